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
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "json/message.h"
#include "json/policy.h"
#include "json/redrive.h"
#include "json/values.h"
#include "wharf/client.h"
#include "wharf/message.h"
#include "wharf/result.h"
#include "wharf/types.h"

namespace wharf::ctl {

// The shared value encodings (json/values.h): header values with their types, bodies as
// "payload" and "payload_encoding".
using json::AddPayload;
using json::DefinitionJson;
using json::Dump;
using json::HeadersFromJson;
using json::HeadersJson;
using json::HeaderValueFromJson;
using json::HeaderValueJson;
using json::IsUtf8;
using json::Json;
using json::OrNull;
using json::PayloadFromJson;
using json::PolicyFromJson;
using json::PolicyJson;

// Dump(doc) and a newline on stdout: kExitOk, or kExitRefused (said on stderr) when stdout
// could not take it.
int PrintJson(const Json& doc);

// A message as consume, get and peek print it (json/message.h), the same object as the HTTP
// API's.
using json::DeathJson;
using json::DeliveryJson;
using json::HexId;
using json::PeekedJson;
using json::PropertiesJson;

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
using json::DelayedJson;
using json::RedriveJson;
Json BackupJson(const BackupInfo& b);

}  // namespace wharf::ctl
