#include "server/api_writes.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <optional>
#include <utility>
#include <vector>

#include "broker/exchange.h"
#include "broker/rabbitmq_texts.h"
#include "json/message.h"
#include "json/policy.h"
#include "json/redrive.h"

namespace wharf::server {
namespace {

using json::Json;

// ApiSession ids: bit 62, never a connection's (small counters) nor an AMQP channel's (bit 63).
constexpr uint64_t kApiSessionBit = uint64_t{1} << 62;

using api::Done;
using api::NotFound;

// The body's "arguments" (typed, json/values.h) into `out`, or the 400 to answer.
std::optional<api::Reply> ReadArguments(const Json& request, Headers* out) {
  auto arguments = json::HeadersFromJson(request.value("arguments", Json()));
  if (!arguments.ok()) {
    return api::Error(400, "bad_request", std::string(arguments.status().message()));
  }
  *out = std::move(*arguments);
  return std::nullopt;
}

// The default exchange is the broker's: AMQP's refusal, as a 401.
std::optional<api::Reply> RefuseDefaultExchange(const std::string& name) {
  if (!name.empty() && name != "amq.default") return std::nullopt;
  return api::Error(401, "not_authorised",
                    "ACCESS_REFUSED - operation not permitted on the default exchange");
}

// A JSON integer of 0 or more (nlohmann keeps a parsed one unsigned, a literal one signed).
bool Counting(const Json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
}

bool IsTrue(const std::multimap<std::string, std::string>& params, const std::string& key) {
  const std::string* value = api::QueryParam(params, key);
  return value != nullptr && *value == "true";
}

// The queue's info, or nullopt when `vhost` has none of that name.
std::optional<QueueInfo> QueueNamed(const broker::Broker& broker, const std::string& vhost,
                                    const std::string& name) {
  for (QueueInfo& q : broker.ListQueues(name, vhost)) {
    if (q.name == name) return std::move(q);
  }
  return std::nullopt;
}

// A boolean member of `body`, or `fallback` when absent; false in `ok` when not a boolean.
bool Flag(const Json& body, const char* key, bool fallback, bool* ok) {
  auto it = body.find(key);
  if (it == body.end()) return fallback;
  if (!it->is_boolean()) {
    *ok = false;
    return fallback;
  }
  return it->get<bool>();
}

// Answers `status` once every change the session made is on disk.
void AnswerWhenDurable(ApiSession& session, broker::Broker& broker, int status) {
  broker.AnswerWhenDurable(session.id(), [status](broker::SessionPeer& peer, const Status& s) {
    auto& me = static_cast<ApiSession&>(peer);
    if (!s.ok()) return me.Fail(s);
    me.Answer(Done(status));
  });
}

}  // namespace

api::Reply ApiWrites::Run(const std::string& vhost, ApiSession::Operation operation) {
  const uint64_t id = kApiSessionBit | context_.next_session->fetch_add(1);
  auto progress = std::make_shared<std::atomic<int>>(ApiSession::kWaiting);
  std::future<api::Reply> answer =
      ApiSession::Start(context_.broker, context_.post, id, context_.user, vhost,
                        "http:" + context_.address, std::move(operation), progress);
  if (answer.wait_for(kTimeout) != std::future_status::ready) {
    int waiting = ApiSession::kWaiting;
    if (progress->compare_exchange_strong(waiting, ApiSession::kAbandoned)) {
      return api::Error(503, "service_unavailable",
                        "the broker did not take the request within 10 s; nothing was done");
    }
    return api::Error(503, "service_unavailable",
                      "the broker did not answer within 10 s; the request was started and may "
                      "still take effect");
  }
  try {
    return answer.get();
  } catch (const std::future_error&) {  // the broker went away with the request
    return api::Error(503, "service_unavailable", "the broker is shutting down");
  }
}

api::Reply ApiWrites::PutQueue(const std::string& vhost, const std::string& name,
                               const std::string& body) {
  Json request;
  if (auto refused = api::ParseBody(body, &request)) return *refused;
  bool ok = true;
  QueueSpec spec;
  spec.name = name;
  spec.vhost = vhost;
  spec.durable = Flag(request, "durable", true, &ok);
  spec.auto_delete = Flag(request, "auto_delete", false, &ok);
  if (!ok) return api::Error(400, "bad_request", "durable and auto_delete must be true or false");
  if (auto refused = ReadArguments(request, &spec.arguments)) return *refused;
  return Run(vhost, [spec = std::move(spec)](ApiSession& session, broker::Broker& broker) mutable {
    const bool existed = QueueNamed(broker, spec.vhost, spec.name).has_value();
    const bool stored = spec.durable;
    auto declared = broker.DeclareQueue(session.id(), std::move(spec));
    if (!declared.ok()) return session.Fail(declared.status());
    const int status = existed ? 204 : 201;
    if (!stored) return session.Answer(Done(status));
    AnswerWhenDurable(session, broker, status);
  });
}

api::Reply ApiWrites::DeleteQueue(const std::string& vhost, const std::string& name,
                                  const std::multimap<std::string, std::string>& params) {
  const bool if_unused = IsTrue(params, "if-unused");
  const bool if_empty = IsTrue(params, "if-empty");
  return Run(vhost, [vhost, name, if_unused, if_empty](ApiSession& session,
                                                       broker::Broker& broker) {
    if (!QueueNamed(broker, vhost, name)) return session.Answer(NotFound());
    session.on_deleted = [&session](const Result<uint64_t>& dropped) {
      if (!dropped.ok()) return session.Fail(dropped.status());
      session.Answer(Done(204));
    };
    auto dropped = broker.DeleteQueue(session.id(), name, if_unused, if_empty, /*request_id=*/1);
    if (!dropped.ok()) session.Fail(dropped.status());
  });
}

api::Reply ApiWrites::Purge(const std::string& vhost, const std::string& name) {
  return Run(vhost, [vhost, name](ApiSession& session, broker::Broker& broker) {
    if (!QueueNamed(broker, vhost, name)) return session.Answer(NotFound());
    session.on_purged = [&session](const Result<uint64_t>& purged) {
      if (!purged.ok()) return session.Fail(purged.status());
      session.Answer(Done(204));
    };
    auto purged = broker.PurgeQueue(session.id(), name, /*request_id=*/1);
    if (!purged.ok()) session.Fail(purged.status());
  });
}

api::Reply ApiWrites::Get(const std::string& vhost, const std::string& name,
                          const std::string& body) {
  Json request;
  if (auto refused = api::ParseBody(body, &request)) return *refused;
  // RabbitMQ's fields: ackmode and encoding are required.
  std::vector<std::string> missing;
  for (const char* key : {"ackmode", "encoding"}) {
    if (!request.contains(key)) missing.push_back(key);
  }
  if (!missing.empty()) {
    std::string reason = "missing: ";
    for (size_t i = 0; i < missing.size(); ++i) reason += (i ? ", " : "") + missing[i];
    return api::Error(400, "bad_request", reason);
  }
  const Json& ackmode = request["ackmode"];
  const Json& encoding = request["encoding"];
  if (encoding != "auto" && encoding != "base64") {
    return api::Error(400, "bad_request", "Unsupported encoding. Please use auto or base64.");
  }
  const bool requeue = ackmode == "ack_requeue_true" || ackmode == "reject_requeue_true";
  const bool ack = ackmode == "ack_requeue_false";
  const bool reject = ackmode == "reject_requeue_false";
  if (!requeue && !ack && !reject) {
    return api::Error(400, "bad_request",
                      "ackmode must be ack_requeue_true, reject_requeue_true, "
                      "ack_requeue_false or reject_requeue_false");
  }
  const Json count_json = request.value("count", Json(1));
  const Json truncate_json = request.value("truncate", Json(0));
  if (!Counting(count_json) || count_json.get<uint64_t>() == 0 ||
      count_json.get<uint64_t>() > kMaxMessages) {
    return api::Error(400, "bad_request",
                      "count must be an integer from 1 to " + std::to_string(kMaxMessages));
  }
  if (!Counting(truncate_json)) {
    return api::Error(400, "bad_request", "truncate must be a number of bytes");
  }
  const uint64_t count = count_json.get<uint64_t>();
  const uint64_t truncate = truncate_json.get<uint64_t>();
  const bool base64 = encoding == "base64";
  return Run(vhost, [vhost, name, count, truncate, base64, requeue, reject](
                        ApiSession& session, broker::Broker& broker) {
    if (requeue) {
      // The requeue modes leave the queue as it was: Wharf reads them without taking them
      // (a peek), where RabbitMQ takes and requeues them (marking them redelivered).
      auto queue = QueueNamed(broker, vhost, name);
      const uint64_t ready = queue ? queue->ready : 0;
      session.on_peeked = [&session, ready, truncate, base64](const Result<PeekPage>& page) {
        if (!page.ok()) return session.Fail(page.status());
        Json out = Json::array();
        uint64_t left = ready;
        for (const PeekedMessage& m : page->messages) {
          left = left > 0 ? left - 1 : 0;
          out.push_back(api::GotMessageJson(m.message, m.receive_count > 0, m.exchange,
                                            m.routing_key, left, base64, truncate));
        }
        session.Answer(api::Reply{200, std::move(out)});
      };
      Status peeked = broker.Peek(session.id(), /*request_id=*/1, name, /*after_position=*/0,
                                  static_cast<uint32_t>(count), /*with_body=*/true);
      if (!peeked.ok()) session.Fail(peeked);
      return;
    }
    // Taken: acked at once, or rejected (dead-lettered where the queue says). At most
    // kGetBodyBytes of bodies in one answer (the one that crosses it included), as a peek's.
    Json out = Json::array();
    uint64_t body_bytes = 0;
    for (uint64_t i = 0; i < count && body_bytes < kGetBodyBytes; ++i) {
      auto got = broker.Get(session.id(), name, /*no_ack=*/!reject);
      if (!got.ok()) return session.Fail(got.status());
      if (!got->delivery) break;
      const broker::Delivery& d = *got->delivery;
      body_bytes += d.envelope->message.body.size();
      out.push_back(api::GotMessageJson(d.envelope->message, d.redelivered, d.envelope->exchange,
                                        d.envelope->routing_key, got->message_count, base64,
                                        truncate));
      if (reject) {
        Status rejected = broker.Nack(session.id(), d.delivery_tag, /*multiple=*/false,
                                      /*requeue=*/false);
        if (!rejected.ok()) return session.Fail(rejected);
      }
    }
    session.Answer(api::Reply{200, std::move(out)});
  });
}

api::Reply ApiWrites::Peek(const std::string& vhost, const std::string& name,
                           const std::multimap<std::string, std::string>& params) {
  uint64_t after = 0;
  uint64_t limit = 50;
  for (auto [key, value] :
       {std::pair<const char*, uint64_t*>{"after", &after}, {"limit", &limit}}) {
    const std::string* text = api::QueryParam(params, key);
    if (text == nullptr) continue;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), *value);
    if (text->empty() || ec != std::errc() || end != text->data() + text->size()) {
      return api::Error(400, "bad_request",
                        std::string(key) + " must be a number, not '" + *text + "'");
    }
  }
  if (limit == 0 || limit > kMaxMessages) {
    return api::Error(400, "bad_request",
                      "limit must be from 1 to " + std::to_string(kMaxMessages));
  }
  const std::string* body_param = api::QueryParam(params, "body");
  const bool with_body = body_param == nullptr || *body_param != "false";
  return Run(vhost,
             [vhost, name, after, limit, with_body](ApiSession& session, broker::Broker& broker) {
               if (!QueueNamed(broker, vhost, name)) return session.Answer(NotFound());
               session.on_peeked = [&session, name, with_body](const Result<PeekPage>& page) {
                 if (!page.ok()) return session.Fail(page.status());
                 Json messages = Json::array();
                 for (const PeekedMessage& m : page->messages) {
                   messages.push_back(json::PeekedJson(name, m, with_body));
                 }
                 session.Answer(api::Reply{200, Json{{"messages", std::move(messages)},
                                                     {"more", page->more},
                                                     {"next_after", page->next_after}}});
               };
               Status peeked = broker.Peek(session.id(), /*request_id=*/1, name, after,
                                           static_cast<uint32_t>(limit), with_body);
               if (!peeked.ok()) session.Fail(peeked);
             });
}

