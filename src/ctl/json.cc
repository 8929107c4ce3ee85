// ctl/json.cc: wharfctl's JSON documents (ctl/json.h).
#include "ctl/json.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <variant>

#include "common/base64.h"
#include "ctl/ctl.h"

namespace wharf::ctl {
namespace {

// A value, or null when it is zero or empty: the wire's "not set".
template <typename T>
Json OrNull(const T& value) {
  if (value == T{}) return nullptr;
  return value;
}

Status BadJson(const std::string& what) { return Status(StatusCode::kInvalidArgument, what); }

}  // namespace

std::string Dump(const Json& doc, bool pretty) {
  return doc.dump(pretty ? 2 : -1, ' ', false, Json::error_handler_t::replace);
}

int PrintJson(const Json& doc) {
  std::string error;
  if (!WriteOut(Dump(doc) + "\n", &error)) {
    std::fprintf(stderr, "wharfctl: cannot write to stdout: %s\n", error.c_str());
    return kExitRefused;
  }
  return kExitOk;
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
  if (value.is_object() && value.value("type", "") == "double" && value.contains("text") &&
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
    const std::string type = value.value("type", "bytes");
    if (type == "bytes") return HeaderValue(Bytes{*bytes});
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

Json DeathJson(const Death& d) {
  return Json{{"reason", d.reason},
              {"queue", d.queue},
              {"exchange", d.exchange},
              {"routing_key", d.routing_key},
              {"count", d.count},
              {"first_at_ms", OrNull(d.first_at_ms)},
              {"last_at_ms", OrNull(d.last_at_ms)},
              {"receive_count", d.receive_count},
              {"failure_count", d.failure_count},
              {"last_error", OrNull(d.last_error)}};
}

Json PropertiesJson(const Message& m) {
  const Properties& p = m.properties;
  return Json{{"content_type", OrNull(p.content_type)},
              {"content_encoding", OrNull(p.content_encoding)},
              {"message_id", OrNull(p.message_id)},
              {"correlation_id", OrNull(p.correlation_id)},
              {"reply_to", OrNull(p.reply_to)},
              {"type", OrNull(p.type)},
              {"app_id", OrNull(p.app_id)},
              {"timestamp_ms", OrNull(p.timestamp_ms)},
              {"priority", OrNull(p.priority)},
              {"expiration_ms", OrNull(p.expiration_ms)},
              {"headers", HeadersJson(m.headers)}};
}

namespace {

// The keys every message object has, in one order (ctl/json.h).
struct MessageFields {
  const Message& message;
  const std::string& queue;
  const std::string& exchange;
  const std::string& routing_key;
  Json position;
  Json redelivered;
  uint32_t receive_count;
  int64_t first_received_at_ms;
  uint32_t failure_count;
  int64_t last_failed_at_ms;
  const std::string& last_error;
  uint64_t body_bytes;
  bool with_body;
};

Json MessageJson(const MessageFields& f) {
  Json out{{"message_id", HexId(f.message.id)},
           {"queue", f.queue},
           {"position", f.position},
           {"exchange", f.exchange},
           {"routing_key", f.routing_key},
           {"published_at_ms", OrNull(f.message.published_at_ms)},
           {"persistent", f.message.persistent},
           {"redelivered", f.redelivered},
           {"receive_count", f.receive_count},
           {"first_received_at_ms", OrNull(f.first_received_at_ms)},
           {"failure_count", f.failure_count},
           {"last_failed_at_ms", OrNull(f.last_failed_at_ms)},
           {"last_error", OrNull(f.last_error)},
           {"properties", PropertiesJson(f.message)},
           {"deaths", Json::array()}};
  for (const Death& d : f.message.deaths) out["deaths"].push_back(DeathJson(d));
  if (f.with_body) {
    AddPayload(f.message.body, &out);
  } else {
    out["payload_bytes"] = f.body_bytes;
    out["payload"] = nullptr;
    out["payload_encoding"] = nullptr;
  }
  return out;
}

}  // namespace

Json DeliveryJson(const Delivery& d) {
  return MessageJson({d.message, d.queue, d.exchange, d.routing_key, nullptr, d.redelivered,
                      d.receive_count, d.first_received_at_ms, d.failure_count, d.last_failed_at_ms,
                      d.last_error, d.message.body.size(), true});
}

Json PeekedJson(const std::string& queue, const PeekedMessage& m, bool with_body) {
  return MessageJson({m.message, queue, m.exchange, m.routing_key, m.position, nullptr,
                      m.receive_count, m.first_received_at_ms, m.failure_count, m.last_failed_at_ms,
                      m.last_error, m.body_bytes, with_body});
}

Result<Message> MessageFromJson(const Json& doc) {
  if (!doc.is_object()) return BadJson("a message must be a JSON object");
  Message m;
  auto body = PayloadFromJson(doc);
  if (!body.ok()) return body.status();
  m.body = std::move(*body);
  if (doc.contains("persistent")) {
    if (!doc["persistent"].is_boolean()) return BadJson("\"persistent\" must be true or false");
    m.persistent = doc["persistent"].get<bool>();
  }
  const Json props = doc.value("properties", Json::object());
  if (!props.is_object()) return BadJson("\"properties\" must be a JSON object");
  auto text = [&](const char* key, std::string* out) -> Status {
    if (!props.contains(key) || props[key].is_null()) return Status::Ok();
    if (!props[key].is_string())
      return BadJson(std::string("properties.") + key + " must be a string");
    *out = props[key].get<std::string>();
    return Status::Ok();
  };
  auto number = [&](const char* key, auto* out, int64_t min, int64_t max) -> Status {
    if (!props.contains(key) || props[key].is_null()) return Status::Ok();
    const Json& v = props[key];
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max ||
        (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))) {
      return BadJson(std::string("properties.") + key + " must be an integer from " +
                     std::to_string(min) + " to " + std::to_string(max));
    }
    *out = static_cast<std::remove_pointer_t<decltype(out)>>(v.get<int64_t>());
    return Status::Ok();
  };
  Properties& p = m.properties;
  for (Status s :
       {text("content_type", &p.content_type), text("content_encoding", &p.content_encoding),
        text("message_id", &p.message_id), text("correlation_id", &p.correlation_id),
        text("reply_to", &p.reply_to), text("type", &p.type), text("app_id", &p.app_id),
        number("timestamp_ms", &p.timestamp_ms, INT64_MIN, INT64_MAX),
        number("priority", &p.priority, 0, 255),
        number("expiration_ms", &p.expiration_ms, 0, INT64_MAX)}) {
    if (!s.ok()) return s;
  }
  auto headers = HeadersFromJson(props.value("headers", Json()));
  if (!headers.ok()) return headers.status();
  m.headers = std::move(*headers);
  return m;
}

Json QueueJson(const QueueInfo& q) {
  const std::optional<int64_t> oldest_ms = OldestReadyAgeMs(q);
  const Json oldest = oldest_ms ? Json(*oldest_ms) : Json();
  return Json{{"name", q.name},
              {"durable", q.durable},
              {"exclusive", q.exclusive},
              {"auto_delete", q.auto_delete},
              {"ready", q.ready},
              {"in_flight", q.in_flight},
              {"delayed", q.delayed},
              {"next_delayed_at_ms", OrNull(q.next_delayed_at_ms)},
              {"consumers", q.consumers},
              {"published_total", q.published_total},
              {"delivered_total", q.delivered_total},
              {"acked_total", q.acked_total},
              {"dead_letter_target", OrNull(q.dead_letter_target)},
              {"oldest_ready_age_ms", oldest},
              {"publish_rate", q.publish_rate},
              {"deliver_rate", q.deliver_rate},
              {"ack_rate", q.ack_rate},
              {"purge_reclaiming", q.purge_reclaiming},
              {"groups", q.groups},
              {"groups_held", q.groups_held},
              {"arguments", HeadersJson(q.arguments)}};
}

Json ExchangeJson(const ExchangeInfo& e) {
  return Json{{"name", e.name},
              {"type", std::string(ExchangeTypeName(e.type))},
              {"durable", e.durable},
              {"auto_delete", e.auto_delete},
              {"alternate_exchange", OrNull(e.alternate_exchange)},
              {"bindings", e.bindings},
              {"internal", e.internal},
              {"delayed", e.delayed},
              {"arguments", HeadersJson(e.arguments)}};
}

Json BindingJson(const BindingSpec& b) {
  return Json{{"exchange", b.exchange},
              {"queue", OrNull(b.queue)},
              {"destination_exchange", OrNull(b.destination_exchange)},
              {"routing_key", b.routing_key},
              {"arguments", HeadersJson(b.arguments)}};
}

Json ConsumerJson(const ConsumerInfo& c) {
  return Json{{"queue", c.queue},
              {"consumer_tag", c.consumer_tag},
              {"connection_id", c.connection_id},
              {"user", c.user},
              {"prefetch", OrNull(c.prefetch)},
              {"unacked", c.unacked},
              {"lease_ms", OrNull(c.lease_ms)},
              {"exclusive", c.exclusive},
              {"channel", OrNull(c.channel)},
              {"priority", c.priority},
              {"activity", c.activity}};
}

Json ConnectionJson(const ConnectionInfo& c) {
  return Json{{"id", c.id},
              {"user", c.user},
              {"address", c.address},
              {"connected_at_ms", OrNull(c.connected_at_ms)},
              {"consumers", c.consumers},
              {"unacked", c.unacked},
              {"pending_receives", c.pending_receives},
              {"protocol", c.protocol},
              {"client", OrNull(c.client)},
              {"client_version", OrNull(c.client_version)},
              {"channels", c.channels},
              {"vhost", c.vhost}};
}

Status ParseLimitsJson(const std::string& text,
                       const std::vector<std::pair<std::string, std::optional<int64_t>*>>& known) {
  std::string names;
  for (const auto& [name, target] : known) names += (names.empty() ? "" : ", ") + name;
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || doc.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "limits must be a JSON object such as '{\"" + known.front().first + "\": 10}'");
  }
  for (const auto& [key, value] : doc.items()) {
    auto it =
        std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.first == key; });
    if (it == known.end()) {
      return Status(StatusCode::kInvalidArgument, "unknown limit '" + key + "' (" + names + ")");
    }
    if (!value.is_number_integer()) {
      return Status(StatusCode::kInvalidArgument, "limit '" + key + "' must be an integer");
    }
    *it->second = value.get<int64_t>();
  }
  return Status::Ok();
}

