#include "broker/queue_policy.h"

#include <algorithm>

#include "common/log_safe.h"

namespace wharf::broker {
namespace {

Status ReadUint32(const Headers& arguments, const char* name, uint32_t min, uint32_t max,
                  uint32_t* out) {
  auto it = arguments.find(name);
  if (it == arguments.end()) return Status::Ok();
  const auto* value = std::get_if<int64_t>(&it->second);
  if (!value) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("queue argument '") + name + "' must be an integer");
  }
  if (*value < min || *value > max) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("queue argument '") + name + "' = " + std::to_string(*value) +
                      " is out of range " + std::to_string(min) + ".." + std::to_string(max));
  }
  *out = static_cast<uint32_t>(*value);
  return Status::Ok();
}

Status ReadString(const Headers& arguments, const char* name, std::optional<std::string>* out) {
  auto it = arguments.find(name);
  if (it == arguments.end()) return Status::Ok();
  const auto* value = std::get_if<std::string>(&it->second);
  if (!value) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("queue argument '") + name + "' must be a string");
  }
  if (value->size() > 255) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("queue argument '") + name + "' is longer than 255 bytes");
  }
  *out = *value;
  return Status::Ok();
}

constexpr const char* kKnown[] = {"x-lease-ms",
                                  "x-max-lease-ms",
                                  "x-retry-base-ms",
                                  "x-retry-max-ms",
                                  "x-dead-letter-queue",
                                  "x-dead-letter-exchange",
                                  "x-dead-letter-routing-key",
                                  "x-max-attempts",
                                  "x-max-length",
                                  "x-max-length-bytes",
                                  "x-overflow",
                                  "x-message-ttl"};

}  // namespace

uint64_t QueuePolicy::RetryDelay(uint32_t failures, std::mt19937_64& rng) const {
  if (retry_base_ms == 0) return 0;
  uint32_t doublings = std::min<uint32_t>(failures > 0 ? failures - 1 : 0, 40);
  uint64_t ceiling = std::min<uint64_t>(retry_max_ms, uint64_t{retry_base_ms} << doublings);
  return std::uniform_int_distribution<uint64_t>(0, ceiling)(rng);
}

Result<QueuePolicy> ParseQueuePolicy(const Headers& arguments) {
  for (const auto& [name, value] : arguments) {
    if (std::find_if(std::begin(kKnown), std::end(kKnown),
                     [&](const char* known) { return name == known; }) == std::end(kKnown)) {
      return Status(StatusCode::kInvalidArgument,
                    "unknown queue argument '" + CutForDisplay(name) +
                        "' (known: x-lease-ms, x-max-lease-ms, x-retry-base-ms, x-retry-max-ms, "
                        "x-dead-letter-queue, x-dead-letter-exchange, x-dead-letter-routing-key, "
                        "x-max-attempts, x-max-length, x-max-length-bytes, x-overflow, "
                        "x-message-ttl)");
    }
  }
  QueuePolicy policy;
  constexpr uint32_t kDay = 86'400'000;
  WHARF_RETURN_IF_ERROR(ReadUint32(arguments, "x-max-lease-ms", 1, kDay, &policy.max_lease_ms));
  WHARF_RETURN_IF_ERROR(
      ReadUint32(arguments, "x-lease-ms", 1, policy.max_lease_ms, &policy.lease_ms));
  WHARF_RETURN_IF_ERROR(ReadUint32(arguments, "x-retry-base-ms", 0, kDay, &policy.retry_base_ms));
  WHARF_RETURN_IF_ERROR(ReadUint32(arguments, "x-retry-max-ms", 1, kDay, &policy.retry_max_ms));
  if (policy.retry_base_ms > policy.retry_max_ms) {
    return Status(StatusCode::kInvalidArgument,
                  "queue argument 'x-retry-base-ms' is larger than 'x-retry-max-ms'");
  }
  std::optional<std::string> dlq;
  WHARF_RETURN_IF_ERROR(ReadString(arguments, "x-dead-letter-queue", &dlq));
  WHARF_RETURN_IF_ERROR(
      ReadString(arguments, "x-dead-letter-exchange", &policy.dead_letter_exchange));
  WHARF_RETURN_IF_ERROR(
      ReadString(arguments, "x-dead-letter-routing-key", &policy.dead_letter_routing_key));
  if (dlq) {
    if (dlq->empty()) {
      return Status(StatusCode::kInvalidArgument, "queue argument 'x-dead-letter-queue' is empty");
    }
    if (policy.dead_letter_exchange || policy.dead_letter_routing_key) {
      return Status(StatusCode::kInvalidArgument,
                    "queue argument 'x-dead-letter-queue' excludes 'x-dead-letter-exchange' and "
                    "'x-dead-letter-routing-key': name a queue, or an exchange and a key");
    }
    policy.dead_letter_queue = *dlq;
  }
  if (policy.dead_letter_routing_key && !policy.dead_letter_exchange) {
    return Status(StatusCode::kInvalidArgument,
                  "queue argument 'x-dead-letter-routing-key' needs 'x-dead-letter-exchange'");
  }
  if (policy.dead_letter_exchange && policy.dead_letter_exchange->empty() &&
      !policy.dead_letter_routing_key) {
    return Status(StatusCode::kInvalidArgument,
                  "dead-lettering through the default exchange needs "
                  "'x-dead-letter-routing-key' (the queue's name)");
  }
  uint32_t attempts = 0;
  WHARF_RETURN_IF_ERROR(ReadUint32(arguments, "x-max-attempts", 1, 1'000'000, &attempts));
  policy.max_attempts = attempts;
  for (auto [name, out] : {std::pair{"x-max-length", &policy.max_length},
                           std::pair{"x-max-length-bytes", &policy.max_length_bytes},
                           std::pair{"x-message-ttl", &policy.message_ttl_ms}}) {
    auto it = arguments.find(name);
    if (it == arguments.end()) continue;
    const auto* value = std::get_if<int64_t>(&it->second);
    if (!value || *value < 1) {
      return Status(StatusCode::kInvalidArgument,
                    std::string("queue argument '") + name + "' must be a positive integer");
    }
    *out = static_cast<uint64_t>(*value);
  }
  std::optional<std::string> overflow;
  WHARF_RETURN_IF_ERROR(ReadString(arguments, "x-overflow", &overflow));
  if (overflow) {
    if (*overflow == "drop-head") {
      policy.overflow = QueuePolicy::Overflow::kDropHead;
    } else if (*overflow == "reject-publish") {
      policy.overflow = QueuePolicy::Overflow::kRejectPublish;
    } else if (*overflow == "reject-publish-dlx") {
      policy.overflow = QueuePolicy::Overflow::kRejectPublishDlx;
    } else {
      return Status(StatusCode::kInvalidArgument,
                    "queue argument 'x-overflow' = '" + CutForDisplay(*overflow) +
                        "': must be drop-head, reject-publish or reject-publish-dlx");
    }
  }
  return policy;
}

}  // namespace wharf::broker
