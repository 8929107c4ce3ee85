#include "broker/vhost.h"

namespace wharf::broker {

std::string ResourceKey(std::string_view vhost, std::string_view name) {
  if (vhost.empty()) vhost = kDefaultVhost;
  std::string key;
  key.reserve(vhost.size() + 1 + name.size());
  key.append(vhost);
  key.push_back('\0');
  key.append(name);
  return key;
}

std::string_view VhostOfKey(std::string_view key) { return key.substr(0, key.find('\0')); }

std::string_view NameOfKey(std::string_view key) {
  size_t nul = key.find('\0');
  return nul == std::string_view::npos ? key : key.substr(nul + 1);
}

}  // namespace wharf::broker
