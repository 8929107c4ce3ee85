// common/vhost_name.h
//
// Virtual host names (docs/security.md, "Virtual hosts"): the default vhost and the rule every
// vhost name follows, shared by the broker, the config file and the tools.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include "wharf/status.h"

namespace wharf {

// The vhost every broker has, and the one a client that names none opens.
inline constexpr std::string_view kDefaultVhost = "/";

// Vhost names: 1-255 bytes of valid UTF-8 without control characters (so no NUL, CR or LF).
// kInvalidArgument otherwise.
Status ValidateVhostName(std::string_view name);

}  // namespace wharf
