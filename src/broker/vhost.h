// broker/vhost.h
//
// Virtual hosts (docs/security.md, "Virtual hosts"): namespaces of exchanges, queues and
// bindings. A resource is named by its vhost and its name, as RabbitMQ's #resource{} is; the
// broker's maps key it by ResourceKey. The vhost "/" always exists; names follow
// common/vhost_name.h.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/vhost_name.h"

namespace wharf::broker {

using wharf::kDefaultVhost;
using wharf::ValidateVhostName;

// `vhost`, a NUL byte, `name`: a resource's key in the broker's maps. Vhost names hold no NUL
// (ValidateVhostName), so two vhosts never share a key, and a map ordered by key lists each
// vhost's resources together, by name. An empty `vhost` is the default one.
std::string ResourceKey(std::string_view vhost, std::string_view name);

// The vhost part and the name part of a ResourceKey.
std::string_view VhostOfKey(std::string_view key);
std::string_view NameOfKey(std::string_view key);

}  // namespace wharf::broker