api::Reply ApiWrites::Publish(const std::string& vhost, const std::string& exchange,
                              const std::string& body) {
  Json request;
  if (auto refused = api::ParseBody(body, &request)) return *refused;
  Message message;
  auto payload = json::PayloadFromJson(request);
  if (!payload.ok()) return api::Error(400, "bad_request", std::string(payload.status().message()));
  message.body = std::move(*payload);
  Status properties = api::MessageFromPublishJson(request.value("properties", Json()), &message);
  if (!properties.ok()) return api::Error(400, "bad_request", std::string(properties.message()));
  const Json routing_key = request.value("routing_key", Json(""));
  if (!routing_key.is_string())
    return api::Error(400, "bad_request", "routing_key must be a string");
  // RabbitMQ names the default exchange amq.default in paths.
  const std::string target = exchange == "amq.default" ? "" : exchange;
  // An expiration of "0", as AMQP's: the message lives only if a consumer takes it at once.
  broker::PublishTiming timing;
  if (const Json* properties = request.contains("properties") ? &request["properties"] : nullptr;
      properties != nullptr && properties->is_object() && properties->contains("expiration")) {
    timing.expire_undelivered = (*properties)["expiration"] == "0";
  }
  return Run(
      vhost, [vhost, target, timing, key = routing_key.get<std::string>(),
              message = std::move(message)](ApiSession& session, broker::Broker& broker) mutable {
        session.on_published = [&session](const PublishResult& result, const Status& status) {
          if (!status.ok()) return session.Fail(status);
          session.Answer(api::Reply{200, Json{{"routed", result.routed_queues > 0}}});
        };
        auto outcome = broker.Publish(session.id(), target, key, std::move(message),
                                      /*request_id=*/1, timing);
        if (outcome.status().code() == StatusCode::kExchangeNotFound) {
          // RabbitMQ's: the publish, not the path, names the missing exchange.
          return session.Answer(api::Error(
              400, "bad_request",
              "404 NOT_FOUND - " + broker::rabbitmq::NotFound("exchange", target, vhost)));
        }
        if (!outcome.ok()) return session.Fail(outcome.status());
        if (outcome->deferred) return;  // answered through PublishDone once on disk
        session.Answer(api::Reply{200, Json{{"routed", outcome->result.routed_queues > 0}}});
      });
}

