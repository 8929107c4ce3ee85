#include "broker/policy.h"

#include <algorithm>
#include <cstdint>

#include "broker/queue_policy.h"
#include "common/log_safe.h"
#include "common/utf8.h"

namespace wharf::broker {
namespace {

enum class Kind { kInteger, kString, kOverflow, kIgnored };
// How a key meets a declared argument of the same meaning: the lower value wins (a limit), or
// the declared argument does.
enum class Merge { kLower, kDeclared };

struct Key {
  std::string_view name;      // the policy's key
  std::string_view argument;  // the queue argument it stands for; "" = an exchange key
  Kind kind;
  int64_t min = 0;
  int64_t max = INT64_MAX;
  Merge merge = Merge::kDeclared;
};

constexpr int64_t kDay = 86'400'000;
constexpr int64_t kMaxExpiry = 4'294'967'295;  // RabbitMQ's bound on expires and TTLs

// The keys Wharf applies. delivery-limit (RabbitMQ's, counting returns) becomes
// x-max-attempts (counting deliveries): one more.
constexpr Key kKeys[] = {
    {"dead-letter-exchange", "x-dead-letter-exchange", Kind::kString},
    {"dead-letter-routing-key", "x-dead-letter-routing-key", Kind::kString},
    {"dead-letter-queue", "x-dead-letter-queue", Kind::kString},
    {"message-ttl", "x-message-ttl", Kind::kInteger, 0, kMaxExpiry, Merge::kLower},
    {"expires", "x-expires", Kind::kInteger, 1, kMaxExpiry, Merge::kLower},
    {"max-length", "x-max-length", Kind::kInteger, 0, INT64_MAX, Merge::kLower},
    {"max-length-bytes", "x-max-length-bytes", Kind::kInteger, 0, INT64_MAX, Merge::kLower},
    {"overflow", "x-overflow", Kind::kOverflow},
    {"delivery-limit", "x-max-attempts", Kind::kInteger, 0, 999'999, Merge::kLower},
    {"max-attempts", "x-max-attempts", Kind::kInteger, 1, 1'000'000, Merge::kLower},
    {"lease-ms", "x-lease-ms", Kind::kInteger, 1, kDay},
    {"max-lease-ms", "x-max-lease-ms", Kind::kInteger, 1, kDay},
    {"retry-base-ms", "x-retry-base-ms", Kind::kInteger, 0, kDay},
    {"retry-max-ms", "x-retry-max-ms", Kind::kInteger, 1, kDay},
    {"alternate-exchange", "", Kind::kString},
};

// RabbitMQ 3.10's keys for what Wharf does not have (mirroring, lazy mode, queue versions,
// federation, streams, in-memory limits of quorum queues, leader placement, cluster size; its
// policy_validator registry): accepted, so a definitions file from RabbitMQ imports, and kept,
// never applied.
constexpr std::string_view kIgnored[] = {"ha-mode",
                                         "ha-params",
                                         "ha-sync-mode",
                                         "ha-sync-batch-size",
                                         "ha-promote-on-shutdown",
                                         "ha-promote-on-failure",
                                         "queue-mode",
                                         "queue-version",
                                         "queue-master-locator",
                                         "queue-leader-locator",
                                         "initial-cluster-size",
                                         "max-in-memory-length",
                                         "max-in-memory-bytes",
                                         "max-age",
                                         "stream-max-segment-size-bytes",
                                         "dead-letter-strategy",
                                         "federation-upstream",
                                         "federation-upstream-set"};

const Key* FindKey(std::string_view name) {
  for (const Key& key : kKeys) {
    if (key.name == name) return &key;
  }
  return nullptr;
}

bool IsIgnoredKey(std::string_view name) {
  return std::find(std::begin(kIgnored), std::end(kIgnored), name) != std::end(kIgnored);
}

Status Invalid(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}

Status CheckValue(const Key& key, const HeaderValue& value) {
  const std::string what = "policy definition key '" + std::string(key.name) + "'";
  switch (key.kind) {
    case Kind::kInteger: {
      const auto* n = std::get_if<int64_t>(&value);
      if (n == nullptr) return Invalid(what + " must be an integer");
      if (*n < key.min || *n > key.max) {
        return Invalid(what + " = " + std::to_string(*n) + " is out of range " +
                       std::to_string(key.min) + ".." + std::to_string(key.max));
      }
      return Status::Ok();
    }
    case Kind::kString: {
      const auto* s = std::get_if<std::string>(&value);
      if (s == nullptr) return Invalid(what + " must be a string");
      if (s->size() > 255) return Invalid(what + " is longer than 255 bytes");
      if (!IsValidUtf8(*s)) return Invalid(what + " is not UTF-8");
      if (key.name == "dead-letter-queue" && s->empty()) return Invalid(what + " is empty");
      return Status::Ok();
    }
    case Kind::kOverflow: {
      const auto* s = std::get_if<std::string>(&value);
      if (s == nullptr ||
          (*s != "drop-head" && *s != "reject-publish" && *s != "reject-publish-dlx")) {
        return Invalid(what + " must be drop-head, reject-publish or reject-publish-dlx");
      }
      return Status::Ok();
    }
    case Kind::kIgnored:
      break;
  }
  return Status::Ok();
}

int64_t AsAttempts(std::string_view key, int64_t value) {
  return key == "delivery-limit" ? value + 1 : value;
}

}  // namespace

bool IsAppliedPolicyKey(std::string_view key) { return FindKey(key) != nullptr; }

Status ValidatePolicy(const PolicyInfo& policy) {
  if (policy.name.empty()) return Invalid("a policy needs a name");
  if (policy.name.size() > 255) return Invalid("a policy's name is longer than 255 bytes");
  if (!IsValidUtf8(policy.name)) return Invalid("a policy's name is not UTF-8");
  if (policy.pattern.size() > 1024) return Invalid("a policy's pattern is longer than 1024 bytes");
  if (!IsValidUtf8(policy.pattern)) return Invalid("a policy's pattern is not UTF-8");
  if (auto compiled = Regex::Compile(policy.pattern); !compiled.ok()) {
    return Invalid("policy pattern '" + CutForDisplay(policy.pattern) +
                   "' is not a regular expression: " + std::string(compiled.status().message()));
  }
  if (policy.apply_to != "queues" && policy.apply_to != "exchanges" && policy.apply_to != "all") {
    return Invalid("policy apply-to '" + CutForDisplay(policy.apply_to) +
                   "' must be queues, exchanges or all");
  }
  if (policy.definition.empty()) return Invalid("a policy's definition is empty");
  std::string unknown;
  for (const auto& [name, value] : policy.definition) {
    if (const Key* key = FindKey(name)) {
      WHARF_RETURN_IF_ERROR(CheckValue(*key, value));
    } else if (!IsIgnoredKey(name)) {
      unknown += (unknown.empty() ? "'" : ", '") + CutForDisplay(name, 64) + "'";
    }
  }
  if (!unknown.empty()) {
    return Invalid("policy definition keys " + unknown +
                   " are not known (docs/policies.md lists the keys)");
  }
  const Headers& d = policy.definition;
  if (d.contains("dead-letter-queue") &&
      (d.contains("dead-letter-exchange") || d.contains("dead-letter-routing-key"))) {
    return Invalid(
        "policy definition key 'dead-letter-queue' excludes 'dead-letter-exchange' and "
        "'dead-letter-routing-key': name a queue, or an exchange and a key");
  }
  if (d.contains("delivery-limit") && d.contains("max-attempts")) {
    return Invalid(
        "policy definition keys 'delivery-limit' and 'max-attempts' say the same: use one");
  }
  auto number = [&](std::string_view key) -> std::optional<int64_t> {
    auto it = d.find(key);
    if (it == d.end()) return std::nullopt;
    return std::get<int64_t>(it->second);
  };
  // Against the queue's defaults when the policy gives one side only: a policy no queue without
  // its own arguments could run with would be accepted and never apply.
  const QueuePolicy defaults;
  const int64_t max_lease = number("max-lease-ms").value_or(defaults.max_lease_ms);
  if (auto lease = number("lease-ms"); lease && *lease > max_lease) {
    return Invalid("policy definition key 'lease-ms' = " + std::to_string(*lease) +
                   " is larger than 'max-lease-ms' (" + std::to_string(max_lease) + ")");
  }
  const int64_t retry_max = number("retry-max-ms").value_or(defaults.retry_max_ms);
  if (auto base = number("retry-base-ms"); base && *base > retry_max) {
    return Invalid("policy definition key 'retry-base-ms' = " + std::to_string(*base) +
                   " is larger than 'retry-max-ms' (" + std::to_string(retry_max) + ")");
  }
  return Status::Ok();
}

Headers EffectiveQueueArguments(const Headers& declared, const Headers& definition) {
  Headers out = declared;
  const bool declared_target =
      declared.contains("x-dead-letter-queue") || declared.contains("x-dead-letter-exchange");
  for (const auto& [name, value] : definition) {
    const Key* key = FindKey(name);
    if (key == nullptr || key->argument.empty()) continue;
    const bool target_key = key->name.starts_with("dead-letter-");
    if (target_key && declared_target) {
      // The routing key alone may complete a declared exchange, as in RabbitMQ.
      if (key->name != "dead-letter-routing-key" || !declared.contains("x-dead-letter-exchange") ||
          declared.contains("x-dead-letter-routing-key")) {
        continue;
      }
    }
    HeaderValue policy_value = value;
    if (const auto* n = std::get_if<int64_t>(&value)) policy_value = AsAttempts(key->name, *n);
    auto it = out.find(key->argument);
    if (it == out.end()) {
      out.emplace(std::string(key->argument), std::move(policy_value));
      continue;
    }
    if (key->merge != Merge::kLower) continue;  // the declared argument wins
    const auto* have = std::get_if<int64_t>(&it->second);
    const auto* want = std::get_if<int64_t>(&policy_value);
    // A declared value of another type is the queue's own business (a lenient queue keeps
    // what it was given); it stays.
    if (have != nullptr && want != nullptr && *want < *have) it->second = *want;
  }
  // A routing key with no exchange to go with it (the queue names a dead-letter queue, or
  // nothing) is left out: it would mean nothing.
  if (out.contains("x-dead-letter-routing-key") && !out.contains("x-dead-letter-exchange") &&
      !declared.contains("x-dead-letter-routing-key")) {
    out.erase("x-dead-letter-routing-key");
  }
  return out;
}

std::string EffectiveAlternateExchange(const ExchangeSpec& spec, const Headers& definition) {
  if (!spec.alternate_exchange.empty()) return spec.alternate_exchange;
  auto it = definition.find("alternate-exchange");
  if (it == definition.end()) return {};
  const auto* name = std::get_if<std::string>(&it->second);
  return name == nullptr ? std::string() : *name;
}

// --- PolicyTable ---------------------------------------------------------------------------

bool PolicyTable::Put(PolicyInfo policy) {
  auto regex = Regex::Compile(policy.pattern);
  if (!regex.ok()) return false;  // REQUIRES says it compiles
  auto& policies = by_vhost_[policy.vhost];
  if (auto it = policies.find(policy.name); it != policies.end()) {
    if (it->second.info == policy) return false;
    it->second = Entry{std::move(policy), std::move(*regex)};
    return true;
  }
  std::string name = policy.name;
  policies.emplace(std::move(name), Entry{std::move(policy), std::move(*regex)});
  return true;
}

bool PolicyTable::Remove(std::string_view vhost, std::string_view name) {
  auto v = by_vhost_.find(vhost);
  if (v == by_vhost_.end()) return false;
  auto it = v->second.find(name);
  if (it == v->second.end()) return false;
  v->second.erase(it);
  if (v->second.empty()) by_vhost_.erase(v);
  return true;
}

void PolicyTable::RemoveVhost(std::string_view vhost) {
  if (auto v = by_vhost_.find(vhost); v != by_vhost_.end()) by_vhost_.erase(v);
}

const PolicyInfo* PolicyTable::For(std::string_view vhost, std::string_view name,
                                   PolicyTarget target) const {
  auto v = by_vhost_.find(vhost);
  if (v == by_vhost_.end()) return nullptr;
  const std::string_view kind = target == PolicyTarget::kQueue ? "queues" : "exchanges";
  const PolicyInfo* best = nullptr;
  // In name order: on a tie in priority the first by name stays.
  for (const auto& [policy_name, entry] : v->second) {
    const PolicyInfo& info = entry.info;
    if (info.apply_to != "all" && info.apply_to != kind) continue;
    if (best != nullptr && info.priority <= best->priority) continue;
    if (entry.regex.Search(name)) best = &info;
  }
  return best;
}

const PolicyInfo* PolicyTable::Find(std::string_view vhost, std::string_view name) const {
  auto v = by_vhost_.find(vhost);
  if (v == by_vhost_.end()) return nullptr;
  auto it = v->second.find(name);
  return it == v->second.end() ? nullptr : &it->second.info;
}

std::vector<PolicyInfo> PolicyTable::List(std::optional<std::string_view> vhost) const {
  std::vector<PolicyInfo> out;
  for (const auto& [v, policies] : by_vhost_) {
    if (vhost && v != *vhost) continue;
    for (const auto& [name, entry] : policies) out.push_back(entry.info);
  }
  return out;
}

size_t PolicyTable::size() const {
  size_t n = 0;
  for (const auto& [v, policies] : by_vhost_) n += policies.size();
  return n;
}

}  // namespace wharf::broker
