// json/values.cc: the JSON of shared values (json/values.h).
#include "json/values.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <variant>

#include "common/base64.h"

namespace wharf::json {
namespace {

Status BadJson(const std::string& what) { return Status(StatusCode::kInvalidArgument, what); }

}  // namespace

std::string Dump(const Json& doc, bool pretty) {
  return doc.dump(pretty ? 2 : -1, ' ', false, Json::error_handler_t::replace);
}

bool IsUtf8(std::string_view text) {
  // nlohmann-json's own check, the one Dump would apply.
  try {
    (void)Json(std::string(text)).dump();
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

Json HeaderValueJson(const HeaderValue& value) {
  return std::visit(
      [](const auto& v) -> Json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Bytes>) {
          return Json{{"type", "bytes"}, {"base64", Base64Encode(v.data)}};
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (IsUtf8(v)) return v;
          return Json{{"type", "string"}, {"base64", Base64Encode(v)}};
        } else if constexpr (std::is_same_v<T, double>) {
          if (!std::isfinite(v)) return Json{{"type", "double"}, {"text", std::to_string(v)}};
          return v;
        } else {
          return v;
        }
      },
      value);
}

Json HeadersJson(const Headers& headers) {
  Json out = Json::object();
  for (const auto& [key, value] : headers) out[key] = HeaderValueJson(value);
  return out;
}

Result<HeaderValue> HeaderValueFromJson(const std::string& key, const Json& value) {
  if (value.is_boolean()) return HeaderValue(value.get<bool>());
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX)) {
      return BadJson("header '" + key + "': " + value.dump() + " is out of range");
    }
    return HeaderValue(value.get<int64_t>());
  }
  if (value.is_number_float()) return HeaderValue(value.get<double>());
  if (value.is_string()) return HeaderValue(value.get<std::string>());
  // A typed value: {"type": ..., ...}. Read with find, never value(): this comes from clients
  // (the HTTP API), and a "type" that is not a string must be an error, not an exception.
  std::string type;
  if (value.is_object()) {
    if (auto t = value.find("type"); t != value.end()) {
      if (!t->is_string()) return BadJson("header '" + key + "': \"type\" must be a string");
      type = t->get<std::string>();
    }
  }
  if (type == "double" && value.contains("text") &&
      value["text"].is_string()) {  // nan and inf, which JSON numbers cannot hold
    const std::string text = value["text"].get<std::string>();
    char* end = nullptr;
    const double d = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0')
      return BadJson("header '" + key + "': '" + text + "' is not a number");
    return HeaderValue(d);
  }
  if (value.is_object() && value.contains("base64") && value["base64"].is_string()) {
    auto bytes = Base64Decode(value["base64"].get<std::string>());
    if (!bytes) return BadJson("header '" + key + "': its base64 does not decode");
    if (type.empty() || type == "bytes") return HeaderValue(Bytes{*bytes});
    if (type == "string") return HeaderValue(*bytes);
    return BadJson("header '" + key + "': type '" + type + "' is not bytes or string");
  }
  return BadJson("header '" + key + "': " + std::string(value.type_name()) +
                 " is not a header value (boolean, number, string, or {\"type\": \"bytes\", "
                 "\"base64\": ...})");
}

Result<Headers> HeadersFromJson(const Json& object) {
  if (object.is_null()) return Headers{};
  if (!object.is_object()) return BadJson("headers must be a JSON object");
  Headers out;
  for (const auto& [key, value] : object.items()) {
    auto v = HeaderValueFromJson(key, value);
    if (!v.ok()) return v.status();
    out[key] = std::move(*v);
  }
  return out;
}

void AddPayload(std::string_view body, Json* out) {
  (*out)["payload_bytes"] = body.size();
  if (IsUtf8(body)) {
    (*out)["payload"] = std::string(body);
    (*out)["payload_encoding"] = "string";
  } else {
    (*out)["payload"] = Base64Encode(body);
    (*out)["payload_encoding"] = "base64";
  }
}

Result<std::string> PayloadFromJson(const Json& message) {
  if (!message.contains("payload") || message["payload"].is_null()) {
    return BadJson("the message has no \"payload\" (peek --no-body leaves it out)");
  }
  if (!message["payload"].is_string()) return BadJson("\"payload\" must be a string");
  const std::string payload = message["payload"].get<std::string>();
  const Json encoding = message.value("payload_encoding", Json("string"));
  if (encoding == "string") return payload;
  if (encoding == "base64") {
    auto bytes = Base64Decode(payload);
    if (!bytes) return BadJson("\"payload\" is not valid base64");
    return *bytes;
  }
  return BadJson("\"payload_encoding\" must be \"string\" or \"base64\", not " + encoding.dump());
}

bool NestedDeeperThan(std::string_view text, int depth) {
  int open = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++open > depth) return true;
    } else if (c == ']' || c == '}') {
      --open;
    }
  }
  return false;
}

}  // namespace wharf::json
