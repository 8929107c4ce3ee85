#include "server/user_directory.h"

#include <spdlog/spdlog.h>

#include <mutex>

#include "common/log_safe.h"
#include "common/password.h"

namespace wharf::server {

UserDirectory::UserDirectory(const ServerOptions& options,
                             const std::vector<store::StoredUser>& stored)
    : max_hash_iterations_(options.max_hash_iterations) {
  for (const auto& user : stored) {
    // Stored before [auth] max_hash_iterations was lowered: each of its logins would cost more
    // than the operator allows, so it cannot log in until an admin sets a new hash.
    if (Status valid = ValidatePasswordHash(user.password_hash, max_hash_iterations_);
        !valid.ok()) {
      spdlog::error("user {} from the store cannot log in: {}", LogSafe(user.name),
                    valid.message());
      continue;
    }
    users_[user.name] = User{user.password_hash, user.admin, "store", user.limits};
  }
  // The config file wins over a stored user of the same name (made before the operator added
  // it to the config).
  AddConfigUsers(options);
}

void UserDirectory::AddConfigUsers(const ServerOptions& options) {
  for (const auto& [name, hash] : options.users) {
    auto limits = options.user_limits.find(name);
    users_[name] = User{hash, true, "config",
                        limits == options.user_limits.end() ? UserLimits{} : limits->second};
  }
  if (options.loopback_guest && !users_.contains("guest")) {
    users_["guest"] = User{"", true, "builtin", {}};
  }
}

void UserDirectory::ReloadConfigUsers(const ServerOptions& options) {
  std::unique_lock lock(mu_);
  std::erase_if(users_, [](const auto& entry) {
    return entry.second.source == "config" || entry.second.source == "builtin";
  });
  AddConfigUsers(options);
}

std::optional<UserDirectory::User> UserDirectory::Find(const std::string& name) const {
  std::shared_lock lock(mu_);
  auto it = users_.find(name);
  if (it == users_.end()) return std::nullopt;
  return it->second;
}

bool UserDirectory::IsAdmin(const std::string& name) const {
  auto user = Find(name);
  return user && user->admin;
}

Status UserDirectory::CheckChange(const std::string& name, const std::string* password_hash) const {
  if (name.empty() || name.size() > 255) {
    return Status(StatusCode::kInvalidArgument, "a user name must be 1 to 255 bytes long");
  }
  if (password_hash) {
    Status valid = ValidatePasswordHash(*password_hash, max_hash_iterations_);
    if (!valid.ok()) return Status(StatusCode::kInvalidArgument, valid.message());
  }
  auto user = Find(name);
  if (user && user->source != "store") {
    return Status(StatusCode::kPreconditionFailed,
                  "user '" + name + "' is defined " +
                      (user->source == "config" ? "in the config file" : "by the broker") +
                      " and cannot be changed at runtime");
  }
  return Status::Ok();
}

Status UserDirectory::CheckLimitsChange(const std::string& name) const {
  auto user = Find(name);
  if (!user) {
    return Status(StatusCode::kPreconditionFailed, "user '" + name + "' does not exist");
  }
  if (user->source == "config") {
    return Status(StatusCode::kPreconditionFailed,
                  "user '" + name +
                      "' is defined in the config file: its limits are its max_connections and "
                      "max_channels there");
  }
  if (user->source != "store") {
    return Status(StatusCode::kPreconditionFailed,
                  "user '" + name + "' is defined by the broker and has no limits to set");
  }
  return Status::Ok();
}

void UserDirectory::Put(const store::StoredUser& user) {
  std::unique_lock lock(mu_);
  users_[user.name] = User{user.password_hash, user.admin, "store", user.limits};
}

void UserDirectory::Remove(const std::string& name) {
  std::unique_lock lock(mu_);
  users_.erase(name);
}

std::vector<UserInfo> UserDirectory::List() const {
  std::shared_lock lock(mu_);
  std::vector<UserInfo> out;
  for (const auto& [name, user] : users_) {
    out.push_back(UserInfo{name, user.admin, user.source, user.limits});
  }
  return out;
}

}  // namespace wharf::server
