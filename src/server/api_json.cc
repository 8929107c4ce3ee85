#include "server/api_json.h"

#include <cstdio>
#include <functional>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "common/base64.h"
#include "json/policy.h"

namespace wharf::server::api {
namespace {

// A counter with its rate, as RabbitMQ's message_stats give them: "publish": 10,
// "publish_details": {"rate": 2.0}.
void AddStat(Json* stats, const char* name, uint64_t total, double rate) {
  (*stats)[name] = total;
  (*stats)[std::string(name) + "_details"] = Json{{"rate", rate}};
}

Json MessageStats(uint64_t published, double publish_rate, uint64_t delivered, double deliver_rate,
                  uint64_t acked, double ack_rate) {
  Json stats = Json::object();
  AddStat(&stats, "publish", published, publish_rate);
  AddStat(&stats, "deliver_get", delivered, deliver_rate);
  AddStat(&stats, "ack", acked, ack_rate);
  return stats;
}

// The routing key and arguments of a binding as one path segment (RabbitMQ's properties_key):
// the key alone when there are no arguments ("~" for an empty key), else key~<hash>.
std::string PropertiesKey(const std::string& routing_key, const Headers& arguments) {
  if (arguments.empty()) return routing_key.empty() ? "~" : routing_key;
  const std::string text = json::Dump(json::HeadersJson(arguments), false);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(text));
  return routing_key + "~" + hash;
}

std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

Json PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return nullptr;
  try {
    return std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    return nullptr;
  }
}

Json OrNull(const std::string& text) { return text.empty() ? Json() : Json(text); }

// rabbitmqctl's limits object: the limits that are set (a negative one is none).
Json LimitsJson(std::initializer_list<std::pair<const char*, int64_t>> limits) {
  Json out = Json::object();
  for (const auto& [name, limit] : limits) {
    if (limit >= 0) out[name] = limit;
  }
  return out;
}

}  // namespace

Json QueueJson(const QueueInfo& q, const std::string& node) {
  Json out = Json::object();
  out["name"] = q.name;
  out["vhost"] = q.vhost;
  out["durable"] = q.durable;
  out["auto_delete"] = q.auto_delete;
  out["exclusive"] = q.exclusive;
  out["arguments"] = json::HeadersJson(q.arguments);
  out["node"] = node;
  out["type"] = "classic";
  out["state"] = "running";
  out["consumers"] = q.consumers;
  out["messages"] = q.ready + q.in_flight;
  out["messages_ready"] = q.ready;
  out["messages_unacknowledged"] = q.in_flight;
  // RabbitMQ's is the AMQP timestamp of the head message, in seconds; Wharf's is when it was
  // published.
  out["head_message_timestamp"] =
      q.head_published_at_ms == 0 ? Json() : Json(q.head_published_at_ms / 1000);
  out["policy"] = OrNull(q.policy);
  out["operator_policy"] = nullptr;
  out["effective_policy_definition"] = json::DefinitionJson(q.policy_definition);
  out["message_stats"] = MessageStats(q.published_total, q.publish_rate, q.delivered_total,
                                      q.deliver_rate, q.acked_total, q.ack_rate);
  // Wharf's own.
  out["messages_delayed"] = q.delayed;
  out["next_delayed_at_ms"] = q.next_delayed_at_ms == 0 ? Json() : Json(q.next_delayed_at_ms);
  out["head_published_at_ms"] = q.head_published_at_ms == 0 ? Json() : Json(q.head_published_at_ms);
  out["dead_letter_target"] = OrNull(q.dead_letter_target);
  out["purge_reclaiming"] = q.purge_reclaiming;
  out["groups"] = q.groups;
  out["groups_held"] = q.groups_held;
  out["effective_arguments"] = json::HeadersJson(q.effective_arguments);
  return out;
}

Json ExchangeJson(const ExchangeInfo& e) {
  Json out = Json::object();
  out["name"] = e.name;
  out["vhost"] = e.vhost;
  out["type"] = e.delayed ? "x-delayed-message" : std::string(ExchangeTypeName(e.type));
  out["durable"] = e.durable;
  out["auto_delete"] = e.auto_delete;
  out["internal"] = e.internal;
  out["arguments"] = json::HeadersJson(e.arguments);  // the declared alternate exchange in them
  out["policy"] = OrNull(e.policy);
  out["effective_policy_definition"] = json::DefinitionJson(e.policy_definition);
  out["bindings"] = e.bindings;                              // Wharf's own: as source
  out["alternate_exchange"] = OrNull(e.alternate_exchange);  // the one in effect
  return out;
}

