// server/api_json.h
//
// The objects of wharfd's HTTP API (server/http_api.h), shaped like RabbitMQ's management API's
// for what both brokers have, so that scripts, autoscalers and dashboards written for RabbitMQ
// read Wharf's the same way: a queue's "messages", "messages_ready",
// "messages_unacknowledged", "consumers" and "message_stats"; a binding's "source",
// "destination" and "destination_type"; and so on (docs/http-api.md lists every key). What only
// Wharf has is added under keys of its own ("messages_delayed", "dead_letter_target", ...).
// Every string is UTF-8 (json/values.h), so an answer is always valid JSON.
//
// Thread safety: plain functions on values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "json/values.h"
#include "wharf/message.h"
#include "wharf/status.h"
#include "wharf/types.h"

namespace wharf::server::api {

using json::Json;

// Facts of this node that the broker does not hold, for /api/overview and "node" keys.
struct NodeFacts {
  std::string node;  // "wharf@<hostname>", as RabbitMQ's "rabbit@<hostname>"
  std::string product_version;
  struct Listener {
    std::string protocol;  // "wharf", "amqp", "wharf/ssl", "amqp/ssl", "http", "https"
    std::string host;
    uint16_t port = 0;
  };
  std::vector<Listener> listeners;
};

Json QueueJson(const QueueInfo& q, const std::string& node);
Json ExchangeJson(const ExchangeInfo& e);
// A binding between an exchange and a queue or exchange. The default exchange's implicit
// bindings (one per queue, by its name) are listed as RabbitMQ lists them: DefaultBinding.
Json BindingJson(const BindingSpec& b);
Json DefaultBindingJson(const std::string& vhost, const std::string& queue);
Json ConsumerJson(const ConsumerInfo& c);
Json ConnectionJson(const ConnectionInfo& c, const std::string& node);
// A vhost, with the message counts of its queues (`queues` are that vhost's).
Json VhostJson(const VhostInfo& v, const std::vector<QueueInfo>& queues);
Json UserJson(const UserInfo& u);
Json PermissionJson(const std::string& user, const UserPermission& p);
// The node at a glance: totals of what the caller may see.
Json OverviewJson(const NodeFacts& node, const std::vector<QueueInfo>& queues,
                  const std::vector<ExchangeInfo>& exchanges, uint64_t connections,
                  uint64_t channels, uint64_t consumers);
// RabbitMQ's error body: {"error": "not_found", "reason": "..."}.
Json ErrorJson(const std::string& error, const std::string& reason);

// One answer of the API: its status and JSON body (none for 201 and 204, as RabbitMQ's).
struct Reply {
  Reply() = default;
  Reply(int status_code, Json json) : status(status_code), body(std::move(json)) {}

  int status = 200;
  Json body;
  std::string allow;  // 405: the methods the path takes
};
Reply Error(int status, const std::string& error, const std::string& reason);
// RabbitMQ's 404 for a path naming nothing: {"error": "Object Not Found", "reason": "Not Found"}.
Reply NotFound();
// A change's answer without a body (201, 204), as RabbitMQ's.
Reply Done(int status);
// The value of query parameter `key` (the first when repeated), or nullptr when absent.
const std::string* QueryParam(const std::multimap<std::string, std::string>& params,
                              const std::string& key);
// A request's JSON body into `out` (an object; {} when empty), or the 400 to answer: RabbitMQ's
// "not_json" for what is not a JSON object, and a body nesting deeper than kMaxBodyDepth.
inline constexpr int kMaxBodyDepth = 32;
std::optional<Reply> ParseBody(const std::string& body, Json* out);
// A broker Status as RabbitMQ's API answers it: 404 for what is not found, 401 for a refused
// permission, 400 for an inequivalent or bad argument, 503 when the broker cannot take it;
// the reason is the broker's text, RabbitMQ's where it has one.
Reply ErrorOf(const Status& status);

// A message as POST /api/queues/{vhost}/{name}/get answers it (RabbitMQ's keys):
// payload_bytes, redelivered, exchange, routing_key, message_count, properties, payload,
// payload_encoding. `base64`: always base64, else "string" when the body is UTF-8 (auto);
// `truncate`: at most that many bytes of the body (0: all).
Json GotMessageJson(const Message& m, bool redelivered, const std::string& exchange,
                    const std::string& routing_key, uint64_t message_count, bool base64,
                    uint64_t truncate);
// RabbitMQ's message properties (delivery_mode, headers, timestamp in seconds, expiration as
// text, ...), and back for POST .../publish: kInvalidArgument names the property.
Json AmqpPropertiesJson(const Message& m);
Status MessageFromPublishJson(const Json& properties, Message* message);

}  // namespace wharf::server::api
