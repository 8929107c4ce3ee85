// server/console_assets.h
//
// The web console's files (console/ in the source tree: HTML, JavaScript modules, CSS),
// embedded in wharfd at build time by cmake/embed_console.cmake, so the console is served with
// nothing installed beside the binary and nothing fetched from elsewhere (docs/console.md).
// MetricsServer serves them: "/" is index.html, "/console/{path}" each file.
//
// Thread safety: immutable.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace wharf::server {

struct ConsoleAsset {
  std::string_view path;  // relative to console/: "index.html", "views/queue.js"
  std::string_view bytes;
};

// Every file, by path (generated).
std::span<const ConsoleAsset> ConsoleAssets();
// The file at `path`, or nullopt.
std::optional<ConsoleAsset> FindConsoleAsset(std::string_view path);
// The Content-Type for `path`, by its extension.
std::string_view ConsoleContentType(std::string_view path);

}  // namespace wharf::server
