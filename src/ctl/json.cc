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

Status BadJson(const std::string& what) { return Status(StatusCode::kInvalidArgument, what); }

}  // namespace

int PrintJson(const Json& doc) {
  std::string error;
  if (!WriteOut(Dump(doc) + "\n", &error)) {
    std::fprintf(stderr, "wharfctl: cannot write to stdout: %s\n", error.c_str());
    return kExitRefused;
  }
  return kExitOk;
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
              {"arguments", HeadersJson(q.arguments)},
              {"policy", OrNull(q.policy)},
              {"effective_policy_definition", DefinitionJson(q.policy_definition)},
              {"effective_arguments", HeadersJson(q.effective_arguments)}};
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
              {"arguments", HeadersJson(e.arguments)},
              {"policy", OrNull(e.policy)},
              {"effective_policy_definition", DefinitionJson(e.policy_definition)}};
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

Json BackupJson(const BackupInfo& b) {
  return Json{{"directory", b.directory},
              {"files", b.files},
              {"bytes", b.bytes},
              {"linked_bytes", b.linked_bytes},
              {"duration_ms", b.duration_ms},
              {"max_message_id", HexId(b.max_message_id)}};
}

}  // namespace wharf::ctl