Json BindingJson(const BindingSpec& b) {
  const bool to_exchange = !b.destination_exchange.empty();
  Json out = Json::object();
  out["source"] = b.exchange;
  out["vhost"] = b.vhost;
  out["destination"] = to_exchange ? b.destination_exchange : b.queue;
  out["destination_type"] = to_exchange ? "exchange" : "queue";
  out["routing_key"] = b.routing_key;
  out["arguments"] = json::HeadersJson(b.arguments);
  out["properties_key"] = PropertiesKey(b.routing_key, b.arguments);
  return out;
}

Json DefaultBindingJson(const std::string& vhost, const std::string& queue) {
  BindingSpec b;
  b.exchange = "";
  b.queue = queue;
  b.routing_key = queue;
  b.vhost = vhost;
  return BindingJson(b);
}

Json ConsumerJson(const ConsumerInfo& c) {
  Json out = Json::object();
  out["consumer_tag"] = c.consumer_tag;
  out["queue"] = Json{{"name", c.queue}, {"vhost", c.vhost}};
  out["channel_details"] =
      Json{{"connection_id", c.connection_id}, {"number", c.channel}, {"user", c.user}};
  out["exclusive"] = c.exclusive;
  out["ack_required"] = true;
  out["prefetch_count"] = c.prefetch;
  out["active"] = c.activity != "waiting";
  out["activity_status"] = c.activity.empty() ? "up" : c.activity;
  out["arguments"] = c.priority == 0 ? Json::object() : Json{{"x-priority", c.priority}};
  // Wharf's own.
  out["unacked"] = c.unacked;
  out["lease_ms"] = c.lease_ms == 0 ? Json() : Json(c.lease_ms);
  return out;
}

Json ConnectionJson(const ConnectionInfo& c, const std::string& node) {
  Json out = Json::object();
  out["name"] = c.address + " (" + std::to_string(c.id) + ")";
  out["id"] = c.id;  // Wharf's own: wharfctl's connection id
  out["node"] = node;
  out["user"] = c.user;
  out["vhost"] = c.vhost;
  out["protocol"] = c.protocol == "amqp" ? "AMQP 0-9-1" : "Wharf";
  out["peer_host"] = HostOf(c.address);
  out["peer_port"] = PortOf(c.address);
  out["connected_at"] = c.connected_at_ms;
  out["channels"] = c.channels;
  out["state"] = "running";
  out["type"] = "network";
  Json properties = Json::object();
  if (!c.client.empty()) properties["product"] = c.client;
  if (!c.client_version.empty()) properties["version"] = c.client_version;
  out["client_properties"] = std::move(properties);
  // Wharf's own.
  out["consumers"] = c.consumers;
  out["unacked"] = c.unacked;
  return out;
}

Json VhostJson(const VhostInfo& v, const std::vector<QueueInfo>& queues) {
  uint64_t ready = 0, unacked = 0;
  for (const QueueInfo& q : queues) {
    ready += q.ready;
    unacked += q.in_flight;
  }
  Json out = Json::object();
  out["name"] = v.name;
  out["description"] = v.description;
  out["tags"] = Json::array();
  out["default_queue_type"] = "classic";
  out["metadata"] = Json{{"description", v.description}, {"tags", Json::array()}};
  out["tracing"] = false;
  out["messages"] = ready + unacked;
  out["messages_ready"] = ready;
  out["messages_unacknowledged"] = unacked;
  // Wharf's own.
  out["queues"] = v.queues;
  out["exchanges"] = v.exchanges;
  out["connections"] = v.connections;
  out["limits"] = LimitsJson(
      {{"max-connections", v.limits.max_connections}, {"max-queues", v.limits.max_queues}});
  return out;
}

Json UserJson(const UserInfo& u) {
  Json out = Json::object();
  out["name"] = u.name;
  out["tags"] = u.tags;
  out["limits"] = LimitsJson(
      {{"max-connections", u.limits.max_connections}, {"max-channels", u.limits.max_channels}});
  out["source"] = u.source;  // Wharf's own: config, store or builtin
  return out;
}

