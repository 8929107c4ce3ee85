#include "server/api_users.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/log_safe.h"
#include "common/password.h"
#include "json/definitions.h"
#include "server/user_admin.h"

namespace wharf::server {
namespace {

using json::Json;

using api::Done;
using api::NotFound;
api::Reply BadRequest(const std::string& reason) { return api::Error(400, "bad_request", reason); }

// The string member `key` of `body` into `out`; false when it is there but not a string.
bool Text(const Json& body, const char* key, std::optional<std::string>* out) {
  auto it = body.find(key);
  if (it == body.end()) return true;
  if (!it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

// A JSON integer (nlohmann keeps a parsed one unsigned when it is not negative).
std::optional<int64_t> Integer(const Json& value) {
  if (value.is_number_integer() && !value.is_number_unsigned()) return value.get<int64_t>();
  if (value.is_number_unsigned() && value.get<uint64_t>() <= uint64_t{INT64_MAX}) {
    return static_cast<int64_t>(value.get<uint64_t>());
  }
  return std::nullopt;
}

// The "limits" of a user's PUT body into `change`, or the 400 to answer. RabbitMQ writes [] for
// none.
std::optional<api::Reply> ReadUserLimits(const Json& body, UserChange* change) {
  auto it = body.find("limits");
  if (it == body.end() || it->is_null() || (it->is_array() && it->empty())) return std::nullopt;
  if (!it->is_object()) return BadRequest("limits must be an object");
  for (const auto& [key, value] : it->items()) {
    auto limit = Integer(value);
    if (!limit) return BadRequest("limits: " + key + " must be an integer");
    if (key == "max-connections") {
      change->max_connections = *limit;
    } else if (key == "max-channels") {
      change->max_channels = *limit;
    } else {
      return BadRequest("limits: " + QuotedForDisplay(key) +
                        " is not a user limit (max-connections, max-channels)");
    }
  }
  return std::nullopt;
}

// The "value" of a limit's PUT body, or the 400 to answer (RabbitMQ's rule: an integer).
std::optional<api::Reply> ReadLimitValue(const std::string& text, const std::string& limit,
                                         int64_t* value) {
  Json body;
  if (auto refused = api::ParseBody(text, &body)) return refused;
  auto it = body.find("value");
  if (it == body.end()) return BadRequest("the body has no \"value\"");
  auto parsed = Integer(*it);
  if (!parsed) {
    return BadRequest(limit + " should be an integer, actually was " + CutForDisplay(it->dump()));
  }
  *value = *parsed;
  return std::nullopt;
}

// A limit's name (max-connections or `other`, of a `kind`) and its PUT body's value (-1, no
// limit, for a DELETE: no body), or the 400 to answer.
std::optional<api::Reply> ReadLimit(const std::string& limit, const char* kind, const char* other,
                                    const std::string* body, int64_t* value) {
  if (limit != "max-connections" && limit != other) {
    return BadRequest(QuotedForDisplay(limit) + " is not a " + kind + " limit (max-connections, " +
                      other + ")");
  }
  *value = -1;
  if (!body) return std::nullopt;
  return ReadLimitValue(*body, limit, value);
}

// Deletes users one after the other, stopping at the first that is not there (RabbitMQ's
// bulk-delete: what went before it stays deleted).
class BulkDelete : public std::enable_shared_from_this<BulkDelete> {
 public:
  BulkDelete(const ServerContext& context, std::vector<std::string> names, std::string actor,
             std::function<void(api::Reply)> answer)
      : context_(context),
        names_(std::move(names)),
        actor_(std::move(actor)),
        answer_(std::move(answer)) {}

  void Next() {
    if (next_ == names_.size()) return answer_(Done(204));
    const std::string& name = names_[next_++];
    if (!context_.users->Find(name))
      return answer_(BadRequest("no_such_user: " + QuotedForDisplay(name)));
    UserChange change;
    change.kind = UserChange::Kind::kDelete;
    change.name = name;
    ChangeUser(context_, std::move(change), actor_,
               [self = shared_from_this()](const UserChangeDone& done) {
                 if (!done.status.ok()) return self->answer_(api::ErrorOf(done.status));
                 self->Next();
               });
  }

 private:
  const ServerContext context_;
  const std::vector<std::string> names_;
  const std::string actor_;
  const std::function<void(api::Reply)> answer_;
  size_t next_ = 0;
};

}  // namespace

api::Reply ApiUsers::Run(std::function<void(const ServerContext&, Answer)> change) const {
  auto promise = std::make_shared<std::promise<api::Reply>>();
  auto answered = std::make_shared<std::atomic<bool>>(false);
  std::future<api::Reply> future = promise->get_future();
  const ServerContext* server = context_.server;
  context_.post([server, promise, answered, change = std::move(change)] {
    change(*server, [promise, answered](api::Reply reply) {
      if (!answered->exchange(true)) promise->set_value(std::move(reply));
    });
  });
  if (future.wait_for(kTimeout) != std::future_status::ready) {
    return api::Error(503, "service_unavailable",
                      "the change was not on disk within 10 s; it may still take effect");
  }
  try {
    return future.get();
  } catch (const std::future_error&) {  // the broker context went away with it (shutdown)
    return api::Error(503, "service_unavailable", "the broker is shutting down");
  }
}

std::string ApiUsers::Actor() const {
  return fmt::format("http user={} from {}", LogSafe(context_.user), LogSafe(context_.address));
}

api::Reply ApiUsers::PutUser(const std::string& name, const std::string& body) {
  Json request;
  if (auto refused = api::ParseBody(body, &request)) return *refused;
  UserChange change;
  change.kind = UserChange::Kind::kPut;
  change.name = name;
  change.allow_no_password = true;
  // RabbitMQ's rule: every PUT says the user's tags.
  auto tags = request.find("tags");
  if (tags == request.end()) return BadRequest("tags_not_present");
  auto read = json::TagsFromJson(*tags);
  if (!read.ok()) return BadRequest(std::string(read.status().message()));
  change.tags = std::move(*read);
  std::optional<std::string> password, hash, algorithm;
  if (!Text(request, "password", &password) || !Text(request, "password_hash", &hash) ||
      !Text(request, "hashing_algorithm", &algorithm)) {
    return BadRequest("password, password_hash and hashing_algorithm must be strings");
  }
  if (password && hash) return BadRequest("both_password_and_password_hash_are_provided");
  if (password && !password->empty()) {
    change.password_hash = HashPassword(*password);  // PBKDF2 here, on the worker
  } else if (hash) {
    auto stored =
        json::StoredPasswordHash(*hash, algorithm.value_or("rabbit_password_hashing_sha256"));
    if (!stored.ok()) return BadRequest(std::string(stored.status().message()));
    change.password_hash = std::move(*stored);
  }
  // Neither, or an empty password: a user who cannot log in with a password (RabbitMQ's: an
  // existing user's password is cleared).
  if (auto refused = ReadUserLimits(request, &change)) return *refused;
  return Run([change = std::move(change), actor = Actor()](const ServerContext& server,
                                                           Answer answer) mutable {
    ChangeUser(server, std::move(change), actor, [answer](const UserChangeDone& done) {
      if (!done.status.ok()) return answer(api::ErrorOf(done.status));
      answer(Done(done.created ? 201 : 204));
    });
  });
}

api::Reply ApiUsers::DeleteUser(const std::string& name) {
  return Run([name, actor = Actor()](const ServerContext& server, Answer answer) {
    if (!server.users->Find(name)) return answer(NotFound());
    UserChange change;
    change.kind = UserChange::Kind::kDelete;
    change.name = name;
    ChangeUser(server, std::move(change), actor,
               [answer, name, users = server.users](const UserChangeDone& done) {
                 if (done.status.ok()) return answer(Done(204));
                 if (!users->Find(name)) return answer(NotFound());  // gone meanwhile
                 answer(api::ErrorOf(done.status));
               });
  });
}

api::Reply ApiUsers::BulkDeleteUsers(const std::string& body) {
  Json request;
  if (auto refused = api::ParseBody(body, &request)) return *refused;
  auto users = request.find("users");
  if (users == request.end()) return BadRequest("the body has no \"users\"");
  if (!users->is_array()) return BadRequest("\"users\" must be an array of user names");
  std::vector<std::string> names;
  for (const Json& user : *users) {
    if (!user.is_string()) return BadRequest("\"users\" must be an array of user names");
    names.push_back(user.get<std::string>());
  }
  return Run([names = std::move(names), actor = Actor()](const ServerContext& server,
                                                         Answer answer) mutable {
    std::make_shared<BulkDelete>(server, std::move(names), actor, std::move(answer))->Next();
  });
}

api::Reply ApiUsers::PutPermissions(const std::string& vhost, const std::string& user,
                                    const std::string& body) {
  Json request;
  if (auto refused = api::ParseBody(body, &request)) return *refused;
  UserChange change;
  change.kind = UserChange::Kind::kSetPermissions;
  change.name = user;
  change.permission.vhost = vhost;
  std::string missing;
  for (auto [key, out] :
       {std::pair<const char*, std::string*>{"configure", &change.permission.configure},
        {"write", &change.permission.write},
        {"read", &change.permission.read}}) {
    auto it = request.find(key);
    if (it == request.end()) {
      missing += missing.empty() ? key : std::string(", ") + key;
    } else if (!it->is_string()) {
      return BadRequest(std::string(key) + " must be a string (a regular expression)");
    } else {
      *out = it->get<std::string>();
    }
  }
  if (!missing.empty())
    return BadRequest("configure, write and read are needed; missing: " + missing);
  return Run([change = std::move(change), actor = Actor()](const ServerContext& server,
                                                           Answer answer) mutable {
    // RabbitMQ answers an unknown user or vhost alike: 400.
    if (!server.users->Find(change.name) || !server.broker->HasVhost(change.permission.vhost)) {
      return answer(BadRequest("vhost_or_user_not_found"));
    }
    ChangeUser(server, std::move(change), actor, [answer](const UserChangeDone& done) {
      if (!done.status.ok()) {
        if (done.status.code() == StatusCode::kVhostNotFound) {  // deleted meanwhile
          return answer(BadRequest("vhost_or_user_not_found"));
        }
        return answer(api::ErrorOf(done.status));
      }
      answer(Done(done.created ? 201 : 204));
    });
  });
}

api::Reply ApiUsers::DeletePermissions(const std::string& vhost, const std::string& user) {
  return Run([vhost, user, actor = Actor()](const ServerContext& server, Answer answer) {
    auto known = server.users->Find(user);
    const bool has =
        known && std::any_of(known->permissions.begin(), known->permissions.end(),
                             [&](const UserPermission& p) { return p.vhost == vhost; });
    if (!has || !server.broker->HasVhost(vhost)) return answer(NotFound());
    UserChange change;
    change.kind = UserChange::Kind::kClearPermissions;
    change.name = user;
    change.permission.vhost = vhost;
    ChangeUser(server, std::move(change), actor, [answer](const UserChangeDone& done) {
      answer(done.status.ok() ? Done(204) : api::ErrorOf(done.status));
    });
  });
}

api::Reply ApiUsers::PutVhost(const std::string& name, const std::string& body) {
  Json request;
  if (auto refused = api::ParseBody(body, &request)) return *refused;
  std::optional<std::string> description;
  if (!Text(request, "description", &description)) {
    return BadRequest("description must be a string");
  }
  return Run([name, description = description.value_or(""), maker = context_.user, actor = Actor()](
                 const ServerContext& server, Answer answer) {
    AddVhost(server, name, description, actor,
             [server, name, maker, actor, answer](const Status& s, bool created) {
               if (!s.ok()) return answer(api::ErrorOf(s));
               if (!created) return answer(Done(204));
               // As RabbitMQ: its maker may use it at once, when the maker's permissions are
               // the broker's to change (a stored user, not the config file's nor guest).
               if (!server.users->Stored(maker)) return answer(Done(201));
               UserChange grant;
               grant.kind = UserChange::Kind::kSetPermissions;
               grant.name = maker;
               grant.permission = UserPermission{name, ".*", ".*", ".*"};
               ChangeUser(server, std::move(grant), actor,
                          [answer, name, maker](const UserChangeDone& done) {
                            if (!done.status.ok()) {
                              spdlog::warn(
                                  "vhost {} made, but its maker {} was not given "
                                  "permissions in it: {}",
                                  LogSafe(name), LogSafe(maker), LogSafe(done.status.message()));
                            }
                            answer(Done(201));
                          });
             });
  });
}

api::Reply ApiUsers::DeleteVhost(const std::string& name) {
  return Run([name, actor = Actor()](const ServerContext& server, Answer answer) {
    server::DeleteVhost(server, name, actor, [answer](const Status& s) {
      if (s.code() == StatusCode::kVhostNotFound) return answer(NotFound());
      answer(s.ok() ? Done(204) : api::ErrorOf(s));
    });
  });
}

api::Reply ApiUsers::SetUserLimit(const std::string& user, const std::string& limit,
                                  const std::string* body) {
  int64_t value = -1;
  if (auto refused = ReadLimit(limit, "user", "max-channels", body, &value)) return *refused;
  UserChange change;
  change.kind = UserChange::Kind::kLimits;
  change.name = user;
  (limit == "max-connections" ? change.max_connections : change.max_channels) = value;
  return Run([change = std::move(change), actor = Actor()](const ServerContext& server,
                                                           Answer answer) mutable {
    if (!server.users->Find(change.name)) {
      return answer(BadRequest("no_such_user: " + QuotedForDisplay(change.name)));
    }
    ChangeUser(server, std::move(change), actor, [answer](const UserChangeDone& done) {
      answer(done.status.ok() ? Done(204) : api::ErrorOf(done.status));
    });
  });
}

api::Reply ApiUsers::SetVhostLimit(const std::string& vhost, const std::string& limit,
                                   const std::string* body) {
  int64_t value = -1;
  if (auto refused = ReadLimit(limit, "vhost", "max-queues", body, &value)) return *refused;
  std::optional<int64_t> connections, queues;
  (limit == "max-connections" ? connections : queues) = value;
  return Run(
      [vhost, connections, queues, actor = Actor()](const ServerContext& server, Answer answer) {
        SetVhostLimits(server, vhost, connections, queues, actor,
                       [answer](const Status& s) { answer(s.ok() ? Done(204) : api::ErrorOf(s)); });
      });
}

}  // namespace wharf::server
