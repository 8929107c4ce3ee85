// include/wharf/types.h
//
// Plain value types for the topology (exchanges, queues, bindings) and for what the broker
// reports about it. Used by the broker core, the client library and wharfctl alike.
//
// Thread safety: value types; not synchronised.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/message.h"

namespace wharf {

enum class ExchangeType : uint8_t { kDirect = 1, kFanout = 2, kTopic = 3, kHeaders = 4 };

std::string_view ExchangeTypeName(ExchangeType type);  // "direct", "fanout", ...
std::optional<ExchangeType> ParseExchangeType(std::string_view name);

struct ExchangeSpec {
  std::string name;
  ExchangeType type = ExchangeType::kDirect;
  bool durable = true;
  bool auto_delete = false;        // deleted when its last binding goes
  std::string alternate_exchange;  // unroutable messages go here; "" = none
  bool passive = false;            // only check that it exists
  // AMQP exchange.declare's `internal`: clients may not publish to it directly; only
  // exchange-to-exchange bindings feed it. (After `passive`, so that positional initialisers
  // written before it keep their meaning.)
  bool internal = false;
  Headers arguments;  // as declared (AMQP exchange arguments): for equivalence and listings
  // RabbitMQ's delayed-message exchange (AMQP type x-delayed-message; `type` is then its
  // x-delayed-type): a message published to it with an integer x-delay header (ms, > 0) is
  // delayed that long in each queue it routes to (docs/scheduler.md).
  bool delayed = false;
  // The virtual host it lives in. A session's declarations are always in the session's own
  // vhost (what a client sets here is ignored); listings and the store fill it in.
  std::string vhost = {};
};

struct QueueSpec {
  std::string name;  // "" = the broker generates one
  bool durable = true;
  bool exclusive = false;    // owned by the declaring connection, deleted when it closes
  bool auto_delete = false;  // deleted when its last consumer is cancelled
  // Recognised (docs/lifecycle.md; an unknown key is refused with INVALID_ARGUMENT):
  // x-lease-ms, x-max-lease-ms, x-retry-base-ms, x-retry-max-ms, x-max-attempts,
  // x-dead-letter-queue, x-dead-letter-exchange, x-dead-letter-routing-key, x-max-length,
  // x-max-length-bytes, x-overflow (drop-head | reject-publish | reject-publish-dlx),
  // x-message-ttl, x-expires, x-single-active-consumer (a bool).
  Headers arguments;
  bool passive = false;    // only check that it exists
  std::string vhost = {};  // as ExchangeSpec::vhost
};

// A binding from `exchange` (the source) to a queue, or to another exchange when
// `destination_exchange` is set (then `queue` stays empty).
struct BindingSpec {
  std::string queue;
  std::string exchange;
  std::string routing_key;  // a pattern for topic exchanges
  Headers arguments;        // headers exchanges: the match table, plus "x-match" = "all"|"any"
  std::string destination_exchange = {};  // exchange-to-exchange binding: route on into this one
  std::string vhost = {};                 // as ExchangeSpec::vhost
};

struct QueueInfo {
  std::string name;
  bool durable = false;
  bool exclusive = false;
  bool auto_delete = false;
  uint64_t ready = 0;      // waiting to be delivered
  uint64_t in_flight = 0;  // delivered, not yet settled
  uint32_t consumers = 0;
  uint64_t published_total = 0;  // enqueued since the broker started
  uint64_t delivered_total = 0;
  uint64_t acked_total = 0;
  uint64_t delayed = 0;  // routed here, waiting for their delivery time (docs/scheduler.md)
  int64_t next_delayed_at_ms = 0;    // the earliest of them, Unix ms; 0 = none (or not loaded)
  Headers arguments;                 // as declared (x-lease-ms, x-dead-letter-queue, ...)
  std::string dead_letter_target;    // the queue, or "exchange 'x'"; "" = none
  int64_t head_published_at_ms = 0;  // of the next ready message, Unix ms; 0 = none in RAM
  // Per second over the last 5-second window.
  double publish_rate = 0;
  double deliver_rate = 0;
  double ack_rate = 0;
  // Purged messages still being removed from the disk in the background (0 once a purge's
  // disk space is reclaimed).
  uint64_t purge_reclaiming = 0;
  // A queue with message groups (x-message-groups): the groups with a ready message in RAM or
  // a delivery out, and of them those waiting for a delivery to be settled (or a retry's
  // backoff). 0 otherwise.
  uint64_t groups = 0;
  uint64_t groups_held = 0;
  std::string vhost = {};  // the virtual host it is in
  // The policy that applies to it (docs/policies.md); "" = none. With one: its definition
  // (RabbitMQ's effective_policy_definition), and the arguments the queue runs with: the
  // declared ones with the policy's merged in.
  std::string policy = {};
  Headers policy_definition = {};
  Headers effective_arguments = {};
};

// A message waiting in a queue until its delivery time (Client::ListDelayed).
struct DelayedInfo {
  Message message;  // without its body (body_bytes says how long it is)
  uint64_t body_bytes = 0;
  int64_t deliver_at_ms = 0;   // Unix ms
  uint32_t receive_count = 0;  // deliveries before it was delayed (retries)
  std::string exchange;        // as published
  std::string routing_key;
};

// One page of a queue's delayed messages in delivery order. To read the next page, list
// after the last message's (deliver_at_ms, message.id).
struct DelayedPage {
  std::vector<DelayedInfo> messages;
  bool more = false;  // another page follows
  // Where the next page starts (list after this); set whenever `more` is, even when this page
  // is empty (every entry it read was skipped).
  int64_t next_after_deliver_at_ms = 0;
  uint64_t next_after_message_id = 0;
};

// A ready message as Client::Peek shows it: where it is in its queue and its delivery history,
// without taking it (docs/operations.md, "Peek").
struct PeekedMessage {
  Message message;        // the body only when asked for
  uint64_t position = 0;  // in its queue; list after it for the next page
  uint64_t body_bytes = 0;
  uint32_t receive_count = 0;
  int64_t first_received_at_ms = 0;
  uint32_t failure_count = 0;
  int64_t last_failed_at_ms = 0;
  std::string last_error;
  std::string exchange;  // as published
  std::string routing_key;
};

// One page of a queue's ready messages in delivery order.
struct PeekPage {
  std::vector<PeekedMessage> messages;
  bool more = false;        // another page follows: peek after next_after
  uint64_t next_after = 0;  // the position to continue after
};

// A redrive: moves a dead-letter queue's messages back to where they died (docs/lifecycle.md,
// "Redrive"). Runs inside the broker; its progress is stored with every move.
struct RedriveSpec {
  std::string queue;        // the dead-letter queue to empty
  std::string to;           // every message to this queue; "" = each to the queue it died in
  std::string reason;       // only messages whose last death has this reason; "" = all
  uint64_t limit = 0;       // move at most this many; 0 = all
  uint32_t rate = 0;        // messages per second at most; 0 = the broker's default
  bool dry_run = false;     // count what would move, move nothing
  uint64_t message_id = 0;  // only this message (wharfctl requeue); 0 = any
};

struct RedriveTargetCount {
  std::string queue;
  uint64_t messages = 0;
};

struct RedriveInfo {
  enum class State : uint8_t { kRunning = 1, kFinished = 2, kCancelled = 3, kFailed = 4 };
  RedriveSpec spec;  // rate as applied
  State state = State::kRunning;
  std::string detail;          // why it stopped (cancelled, failed), or ""
  int64_t started_at_ms = 0;   // Unix ms
  int64_t finished_at_ms = 0;  // 0 while running
  uint64_t total = 0;          // ready messages in the queue when it started
  uint64_t moved = 0;          // moved (or, for a dry run, would move)
  uint64_t remaining = 0;      // ready messages it has not looked at yet (about)
  // Left in the dead-letter queue: not matching --reason (or never dead-lettered), no
  // target queue (deleted, exclusive, the queue itself), or a full target.
  uint64_t skipped_not_matching = 0;
  uint64_t skipped_no_target = 0;
  uint64_t skipped_target_full = 0;
  double rate_per_second = 0;               // measured over the last seconds
  std::vector<RedriveTargetCount> targets;  // moved per target queue
};

std::string_view RedriveStateName(RedriveInfo::State state);  // "running", ...

struct ExchangeInfo {
  std::string name;
  ExchangeType type = ExchangeType::kDirect;
  bool durable = false;
  bool auto_delete = false;
  std::string alternate_exchange;
  uint32_t bindings = 0;
  bool internal = false;   // fed only by exchange-to-exchange bindings (ExchangeSpec::internal)
  Headers arguments;       // as declared
  bool delayed = false;    // an x-delayed-message exchange of type `type` (ExchangeSpec::delayed)
  std::string vhost = {};  // the virtual host it is in
  // The policy that applies to it (docs/policies.md); "" = none. alternate_exchange is then
  // the effective one (the declared one, else the policy's).
  std::string policy = {};
  Headers policy_definition = {};
};

// A client connection, as wharfctl connections shows it.
struct ConnectionInfo {
  uint64_t id = 0;
  std::string user;
  std::string address;  // host:port of the client
  int64_t connected_at_ms = 0;
  uint32_t consumers = 0;
  uint64_t unacked = 0;
  uint32_t pending_receives = 0;
  std::string protocol;        // "wharf" (native) or "amqp"
  std::string client;          // the client's name: native Hello, AMQP client properties' product
  std::string client_version;  // AMQP client properties' version
  uint32_t channels = 0;       // AMQP: channels open; native: 1 (the connection is one session)
  std::string vhost = {};      // the virtual host it opened
};

struct ConsumerInfo {
  std::string queue;
  std::string consumer_tag;
  uint64_t connection_id = 0;
  std::string user;
  uint32_t prefetch = 0;  // 0 = unlimited
  uint32_t unacked = 0;
  uint32_t lease_ms = 0;  // 0 = the queue's default
  bool exclusive = false;
  uint32_t channel = 0;  // the AMQP channel it was made on; 0 for a native connection
  int32_t priority = 0;  // x-priority: higher priorities are offered messages first
  // RabbitMQ's activity_status: "up" (offered messages), or on a single-active-consumer queue
  // "single_active" (the one offered messages) or "waiting".
  std::string activity;
  std::string vhost = {};  // the virtual host it is in
};

// Per-user limits (RabbitMQ's set_user_limits): how many connections, and AMQP channels across
// them, the user may have open at once. Negative: no limit; 0: none at all.
struct UserLimits {
  int64_t max_connections = -1;
  int64_t max_channels = -1;
  bool operator==(const UserLimits&) const = default;
};

// A user's permissions in one virtual host (RabbitMQ's set_permissions): regular expressions
// (PCRE, unanchored) over the names of the queues and exchanges the user may configure
// (declare, delete), write (publish to, bind into) and read (consume from, bind from, purge).
// The empty pattern allows nothing. docs/security.md has the table of operations.
struct UserPermission {
  std::string vhost = "/";
  std::string configure;
  std::string write;
  std::string read;
  bool operator==(const UserPermission&) const = default;
};

// Per-vhost limits (RabbitMQ's set_vhost_limits): connections open into the vhost and queues
// in it at once. Negative: no limit; 0: none at all.
struct VhostLimits {
  int64_t max_connections = -1;
  int64_t max_queues = -1;
  bool operator==(const VhostLimits&) const = default;
};

// A virtual host: a namespace of exchanges, queues and bindings of its own (docs/security.md,
// "Virtual hosts").
struct VhostInfo {
  std::string name;
  std::string description;
  VhostLimits limits;
  uint64_t queues = 0;       // in it now
  uint64_t exchanges = 0;    // built-in ones included
  uint64_t connections = 0;  // open into it now
};

// A policy (docs/policies.md): queue or exchange arguments an operator applies at runtime to
// every queue or exchange of its vhost whose name `pattern` (PCRE, unanchored) matches,
// RabbitMQ's model. Of the policies that match one, the highest priority applies (a tie: the
// first by name).
struct PolicyInfo {
  std::string vhost = "/";
  std::string name;
  std::string pattern;
  std::string apply_to = "all";  // "queues", "exchanges" or "all"
  int64_t priority = 0;
  Headers definition;  // RabbitMQ's keys: "max-length" = 1000, "dead-letter-exchange" = "dlx"
  bool operator==(const PolicyInfo&) const = default;
};

struct UserInfo {
  std::string name;
  bool admin = false;  // has the administrator tag: may manage users
  std::string source;  // "config", "store" (made at runtime) or "builtin" (guest)
  UserLimits limits;
  // RabbitMQ's user tags (administrator, monitoring, policymaker, management; others are kept
  // and grant nothing), and the permissions per vhost.
  std::vector<std::string> tags;
  std::vector<UserPermission> permissions;
};

// What an online backup wrote (Client::Backup; docs/operations.md, "Backup and restore").
struct BackupInfo {
  std::string directory;  // absolute, normalised: it holds store/
  uint64_t files = 0;     // in directory/store
  uint64_t bytes = 0;     // their sizes together
  // Of those bytes, hard links to the live store's files (the backup is on the store's file
  // system): they take no new space now, but keep files the store would otherwise delete.
  uint64_t linked_bytes = 0;
  uint64_t duration_ms = 0;  // from the request reaching the store to the copy complete
  // The highest message id written before the backup began: every message confirmed before
  // the request was sent is in the copy.
  uint64_t max_message_id = 0;
};

struct PublishResult {
  uint64_t message_id = 0;
  uint32_t routed_queues = 0;  // 0: reached no queue
  // Not 0: a queue with a deduplication window had already accepted this publish's key, from
  // the message with this id, and dropped it (docs/lifecycle.md, "Deduplication").
  uint64_t duplicate_of = 0;
};

}  // namespace wharf
