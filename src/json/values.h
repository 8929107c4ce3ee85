// json/values.h: the JSON of the values every Wharf document shares, through nlohmann-json
// (Debian's nlohmann-json3-dev), for wharfctl (ctl/json.h) and wharfd's HTTP API
// (server/api_json.h) alike: header and argument values with their types, and message bodies
// as RabbitMQ's HTTP API gives them ("payload" with "payload_encoding" "string" when the body
// is UTF-8, else "base64"), so that a binary body never makes a document invalid JSON.
//
// Thread safety: plain functions on values.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "wharf/result.h"
#include "wharf/types.h"

namespace wharf::json {

// Ordered, so that objects print in the order they are built.
using Json = nlohmann::ordered_json;

// A value, or null when it is zero or empty: the wire's "not set".
template <typename T>
Json OrNull(const T& value) {
  if (value == T{}) return nullptr;
  return value;
}

// The text of `doc` (indented when `pretty`). Never throws: every string in it is UTF-8 (bodies
// and header values that are not are base64), and anything else would be a bug shown as U+FFFD.
std::string Dump(const Json& doc, bool pretty = true);

bool IsUtf8(std::string_view text);

// Whether the JSON text `text` nests arrays and objects more than `depth` deep. nlohmann-json
// parses without recursion, but copies, compares and dumps a value recursively: a document
// from outside (an HTTP request body) is checked with this first, so that a body of 100,000
// brackets cannot overflow a thread's stack.
bool NestedDeeperThan(std::string_view text, int depth);

// Typed header (and argument) values: booleans and numbers as JSON booleans and numbers, UTF-8
// strings as strings, anything else as {"type": "bytes"|"string", "base64": "..."}.
Json HeaderValueJson(const HeaderValue& value);
Json HeadersJson(const Headers& headers);
// The reverse: a JSON integer is an integer header, a fraction a double, and so on.
// kInvalidArgument names the key.
Result<HeaderValue> HeaderValueFromJson(const std::string& key, const Json& value);
Result<Headers> HeadersFromJson(const Json& object);

// "payload", "payload_bytes" and "payload_encoding" of a body, into `out`.
void AddPayload(std::string_view body, Json* out);
// The body of a message object: its "payload" in its "payload_encoding" (string by default).
Result<std::string> PayloadFromJson(const Json& message);

}  // namespace wharf::json