api::Reply ApiWrites::PutExchange(const std::string& vhost, const std::string& name,
                                  const std::string& body) {
  Json request;
  if (auto refused = api::ParseBody(body, &request)) return *refused;
  if (auto refused = RefuseDefaultExchange(name)) return *refused;
  bool ok = true;
  ExchangeSpec spec;
  spec.name = name;
  spec.vhost = vhost;
  spec.durable = Flag(request, "durable", true, &ok);
  spec.auto_delete = Flag(request, "auto_delete", false, &ok);
  spec.internal = Flag(request, "internal", false, &ok);
  if (!ok) {
    return api::Error(400, "bad_request",
                      "durable, auto_delete and internal must be true or false");
  }
  const Json type = request.value("type", Json());
  if (!type.is_string()) return api::Error(400, "bad_request", "type must be given, as a string");
  if (auto refused = ReadArguments(request, &spec.arguments)) return *refused;
  if (Status typed = broker::ApplyDeclaredType(type.get<std::string>(), &spec); !typed.ok()) {
    return api::Error(400, "bad_request", std::string(typed.message()));
  }
  return Run(vhost, [spec = std::move(spec)](ApiSession& session, broker::Broker& broker) {
    bool existed = false;
    for (const ExchangeInfo& e : broker.ListExchanges(spec.vhost)) existed |= e.name == spec.name;
    Status declared = broker.DeclareExchange(session.id(), spec);
    if (!declared.ok()) return session.Fail(declared);
    const int status = existed ? 204 : 201;
    if (!spec.durable) return session.Answer(Done(status));
    AnswerWhenDurable(session, broker, status);
  });
}

