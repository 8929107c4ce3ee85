#include "server/user_admin.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "broker/access.h"
#include "common/log_safe.h"
#include "server/internal_session.h"

namespace wharf::server {
namespace {

Status VhostExists(const ServerContext& context, const std::string& vhost) {
  if (context.broker->HasVhost(vhost)) return Status::Ok();
  return Status(StatusCode::kVhostNotFound, "vhost '" + CutForDisplay(vhost) + "' not found");
}

Status CheckTags(const std::vector<std::string>& tags) {
  for (const std::string& tag : tags) {
    if (tag.empty() || tag.size() > 255) {
      return Status(StatusCode::kInvalidArgument, "a tag must be 1 to 255 bytes long");
    }
  }
  return Status::Ok();
}

// `tags` without repeats, in their order; the administrator flag follows them.
void SetTags(const std::vector<std::string>& tags, store::StoredUser* user) {
  user->tags.clear();
  for (const std::string& tag : tags) {
    if (std::find(user->tags.begin(), user->tags.end(), tag) == user->tags.end()) {
      user->tags.push_back(tag);
    }
  }
  user->admin =
      std::find(user->tags.begin(), user->tags.end(), "administrator") != user->tags.end();
}

// The limits `change` gives. Negative: no limit (stored as such: -1).
void SetLimits(const UserChange& change, store::StoredUser* user) {
  if (change.max_connections) {
    user->limits.max_connections = std::max<int64_t>(*change.max_connections, -1);
  }
  if (change.max_channels) {
    user->limits.max_channels = std::max<int64_t>(*change.max_channels, -1);
  }
}

// The stored user as `change` leaves it (kPut), or why not; `created` when it is new.
Result<store::StoredUser> PutUser(const ServerContext& context, const UserChange& change,
                                  bool* created) {
  UserDirectory& users = *context.users;
  const bool no_password = change.password_hash.empty() && change.allow_no_password;
  WHARF_RETURN_IF_ERROR(
      users.CheckChange(change.name, no_password ? nullptr : &change.password_hash));
  if (change.tags) WHARF_RETURN_IF_ERROR(CheckTags(*change.tags));
  // A replaced user keeps its limits and permissions (as RabbitMQ's change_password). A new
  // user has no permissions, as after rabbitmqctl add_user.
  auto existing = users.Stored(change.name);
  *created = !existing;
  store::StoredUser user =
      existing ? *existing : store::StoredUser{change.name, "", false, {}, {}, {}};
  user.password_hash = change.password_hash;
  if (change.tags) {
    SetTags(*change.tags, &user);
  } else {
    std::erase(user.tags, "administrator");
    if (change.admin) user.tags.insert(user.tags.begin(), "administrator");
    user.admin = change.admin;
  }
  SetLimits(change, &user);
  return user;
}

// The stored user as `change` leaves it (kLimits, kTags, kSetPermissions, kClearPermissions).
Result<store::StoredUser> ChangedUser(const ServerContext& context, const UserChange& change,
                                      bool* created) {
  UserDirectory& users = *context.users;
  const char* what = change.kind == UserChange::Kind::kLimits ? "limits"
                     : change.kind == UserChange::Kind::kTags ? "tags"
                                                              : "permissions";
  WHARF_RETURN_IF_ERROR(users.CheckStoredChange(change.name, what));
  auto stored = users.Stored(change.name);  // there: both calls run on this thread
  if (!stored) return Status(StatusCode::kInternal, "user vanished");
  store::StoredUser user = std::move(*stored);
  switch (change.kind) {
    case UserChange::Kind::kLimits:
      SetLimits(change, &user);
      break;
    case UserChange::Kind::kTags: {
      const std::vector<std::string> tags = change.tags.value_or(std::vector<std::string>{});
      WHARF_RETURN_IF_ERROR(CheckTags(tags));
      SetTags(tags, &user);
      break;
    }
    case UserChange::Kind::kSetPermissions: {
      UserPermission permission = change.permission;
      if (permission.vhost.empty()) permission.vhost = "/";
      WHARF_RETURN_IF_ERROR(VhostExists(context, permission.vhost));
      // Compiled here so a bad pattern is refused now, naming itself.
      WHARF_RETURN_IF_ERROR(broker::Access::Make(change.name, {}, {permission}).status());
      *created = std::erase_if(user.permissions, [&](const UserPermission& p) {
                   return p.vhost == permission.vhost;
                 }) == 0;
      user.permissions.push_back(std::move(permission));
      break;
    }
    default: {
      std::string vhost = change.permission.vhost.empty() ? "/" : change.permission.vhost;
      WHARF_RETURN_IF_ERROR(VhostExists(context, vhost));
      std::erase_if(user.permissions, [&](const UserPermission& p) { return p.vhost == vhost; });
      break;
    }
  }
  return user;
}

// Runs one change (UserChanges' turn): commits, applies, answers, then lets the next one go.
void RunChange(const ServerContext& context, const UserChange& change, const std::string& actor,
               const std::function<void(const UserChangeDone&)>& answer,
               std::function<void()> next) {
  UserDirectory& users = *context.users;
  auto refuse = [&](const Status& s) {
    answer(UserChangeDone{s, false});
    next();
  };
  bool created = false;
  store::StoreBatch batch;
  std::function<void()> apply;
  if (change.kind == UserChange::Kind::kDelete) {
    const std::string& name = change.name;
    Status s = users.CheckChange(name, nullptr);
    if (s.ok() && !users.Find(name)) {
      s = Status(StatusCode::kPreconditionFailed,
                 "user '" + CutForDisplay(name) + "' does not exist");
    }
    if (!s.ok()) return refuse(s);
    batch.Add(store::StoreBatch::RemoveUser{name});
    // As RabbitMQ's delete_user: the user's open connections are closed.
    apply = [&users, name, context] {
      users.Remove(name);
      context.close_connections_of(name, "user '" + CutForDisplay(name) + "' is deleted");
    };
  } else {
    auto user = change.kind == UserChange::Kind::kPut ? PutUser(context, change, &created)
                                                      : ChangedUser(context, change, &created);
    if (!user.ok()) return refuse(user.status());
    batch.Add(store::StoreBatch::PutUser{*user});
    apply = [&users, user = *user] { users.Put(user); };
  }
  // Answered once it is on disk; the change takes effect for logins from then on.
  context.store->Commit(std::move(batch), /*sync=*/true,
                        [apply, actor, name = change.name, created, answer, next](Status status) {
                          if (status.ok()) apply();
                          spdlog::info("{} changed user {}: {}", actor, LogSafe(name),
                                       LogSafe(status.ToString(), kLogSafeStatusBytes));
                          answer(UserChangeDone{status, created && status.ok()});
                          next();
                        });
}

}  // namespace

void ChangeUser(const ServerContext& context, UserChange change, std::string actor,
                std::function<void(const UserChangeDone&)> done) {
  context.user_changes->Run([context, change = std::move(change), actor = std::move(actor),
                             done = std::move(done)](std::function<void()> next) {
    RunChange(context, change, actor, done, std::move(next));
  });
}

void AddVhost(const ServerContext& context, const std::string& name, std::string description,
              const std::string& actor, std::function<void(const Status&, bool created)> done) {
  const bool created = !context.broker->HasVhost(name);
  Status s = context.broker->AddVhost(name, std::move(description));
  if (!s.ok()) return done(s, false);
  if (created) spdlog::info("{} added vhost {}", actor, LogSafe(name));
  WhenSynced(context, [done = std::move(done), created](const Status& synced) {
    done(synced, created && synced.ok());
  });
}

void SetVhostLimits(const ServerContext& context, const std::string& name,
                    std::optional<int64_t> max_connections, std::optional<int64_t> max_queues,
                    const std::string& actor, std::function<void(const Status&)> done) {
  auto vhosts = context.broker->ListVhosts();
  auto it = std::find_if(vhosts.begin(), vhosts.end(),
                         [&](const VhostInfo& v) { return v.name == name; });
  if (it == vhosts.end()) return done(VhostExists(context, name));
  VhostLimits limits = it->limits;
  // Negative: no limit (stored as such: -1).
  if (max_connections) limits.max_connections = std::max<int64_t>(*max_connections, -1);
  if (max_queues) limits.max_queues = std::max<int64_t>(*max_queues, -1);
  Status s = context.broker->SetVhostLimits(name, limits);
  if (!s.ok()) return done(s);
  spdlog::info("{} set the limits of vhost {}: max-connections {}, max-queues {}", actor,
               LogSafe(name), limits.max_connections, limits.max_queues);
  WhenSynced(context, std::move(done));
}

void DeleteVhost(const ServerContext& context, const std::string& name, const std::string& actor,
                 std::function<void(const Status&)> done) {
  // "/" and a vhost that does not exist are refused before anything changes.
  if (name == broker::kDefaultVhost) return done(context.broker->DeleteVhost(name));
  if (Status exists = VhostExists(context, name); !exists.ok()) return done(exists);
  context.user_changes->Run([context, name, actor, done](std::function<void()> next) {
    // Then the vhost with everything in it, answered once that is on disk.
    auto remove = [context, name, actor, done, next](const Status& forgotten) {
      Status s = forgotten.ok() ? context.broker->DeleteVhost(name) : forgotten;
      next();  // the next user change finds the vhost gone
      if (!s.ok()) return done(s);
      spdlog::info("{} deleted vhost {}", actor, LogSafe(name));
      // As RabbitMQ's delete_vhost: its connections are closed.
      context.close_connections_in(name, "vhost '" + CutForDisplay(name) + "' is deleted");
      WhenSynced(context, done);
    };
    UserDirectory& users = *context.users;
    store::StoreBatch batch;
    std::vector<store::StoredUser> changed;
    for (const UserInfo& info : users.List()) {
      auto stored = users.Stored(info.name);  // config and built-in users are not stored
      if (!stored) continue;
      if (std::erase_if(stored->permissions,
                        [&](const UserPermission& p) { return p.vhost == name; }) == 0) {
        continue;
      }
      batch.Add(store::StoreBatch::PutUser{*stored});
      changed.push_back(std::move(*stored));
    }
    if (changed.empty()) return remove(Status::Ok());
    context.store->Commit(std::move(batch), /*sync=*/true,
                          [context, changed = std::move(changed), remove](Status status) {
                            if (status.ok()) {
                              for (const auto& user : changed) context.users->Put(user);
                            }
                            remove(status);
                          });
  });
}

}  // namespace wharf::server
