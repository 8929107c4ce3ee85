#include "server/user_directory.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>

#include "common/log_safe.h"
#include "common/password.h"

namespace wharf::server {
namespace {

const std::vector<std::string> kAdministrator{"administrator"};
const std::vector<UserPermission> kEverythingOnDefault{UserPermission{"/", ".*", ".*", ".*"}};

UserDirectory::User MakeUser(const std::string& name, std::string hash, std::string source,
                             UserLimits limits, std::vector<std::string> tags,
                             std::vector<UserPermission> permissions) {
  UserDirectory::User user;
  user.password_hash = std::move(hash);
  user.admin = std::find(tags.begin(), tags.end(), "administrator") != tags.end();
  user.source = std::move(source);
  user.limits = limits;
  auto access = broker::Access::Make(name, tags, permissions);
  if (!access.ok()) {
    // Checked before they are stored or read from the config; a store written by another
    // PCRE2 could still hold one this build does not take.
    spdlog::error("user {} has a permission this broker cannot compile, it gets none: {}",
                  LogSafe(name), LogSafe(access.status().message()));
    user.access = broker::Access::None(name);
  } else {
    user.access = *access;
  }
  user.tags = std::move(tags);
  user.permissions = std::move(permissions);
  return user;
}

}  // namespace

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
    Insert(user.name, MakeUser(user.name, user.password_hash, "store", user.limits, user.tags,
                               user.permissions));
  }
  // The config file wins over a stored user of the same name (made before the operator added
  // it to the config).
  AddConfigUsers(options);
}

void UserDirectory::Insert(const std::string& name, User user) {
  users_.insert_or_assign(name, std::move(user));
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

void UserDirectory::AddConfigUsers(const ServerOptions& options) {
  for (const auto& [name, hash] : options.users) {
    auto limits = options.user_limits.find(name);
    auto tags = options.user_tags.find(name);
    auto permissions = options.user_permissions.find(name);
    Insert(name, MakeUser(name, hash, "config",
                          limits == options.user_limits.end() ? UserLimits{} : limits->second,
                          tags == options.user_tags.end() ? kAdministrator : tags->second,
                          permissions == options.user_permissions.end() ? kEverythingOnDefault
                                                                        : permissions->second));
  }
  if (options.loopback_guest && !users_.contains("guest")) {
    Insert("guest", MakeUser("guest", "", "builtin", {}, kAdministrator, kEverythingOnDefault));
  }
}

void UserDirectory::ReloadConfigUsers(const ServerOptions& options) {
  std::unique_lock lock(mu_);
  std::erase_if(users_, [](const auto& entry) {
    return entry.second.source == "config" || entry.second.source == "builtin";
  });
  AddConfigUsers(options);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

std::optional<UserDirectory::User> UserDirectory::Find(const std::string& name) const {
  std::shared_lock lock(mu_);
  auto it = users_.find(name);
  if (it == users_.end()) return std::nullopt;
  return it->second;
}

std::shared_ptr<const broker::Access> UserDirectory::AccessOf(std::string_view name) const {
  std::shared_lock lock(mu_);
  auto it = users_.find(name);
  if (it == users_.end()) return broker::Access::None(std::string(name));
  return it->second.access;
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

Status UserDirectory::CheckStoredChange(const std::string& name, std::string_view what) const {
  auto user = Find(name);
  if (!user) {
    return Status(StatusCode::kPreconditionFailed, "user '" + name + "' does not exist");
  }
  if (user->source == "config") {
    return Status(StatusCode::kPreconditionFailed,
                  "user '" + name + "' is defined in the config file: its " + std::string(what) +
                      " are the config file's");
  }
  if (user->source != "store") {
    return Status(StatusCode::kPreconditionFailed, "user '" + name +
                                                       "' is defined by the broker: its " +
                                                       std::string(what) + " cannot be changed");
  }
  return Status::Ok();
}

std::optional<store::StoredUser> UserDirectory::Stored(const std::string& name) const {
  auto user = Find(name);
  if (!user || user->source != "store") return std::nullopt;
  return store::StoredUser{name,         user->password_hash, user->admin,
                           user->limits, user->tags,          user->permissions};
}

void UserDirectory::Put(const store::StoredUser& user) {
  std::unique_lock lock(mu_);
  Insert(user.name, MakeUser(user.name, user.password_hash, "store", user.limits, user.tags,
                             user.permissions));
}

void UserDirectory::Remove(const std::string& name) {
  std::unique_lock lock(mu_);
  users_.erase(name);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

std::vector<UserInfo> UserDirectory::List() const {
  std::shared_lock lock(mu_);
  std::vector<UserInfo> out;
  for (const auto& [name, user] : users_) {
    out.push_back(
        UserInfo{name, user.admin, user.source, user.limits, user.tags, user.permissions});
  }
  return out;
}

}  // namespace wharf::server