api::Reply ApiWrites::DeleteExchange(const std::string& vhost, const std::string& name,
                                     const std::multimap<std::string, std::string>& params) {
  if (auto refused = RefuseDefaultExchange(name)) return *refused;
  const bool if_unused = IsTrue(params, "if-unused");
  return Run(vhost, [vhost, name, if_unused](ApiSession& session, broker::Broker& broker) {
    bool exists = false;
    for (const ExchangeInfo& e : broker.ListExchanges(vhost)) exists |= e.name == name;
    if (!exists) return session.Answer(NotFound());
    broker.TakeDurableTopologyChange();
    Status deleted = broker.DeleteExchange(session.id(), name, if_unused);
    if (!deleted.ok()) return session.Fail(deleted);
    if (!broker.TakeDurableTopologyChange()) return session.Answer(Done(204));
    AnswerWhenDurable(session, broker, 204);
  });
}

namespace {

// The binding a bindings path names (its routing key and arguments left to the caller).
BindingSpec BindingOf(const std::string& vhost, const std::string& source,
                      const std::string& destination_kind, const std::string& destination) {
  BindingSpec b;
  b.vhost = vhost;
  b.exchange = source;
  (destination_kind == "q" ? b.queue : b.destination_exchange) = destination;
  return b;
}

}  // namespace