Json PermissionJson(const std::string& user, const UserPermission& p) {
  return Json{{"user", user},
              {"vhost", p.vhost},
              {"configure", p.configure},
              {"write", p.write},
              {"read", p.read}};
}

Json OverviewJson(const NodeFacts& node, const std::vector<QueueInfo>& queues,
                  const std::vector<ExchangeInfo>& exchanges, uint64_t connections,
                  uint64_t channels, uint64_t consumers) {
  uint64_t ready = 0, unacked = 0, published = 0, delivered = 0, acked = 0;
  double publish_rate = 0, deliver_rate = 0, ack_rate = 0;
  for (const QueueInfo& q : queues) {
    ready += q.ready;
    unacked += q.in_flight;
    published += q.published_total;
    delivered += q.delivered_total;
    acked += q.acked_total;
    publish_rate += q.publish_rate;
    deliver_rate += q.deliver_rate;
    ack_rate += q.ack_rate;
  }
  Json listeners = Json::array();
  for (const NodeFacts::Listener& l : node.listeners) {
    listeners.push_back(Json{
        {"node", node.node}, {"protocol", l.protocol}, {"ip_address", l.host}, {"port", l.port}});
  }
  Json exchange_types = Json::array();
  for (const char* type : {"direct", "fanout", "topic", "headers", "x-delayed-message"}) {
    exchange_types.push_back(Json{{"name", type}, {"enabled", true}});
  }
  Json out = Json::object();
  out["product_name"] = "Wharf";
  out["product_version"] = node.product_version;
  out["management_version"] = node.product_version;
  out["node"] = node.node;
  out["cluster_name"] = node.node;
  out["rates_mode"] = "basic";
  out["exchange_types"] = std::move(exchange_types);
  // Summed over queues: what reached a queue, as the queues' own message_stats.
  out["message_stats"] =
      MessageStats(published, publish_rate, delivered, deliver_rate, acked, ack_rate);
  out["queue_totals"] = Json{{"messages", ready + unacked},
                             {"messages_ready", ready},
                             {"messages_unacknowledged", unacked}};
  out["object_totals"] = Json{{"connections", connections},
                              {"channels", channels},
                              {"exchanges", exchanges.size()},
                              {"queues", queues.size()},
                              {"consumers", consumers}};
  out["listeners"] = std::move(listeners);
  return out;
}

Json ErrorJson(const std::string& error, const std::string& reason) {
  return Json{{"error", error}, {"reason", reason}};
}

}  // namespace wharf::server::api

namespace wharf::server::api {

Reply Error(int status, const std::string& error, const std::string& reason) {
  return Reply{status, ErrorJson(error, reason)};
}

const std::string* QueryParam(const std::multimap<std::string, std::string>& params,
                              const std::string& key) {
  auto it = params.find(key);
  return it == params.end() ? nullptr : &it->second;
}

Reply NotFound() { return Error(404, "Object Not Found", "Not Found"); }

Reply Done(int status) { return Reply{status, nullptr}; }

std::optional<Reply> ParseBody(const std::string& body, Json* out) {
  *out = Json::object();
  if (body.empty()) return std::nullopt;
  if (json::NestedDeeperThan(body, kMaxBodyDepth)) {
    return Error(400, "bad_request",
                 "the body nests deeper than " + std::to_string(kMaxBodyDepth) + " levels");
  }
  Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Error(400, "bad_request", "not_json");  // RabbitMQ's words
  }
  *out = std::move(parsed);
  return std::nullopt;
}

Reply ErrorOf(const Status& status) {
  const std::string reason(status.message());
  switch (status.code()) {
    case StatusCode::kQueueNotFound:
    case StatusCode::kExchangeNotFound:
      return Error(404, "not_found", "NOT_FOUND - " + reason);  // RabbitMQ's AMQP text
    case StatusCode::kVhostNotFound:
    case StatusCode::kPolicyNotFound:
      return Error(404, "not_found", reason);
    case StatusCode::kAccessRefused:
    case StatusCode::kAuthenticationFailed:
      return Error(401, "not_authorised", reason);
    case StatusCode::kPreconditionFailed:
    case StatusCode::kInvalidArgument:
    case StatusCode::kReservedName:
    case StatusCode::kResourceLocked:
    case StatusCode::kMessageTooLarge:
    case StatusCode::kQueueFull:
    case StatusCode::kResourceExhausted:
    case StatusCode::kNoRoute:
      return Error(400, "bad_request", reason);
    case StatusCode::kStoreFull:
    case StatusCode::kStoreUnavailable:
    case StatusCode::kShuttingDown:
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return Error(503, "service_unavailable", reason);
    default:
      return Error(500, "internal_error", reason);
  }
}

