#include "broker/queue_policy.h"

#include <algorithm>

#include "broker/rabbitmq_texts.h"
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
                                  "x-message-ttl",
                                  "x-expires",
                                  "x-single-active-consumer",
                                  "x-max-priority",
                                  "x-message-groups",
                                  "x-deduplication-window",
                                  "x-deduplication-source"};

}  // namespace

uint64_t QueuePolicy::RetryDelay(uint32_t failures, std::mt19937_64& rng) const {
  if (retry_base_ms == 0) return 0;
  uint32_t doublings = std::min<uint32_t>(failures > 0 ? failures - 1 : 0, 40);
  uint64_t ceiling = std::min<uint64_t>(retry_max_ms, uint64_t{retry_base_ms} << doublings);
  return std::uniform_int_distribution<uint64_t>(0, ceiling)(rng);
}

namespace {

// RabbitMQ's own checks of the arguments it knows (rabbit_amqqueue:declare_args), in its
// order and words. What passes goes on to the common parse.
Status CheckAsRabbitMq(const Headers& arguments, std::string_view queue, std::string_view vhost) {
  auto invalid = [&](std::string_view key, std::string reason) {
    return Status(StatusCode::kPreconditionFailed, rabbitmq::InvalidArg(key, queue, vhost, reason));
  };
  auto integer = [&](std::string_view key, const HeaderValue& v) -> std::optional<Status> {
    if (std::holds_alternative<int64_t>(v)) return std::nullopt;
    return invalid(key, "\"expected integer, got " + std::string(rabbitmq::TypeName(v)) + "\"");
  };
  constexpr int64_t kMaxExpiry = 4'294'967'295;  // rabbit_misc:check_expiry
  for (const char* key : {"x-expires", "x-message-ttl"}) {
    auto it = arguments.find(key);
    if (it == arguments.end()) continue;
    if (auto bad = integer(key, it->second)) return *bad;
    const int64_t n = std::get<int64_t>(it->second);
    if (std::string_view(key) == "x-expires" && n == 0) return invalid(key, "{value_zero,0}");
    if (n < 0) return invalid(key, "{value_negative," + std::to_string(n) + "}");
    // rabbit_misc:check_expiry bounds x-expires only (RabbitMQ 3.10 takes any x-message-ttl).
    if (std::string_view(key) == "x-expires" && n > kMaxExpiry) {
      return invalid(key, "{value_too_large," + std::to_string(n) + "}");
    }
  }
  for (const char* key : {"x-dead-letter-exchange", "x-dead-letter-routing-key"}) {
    auto it = arguments.find(key);
    if (it == arguments.end() || std::holds_alternative<std::string>(it->second)) continue;
    return Status(StatusCode::kPreconditionFailed,
                  "invalid type '" + std::string(rabbitmq::TypeName(it->second)) + "' for arg '" +
                      key + "' in " + rabbitmq::Resource("queue", queue, vhost));
  }
  if (arguments.contains("x-dead-letter-routing-key") &&
      !arguments.contains("x-dead-letter-exchange")) {
    return invalid("x-dead-letter-routing-key", "routing_key_but_no_dlx_defined");
  }
  for (const char* key : {"x-max-length", "x-max-length-bytes"}) {
    auto it = arguments.find(key);
    if (it == arguments.end()) continue;
    if (auto bad = integer(key, it->second)) return *bad;
    if (const int64_t n = std::get<int64_t>(it->second); n < 0) {
      return invalid(key, "{value_negative," + std::to_string(n) + "}");
    }
  }
  if (auto it = arguments.find("x-max-priority"); it != arguments.end()) {
    if (auto bad = integer("x-max-priority", it->second)) return *bad;
    const int64_t n = std::get<int64_t>(it->second);
    if (n < 0) return invalid("x-max-priority", "{value_negative," + std::to_string(n) + "}");
    if (n > 255) {
      return invalid("x-max-priority", "{max_value_exceeded," + std::to_string(n) + "}");
    }
  }
  if (auto it = arguments.find("x-overflow"); it != arguments.end()) {
    const auto* value = std::get_if<std::string>(&it->second);
    if (!value ||
        (*value != "drop-head" && *value != "reject-publish" && *value != "reject-publish-dlx")) {
      return invalid("x-overflow", "invalid_overflow");
    }
  }
  if (auto it = arguments.find("x-single-active-consumer"); it != arguments.end()) {
    if (!std::holds_alternative<bool>(it->second)) {
      return invalid("x-single-active-consumer",
                     "{unacceptable_type," + std::string(rabbitmq::TypeName(it->second)) + "}");
    }
  }
  return Status::Ok();
}

}  // namespace

void AddQuorumDeliveryLimit(Headers* arguments) {
  auto type = arguments->find("x-queue-type");
  const auto* name = type == arguments->end() ? nullptr : std::get_if<std::string>(&type->second);
  if (name == nullptr || *name != "quorum") return;
  auto limit = arguments->find("x-delivery-limit");
  const auto* n = limit == arguments->end() ? nullptr : std::get_if<int64_t>(&limit->second);
  if (n != nullptr && *n >= 0 && *n < INT64_MAX) (*arguments)["x-max-attempts"] = *n + 1;
}

bool IsKnownQueueArgument(std::string_view name) {
  return std::find_if(std::begin(kKnown), std::end(kKnown),
                      [&](const char* known) { return name == known; }) != std::end(kKnown);
}