api::Reply ApiWrites::Bind(const std::string& vhost, const std::string& source,
                           const std::string& destination_kind, const std::string& destination,
                           const std::string& body) {
  Json request;
  if (auto refused = api::ParseBody(body, &request)) return *refused;
  BindingSpec binding = BindingOf(vhost, source, destination_kind, destination);
  const Json key = request.value("routing_key", Json(""));
  if (!key.is_string()) return api::Error(400, "bad_request", "routing_key must be a string");
  binding.routing_key = key.get<std::string>();
  if (auto refused = ReadArguments(request, &binding.arguments)) return *refused;
  return Run(vhost, [binding = std::move(binding)](ApiSession& session, broker::Broker& broker) {
    broker.TakeDurableTopologyChange();
    Status bound = broker.Bind(session.id(), binding);
    if (!bound.ok()) return session.Fail(bound);
    if (!broker.TakeDurableTopologyChange()) return session.Answer(Done(201));
    AnswerWhenDurable(session, broker, 201);
  });
}

api::Reply ApiWrites::Unbind(const std::string& vhost, const std::string& source,
                             const std::string& destination_kind, const std::string& destination,
                             const std::string& properties_key) {
  const BindingSpec path = BindingOf(vhost, source, destination_kind, destination);
  return Run(vhost, [path, properties_key](ApiSession& session, broker::Broker& broker) {
    // The binding whose properties key (as the listings give it) the path names.
    for (const BindingSpec& b : broker.ListBindings(path.exchange, path.queue, path.vhost)) {
      if (b.exchange != path.exchange || b.destination_exchange != path.destination_exchange ||
          api::BindingJson(b)["properties_key"] != properties_key) {
        continue;
      }
      broker.TakeDurableTopologyChange();
      Status unbound = broker.Unbind(session.id(), b);
      if (!unbound.ok()) return session.Fail(unbound);
      if (!broker.TakeDurableTopologyChange()) return session.Answer(Done(204));
      return AnswerWhenDurable(session, broker, 204);
    }
    session.Answer(NotFound());
  });
}