Json AmqpPropertiesJson(const Message& m) {
  const Properties& p = m.properties;
  Json out = Json::object();
  auto text = [&out](const char* key, const std::string& value) {
    if (!value.empty()) out[key] = value;
  };
  text("content_type", p.content_type);
  text("content_encoding", p.content_encoding);
  if (!m.headers.empty()) out["headers"] = json::HeadersJson(m.headers);
  if (m.persistent) out["delivery_mode"] = 2;
  if (p.priority != 0) out["priority"] = p.priority;
  text("correlation_id", p.correlation_id);
  text("reply_to", p.reply_to);
  if (p.expiration_ms != 0) out["expiration"] = std::to_string(p.expiration_ms);
  text("message_id", p.message_id);
  if (p.timestamp_ms != 0) out["timestamp"] = p.timestamp_ms / 1000;
  text("type", p.type);
  text("app_id", p.app_id);
  return out;
}

Status MessageFromPublishJson(const Json& properties, Message* message) {
  auto bad = [](const std::string& what) { return Status(StatusCode::kInvalidArgument, what); };
  if (properties.is_null()) return Status::Ok();
  if (!properties.is_object()) return bad("\"properties\" must be a JSON object");
  Properties& p = message->properties;
  for (const auto& [key, value] : properties.items()) {
    std::string* text = key == "content_type"       ? &p.content_type
                        : key == "content_encoding" ? &p.content_encoding
                        : key == "correlation_id"   ? &p.correlation_id
                        : key == "reply_to"         ? &p.reply_to
                        : key == "message_id"       ? &p.message_id
                        : key == "type"             ? &p.type
                        : key == "app_id"           ? &p.app_id
                                                    : nullptr;
    if (text != nullptr) {
      if (!value.is_string()) return bad("properties." + key + " must be a string");
      *text = value.get<std::string>();
    } else if (key == "delivery_mode") {
      if (value != 1 && value != 2) return bad("properties.delivery_mode must be 1 or 2");
      message->persistent = value == 2;
    } else if (key == "priority") {
      if (!value.is_number_unsigned() || value.get<uint64_t>() > 255) {
        return bad("properties.priority must be an integer from 0 to 255");
      }
      p.priority = value.get<uint32_t>();
    } else if (key == "timestamp") {
      if (!value.is_number_unsigned() || value.get<uint64_t>() > uint64_t{1} << 40) {
        return bad("properties.timestamp must be Unix seconds");
      }
      p.timestamp_ms = static_cast<int64_t>(value.get<uint64_t>()) * 1000;
    } else if (key == "expiration") {
      // RabbitMQ's: milliseconds, as a string of digits.
      const std::string ms = value.is_string() ? value.get<std::string>() : std::string();
      if (ms.empty() || ms.size() > 15 || ms.find_first_not_of("0123456789") != std::string::npos) {
        return bad("properties.expiration must be milliseconds as a string of digits");
      }
      p.expiration_ms = std::stoull(ms);
    } else if (key == "headers") {
      auto headers = json::HeadersFromJson(value);
      if (!headers.ok()) return headers.status();
      message->headers = std::move(*headers);
    } else {
      return bad("properties." + key + " is not a message property");
    }
  }
  return Status::Ok();
}

Json GotMessageJson(const Message& m, bool redelivered, const std::string& exchange,
                    const std::string& routing_key, uint64_t message_count, bool base64,
                    uint64_t truncate) {
  std::string_view body = m.body;
  if (truncate != 0 && body.size() > truncate) body = body.substr(0, truncate);
  Json out = Json::object();
  out["payload_bytes"] = m.body.size();
  out["redelivered"] = redelivered;
  out["exchange"] = exchange;
  out["routing_key"] = routing_key;
  out["message_count"] = message_count;
  out["properties"] = AmqpPropertiesJson(m);
  if (base64 || !json::IsUtf8(body)) {
    out["payload"] = Base64Encode(body);
    out["payload_encoding"] = "base64";
  } else {
    out["payload"] = std::string(body);
    out["payload_encoding"] = "string";
  }
  return out;
}

}  // namespace wharf::server::api
