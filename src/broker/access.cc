#include "broker/access.h"

#include "common/log_safe.h"

namespace wharf::broker {
namespace {

struct TagName {
  uint32_t bit;
  std::string_view name;
};
constexpr TagName kTags[] = {{kTagManagement, "management"},
                             {kTagPolicymaker, "policymaker"},
                             {kTagMonitoring, "monitoring"},
                             {kTagAdministrator, "administrator"},
                             {kTagImpersonator, "impersonator"}};

}  // namespace

uint32_t TagBits(const std::vector<std::string>& tags) {
  uint32_t bits = 0;
  for (const std::string& tag : tags) {
    for (const TagName& known : kTags) {
      if (tag == known.name) bits |= known.bit;
    }
  }
  return bits;
}

std::string TagNames(uint32_t bits) {
  std::vector<std::string_view> names;
  for (const TagName& known : kTags) {
    if (bits & known.bit) names.push_back(known.name);
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

Result<std::shared_ptr<const Access>> Access::Make(std::string user,
                                                   const std::vector<std::string>& tags,
                                                   const std::vector<UserPermission>& permissions) {
  std::map<std::string, Patterns, std::less<>> patterns;
  for (const UserPermission& p : permissions) {
    // RabbitMQ: the empty pattern is ^$ (no name but the empty one).
    auto compile = [](const std::string& pattern) {
      return Regex::Compile(pattern.empty() ? std::string_view("^$") : std::string_view(pattern));
    };
    auto configure = compile(p.configure);
    if (!configure.ok()) return configure.status();
    auto write = compile(p.write);
    if (!write.ok()) return write.status();
    auto read = compile(p.read);
    if (!read.ok()) return read.status();
    patterns.insert_or_assign(p.vhost, Patterns{*configure, *write, *read});
  }
  return std::shared_ptr<const Access>(
      new Access(std::move(user), TagBits(tags), std::move(patterns)));
}

std::shared_ptr<const Access> Access::None(std::string user) {
  return std::shared_ptr<const Access>(new Access(std::move(user), 0, {}));
}

bool Access::CanUseVhost(std::string_view vhost) const {
  return patterns_.find(vhost) != patterns_.end();
}

bool Access::Allows(std::string_view vhost, Permission permission, ResourceKind,
                    std::string_view name) const {
  auto it = patterns_.find(vhost);
  if (it == patterns_.end()) return false;
  const Patterns& p = it->second;
  switch (permission) {
    case Permission::kConfigure:
      return p.configure.Search(name);
    case Permission::kWrite:
      return p.write.Search(name);
    case Permission::kRead:
      return p.read.Search(name);
  }
  return false;
}

Status Access::Check(std::string_view vhost, Permission permission, ResourceKind kind,
                     std::string_view name) const {
  if (Allows(vhost, permission, kind, name)) return Status::Ok();
  // RabbitMQ's text does not say which permission is missing.
  return Status(StatusCode::kAccessRefused,
                std::string("access to ") + (kind == ResourceKind::kQueue ? "queue" : "exchange") +
                    " '" + CutForDisplay(name) + "' in vhost '" + CutForDisplay(vhost) +
                    "' refused for user '" + CutForDisplay(user_) + "'");
}

Status Access::CheckTag(uint32_t any_of, std::string_view action) const {
  if (HasTag(any_of)) return Status::Ok();
  return Status(StatusCode::kAccessRefused, "user '" + CutForDisplay(user_) + "' may not " +
                                                std::string(action) + ": it needs the tag " +
                                                TagNames(any_of));
}

}  // namespace wharf::broker
