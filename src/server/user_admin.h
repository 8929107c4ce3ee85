// server/user_admin.h
//
// The changes operators make to users (a password, tags, limits, permissions, deletion) and to
// vhosts (addition, limits, deletion), made alike whoever asks: the native protocol
// (server/native_session.h) and the HTTP API (server/api_users.h). Each user change runs
// through UserChanges (one at a time, each reading the user as the last one left it), is
// committed synced, applied to the UserDirectory, then answered; a vhost change is answered
// once synced. Who may ask is the caller's check (administrators).
//
// As RabbitMQ: a deleted user's connections are closed, and so are a deleted vhost's, whose
// permissions go first, in a write of their own: a crash between the two leaves the vhost with
// no one's permissions (its deletion may be asked again), never a vhost made again under its
// name open to the users of the old one.
//
// Threads: broker thread (called there; answers there).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "server/server_context.h"

namespace wharf::server {

struct UserChange {
  enum class Kind { kPut, kDelete, kLimits, kTags, kSetPermissions, kClearPermissions };
  Kind kind = Kind::kPut;
  std::string name;
  // kPut: the password hash (common/password.h); "" for a user who cannot log in with a password
  // (a client certificate's), only when `allow_no_password`.
  std::string password_hash;
  bool allow_no_password = false;
  // kPut: the user's tags from now on; nullopt keeps an existing user's other tags and sets or
  // clears its administrator tag as `admin` says (the native PutUser). kTags: the tags.
  std::optional<std::vector<std::string>> tags;
  bool admin = false;
  // kLimits (and kPut): each given one replaces the user's; negative: no limit.
  std::optional<int64_t> max_connections;
  std::optional<int64_t> max_channels;
  // kSetPermissions: the permission ("" vhost: "/"); kClearPermissions: its vhost.
  UserPermission permission;
};

struct UserChangeDone {
  Status status;
  // kPut: the user is new; kSetPermissions: the user had no permissions in the vhost.
  bool created = false;
};

// Runs `change` after the user changes before it; `done` once it is on disk and applied, or
// refused. `actor` names who asked, for the log ("conn=7 user=alice").
void ChangeUser(const ServerContext& context, UserChange change, std::string actor,
                std::function<void(const UserChangeDone&)> done);

// Adds `name` (nothing changes when it exists; `created` says which), answered once synced.
void AddVhost(const ServerContext& context, const std::string& name, std::string description,
              const std::string& actor, std::function<void(const Status&, bool created)> done);
// Replaces the given limits of `name` (negative: no limit), answered once synced.
void SetVhostLimits(const ServerContext& context, const std::string& name,
                    std::optional<int64_t> max_connections, std::optional<int64_t> max_queues,
                    const std::string& actor, std::function<void(const Status&)> done);
// Deletes `name`, everything in it and every user's permissions in it; its connections are
// closed. Answered once synced.
void DeleteVhost(const ServerContext& context, const std::string& name, const std::string& actor,
                 std::function<void(const Status&)> done);

}  // namespace wharf::server
