// broker/queue_policy.h
//
// QueuePolicy is what a queue's declare arguments say about its messages' lifecycle
// (docs/lifecycle.md): the lease each delivery holds, and the retry policy that spaces out
// redeliveries after a failure. Arguments are typed header values under "x-" names, as in
// RabbitMQ; an unknown name or a value of the wrong type or range is refused, naming it
// (under RabbitMQ's rules, for AMQP sessions, an unknown name is kept and ignored).
//
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "broker/vhost.h"
#include "wharf/message.h"
#include "wharf/result.h"

namespace wharf::broker {

// The message header holding a publisher's deduplication id (the name RabbitMQ's
// message-deduplication plugin reads), and the longest window a queue may keep.
inline constexpr std::string_view kDedupHeader = "x-deduplication-header";
inline constexpr uint32_t kMaxDedupWindowMs = 7 * 86'400'000;

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
  // x-message-ttl = 0 (RabbitMQ's rules only): a message expires unless it is delivered at
  // once: whatever a dispatch of the queue leaves ready expires (Broker::Dispatch).
  bool expire_undelivered = false;
  // x-expires: the queue itself is deleted once unused (no consumer, no Receive or Get, no
  // redeclaration) for this long; 0 = never. >= 1 under both rules, as RabbitMQ's.
  uint64_t expires_ms = 0;
  // Unset: no limit. 0 (RabbitMQ's rules only) is a limit: no ready message at all.
  std::optional<uint64_t> max_length;
  std::optional<uint64_t> max_length_bytes;
  Overflow overflow = Overflow::kDropHead;
  bool has_length_limit() const { return max_length || max_length_bytes; }
  // Whether `ready` messages of `ready_bytes` body bytes are over a limit.
  bool OverLimit(uint64_t ready, uint64_t ready_bytes) const {
    return (max_length && ready > *max_length) ||
           (max_length_bytes && ready_bytes > *max_length_bytes);
  }

  // x-single-active-consumer: only one consumer at a time is offered messages (the first to
  // subscribe; when it goes, the highest-priority waiting one). See broker/consumer_set.h.
  bool single_active_consumer = false;

  // x-max-priority (docs/lifecycle.md, "Priorities"): messages are delivered highest priority
  // first, in publish order within one priority; a message's priority above this counts as
  // this. 0 = none (every message waits in one line).
  uint8_t max_priority = 0;

  // x-message-groups (docs/lifecycle.md, "Message groups"): messages with one x-group-id
  // header go in publish order, one at a time (the next once the one out is settled); groups
  // go in parallel. Not with x-max-priority.
  bool message_groups = false;

  // Publish deduplication (docs/lifecycle.md, "Deduplication"): x-deduplication-window, in
  // ms (1 ms to 7 days; 0 = off): a publish whose key this queue accepted within the window is
  // dropped, and still confirmed, as a duplicate. The key is the publish's deduplication_id
  // (native), else the message's x-deduplication-header (kDedupHeader); or with
  // x-deduplication-source "body" the SHA-256 of its body. Durable queues only: the keys live in
  // the store, not in memory.
  uint32_t dedup_window_ms = 0;
  bool dedup_by_body = false;

  // x-queue-type quorum (RabbitMQ's rules): AMQP deliveries carry RabbitMQ's x-delivery-count
  // header, the number of times the message was returned before (Delivery::
  // delivery_count_header).
  bool delivery_count_header = false;

  bool has_dead_letter_target() const {
    return !dead_letter_queue.empty() || dead_letter_exchange.has_value();
  }

  // The delay before the retry that follows failure number `failures` (1 = the first): a
  // uniform draw in [0, min(cap, base * 2^(failures-1))]. 0 when there is no retry policy.
  uint64_t RetryDelay(uint32_t failures, std::mt19937_64& rng) const;
};

// Whose rules a queue declaration follows.
enum class QueueRules {
  kWharf,     // native sessions: an unknown argument is refused, limits and TTL are >= 1
  kRabbitMq,  // AMQP sessions: unknown arguments are kept (and ignored);
              // x-message-ttl, x-max-length and x-max-length-bytes may be 0; and
              // x-dead-letter-exchange "" needs no x-dead-letter-routing-key (the message's
              // own routing key is used, through the default exchange); errors in RabbitMQ's
              // words
  kLenient,   // RabbitMQ's leniency without its own argument checks: recovery (a queue comes back
              // as it was declared, by either protocol), and what passed those checks
};

// Reads the arguments of a queue declaration. Under RabbitMQ's rules an error is in RabbitMQ
// 3.10's words, naming `queue` ("invalid arg 'x-expires' for queue 'q' in vhost '/':
// {value_zero,0}"), with its `vhost`; under Wharf's, the caller names it.
Result<QueuePolicy> ParseQueuePolicy(const Headers& arguments,
                                     QueueRules rules = QueueRules::kWharf,
                                     std::string_view queue = {},
                                     std::string_view vhost = kDefaultVhost);
// Whether Wharf knows the argument (x-lease-ms, ...): under Wharf's rules any other is refused.
bool IsKnownQueueArgument(std::string_view name);

// A quorum queue's x-delivery-limit (RabbitMQ's: returns before a message is dead-lettered) as
// Wharf's x-max-attempts (deliveries): the limit + 1, added to the `arguments` of an
// x-queue-type "quorum" declaration (AMQP's queue.declare, a definitions import).
void AddQuorumDeliveryLimit(Headers* arguments);

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