std::string LimitText(int64_t limit) { return limit < 0 ? "-" : std::to_string(limit); }

Json VhostJson(const VhostInfo& v) {
  // RabbitMQ's list_vhost_limits keys; a limit not set is left out.
  Json limits = Json::object();
  if (v.limits.max_connections >= 0) limits["max-connections"] = v.limits.max_connections;
  if (v.limits.max_queues >= 0) limits["max-queues"] = v.limits.max_queues;
  return Json{{"name", v.name},     {"description", v.description}, {"limits", limits},
              {"queues", v.queues}, {"exchanges", v.exchanges},     {"connections", v.connections}};
}

Json UserJson(const UserInfo& u) {
  // RabbitMQ's list_user_limits keys; a limit not set is left out.
  Json limits = Json::object();
  if (u.limits.max_connections >= 0) limits["max-connections"] = u.limits.max_connections;
  if (u.limits.max_channels >= 0) limits["max-channels"] = u.limits.max_channels;
  // RabbitMQ's list_permissions keys.
  Json permissions = Json::array();
  for (const UserPermission& p : u.permissions) {
    permissions.push_back(
        Json{{"vhost", p.vhost}, {"configure", p.configure}, {"write", p.write}, {"read", p.read}});
  }
  return Json{{"name", u.name},   {"admin", u.admin}, {"source", u.source},
              {"limits", limits}, {"tags", u.tags},   {"permissions", permissions}};
}

