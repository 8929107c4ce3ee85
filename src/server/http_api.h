// server/http_api.h
//
// HttpApi answers wharfd's HTTP API under /api/ (docs/http-api.md), on the HTTP listeners
// (server/metrics_server.h), shaped like RabbitMQ's management API for what both brokers have:
//   GET /api/overview, /api/overview/history (Wharf's), /api/whoami
//   GET /api/vhosts[/{vhost}]
//   GET /api/queues[/{vhost}[/{name}[/bindings]]]
//   GET /api/exchanges[/{vhost}[/{name}[/bindings/source|destination]]]
//   GET /api/bindings[/{vhost}]
//   GET /api/connections, /api/vhosts/{vhost}/connections
//   GET /api/consumers[/{vhost}]
//   GET /api/users[/{name}[/permissions]], /api/permissions[/{vhost}/{user}],
//       /api/vhosts/{vhost}/permissions
//   GET /api/user-limits[/{user}], /api/vhost-limits[/{vhost}]
//   GET /api/policies[/{vhost}[/{name}]]
//   GET and POST /api/definitions[/{vhost}] (administrator; server/definitions.h)
// A path segment is percent-decoded on its own, so the vhost "/" is %2F as with RabbitMQ.
// Lists take RabbitMQ's query (server/api_listing.h): filtering, sorting, columns, pages.
// Requests that change something or read messages (PUT and DELETE of queues, purge, get,
// publish, Wharf's peek, redrive, move and requeue) are server/api_writes.h's; the changes of
// users, permissions, vhosts and limits server/api_users.h's.
//
// Every request needs a broker user (HTTP Basic, or a verified client certificate; the same
// checks as a protocol login, server/http_auth.h) with a management tag (management,
// policymaker, monitoring, administrator); users and permissions need administrator. A user
// sees the vhosts it has permissions in; monitoring and administrator see every vhost, and
// every connection (the others see their own). Errors are RabbitMQ's JSON,
// {"error": ..., "reason": ...}: 401 (not logged in, or not allowed: RabbitMQ answers both
// with 401), 404, 400 for a bad query or body, 405, 429, 503.
//
// Threads: Handle runs on an HTTP worker. Broker state is copied on the broker thread (the
// post function) and read here; the worker waits for it at most kBrokerTimeout.
//
// Thread safety: Handle may run on several workers at once; the object is immutable.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/api_json.h"
#include "server/definitions.h"
#include "server/http_auth.h"
#include "server/overview_history.h"
#include "server/server_context.h"
#include "server/user_directory.h"

namespace wharf::broker {
class Broker;
}

namespace wharf::server {

class HttpApi {
 public:
  static constexpr std::chrono::seconds kBrokerTimeout{2};
  // How long a definitions import may take before the worker answers 503.
  static constexpr std::chrono::seconds kImportTimeout{120};

  struct Config {
    const HttpAuth* auth = nullptr;        // outlives this
    const UserDirectory* users = nullptr;  // outlives this
    broker::Broker* broker = nullptr;      // touched on the broker thread only
    // Runs a function on the broker thread, later, as a batch of broker work (flushed after).
    std::function<void(std::function<void()>)> post_to_broker;
    api::NodeFacts node;
    // The totals sampled for GET /api/overview/history (thread-safe; outlives this); null: none.
    const OverviewHistory* history = nullptr;
    // The server's context, for the changes of users and vhosts (server/api_users.h); touched
    // on the broker thread only.
    const ServerContext* server = nullptr;
    // Imports definitions (server/definitions.h); called on the broker thread, answers there.
    std::function<void(json::Definitions, std::function<void(ImportReport)>)> import_definitions;
  };

  struct Request {
    std::string method;
    std::vector<std::string> path;  // the segments after /api/, each percent-decoded
    std::multimap<std::string, std::string> params;  // the query, decoded
    std::string body;
    HttpAuth::Request credentials;
  };
  struct Response {
    int status = 200;
    std::string body;              // JSON; empty for 201 and 204
    std::string allow;             // 405: the methods the path takes
    bool ask_credentials = false;  // add WWW-Authenticate (401 for missing or wrong credentials)
    std::string user;              // who asked, when known (for the log)
    bool failed_login = false;     // credentials were checked and refused: worth a warning
  };

  explicit HttpApi(Config config) : config_(std::move(config)) {}

  Response Handle(const Request& request) const;

 private:
  class Call;

  // `fn` run on the broker thread, or nullopt when it did not answer in kBrokerTimeout.
  template <typename T>
  std::optional<T> Ask(std::function<T(const broker::Broker&)> fn) const;

  const Config config_;
  // Ids of the ApiSessions of write requests (server/api_writes.h).
  mutable std::atomic<uint64_t> next_session_{1};
};

}  // namespace wharf::server