api::Reply ApiWrites::StartRedrive(const std::string& vhost, const std::string& queue,
                                   const std::string& body, Redrive kind) {
  Json request;
  if (auto refused = api::ParseBody(body, &request)) return *refused;
  RedriveSpec spec;
  spec.queue = queue;
  bool ok = true;
  spec.dry_run = Flag(request, "dry_run", false, &ok);
  for (auto [key, text] :
       {std::pair<const char*, std::string*>{"to", &spec.to}, {"reason", &spec.reason}}) {
    const Json value = request.value(key, Json(""));
    if (!value.is_string()) ok = false;
    if (value.is_string()) *text = value.get<std::string>();
  }
  const Json limit = request.value("limit", Json(0));
  const Json rate = request.value("rate", Json(0));
  if (!ok || !Counting(limit) || !Counting(rate) || rate.get<uint64_t>() > UINT32_MAX) {
    return api::Error(400, "bad_request",
                      "to and reason are strings, limit and rate numbers, dry_run true or false");
  }
  spec.limit = limit.get<uint64_t>();
  spec.rate = static_cast<uint32_t>(rate.get<uint64_t>());
  if (auto id = request.find("message_id"); id != request.end() && !id->is_null()) {
    auto parsed = id->is_string() ? json::ParseMessageId(id->get<std::string>()) : std::nullopt;
    if (!parsed) return api::Error(400, "bad_request", "message_id is a hex message id");
    spec.message_id = *parsed;
  }
  if (kind == Redrive::kMove) {
    if (spec.to.empty()) return api::Error(400, "bad_request", "a move needs \"to\", a queue");
    if (spec.message_id != 0) {
      return api::Error(400, "bad_request", "a move takes no message_id (see requeue)");
    }
    if (spec.rate == 0) spec.rate = 100'000;  // as fast as the broker allows, as wharfctl move
  } else if (kind == Redrive::kRequeue) {
    if (spec.message_id == 0) {
      return api::Error(400, "bad_request", "a requeue needs \"message_id\", a hex message id");
    }
    spec.limit = 1;
  }
  return Run(vhost, [spec = std::move(spec)](ApiSession& session, broker::Broker& broker) {
    session.on_redrive = [&session](const Result<RedriveInfo>& info) {
      if (!info.ok()) return session.Fail(info.status());
      session.Answer(api::Reply{201, json::RedriveJson(*info)});
    };
    Status started = broker.StartRedrive(session.id(), /*request_id=*/1, spec);
    if (!started.ok()) session.Fail(started);
  });
}

api::Reply ApiWrites::RedriveProgress(const std::string& vhost, const std::string& queue) {
  return Run(vhost, [queue](ApiSession& session, broker::Broker& broker) {
    auto tasks = broker.RedriveStatus(session.id(), queue);
    if (!tasks.ok()) return session.Fail(tasks.status());
    if (tasks->empty()) return session.Answer(NotFound());
    session.Answer(api::Reply{200, json::RedriveJson(tasks->back())});
  });
}

api::Reply ApiWrites::CancelRedrive(const std::string& vhost, const std::string& queue) {
  return Run(vhost, [queue](ApiSession& session, broker::Broker& broker) {
    session.on_redrive = [&session](const Result<RedriveInfo>& info) {
      if (!info.ok()) return session.Fail(info.status());
      session.Answer(api::Reply{200, json::RedriveJson(*info)});
    };
    Status cancelled = broker.CancelRedrive(session.id(), /*request_id=*/1, queue);
    if (!cancelled.ok()) session.Fail(cancelled);
  });
}

