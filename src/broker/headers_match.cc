#include "broker/headers_match.h"

#include <string>

namespace wharf::broker {

Status ParseHeadersMatchMode(const Headers& binding_arguments, HeadersMatchMode* mode) {
  *mode = HeadersMatchMode::kAll;
  auto it = binding_arguments.find("x-match");
  if (it == binding_arguments.end()) return Status::Ok();
  const auto* text = std::get_if<std::string>(&it->second);
  if (text && *text == "all") return Status::Ok();
  if (text && *text == "any") {
    *mode = HeadersMatchMode::kAny;
    return Status::Ok();
  }
  return Status(
      StatusCode::kInvalidArgument,
      "x-match must be the string \"all\" or \"any\", not " + HeaderValueToString(it->second));
}

bool HeadersMatch(const Headers& binding_arguments, HeadersMatchMode mode,
                  const Headers& message_headers) {
  for (const auto& [key, expected] : binding_arguments) {
    if (key.starts_with("x-")) continue;
    auto it = message_headers.find(key);
    bool equal = it != message_headers.end() && it->second == expected;
    if (mode == HeadersMatchMode::kAny && equal) return true;
    if (mode == HeadersMatchMode::kAll && !equal) return false;
  }
  return mode == HeadersMatchMode::kAll;
}

}  // namespace wharf::broker
