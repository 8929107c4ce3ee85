#include "server/console_assets.h"

namespace wharf::server {

std::optional<ConsoleAsset> FindConsoleAsset(std::string_view path) {
  for (const ConsoleAsset& asset : ConsoleAssets()) {
    if (asset.path == path) return asset;
  }
  return std::nullopt;
}

std::string_view ConsoleContentType(std::string_view path) {
  if (path.ends_with(".html")) return "text/html; charset=utf-8";
  if (path.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (path.ends_with(".css")) return "text/css; charset=utf-8";
  if (path.ends_with(".svg")) return "image/svg+xml";
  if (path.ends_with(".png")) return "image/png";
  return "application/octet-stream";
}

}  // namespace wharf::server
