#include "common/vhost_name.h"

#include <string>

#include "common/log_safe.h"
#include "common/utf8.h"

namespace wharf {

Status ValidateVhostName(std::string_view name) {
  if (name.empty() || name.size() > 255) {
    return Status(StatusCode::kInvalidArgument, "vhost name must be 1 to 255 bytes long");
  }
  if (!IsValidUtf8(name)) {
    return Status(StatusCode::kInvalidArgument,
                  "vhost name '" + CutForDisplay(name) + "' is not valid UTF-8");
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      return Status(StatusCode::kInvalidArgument,
                    "vhost name '" + CutForDisplay(name) + "' contains a control character");
    }
  }
  return Status::Ok();
}

}  // namespace wharf