Json DelayedJson(const DelayedInfo& m) {
  return Json{{"message_id", HexId(m.message.id)},
              {"deliver_at_ms", m.deliver_at_ms},
              {"published_at_ms", OrNull(m.message.published_at_ms)},
              {"exchange", m.exchange},
              {"routing_key", m.routing_key},
              {"persistent", m.message.persistent},
              {"receive_count", m.receive_count},
              {"properties", PropertiesJson(m.message)},
              {"payload_bytes", m.body_bytes}};
}

Json RedriveJson(const RedriveInfo& r) {
  Json targets = Json::object();
  for (const RedriveTargetCount& t : r.targets) targets[t.queue] = t.messages;
  return Json{{"queue", r.spec.queue},
              {"to", OrNull(r.spec.to)},
              {"reason", OrNull(r.spec.reason)},
              {"limit", OrNull(r.spec.limit)},
              {"rate", r.spec.rate},
              {"dry_run", r.spec.dry_run},
              {"message_id", r.spec.message_id ? Json(HexId(r.spec.message_id)) : Json()},
              {"state", std::string(RedriveStateName(r.state))},
              {"detail", OrNull(r.detail)},
              {"started_at_ms", OrNull(r.started_at_ms)},
              {"finished_at_ms", OrNull(r.finished_at_ms)},
              {"total", r.total},
              {"moved", r.moved},
              {"remaining", r.remaining},
              {"skipped_not_matching", r.skipped_not_matching},
              {"skipped_no_target", r.skipped_no_target},
              {"skipped_target_full", r.skipped_target_full},
              {"rate_per_second", r.rate_per_second},
              {"targets", targets}};
}

Json BackupJson(const BackupInfo& b) {
  return Json{{"directory", b.directory},
              {"files", b.files},
              {"bytes", b.bytes},
              {"linked_bytes", b.linked_bytes},
              {"duration_ms", b.duration_ms},
              {"max_message_id", HexId(b.max_message_id)}};
}

std::string HexId(uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

}  // namespace wharf::ctl
