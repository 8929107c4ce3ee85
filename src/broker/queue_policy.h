// broker/queue_policy.h
//
// QueuePolicy is what a queue's declare arguments say about its messages' lifecycle
// (docs/lifecycle.md): the lease each delivery holds, and the retry policy that spaces out
// redeliveries after a failure. Arguments are typed header values under "x-" names, as in
// RabbitMQ; an unknown name or a value of the wrong type or range is refused, naming it.
//
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "wharf/message.h"
#include "wharf/result.h"

namespace wharf::broker {

struct QueuePolicy {
  // Every delivery holds a lease: unsettled at its end, the message is redelivered.
  uint32_t lease_ms = 30'000;          // x-lease-ms: the default
  uint32_t max_lease_ms = 43'200'000;  // x-max-lease-ms: a consumer's own lease or an extension
  // Retry policy for a nack without "requeue now" and a lease expiry: exponential backoff
  // with full jitter. 0 (the default): back to the queue at once.
  uint32_t retry_base_ms = 0;       // x-retry-base-ms
  uint32_t retry_max_ms = 300'000;  // x-retry-max-ms: the cap
  // Dead-lettering: where messages go when rejected or out of attempts. Either a queue
  // (x-dead-letter-queue), or an exchange (x-dead-letter-exchange, "" = the default exchange)
  // and a routing key (x-dead-letter-routing-key; absent: the message's own).
  std::string dead_letter_queue;
  std::optional<std::string> dead_letter_exchange;
  std::optional<std::string> dead_letter_routing_key;
  // x-max-attempts: a message received this many times that fails again (nack, expiry, or
  // its consumer's connection closing) is dead-lettered with reason max_attempts; 0 = no limit.
  uint32_t max_attempts = 0;
  // Length limits on the ready messages: x-max-length (messages) and x-max-length-bytes (body
  // bytes); 0 = none. x-overflow says what a publish beyond them does.
  enum class Overflow { kDropHead, kRejectPublish, kRejectPublishDlx };
  // x-message-ttl: a ready message older than this (counted from its publish) expires, and is
  // dead-lettered (expired) or dropped; 0 = none. A message's own expiration_ms also applies:
  // the earlier of the two wins.
  uint64_t message_ttl_ms = 0;
  uint64_t max_length = 0;
  uint64_t max_length_bytes = 0;
  Overflow overflow = Overflow::kDropHead;
  bool has_length_limit() const { return max_length != 0 || max_length_bytes != 0; }

  bool has_dead_letter_target() const {
    return !dead_letter_queue.empty() || dead_letter_exchange.has_value();
  }

  // The delay before the retry that follows failure number `failures` (1 = the first): a
  // uniform draw in [0, min(cap, base * 2^(failures-1))]. 0 when there is no retry policy.
  uint64_t RetryDelay(uint32_t failures, std::mt19937_64& rng) const;
};

// Reads the arguments of a queue declaration. Unknown names are refused.
Result<QueuePolicy> ParseQueuePolicy(const Headers& arguments);

// The most text a nack may attach to a message as its last error; longer text is cut.
inline constexpr size_t kMaxLastErrorBytes = 1024;

// The longest prefix of `text` (valid UTF-8) of at most `max_bytes` that ends on a character
// boundary.
inline std::string_view Utf8Prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

}  // namespace wharf::broker
