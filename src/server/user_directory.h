// server/user_directory.h
//
// UserDirectory is who may log in, and what each user may do: the users of the config file
// ([[auth.users]], fixed while wharfd runs; administrators with every permission on "/" unless
// the file gives their tags and permissions), the built-in loopback guest (an administrator
// with every permission on "/", as RabbitMQ's guest), and users made at runtime with PutUser,
// which the message store keeps across restarts (a new one has no tags and no permissions,
// as after rabbitmqctl add_user). An administrator manages the runtime users; a config user can
// be neither replaced nor deleted nor given other rights at runtime. Each user's limits
// (connections, channels; server/user_usage.h) come from the same place.
//
// It is the broker's AccessSource (broker/access.h): every change of a user moves the
// generation, so sessions already open see new rights at their next operation.
//
// Thread safety: thread-safe. I/O threads look users up at login; the broker thread changes
// runtime users. A shared mutex guards the map (a leaf lock: nothing else is taken under it).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "broker/access.h"
#include "server/options.h"
#include "store/message_store.h"
#include "wharf/types.h"

namespace wharf::server {

class UserDirectory final : public broker::AccessSource {
 public:
  struct User {
    std::string password_hash;  // empty for the built-in guest (its password is "guest")
    bool admin = false;         // has the administrator tag
    std::string source;         // "config", "store", "builtin"
    UserLimits limits;
    std::vector<std::string> tags;
    std::vector<UserPermission> permissions;
    std::shared_ptr<const broker::Access> access;  // the two above, compiled
  };

  // A stored user whose hash asks for more than options.max_hash_iterations is left out
  // (logged as an error).
  UserDirectory(const ServerOptions& options, const std::vector<store::StoredUser>& stored);

  std::optional<User> Find(const std::string& name) const;
  // broker::AccessSource.
  uint64_t access_generation() const override {
    return generation_.load(std::memory_order_acquire);
  }
  std::shared_ptr<const broker::Access> AccessOf(std::string_view name) const override;
  // kPreconditionFailed for a config or built-in user; kInvalidArgument for a bad name or hash
  // (one asking for more than [auth] max_hash_iterations included).
  Status CheckChange(const std::string& name, const std::string* password_hash) const;
  // kPreconditionFailed for a user that does not exist or is not a stored one (a config user's
  // limits, tags and permissions are the config file's); `what` names them in the text.
  Status CheckStoredChange(const std::string& name, std::string_view what) const;
  // The stored user as it is now, for a change of its limits, tags or permissions (after
  // CheckStoredChange).
  std::optional<store::StoredUser> Stored(const std::string& name) const;
  void Put(const store::StoredUser& user);
  void Remove(const std::string& name);
  std::vector<UserInfo> List() const;
  // SIGHUP: takes the config file's users (and loopback guest) as they are now. Connections
  // logged in stay; the change applies to later logins. A config user removed from the file
  // is gone until the next restart even when the store holds a user of that name.
  void ReloadConfigUsers(const ServerOptions& options);

 private:
  // REQUIRES: mu_ held, or the constructor. The config file's users, and guest.
  void AddConfigUsers(const ServerOptions& options);
  // REQUIRES: mu_ held, or the constructor.
  void Insert(const std::string& name, User user);

  const uint32_t max_hash_iterations_;  // set at construction, then immutable

  mutable std::shared_mutex mu_;
  std::map<std::string, User, std::less<>> users_;
  std::atomic<uint64_t> generation_{1};
};

}  // namespace wharf::server
