// broker/policy.h
//
// Policies (docs/policies.md): queue and exchange arguments an operator applies at runtime by
// name pattern, RabbitMQ's model. A policy (PolicyInfo) names a vhost, a pattern, what it
// applies to (queues, exchanges or both), a priority and a definition in RabbitMQ's keys
// ("max-length", "dead-letter-exchange", ...; Wharf's own: "lease-ms", "max-attempts", ...).
// Of the policies of a vhost that match a name, the one with the highest priority applies
// (a tie goes to the first by name; RabbitMQ leaves ties unspecified).
//
// A queue runs with its declared arguments and the policy's definition merged in as their
// x- arguments (EffectiveQueueArguments), by RabbitMQ's rules: the lower of the two for a
// limit (max-length, max-length-bytes, message-ttl, expires, delivery-limit, max-attempts),
// the declared argument for anything else. Its name-shaped keys are RabbitMQ's, so a
// definitions file from RabbitMQ means the same here; RabbitMQ's keys with no meaning in Wharf
// (mirroring, lazy mode, federation) are kept and shown, never applied.
//
// Thread safety: PolicyTable is confined to the broker thread; the functions are pure.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/regex.h"
#include "wharf/message.h"
#include "wharf/status.h"
#include "wharf/types.h"

namespace wharf::broker {

// The most policies a vhost may have: every queue and exchange declared in it searches each
// pattern (RabbitMQ has no limit; Wharf's broker thread is one).
inline constexpr size_t kMaxPoliciesPerVhost = 1000;

// What a policy applies to.
enum class PolicyTarget { kQueue, kExchange };

// Checks a policy before it is stored: its name (1..255 bytes), pattern (compiles), apply-to,
// and every key of its definition (known, of the right type and range). kInvalidArgument naming
// what is wrong, as "policy definition key 'max-length' must be a non-negative integer".
Status ValidatePolicy(const PolicyInfo& policy);

// Whether a definition key is applied by Wharf, or only kept (RabbitMQ's keys for features
// Wharf does not have).
bool IsAppliedPolicyKey(std::string_view key);

// The arguments a queue runs with: `declared` with `definition`'s queue keys merged in (see
// above). A dead-letter target comes whole from one side: the declared one if the queue names
// one (a queue or an exchange), else the policy's.
Headers EffectiveQueueArguments(const Headers& declared, const Headers& definition);

// The alternate exchange an exchange routes unroutable messages to: its declared one, else the
// policy's "alternate-exchange"; "" = none.
std::string EffectiveAlternateExchange(const ExchangeSpec& spec, const Headers& definition);

// The policies of every vhost, with their patterns compiled.
class PolicyTable {
 public:
  // Adds or replaces the policy (vhost, name). REQUIRES: ValidatePolicy(policy).ok().
  // Returns whether anything changed.
  bool Put(PolicyInfo policy);
  // Returns false when there was no such policy.
  bool Remove(std::string_view vhost, std::string_view name);
  void RemoveVhost(std::string_view vhost);

  // The policy that applies to the queue or exchange `name` of `vhost`; null = none.
  const PolicyInfo* For(std::string_view vhost, std::string_view name, PolicyTarget target) const;
  const PolicyInfo* Find(std::string_view vhost, std::string_view name) const;
  // By vhost, then name; of one vhost when given.
  std::vector<PolicyInfo> List(std::optional<std::string_view> vhost = std::nullopt) const;
  size_t size() const;

 private:
  struct Entry {
    PolicyInfo info;
    Regex regex;
  };
  std::map<std::string, std::map<std::string, Entry, std::less<>>, std::less<>> by_vhost_;
};

}  // namespace wharf::broker
