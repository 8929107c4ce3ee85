// server/user_directory.h
//
// UserDirectory is who may log in: the users of the config file ([[auth.users]], admins, fixed
// while wharfd runs), the built-in loopback guest (an admin, as RabbitMQ's guest), and users
// made at runtime with PutUser, which the message store keeps across restarts. An admin may
// manage the runtime users; a config user can be neither replaced nor deleted at runtime. Each
// user's limits (connections, channels; server/user_usage.h) come from the same place.
//
// Thread safety: thread-safe. I/O threads look users up at login; the broker thread changes
// runtime users. A shared mutex guards the map (a leaf lock: nothing else is taken under it).
#pragma once

#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "server/options.h"
#include "store/message_store.h"
#include "wharf/types.h"

namespace wharf::server {

class UserDirectory {
 public:
  struct User {
    std::string password_hash;  // empty for the built-in guest (its password is "guest")
    bool admin = false;
    std::string source;  // "config", "store", "builtin"
    UserLimits limits;
  };

  // A stored user whose hash asks for more than options.max_hash_iterations is left out
  // (logged as an error).
  UserDirectory(const ServerOptions& options, const std::vector<store::StoredUser>& stored);

  std::optional<User> Find(const std::string& name) const;
  bool IsAdmin(const std::string& name) const;
  // kPreconditionFailed for a config or built-in user; kInvalidArgument for a bad name or hash
  // (one asking for more than [auth] max_hash_iterations included).
  Status CheckChange(const std::string& name, const std::string* password_hash) const;
  // kPreconditionFailed for a user that does not exist or is not a stored one (a config user's
  // limits are the config file's).
  Status CheckLimitsChange(const std::string& name) const;
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

  const uint32_t max_hash_iterations_;  // set at construction, then immutable

  mutable std::shared_mutex mu_;
  std::map<std::string, User> users_;
};

}  // namespace wharf::server