api::Reply ApiWrites::ListDelayed(const std::string& vhost, const std::string& queue,
                                  const std::multimap<std::string, std::string>& params) {
  int64_t after_ms = 0;
  uint64_t after_id = 0;
  uint64_t limit = 50;
  if (const std::string* after = api::QueryParam(params, "after")) {
    // MS:ID, as next_after gives it.
    const size_t colon = after->find(':');
    const std::string bad = "after must be MS:ID, as next_after gives it";
    if (colon == std::string::npos) return api::Error(400, "bad_request", bad);
    auto id = json::ParseMessageId(after->substr(colon + 1));
    auto [end, ec] = std::from_chars(after->data(), after->data() + colon, after_ms);
    if (!id || ec != std::errc() || end != after->data() + colon) {
      return api::Error(400, "bad_request", bad);
    }
    after_id = *id;
  }
  if (const std::string* text = api::QueryParam(params, "limit")) {
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), limit);
    if (ec != std::errc() || end != text->data() + text->size() || limit == 0 ||
        limit > kMaxMessages) {
      return api::Error(400, "bad_request",
                        "limit must be from 1 to " + std::to_string(kMaxMessages));
    }
  }
  return Run(vhost,
             [queue, after_ms, after_id, limit](ApiSession& session, broker::Broker& broker) {
               session.on_delayed = [&session](const Result<DelayedPage>& page) {
                 if (!page.ok()) return session.Fail(page.status());
                 Json messages = Json::array();
                 for (const DelayedInfo& m : page->messages)
                   messages.push_back(json::DelayedJson(m));
                 Json next = page->more ? Json(std::to_string(page->next_after_deliver_at_ms) +
                                               ":" + json::HexId(page->next_after_message_id))
                                        : Json();
                 session.Answer(api::Reply{200, Json{{"messages", std::move(messages)},
                                                     {"more", page->more},
                                                     {"next_after", std::move(next)}}});
               };
               Status listed = broker.ListDelayed(session.id(), /*request_id=*/1, queue, after_ms,
                                                  after_id, static_cast<uint32_t>(limit));
               if (!listed.ok()) session.Fail(listed);
             });
}

api::Reply ApiWrites::CancelDelayed(const std::string& vhost, const std::string& queue,
                                    const std::string& message_id) {
  auto id = json::ParseMessageId(message_id);
  if (!id) return api::Error(400, "bad_request", "'" + message_id + "' is not a hex message id");
  return Run(vhost, [queue, id = *id](ApiSession& session, broker::Broker& broker) {
    session.on_cancelled = [&session](const Result<bool>& cancelled) {
      if (!cancelled.ok()) return session.Fail(cancelled.status());
      // Not waiting any more (delivered, or never there): nothing to cancel.
      session.Answer(*cancelled ? Done(204) : NotFound());
    };
    Status asked = broker.CancelDelayed(session.id(), /*request_id=*/1, queue, id);
    if (!asked.ok()) session.Fail(asked);
  });
}

api::Reply ApiWrites::PutPolicy(const std::string& vhost, const std::string& name,
                                const std::string& body) {
  Json request;
  if (auto refused = api::ParseBody(body, &request)) return *refused;
  PolicyInfo policy;
  if (Status read = json::PolicyFromJson(request, &policy); !read.ok()) {
    return api::Error(400, "bad_request", std::string(read.message()));
  }
  // The path names it, whatever the body says.
  policy.vhost = vhost;
  policy.name = name;
  return Run(vhost, [policy = std::move(policy)](ApiSession& session, broker::Broker& broker) {
    const std::vector<PolicyInfo> before = broker.ListPolicies(policy.vhost);
    const bool existed = std::any_of(before.begin(), before.end(),
                                     [&](const PolicyInfo& p) { return p.name == policy.name; });
    Status set = broker.SetPolicy(policy);
    if (!set.ok()) return session.Fail(set);
    AnswerWhenDurable(session, broker, existed ? 204 : 201);
  });
}

api::Reply ApiWrites::DeletePolicy(const std::string& vhost, const std::string& name) {
  return Run(vhost, [vhost, name](ApiSession& session, broker::Broker& broker) {
    Status cleared = broker.ClearPolicy(vhost, name);
    if (cleared.code() == StatusCode::kPolicyNotFound) return session.Answer(NotFound());
    if (!cleared.ok()) return session.Fail(cleared);
    AnswerWhenDurable(session, broker, 204);
  });
}

}  // namespace wharf::server
