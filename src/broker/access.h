// broker/access.h
//
// Access is what one user may do, RabbitMQ's model: per virtual host, three regular expressions
// over resource names (configure: declare and delete; write: publish to an exchange, bind into a
// queue; read: consume from a queue, bind from an exchange, purge), and user tags for operator
// actions (administrator: everything, users included; monitoring: every listing and the metrics;
// policymaker and management: listings). The patterns are PCRE, unanchored as RabbitMQ's
// re:run; the empty pattern matches no name (RabbitMQ turns it into ^$). A user with no
// permissions in a vhost may not use it. The impersonator tag lets a user publish with another
// user's user-id property.
//
// The broker checks every session's operation against its user's Access (Broker::Authorize),
// the one place for both protocols and every operator request; it asks an AccessSource
// (server/user_directory.h) for the Access and keeps it until the source's generation moves.
//
// Thread safety: an Access is immutable and may be shared across threads; an AccessSource must
// be thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/vhost.h"
#include "common/regex.h"
#include "wharf/status.h"
#include "wharf/types.h"

namespace wharf::broker {

enum class Permission : uint8_t { kConfigure, kWrite, kRead };
enum class ResourceKind : uint8_t { kQueue, kExchange };

// User tags as a bit set; unknown tags are kept as names but grant nothing.
enum UserTag : uint32_t {
  kTagAdministrator = 1u << 0,
  kTagMonitoring = 1u << 1,
  kTagPolicymaker = 1u << 2,
  kTagManagement = 1u << 3,
  // May publish with a user-id property other than its own (RabbitMQ's impersonator).
  kTagImpersonator = 1u << 4,
};
// Any of these may list queues, exchanges, bindings, consumers, and peek (with read access).
inline constexpr uint32_t kAnyManagementTag =
    kTagAdministrator | kTagMonitoring | kTagPolicymaker | kTagManagement;
// Any of these may see every connection and read the metrics.
inline constexpr uint32_t kMonitoringTags = kTagAdministrator | kTagMonitoring;

uint32_t TagBits(const std::vector<std::string>& tags);
// "administrator", "monitoring or administrator", ...: the tags of `bits`, for messages.
std::string TagNames(uint32_t bits);

class Access {
 public:
  // kInvalidArgument when a pattern does not compile (the text names it).
  static Result<std::shared_ptr<const Access>> Make(std::string user,
                                                    const std::vector<std::string>& tags,
                                                    const std::vector<UserPermission>& permissions);
  // A user this broker does not know (deleted while logged in): no rights at all.
  static std::shared_ptr<const Access> None(std::string user);

  const std::string& user() const { return user_; }
  bool HasTag(uint32_t any_of) const { return (tags_ & any_of) != 0; }
  // Has permissions in `vhost` (RabbitMQ's check_vhost_access).
  bool CanUseVhost(std::string_view vhost) const;
  bool Allows(std::string_view vhost, Permission permission, ResourceKind kind,
              std::string_view name) const;
  // OK, or kAccessRefused with RabbitMQ's words, which do not say which permission is missing:
  // "access to queue 'q' in vhost '/' refused for user 'bob'".
  Status Check(std::string_view vhost, Permission permission, ResourceKind kind,
               std::string_view name) const;
  // OK, or kAccessRefused: "user 'bob' may not <action>: it needs the tag <tags>".
  Status CheckTag(uint32_t any_of, std::string_view action) const;

 private:
  struct Patterns {
    Regex configure, write, read;
  };
  Access(std::string user, uint32_t tags, std::map<std::string, Patterns, std::less<>> patterns)
      : user_(std::move(user)), tags_(tags), patterns_(std::move(patterns)) {}

  std::string user_;
  uint32_t tags_;
  std::map<std::string, Patterns, std::less<>> patterns_;  // by vhost
};

class AccessSource {
 public:
  virtual ~AccessSource() = default;
  // Moves whenever any user's access changes; an Access taken at one generation is current
  // until it moves.
  virtual uint64_t access_generation() const = 0;
  // The user's Access; Access::None for a user that does not exist (any more).
  virtual std::shared_ptr<const Access> AccessOf(std::string_view user) const = 0;
};

}  // namespace wharf::broker