Result<QueuePolicy> ParseQueuePolicy(const Headers& arguments, QueueRules rules,
                                     std::string_view queue, std::string_view vhost) {
  if (rules == QueueRules::kRabbitMq) {
    WHARF_RETURN_IF_ERROR(CheckAsRabbitMq(arguments, queue, vhost));
    // Wharf's own arguments, in its words, said as RabbitMQ would.
    auto parsed = ParseQueuePolicy(arguments, QueueRules::kLenient);
    if (!parsed.ok()) {
      return Status(parsed.status().code(), std::string(parsed.status().message()) + " for " +
                                                rabbitmq::Resource("queue", queue, vhost));
    }
    return parsed;
  }
  const bool lenient = rules != QueueRules::kWharf;
  for (const auto& [name, value] : arguments) {
    if (!lenient && !IsKnownQueueArgument(name)) {
      std::string known;
      for (const char* k : kKnown) known += (known.empty() ? "" : ", ") + std::string(k);
      return Status(StatusCode::kInvalidArgument,
                    "unknown queue argument '" + CutForDisplay(name) + "' (known: " + known + ")");
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
  if (!lenient && policy.dead_letter_exchange && policy.dead_letter_exchange->empty() &&
      !policy.dead_letter_routing_key) {
    return Status(StatusCode::kInvalidArgument,
                  "dead-lettering through the default exchange needs "
                  "'x-dead-letter-routing-key' (the queue's name)");
  }
  uint32_t attempts = 0;
  WHARF_RETURN_IF_ERROR(ReadUint32(arguments, "x-max-attempts", 1, 1'000'000, &attempts));
  policy.max_attempts = attempts;
  // RabbitMQ takes 0 for these three (a queue that holds nothing ready; a TTL that lets a
  // message live only if it is delivered at once); Wharf's own rule asks for >= 1.
  std::optional<uint64_t> ttl;
  for (auto [name, out] : {std::pair{"x-max-length", &policy.max_length},
                           std::pair{"x-max-length-bytes", &policy.max_length_bytes},
                           std::pair{"x-message-ttl", &ttl}}) {
    auto it = arguments.find(name);
    if (it == arguments.end()) continue;
    const auto* value = std::get_if<int64_t>(&it->second);
    if (!value || *value < (lenient ? 0 : 1)) {
      return Status(StatusCode::kInvalidArgument,
                    std::string("queue argument '") + name + "' must be a " +
                        (lenient ? "non-negative" : "positive") + " integer");
    }
    *out = static_cast<uint64_t>(*value);
  }
  if (ttl) {
    policy.message_ttl_ms = *ttl;
    policy.expire_undelivered = *ttl == 0;
  }
  // x-expires: RabbitMQ refuses 0 too (a queue that would be gone before it is used).
  if (auto it = arguments.find("x-expires"); it != arguments.end()) {
    const auto* value = std::get_if<int64_t>(&it->second);
    if (!value || *value < 1) {
      return Status(StatusCode::kInvalidArgument,
                    "queue argument 'x-expires' must be a positive integer");
    }
    policy.expires_ms = static_cast<uint64_t>(*value);
  }
  if (lenient) {
    auto type = arguments.find("x-queue-type");
    const auto* name = type == arguments.end() ? nullptr : std::get_if<std::string>(&type->second);
    policy.delivery_count_header = name != nullptr && *name == "quorum";
  }
  if (auto it = arguments.find("x-single-active-consumer"); it != arguments.end()) {
    const auto* value = std::get_if<bool>(&it->second);
    if (!value) {
      return Status(StatusCode::kInvalidArgument,
                    "queue argument 'x-single-active-consumer' must be a boolean");
    }
    policy.single_active_consumer = *value;
  }
  // RabbitMQ takes 0 (one priority: no order to keep); Wharf's own rule asks for 1..255.
  uint32_t max_priority = 0;
  WHARF_RETURN_IF_ERROR(
      ReadUint32(arguments, "x-max-priority", lenient ? 0 : 1, 255, &max_priority));
  policy.max_priority = static_cast<uint8_t>(max_priority);
  if (auto it = arguments.find("x-message-groups"); it != arguments.end()) {
    const auto* value = std::get_if<bool>(&it->second);
    if (!value) {
      return Status(StatusCode::kInvalidArgument,
                    "queue argument 'x-message-groups' must be a boolean");
    }
    policy.message_groups = *value;
    if (policy.message_groups && arguments.contains("x-max-priority")) {
      return Status(StatusCode::kInvalidArgument,
                    "queue argument 'x-message-groups' cannot be combined with 'x-max-priority'");
    }
  }
  WHARF_RETURN_IF_ERROR(ReadUint32(arguments, "x-deduplication-window", 1, kMaxDedupWindowMs,
                                   &policy.dedup_window_ms));
  std::optional<std::string> source;
  WHARF_RETURN_IF_ERROR(ReadString(arguments, "x-deduplication-source", &source));
  if (source) {
    if (*source != "header" && *source != "body") {
      return Status(StatusCode::kInvalidArgument, "queue argument 'x-deduplication-source' = '" +
                                                      CutForDisplay(*source) +
                                                      "': must be header or body");
    }
    if (policy.dedup_window_ms == 0) {
      return Status(StatusCode::kInvalidArgument,
                    "queue argument 'x-deduplication-source' needs 'x-deduplication-window'");
    }
    policy.dedup_by_body = *source == "body";
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
