// server/api_writes.h
//
// ApiWrites answers the HTTP API's requests that change something or read messages
// (docs/http-api.md), each through an ApiSession (server/api_session.h) of the request's user,
// so that the broker checks its permissions as for a protocol session:
//   PUT    /api/queues/{vhost}/{name}            declare: 201 made, 204 already there alike
//   DELETE /api/queues/{vhost}/{name}            ?if-unused=true&if-empty=true; 204
//   DELETE /api/queues/{vhost}/{name}/contents   purge; 204 once the purge is on disk
//   POST   /api/queues/{vhost}/{name}/get        RabbitMQ's get: count, ackmode, encoding,
//                                                truncate (the requeue modes take nothing)
//   GET    /api/queues/{vhost}/{name}/messages   Wharf's peek: ?after=POSITION&limit=N&body=
//   POST   /api/exchanges/{vhost}/{name}/publish {"routed": bool} once confirmed
//   PUT    /api/exchanges/{vhost}/{name}            declare: 201 made, 204 already there alike
//   DELETE /api/exchanges/{vhost}/{name}            ?if-unused=true; 204
//   POST   /api/bindings/{vhost}/e/{source}/q|e/{destination}          bind: 201
//   DELETE /api/bindings/{vhost}/e/{source}/q|e/{destination}/{props}  unbind: 204
//   POST   /api/queues/{vhost}/{name}/redrive    Wharf's redrive of a dead-letter queue: 201
//   GET    /api/queues/{vhost}/{name}/redrive    its progress
//   DELETE /api/queues/{vhost}/{name}/redrive    cancel it
//   POST   /api/queues/{vhost}/{name}/move       Wharf's move of the ready messages: {"to"}: 201
//   POST   /api/queues/{vhost}/{name}/requeue    Wharf's requeue of one: {"message_id"}: 201
//   GET    /api/queues/{vhost}/{name}/delayed    delayed messages: ?after=MS:ID&limit=N
//   DELETE /api/queues/{vhost}/{name}/delayed/{id}  cancel one: 204, 404 when not waiting
//   PUT    /api/policies/{vhost}/{name}          a policy (docs/policies.md): 201 made, 204
//                                                changed or the same
//   DELETE /api/policies/{vhost}/{name}          204, 404 when there is none
// Bodies are RabbitMQ's JSON; a body that is not JSON is 400 "not_json".
//
// Thread safety: one ApiWrites per request, on its HTTP worker.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <string>

#include "server/api_json.h"
#include "server/api_session.h"

namespace wharf::server {

class ApiWrites {
 public:
  // How long a worker waits for an answer: a write waits for the disk.
  static constexpr std::chrono::seconds kTimeout{10};
  // The most messages one get or peek returns, and the bodies a get takes (it stops after the
  // message that crosses this).
  static constexpr uint64_t kMaxMessages = 1000;
  static constexpr uint64_t kGetBodyBytes = 4u << 20;

  struct Context {
    broker::Broker* broker = nullptr;  // touched on the broker thread only
    ApiSession::Post post;
    std::atomic<uint64_t>* next_session = nullptr;  // ApiSession ids (HttpApi's)
    std::string user;
    std::string address;  // the HTTP peer, for the session (logs)
  };

  explicit ApiWrites(Context context) : context_(std::move(context)) {}

  api::Reply PutQueue(const std::string& vhost, const std::string& name, const std::string& body);
  api::Reply DeleteQueue(const std::string& vhost, const std::string& name,
                         const std::multimap<std::string, std::string>& params);
  api::Reply Purge(const std::string& vhost, const std::string& name);
  api::Reply Get(const std::string& vhost, const std::string& name, const std::string& body);
  api::Reply Peek(const std::string& vhost, const std::string& name,
                  const std::multimap<std::string, std::string>& params);
  api::Reply Publish(const std::string& vhost, const std::string& exchange,
                     const std::string& body);
  api::Reply PutExchange(const std::string& vhost, const std::string& name,
                         const std::string& body);
  api::Reply DeleteExchange(const std::string& vhost, const std::string& name,
                            const std::multimap<std::string, std::string>& params);
  // `destination_kind` is "q" or "e", as in RabbitMQ's paths.
  api::Reply Bind(const std::string& vhost, const std::string& source,
                  const std::string& destination_kind, const std::string& destination,
                  const std::string& body);
  api::Reply Unbind(const std::string& vhost, const std::string& source,
                    const std::string& destination_kind, const std::string& destination,
                    const std::string& properties_key);
  // A redrive of a dead-letter queue; a move of every ready message to "to" (wharfctl move: as
  // fast as the broker allows unless "rate" says otherwise); a requeue of one ready message,
  // "message_id", to the queue it died in or "to" (wharfctl requeue). 201 with the redrive,
  // whose progress GET .../redrive follows.
  enum class Redrive { kRedrive, kMove, kRequeue };
  api::Reply StartRedrive(const std::string& vhost, const std::string& queue,
                          const std::string& body, Redrive kind = Redrive::kRedrive);
  api::Reply RedriveProgress(const std::string& vhost, const std::string& queue);
  api::Reply CancelRedrive(const std::string& vhost, const std::string& queue);
  api::Reply ListDelayed(const std::string& vhost, const std::string& queue,
                         const std::multimap<std::string, std::string>& params);
  api::Reply CancelDelayed(const std::string& vhost, const std::string& queue,
                           const std::string& message_id);
  api::Reply PutPolicy(const std::string& vhost, const std::string& name, const std::string& body);
  api::Reply DeletePolicy(const std::string& vhost, const std::string& name);

 private:
  // `operation` in a session of the user's in `vhost`; its answer, or 503 after kTimeout.
  api::Reply Run(const std::string& vhost, ApiSession::Operation operation);

  const Context context_;
};

}  // namespace wharf::server
