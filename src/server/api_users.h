// server/api_users.h
//
// ApiUsers answers the HTTP API's changes of users, permissions, vhosts and limits
// (docs/http-api.md), RabbitMQ's management API's paths and answers (measured against 3.10.8),
// each made by server/user_admin.h as for the native protocol:
//   PUT    /api/users/{name}                 {"password" | "password_hash" [+ "hashing_algorithm"],
//                                             "tags", ["limits"]}: 201 made, 204 changed
//   DELETE /api/users/{name}                 204; the user's connections are closed
//   POST   /api/users/bulk-delete            {"users": [...]}: in order, stopping at a missing one
//   PUT    /api/permissions/{vhost}/{user}   {"configure", "write", "read"}: 201 new, 204 changed
//   DELETE /api/permissions/{vhost}/{user}   204, 404 when there are none
//   PUT    /api/vhosts/{name}                {"description"}: 201 made (its maker gets every
//                                             permission in it), 204 there already
//   DELETE /api/vhosts/{name}                204; everything in it goes, its connections close
//   PUT    /api/user-limits/{user}/{limit}   {"value": N}: max-connections, max-channels
//   DELETE /api/user-limits/{user}/{limit}
//   PUT    /api/vhost-limits/{vhost}/{limit} {"value": N}: max-connections, max-queues
//   DELETE /api/vhost-limits/{vhost}/{limit}
// Administrators only (HttpApi checks). Each answers once the change is on disk.
//
// Thread safety: one ApiUsers per request, on its HTTP worker; the changes run on the broker
// thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "server/api_json.h"
#include "server/server_context.h"

namespace wharf::server {

class ApiUsers {
 public:
  // How long a worker waits for a change to be on disk.
  static constexpr std::chrono::seconds kTimeout{10};

  struct Context {
    const ServerContext* server = nullptr;            // touched on the broker thread only
    std::function<void(std::function<void()>)> post;  // to the broker thread
    std::string user;                                 // who asks
    std::string address;                              // from where (the log)
  };

  explicit ApiUsers(Context context) : context_(std::move(context)) {}

  api::Reply PutUser(const std::string& name, const std::string& body);
  api::Reply DeleteUser(const std::string& name);
  api::Reply BulkDeleteUsers(const std::string& body);
  api::Reply PutPermissions(const std::string& vhost, const std::string& user,
                            const std::string& body);
  api::Reply DeletePermissions(const std::string& vhost, const std::string& user);
  api::Reply PutVhost(const std::string& name, const std::string& body);
  api::Reply DeleteVhost(const std::string& name);
  // `limit` as in the path; `body` "" for a DELETE (the limit lifted).
  api::Reply SetUserLimit(const std::string& user, const std::string& limit,
                          const std::string* body);
  api::Reply SetVhostLimit(const std::string& vhost, const std::string& limit,
                           const std::string* body);

 private:
  using Answer = std::function<void(api::Reply)>;
  // Runs `change` on the broker thread and waits for its answer (once) at most kTimeout.
  api::Reply Run(std::function<void(const ServerContext&, Answer)> change) const;
  // "http user=alice from 127.0.0.1", for user_admin's log.
  std::string Actor() const;

  const Context context_;
};

}  // namespace wharf::server
