#include "broker/headers_match.h"

#include <string>

namespace wharf::broker {

Status ParseHeadersMatchMode(const Headers& binding_arguments, HeadersMatchMode* mode) {
  *mode = HeadersMatchMode::kAll;
  auto it = binding_arguments.find("x-match");
  if (it == binding_arguments.end()) return Status::Ok();
  const auto* text = std::get_if<std::string>(&it->second);
  for (auto [name, value] : {std::pair{"all", HeadersMatchMode::kAll},
                             {"any", HeadersMatchMode::kAny},
                             {"all-with-x", HeadersMatchMode::kAllWithX},
                             {"any-with-x", HeadersMatchMode::kAnyWithX}}) {
    if (text && *text == name) {
      *mode = value;
      return Status::Ok();
    }
  }
  return Status(StatusCode::kInvalidArgument,
                "x-match must be the string \"all\", \"any\", \"all-with-x\" or \"any-with-x\", "
                "not " +
                    HeaderValueToString(it->second));
}

namespace {

const std::string* Text(const HeaderValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return s;
  if (const auto* b = std::get_if<Bytes>(&v)) return &b->data;
  return nullptr;
}

}  // namespace

bool SameValue(const HeaderValue& a, const HeaderValue& b) {
  const std::string* ta = Text(a);
  const std::string* tb = Text(b);
  if (ta || tb) return ta && tb && *ta == *tb;
  return a == b;
}

bool HeadersMatch(const Headers& binding_arguments, HeadersMatchMode mode,
                  const Headers& message_headers) {
  const bool any = mode == HeadersMatchMode::kAny || mode == HeadersMatchMode::kAnyWithX;
  const bool with_x = mode == HeadersMatchMode::kAllWithX || mode == HeadersMatchMode::kAnyWithX;
  for (const auto& [key, expected] : binding_arguments) {
    if (key == "x-match" || (!with_x && key.starts_with("x-"))) continue;
    auto it = message_headers.find(key);
    bool equal = it != message_headers.end() && SameValue(it->second, expected);
    if (any && equal) return true;
    if (!any && !equal) return false;
  }
  return !any;
}

}  // namespace wharf::broker
