// Policies (broker/policy.h, docs/policies.md): set, cleared, listed, and applied to the queues
// and exchanges they match, at once and to every new one. Part of class Broker (broker.h).
#include <spdlog/spdlog.h>

#include "broker/broker.h"
#include "common/log_safe.h"

namespace wharf::broker {

Status Broker::SetPolicy(PolicyInfo policy) {
  thread_checker_.Check();
  if (policy.vhost.empty()) policy.vhost = kDefaultVhost;
  WHARF_RETURN_IF_ERROR(ValidatePolicy(policy));
  if (!HasVhost(policy.vhost)) {
    return Status(StatusCode::kVhostNotFound,
                  "vhost '" + CutForDisplay(policy.vhost) + "' not found");
  }
  const PolicyInfo* have = policies_.Find(policy.vhost, policy.name);
  if (have != nullptr && *have == policy) return Status::Ok();
  if (have == nullptr && policies_.List(policy.vhost).size() >= kMaxPoliciesPerVhost) {
    // Each declaration searches every pattern of its vhost on the broker thread.
    return Status(StatusCode::kResourceExhausted,
                  "vhost '" + CutForDisplay(policy.vhost) + "' has " +
                      std::to_string(kMaxPoliciesPerVhost) + " policies, the most it may");
  }
  WHARF_RETURN_IF_ERROR(TopologyWritable(store_ != nullptr));
  Persist(store::StoreBatch::PutPolicy{policy});
  const std::string vhost = policy.vhost;
  spdlog::info("vhost={} policy={} set: pattern '{}' apply-to {} priority {}", LogSafe(vhost),
               LogSafe(policy.name), LogSafe(policy.pattern), LogSafe(policy.apply_to),
               policy.priority);
  policies_.Put(std::move(policy));
  ApplyPolicies(vhost);
  return Status::Ok();
}

Status Broker::ClearPolicy(std::string_view vhost_view, std::string_view name) {
  thread_checker_.Check();
  const std::string vhost(vhost_view.empty() ? kDefaultVhost : vhost_view);
  if (policies_.Find(vhost, name) == nullptr) {
    return Status(
        StatusCode::kPolicyNotFound,
        "policy '" + CutForDisplay(name) + "' not found in vhost '" + CutForDisplay(vhost) + "'");
  }
  WHARF_RETURN_IF_ERROR(TopologyWritable(store_ != nullptr));
  Persist(store::StoreBatch::RemovePolicy{vhost, std::string(name)});
  policies_.Remove(vhost, name);
  spdlog::info("vhost={} policy={} cleared", LogSafe(vhost), LogSafe(name));
  ApplyPolicies(vhost);
  return Status::Ok();
}

std::vector<PolicyInfo> Broker::ListPolicies(std::optional<std::string_view> vhost) const {
  return policies_.List(vhost);
}

void Broker::ApplyPolicies(std::string_view vhost) {
  // Keys sort by vhost: its queues are one range.
  const std::string first = ResourceKey(vhost, "");
  std::vector<std::shared_ptr<Queue>> queues;
  for (auto it = queues_.lower_bound(first); it != queues_.end(); ++it) {
    if (it->second->vhost() != vhost) break;
    queues.push_back(it->second);
  }
  for (const auto& queue : queues) ApplyPolicy(queue);
  for (auto& [key, exchange] : exchanges_) {
    if (exchange->vhost() == vhost) ApplyPolicy(*exchange);
  }
}

QueuePolicy Broker::EffectivePolicy(const QueueSpec& spec, const QueuePolicy& declared,
                                    std::string* policy_name, Headers* effective_arguments) const {
  policy_name->clear();
  effective_arguments->clear();
  const std::string& vhost = spec.vhost.empty() ? std::string(kDefaultVhost) : spec.vhost;
  const PolicyInfo* policy = policies_.For(vhost, spec.name, PolicyTarget::kQueue);
  if (policy == nullptr) return declared;
  Headers merged = EffectiveQueueArguments(spec.arguments, policy->definition);
  auto parsed = ParseQueuePolicy(merged, QueueRules::kLenient);
  if (!parsed.ok()) {
    // Each side is valid alone (ValidatePolicy, the declaration); a pair the parser refuses
    // (a retry base above the other side's cap, say) leaves the queue as declared.
    spdlog::warn("vhost={} queue={} policy={} does not apply: {}", LogSafe(vhost),
                 LogSafe(spec.name), LogSafe(policy->name),
                 LogSafe(parsed.status().message(), kLogSafeStatusBytes));
    return declared;
  }
  *policy_name = policy->name;
  *effective_arguments = std::move(merged);
  return *parsed;
}

void Broker::ApplyPolicy(const std::shared_ptr<Queue>& queue) {
  if (queue->deleted) return;
  // Nothing applies and nothing did (every declaration and recovered queue of a broker without
  // policies): its arguments are not parsed again.
  if (queue->applied_policy().empty() &&
      policies_.For(queue->vhost(), queue->name(), PolicyTarget::kQueue) == nullptr) {
    return;
  }
  // The declared policy: what the queue's own arguments say (they parsed when it was declared
  // or recovered; a recovered queue whose arguments no longer parse ran with the defaults).
  auto declared = ParseQueuePolicy(queue->spec().arguments, QueueRules::kLenient);
  std::string name;
  Headers effective;
  QueuePolicy next =
      EffectivePolicy(queue->spec(), declared.ok() ? *declared : QueuePolicy{}, &name, &effective);
  const PolicyInfo* policy = name.empty() ? nullptr : policies_.Find(queue->vhost(), name);
  if (name == queue->applied_policy() && effective == queue->effective_arguments() &&
      (policy == nullptr || policy->definition == queue->policy_definition())) {
    return;
  }
  const QueuePolicy before = queue->policy();
  queue->SetPolicy(next, name, policy ? policy->definition : Headers{}, std::move(effective));
  const QueuePolicy& now = queue->policy();
  spdlog::debug("vhost={} queue={} policy={}", LogSafe(queue->vhost()), LogSafe(queue->name()),
                LogSafe(name.empty() ? std::string_view("(none)") : std::string_view(name)));
  if (now.expires_ms != before.expires_ms) {
    // Its expiry clock starts again (as RabbitMQ's, when a policy changes x-expires).
    ForgetIdle(*queue);
    TouchQueue(*queue);
  }
  if (now.message_ttl_ms != before.message_ttl_ms) {
    queue->NoteExpiries();
    ArmExpiries(queue);
  }
  // A lower limit drops the oldest at once, whatever the overflow mode (as RabbitMQ does when a
  // policy lowers it): the mode is for publishes.
  if (now.has_length_limit()) DropHeads(queue);
  ScheduleDispatch(queue);
}

void Broker::ApplyPolicy(Exchange& exchange) {
  // The default exchange routes by queue name and never to an alternate exchange (as in
  // RabbitMQ, whose default exchange skips policies' alternates too).
  if (exchange.name().empty()) return;
  const PolicyInfo* policy =
      policies_.For(exchange.vhost(), exchange.name(), PolicyTarget::kExchange);
  if (policy == nullptr) {
    if (!exchange.applied_policy().empty()) exchange.SetPolicy({}, {});
    return;
  }
  exchange.SetPolicy(policy->name, policy->definition);
}

}  // namespace wharf::broker
