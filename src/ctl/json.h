// ctl/json.h: every JSON document wharfctl reads or writes, through nlohmann-json (Debian's
// nlohmann-json3-dev). One shape per kind of record (docs/operations.md, "wharfctl --json"):
// a message is the same object whether consumed, peeked or re-published; unknown values are
// null, never a sentinel; header values keep their types; a body is UTF-8 text
// ("payload_encoding": "string") when it is, otherwise base64 ("base64"), as RabbitMQ's HTTP
// API names them.
//
// Thread safety: plain functions on values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wharf/client.h"
#include "wharf/message.h"
#include "wharf/result.h"
#include "wharf/types.h"

namespace wharf::ctl {

// Ordered, so that objects print in the order they are built.
using Json = nlohmann::ordered_json;

// The text of `doc` for a terminal or a pipe. Never throws: every string in it is UTF-8 (bodies
// and header values that are not are base64), and anything else would be a bug shown as U+FFFD.
std::string Dump(const Json& doc, bool pretty = true);
// Dump(doc) and a newline on stdout: kExitOk, or kExitRefused (said on stderr) when stdout
// could not take it.
int PrintJson(const Json& doc);

bool IsUtf8(std::string_view text);

// Typed header (and argument) values: booleans and numbers as JSON booleans and numbers, UTF-8
// strings as strings, anything else as {"type": "bytes"|"string", "base64": "..."}.
Json HeaderValueJson(const HeaderValue& value);
Json HeadersJson(const Headers& headers);
// The reverse, for publish --message and --arguments: a JSON integer is an integer header, a
// fraction a double, and so on. kInvalidArgument names the key.
Result<HeaderValue> HeaderValueFromJson(const std::string& key, const Json& value);
Result<Headers> HeadersFromJson(const Json& object);

// "payload", "payload_bytes" and "payload_encoding" of a body, into `out`.
void AddPayload(std::string_view body, Json* out);
// The body of a message object: its "payload" in its "payload_encoding" (string by default).
Result<std::string> PayloadFromJson(const Json& message);

Json DeathJson(const Death& death);
Json PropertiesJson(const Message& message);

// A message as consume, get and peek print it: the same keys in both, null where a value is
// not known there (a peeked message has no delivery, a consumed one no position).
Json DeliveryJson(const Delivery& d);
Json PeekedJson(const std::string& queue, const PeekedMessage& m, bool with_body);
// A message object (as above) back into a Message: body, persistent flag, properties and
// headers. Everything else in it (ids, counters, deaths) is the broker's and is ignored.
Result<Message> MessageFromJson(const Json& doc);

// oldest_ready_age_ms: OldestReadyAgeMs (ctl/ctl.h).
Json QueueJson(const QueueInfo& q);
Json ExchangeJson(const ExchangeInfo& e);
Json BindingJson(const BindingSpec& b);
Json ConsumerJson(const ConsumerInfo& c);
Json ConnectionJson(const ConnectionInfo& c);
Json UserJson(const UserInfo& u);
// rabbitmqctl's limits JSON (set_user_limits, set_vhost_limits): an object of integers, such as
// '{"max-connections": 10}'; each key of `known` it names is set (negative: clear that limit).
// kInvalidArgument for anything else: not an object, empty, an unknown key, not an integer.
Status ParseLimitsJson(const std::string& text,
                       const std::vector<std::pair<std::string, std::optional<int64_t>*>>& known);
// A limit for a table: "-" when none.
std::string LimitText(int64_t limit);
Json VhostJson(const VhostInfo& v);
Json DelayedJson(const DelayedInfo& m);
Json RedriveJson(const RedriveInfo& r);
Json BackupJson(const BackupInfo& b);

// A message id as wharfctl prints it: 16 hex digits.
std::string HexId(uint64_t id);

}  // namespace wharf::ctl
