// broker/broker.h
//
// Broker is the domain core: exchanges, bindings, queues, consumers and every client's
// outstanding deliveries. It knows nothing of sockets, frames or disks. The server calls it
// with decoded requests; it answers with a Status or Result and pushes asynchronous output
// (deliveries, completed long polls, cancelled consumers) through each session's SessionPeer.
//
// Work is batched: operations only mark queues for dispatch, and Flush() (called by the server
// after each batch of requests and after OnTimer) hands ready messages to consumers and then
// flushes every peer that received output. So the reply to a request always precedes the
// deliveries it caused, and a batch of N publishes costs one dispatch pass per queue.
//
// Delivery semantics (docs/protocol.md, "Consume and ack"): at-least-once; a consumer with
// prefetch N never holds more than N unsettled deliveries; competing consumers are served
// round-robin among those with credit; a message that is nacked with requeue, or that was
// outstanding on a connection that closed, goes back to its original position with its
// receive count kept and `redelivered` set. AMQP connections open one session per channel, all
// with the connection as owner (docs/lifecycle.md, "AMQP sessions"): their deliveries hold no
// lease (kNoLease), and they add no-ack consumers, Get, RequeueAll, a channel-wide prefetch,
// exact settles and RabbitMQ's naming and declaration rules.
//
// Durability (docs/storage.md): with a MessageStore, every change to durable state is added to
// one StoreBatch per Flush() and committed. A publish that wrote a persistent message is
// answered through SessionPeer::PublishDone only when that commit is on disk; acks, deliveries
// (receive counts) and topology changes ride along without waiting. Without a store (unit
// tests) everything lives in RAM only.
//
// Thread safety: confined to one thread, the broker thread (checked in debug builds). Store
// callbacks must be posted to it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "broker/access.h"
#include "broker/exchange.h"
#include "broker/lease_timer.h"
#include "broker/policy.h"
#include "broker/queue.h"
#include "broker/redrive_task.h"
#include "broker/session_state.h"
#include "broker/vhost.h"
#include "common/clock.h"
#include "common/histogram.h"
#include "common/thread_checker.h"
#include "store/message_store.h"
#include "wharf/result.h"
#include "wharf/types.h"

namespace wharf::broker {

struct BrokerOptions {
  // A message's body plus its header names and values (HeaderBytes) may not exceed this, nor
  // its headers number more than max_headers: kMessageTooLarge. The I/O thread refuses too many
  // headers before it parses them (protocol::CountPublishHeaders); this is the same rule for
  // every other way in.
  uint64_t max_message_bytes = 16u << 20;
  uint32_t max_headers = 10'000;
  uint32_t max_receive_batch = 1000;       // cap on Receive.max_messages
  uint32_t max_receive_wait_ms = 60'000;   // cap on Receive.wait_ms
  uint32_t max_receives_per_session = 64;  // outstanding long polls per connection
  // Consumers one session (an AMQP channel, a native connection) may hold; 0 = no limit.
  uint32_t max_consumers_per_session = 65'535;
  PageLimits page_limits;       // durable queues page to disk beyond these
  uint32_t load_batch = 2'000;  // paged messages read back per store Load
  // While the store is failing, how often an empty synced commit checks whether it recovered.
  std::chrono::milliseconds store_probe_interval{1000};
  // Delayed messages (docs/scheduler.md): per durable queue, how many the RAM keeps of the
  // nearest; how many are read back per load; and how many fall due per second at most, so
  // that a million due at once cannot starve live traffic.
  DelayTimeline::Limits delay_limits;
  uint32_t delay_load_batch = 2'000;
  uint32_t delay_release_per_second = 100'000;
  // Delays and delivery times longer than this are refused (0 = no limit).
  uint64_t max_delay_ms = 0;
  // Redrives (docs/lifecycle.md): messages moved per second when the request names no rate.
  uint32_t redrive_rate = 1'000;
};

struct QueueMetrics {
  QueueInfo info;
  bool dead_letter_queue = false;  // another queue names it as its x-dead-letter-queue
  uint64_t nacked_total = 0;
  uint64_t redelivered_total = 0;
  uint64_t dead_lettered_total = 0;
  uint64_t duplicates_total = 0;  // publishes the deduplication window dropped
  uint64_t held = 0;              // publishes waiting for the store's deduplication answer
  uint64_t expired_total = 0;
  uint64_t lease_expired_total = 0;
};

struct BrokerMetrics {
  std::vector<QueueMetrics> queues;
  uint64_t connections = 0;       // both protocols
  uint64_t amqp_connections = 0;  // of them, AMQP's
  uint64_t amqp_channels = 0;     // channels open on them
  uint64_t consumers = 0;
  uint64_t deliveries_in_flight = 0;
  Histogram confirm_ms;
  bool store_writable = true;
  std::string store_error;          // when not writable
  bool publishing_blocked = false;  // flow control: set by the server, not the broker
};

// When a published message becomes visible: after `delay_ms`, or at `deliver_at_ms` (Unix
// ms). Both 0: at once. Setting both is refused.
struct PublishTiming {
  uint64_t delay_ms = 0;
  int64_t deliver_at_ms = 0;
  // AMQP's per-message expiration "0": the message lives only if a consumer takes it at once
  // (in the dispatch that follows the publish, into a queue with nothing ready ahead of it);
  // otherwise it expires (dead-lettered as expired, or dropped) as RabbitMQ does.
  bool expire_undelivered = false;
};

struct PublishOutcome {
  PublishResult result;
  EnvelopePtr envelope;  // the accepted message, for a mandatory return
  // The answer comes later, through SessionPeer::PublishDone, once the message is on disk.
  bool deferred = false;
};

// A lease_ms (Subscribe, Receive, Get) for deliveries that hold no lease: never in the lease
// timer, never redelivered while their session lives; their Delivery::lease_ms is 0. AMQP's
// deliveries are all such. Subscribe and Receive take it only from sessions opened with
// SessionOptions::amqp (from a native client the value stays out of range, as it always was);
// Get from any session.
inline constexpr uint32_t kNoLease = UINT32_MAX;

// What Broker::Get took.
struct GetResult {
  std::optional<Delivery> delivery;  // none: no ready message in RAM (see Get)
  uint64_t message_count = 0;        // ready messages left after this one, paged ones included
};

// How a settle counts (Broker::SettleOne).
struct SettleOptions {
  uint64_t delay_ms = 0;   // kRequeueLater
  bool failed = false;     // counts as a failure (nack, reject, lease expiry)
  bool nack = false;       // a nack or reject (not a lease expiry)
  std::string_view error;  // the failure's text
};

class Broker {
 public:
  // `store` may be null (nothing survives a restart); otherwise it must outlive the broker.
  Broker(BrokerOptions options, const Clock* clock, store::MessageStore* store = nullptr);

  // Rebuilds exchanges, queues and bindings from what the store recovered. Call once, before
  // serving; the thread that calls it need not be the broker thread.
  Status Recover(const store::RecoveredState& state);

  // --- Sessions -------------------------------------------------------------------------------
  // `options.owner_id`: the owner of the exclusive queues the session declares (an AMQP
  // connection, for each of its channels' sessions); 0: the session owns its own. A session
  // that is its own connection (native) is refused, and not opened, when its vhost is unknown
  // (kVhostNotFound) or at its max-connections (kResourceExhausted): CheckVhostConnection.
  Status OpenSession(uint64_t session_id, std::string user, std::shared_ptr<SessionPeer> peer,
                     std::string address = {}, SessionOptions options = {});
  // Requeues everything the session held and cancels its consumers (an auto-delete queue that
  // loses its last consumer goes). A session that is its own owner (native) also deletes its
  // exclusive queues; a channel's session leaves them to its owner's CloseOwner.
  void CloseSession(uint64_t session_id);
  // An AMQP connection logged in (`owner_id`: the owner of its channels' sessions): listed by
  // ListConnections from now on, with or without channels, until CloseOwner. A native
  // session is its own connection and needs no call (SessionOptions::connection).
  // Refused as OpenSession's connections are (meta.vhost: "" is "/").
  Status OpenConnection(uint64_t owner_id, std::string user, std::string address,
                        ConnectionMeta meta);
  // Deletes the exclusive queues of `owner_id` (an AMQP connection, once the server closed
  // every session of its channels; consumers still on them are cancelled with notice), and
  // forgets the connection.
  void CloseOwner(uint64_t owner_id);
  size_t session_count() const { return sessions_.size(); }
  // Entries in the lease timer, stale ones included (tests: they must not pile up).
  size_t lease_entries() const { return leases_.size(); }
  // Entries in the ack-timeout timer (tests: a closed session leaves none).
  size_t ack_deadline_entries() const { return ack_deadlines_.size(); }
  // The server is stopping: the connections it closes from now on hand their deliveries back
  // without counting an attempt (x-max-attempts).
  void BeginShutdown() { shutting_down_ = true; }
  // The session's connection caught up on writing: dispatch to its consumers again.
  void ResumeSession(uint64_t session_id);

  // --- Virtual hosts (broker_vhosts.cc; broker/vhost.h) ----------------------------------------
  // The vhost "/" always exists. A new vhost gets its own built-in exchanges (amq.direct, ...),
  // as in RabbitMQ; stored with a store. An existing one is left as it is (OK, as
  // rabbitmqctl add_vhost).
  Status AddVhost(const std::string& name, std::string description = {}, VhostLimits limits = {});
  // Deletes every queue (with its messages) and exchange of the vhost, then the vhost.
  // Sessions still open in it (the server closes them first) can do nothing more there.
  // kNotFound for an unknown vhost; "/" cannot be deleted (kReservedName).
  Status DeleteVhost(std::string_view name);
  Status SetVhostLimits(std::string_view name, VhostLimits limits);
  bool HasVhost(std::string_view name) const { return vhosts_.find(name) != vhosts_.end(); }
  // kNotAllowed (RabbitMQ's connection.open refusal) when the vhost is unknown or at its
  // max-connections; OK when another connection may open into it.
  Status CheckVhostConnection(std::string_view name) const;
  std::vector<VhostInfo> ListVhosts() const;

  // --- Policies (broker_policies.cc; broker/policy.h, docs/policies.md) -------------------------
  // Adds or replaces a policy in its vhost and applies it at once to every queue and exchange
  // there: a queue gets its new effective arguments (a lower length limit drops or refuses at
  // once, a TTL counts for the messages already in it, an expiry clock starts again). Stored
  // with a store. kInvalidArgument (ValidatePolicy), kVhostNotFound.
  Status SetPolicy(PolicyInfo policy);
  // kPolicyNotFound when the vhost has no such policy.
  Status ClearPolicy(std::string_view vhost, std::string_view name);
  // By vhost, then name; of one vhost when given.
  std::vector<PolicyInfo> ListPolicies(std::optional<std::string_view> vhost = std::nullopt) const;

  // --- Access (broker/access.h) ----------------------------------------------------------------
  // Every session's operations are checked against its user's Access from `source` (which must
  // outlive the broker). Without a source (tests, embedded use) everything is allowed.
  void SetAccessSource(const AccessSource* source) { access_source_ = source; }
  // OK, or kAccessRefused: the session's user may not do `permission` on the resource
  // (RabbitMQ's words). Also OK for an unknown session (the broker's own work).
  Status Authorize(uint64_t session_id, Permission permission, ResourceKind kind,
                   std::string_view name);
  // OK, or kAccessRefused: the session's user has none of the tags `any_of` (broker/access.h),
  // so it may not do `action` ("list queues", "manage users").
  Status AuthorizeTag(uint64_t session_id, uint32_t any_of, std::string_view action);
  // An operator's request on a queue (peek, delayed messages, redrive): any of the management
  // tags, and read access to the queue.
  Status AuthorizeOperator(uint64_t session_id, std::string_view queue, std::string_view action);
  // The session's user's Access; null without a source or for an unknown session.
  const Access* AccessOf(uint64_t session_id);

  // --- Topology ------------------------------------------------------------------------------
  Status DeclareExchange(const ExchangeSpec& spec);
  // The same, with the naming rules of the session (SessionOptions::amqp: RabbitMQ's names,
  // no validation of a passive declare's name, 406 for an existing amq.* exchange redeclared
  // with other flags).
  Status DeclareExchange(uint64_t session_id, const ExchangeSpec& spec);
  Status DeleteExchange(uint64_t session_id, std::string_view name, bool if_unused);
  Result<QueueInfo> DeclareQueue(uint64_t session_id, QueueSpec spec);
  // Returns the number of ready messages dropped with the queue. With a `request_id` (0
  // included: the session then sends only a failure), the answer also comes through
  // SessionPeer::DeleteQueueDone, once the deletion is durable (synced) for a stored queue,
  // at once otherwise.
  Result<uint64_t> DeleteQueue(uint64_t session_id, std::string_view name, bool if_unused,
                               bool if_empty, std::optional<uint64_t> request_id = std::nullopt);
  // Drops the queue's ready and delayed messages and returns how many. With a `request_id`
  // (0 included), the answer also comes through SessionPeer::PurgeDone, once the purge is
  // durable (synced: no purged message comes back after a crash) for a stored queue, at once
  // otherwise.
  Result<uint64_t> PurgeQueue(uint64_t session_id, std::string_view name,
                              std::optional<uint64_t> request_id = std::nullopt);
  Status Bind(uint64_t session_id, const BindingSpec& binding);
  Status Unbind(uint64_t session_id, const BindingSpec& binding);
  // Calls `answer` with the session's peer once every change made so far is synced (at once
  // without a store; not at all when the session has gone), then flushes the session: the
  // answer to a topology change, which must survive a crash once given (docs/storage.md).
  void AnswerWhenDurable(uint64_t session_id,
                         std::function<void(SessionPeer&, const Status&)> answer);
  // Whether a topology change since the last call touched durable topology (a durable
  // exchange, a binding between stored ends), whether or not it had anything to write (an
  // existing binding may still be on its way to disk): its answer waits for the sync. A
  // change of transient topology is answered at once. Clears the note.
  bool TakeDurableTopologyChange() { return std::exchange(durable_topology_change_, false); }
  // Listings (broker_metrics.cc), of the vhost `vhost` ("" = every vhost, by vhost then name):
  // queues whose names start with `prefix`, exchanges, bindings from `exchange` and/or to
  // `queue` ("" = any), consumers of `queue` ("" = all), connections.
  std::vector<QueueInfo> ListQueues(std::string_view prefix, std::string_view vhost = {}) const;
  std::vector<ExchangeInfo> ListExchanges(std::string_view vhost = {}) const;
  std::vector<BindingSpec> ListBindings(std::string_view exchange, std::string_view queue,
                                        std::string_view vhost = {}) const;
  std::vector<ConsumerInfo> ListConsumers(std::string_view queue,
                                          std::string_view vhost = {}) const;
  std::vector<ConnectionInfo> ListConnections(std::string_view vhost = {}) const;

  // --- Messaging -----------------------------------------------------------------------------
  // `request_id` is the publisher's, when it wants a confirm: a persistent message then gets
  // its answer through PublishDone once durable (outcome.deferred); 0 = no confirm wanted.
  // `deduplication_id` (native Publish.deduplication_id): the key queues with a deduplication
  // window check instead of the message's x-deduplication-header; "" = the header's.
  Result<PublishOutcome> Publish(uint64_t session_id, const std::string& exchange,
                                 const std::string& routing_key, Message message,
                                 uint64_t request_id = 0, PublishTiming timing = {},
                                 std::string_view deduplication_id = {});
  // Cancels a delayed message of `queue` that is still waiting. On OK the answer comes later
  // through SessionPeer::CancelDelayedDone, once the removal is on disk; never true for a
  // message that was (or will be) delivered.
  Status CancelDelayed(uint64_t session_id, uint64_t request_id, const std::string& queue,
                       uint64_t message_id);
  // Lists up to `limit` delayed messages of `queue` after (after_due_ms, after_message_id),
  // in delivery order; the answer comes through SessionPeer::ListDelayedDone.
  Status ListDelayed(uint64_t session_id, uint64_t request_id, const std::string& queue,
                     int64_t after_due_ms, uint64_t after_message_id, uint32_t limit);
  // Whether the session may use the queue: kQueueNotFound, or kResourceLocked for another
  // owner's exclusive queue (what Subscribe, Receive and Get check first).
  Status CheckQueue(uint64_t session_id, std::string_view queue) const {
    return FindQueue(session_id, queue).status();
  }
  // Returns the consumer tag (generated when `consumer_tag` is empty).
  // `lease_ms`: each delivery's lease (0 = the queue's default; at most its maximum; kNoLease
  // for an AMQP session). `auto_ack` (AMQP no-ack): each delivery still takes the session's
  // next delivery tag but is settled as acked when dispatched (it is never unacked); prefetch
  // (the consumer's and the session's) does not apply, only the peer's Writable() bounds it.
  // `priority` (x-priority): higher priorities are offered messages first (consumer_set.h).
  // An exclusive consumer on a single-active-consumer queue is refused (kResourceLocked;
  // RabbitMQ's 403 for AMQP).
  Result<std::string> Subscribe(uint64_t session_id, const std::string& queue,
                                std::string consumer_tag, uint32_t prefetch, bool exclusive,
                                uint32_t lease_ms = 0, bool auto_ack = false, int32_t priority = 0);
  Status Cancel(uint64_t session_id, std::string_view consumer_tag);
  // On OK the answer comes later through SessionPeer::CompleteReceive (at the latest after
  // wait_ms); on error nothing else is sent.
  Status Receive(uint64_t session_id, uint64_t request_id, const std::string& queue,
                 uint32_t max_messages, uint32_t wait_ms, uint32_t lease_ms = 0);
  // Takes the queue's head ready message now (AMQP basic.get): no waiting, not behind waiting
  // Receives, not bounded by any prefetch, but counted in the session's unacked (and so in
  // its channel-wide prefetch) unless `no_ack`, which settles it as acked at once. Errors:
  // kQueueNotFound, kResourceLocked (another owner's exclusive queue). An exclusive consumer
  // on the queue does not stop it (RabbitMQ's rule). No delivery when no ready message is in
  // RAM: when the
  // ready head is paged out (a deep queue just restarted) this starts its load and answers
  // empty with message_count counting the paged ones; a Get after the load finds them.
  Result<GetResult> Get(uint64_t session_id, std::string_view queue, bool no_ack,
                        uint32_t lease_ms = kNoLease);
  // With `exact` (RabbitMQ's rule) the tag must itself be outstanding (tag 0 with `multiple`:
  // everything outstanding, possibly nothing), else kUnknownDeliveryTag and nothing is settled.
  // Without it, `multiple` needs only some outstanding tag up to `delivery_tag`.
  Status Ack(uint64_t session_id, uint64_t delivery_tag, bool multiple, bool exact = false);
  // Every unacked delivery of the session goes back to its position at once, redelivered, not
  // counted as a failure (AMQP basic.recover requeue=true); x-max-attempts applies as to a
  // closed connection's deliveries.
  Status RequeueAll(uint64_t session_id);
  // Channel-wide prefetch (AMQP basic.qos global=true): the session's consumers together get
  // no more deliveries while the session holds `count` unacked ones, every unacked counted
  // (Receive and Get ones too); each consumer's own prefetch applies as well. 0 = no limit.
  // Raising or clearing it dispatches the session's consumers' queues again.
  Status SetSessionPrefetch(uint64_t session_id, uint32_t count);
  // A failed delivery (docs/lifecycle.md). Without `requeue` the message is rejected (dropped).
  // With it, it comes back: after `delay_ms` when given, else at once when `immediate` or
  // when the queue has no retry policy, else after the policy's backoff. `error` (cut to
  // 1 KiB) becomes the message's last error.
  struct NackOptions {
    bool requeue = true;
    uint64_t delay_ms = 0;
    bool immediate = false;
    std::string_view error;
    bool exact = false;  // as Ack's `exact`
  };
  Status Nack(uint64_t session_id, uint64_t delivery_tag, bool multiple, NackOptions options);
  Status Nack(uint64_t session_id, uint64_t delivery_tag, bool multiple, bool requeue,
              uint64_t delay_ms = 0) {
    return Nack(session_id, delivery_tag, multiple,
                NackOptions{requeue, delay_ms, /*immediate=*/false, {}, /*exact=*/false});
  }
  // Sets the delivery's lease to end `lease_ms` from now (at most the queue's maximum).
  // kLeaseExpired when it already ran out; kInvalidArgument for a delivery without a lease
  // (kNoLease).
  Status ExtendLease(uint64_t session_id, uint64_t delivery_tag, uint32_t lease_ms);

  // --- Direct reply-to (broker_reply_to.cc; docs/amqp.md) ------------------------------------
  // RabbitMQ's amq.rabbitmq.reply-to, for AMQP sessions: a session consumes the pseudo-queue
  // kReplyTo (no-ack only, one consumer per session: kPreconditionFailed otherwise) and gets
  // an unguessable address, kReplyTo + "." + 22 random characters; a publish to the default
  // exchange with that routing key goes straight to that consumer (never queued nor stored),
  // as long as it exists (else it reaches nothing). Cancel with its tag, or the session's
  // close, ends it.
  static constexpr std::string_view kReplyTo = "amq.rabbitmq.reply-to";
  Result<std::string> SubscribeReplyTo(uint64_t session_id, std::string consumer_tag, bool no_ack);
  // The session's reply address (what a publish's reply-to "amq.rabbitmq.reply-to" becomes);
  // kPreconditionFailed when it has no reply consumer.
  Result<std::string> ReplyToAddress(uint64_t session_id) const;
  // Whether `name` (kReplyTo, or a reply address) may be declared passively: the bare name
  // always, an address while its consumer exists.
  bool ReplyToExists(std::string_view name) const;

  // Lists up to `limit` ready messages of `queue` after `after_position`, in delivery order,
  // taking none (broker_peek.cc); the answer comes through SessionPeer::PeekDone.
  Status Peek(uint64_t session_id, uint64_t request_id, const std::string& queue,
              uint64_t after_position, uint32_t limit, bool with_body);

  // --- Redrive (broker_redrive.cc; docs/lifecycle.md) ----------------------------------------
  // Starts moving spec.queue's messages back to where they died (or to spec.to). On OK the
  // answer comes through SessionPeer::RedriveDone once the task is on disk; from then on it
  // runs, and survives restarts, until done, cancelled, or its queue is deleted.
  Status StartRedrive(uint64_t session_id, uint64_t request_id, RedriveSpec spec);
  // Stops the queue's running redrive; answered through RedriveDone once that is on disk.
  Status CancelRedrive(uint64_t session_id, uint64_t request_id, const std::string& queue);
  // The last redrive of `queue`, or of every queue that had one ("").
  Result<std::vector<RedriveInfo>> RedriveStatus(uint64_t session_id, std::string_view queue);

  // --- Driving -------------------------------------------------------------------------------
  // Dispatches every queue touched since the last Flush and flushes every peer with output.
  void Flush();
  // Completes long polls whose wait has run out (and probes a failed store). Call at
  // NextDeadline(), then Flush().
  void OnTimer();
  std::optional<SteadyTime> NextDeadline() const;
  // Figures for /metrics (server/metrics.h): every queue's depths and counters, the
  // connections, and the confirm latency.
  BrokerMetrics Metrics() const;
  // Commits and loads handed to the store and not yet completed (tests, shutdown).
  uint64_t store_requests_in_flight() const {
    return commits_in_flight_ + loads_in_flight_ + counts_in_flight_ +
           (purge_removals_.empty() ? 0 : 1);
  }

 private:
  enum class Settle {
    kAck,
    kRequeue,       // back at its position at once (connection closed, or asked for)
    kRequeueLater,  // back after a delay (SettleOptions::delay_ms)
    kRetry,         // the queue's retry policy decides: at once or after a backoff
    kDrop,
  };

  // The session's queue `name` (in its vhost): kQueueNotFound, or kResourceLocked for an
  // exclusive queue of another owner.
  Result<std::shared_ptr<Queue>> FindQueue(uint64_t session_id, std::string_view name) const;
  // The same in `vhost` (recovery binds in each binding's own vhost).
  Result<std::shared_ptr<Queue>> FindQueue(uint64_t session_id, std::string_view vhost,
                                           std::string_view name) const;
  // The queue or exchange `name` of `vhost`, or null.
  std::shared_ptr<Queue> QueueIn(std::string_view vhost, std::string_view name) const;
  Exchange* FindExchange(std::string_view vhost, std::string_view name);
  // The session's vhost ("/" for an unknown session: the broker's own work, tests).
  const std::string& VhostOf(uint64_t session_id) const;
  SessionState* FindSession(uint64_t session_id);
  const SessionState* FindSession(uint64_t session_id) const;
  // The session's owner (SessionState::owner_id); the id itself for an unknown session.
  uint64_t OwnerOf(uint64_t session_id) const;
  // Whether the session follows RabbitMQ's rules (SessionOptions::amqp).
  bool IsAmqp(uint64_t session_id) const;
  // kExchangeNotFound for `name`, in the session's words (RabbitMQ's for an AMQP session).
  Status NoExchange(uint64_t session_id, std::string_view name) const;
  // A binding's refusal (Exchange::Bind: a bad x-match) in the session's words.
  Status InSessionWords(uint64_t session_id, Status bound, const Headers& arguments) const;
  // An AMQP queue's x-queue-type, as RabbitMQ checks it on creation: classic or quorum (a
  // quorum queue durable, not exclusive, not auto-delete); anything else 406 in its words.
  static Status CheckQueueType(const QueueSpec& spec);
  // Deletes the exclusive queues `owner_id` declared.
  void DropExclusiveQueues(uint64_t owner_id);
  // `exact`: as Ack's.
  Status SettleTags(uint64_t session_id, uint64_t delivery_tag, bool multiple, Settle action,
                    const SettleOptions& options = {}, bool exact = false);
  void SettleOne(InFlight in_flight, Settle action, const SettleOptions& options = {});
  // kInvalidArgument for a delay (or delivery time) past year 9999 or max_delay_ms.
  Status CheckDelay(uint64_t delay_ms, int64_t deliver_at_ms, int64_t now_ms) const;
  // kInvalidArgument when `lease_ms` is beyond the queue's maximum (0: its default); kNoLease
  // passes when `no_lease_allowed`.
  Status CheckLease(const Queue& queue, uint32_t lease_ms, bool no_lease_allowed = false) const;
  // The lease a delivery of `queue` holds when asked for `lease_ms`: kNoLease (AMQP) becomes
  // the queue's own (0) when it was declared with an x-lease-ms: asked for, leases apply to
  // AMQP consumers too.
  static uint32_t LeaseOf(const Queue& queue, uint32_t lease_ms) {
    return lease_ms == kNoLease && queue.spec().arguments.contains("x-lease-ms") ? 0 : lease_ms;
  }
  // The name rule of the session: ValidateName, or ValidateAmqpName for an AMQP session.
  Status CheckName(bool amqp, std::string_view kind, std::string_view name) const;
  // `prefix` and 22 random base64url characters (RabbitMQ's amq.gen- and amq.ctag- names).
  std::string RandomName(std::string_view prefix);
  // The same from the kernel's randomness (getrandom): for names that must not be guessed
  // (direct reply-to addresses).
  std::string SecureRandomName(std::string_view prefix);
  static std::string NameOf(std::string_view prefix, const uint64_t (&words)[2]);
  // kUnknownDeliveryTag, or kLeaseExpired for a tag whose lease ran out.
  Status UnknownTag(const SessionState& session, uint64_t delivery_tag) const;
  // Moves a delivered message to its queue's dead-letter target with a death record, in the
  // same store batch that removes it from `source`; drops it when there is no target.
  void DeadLetter(const std::shared_ptr<Queue>& source, QueuedMessage message,
                  std::string_view reason);
  // True when one more message of `bytes` would take the queue past x-max-length(-bytes).
  bool WouldOverflow(const Queue& queue, uint64_t bytes) const;
  // Dead-letters (max_length) the oldest ready messages of a drop-head queue over its limits.
  void DropHeads(const std::shared_ptr<Queue>& queue);
  // Arms the expiry timer for the queue's messages that came into RAM.
  void ArmExpiries(const std::shared_ptr<Queue>& queue);
  // Dead-letters (expired) or drops the ready messages whose time ran out, wherever they are
  // in their queue (at most a bounded number per call).
  void ExpireMessages();
  // Drops the lease timer's entries for settled or extended deliveries.
  void CompactLeases();
  // Tells the sessions whose oldest unsettled delivery outlived their ack timeout.
  void ExpireAckTimeouts();
  void ArmAckDeadline(SessionState& session, SteadyTime deadline);
  // Redelivers the deliveries whose lease ran out (at most a bounded number per call).
  void ExpireLeases();
  // Ends the backoffs of message groups that are due: each group goes on (x-message-groups).
  void WakeGroups(SteadyTime now);
  void ScheduleDispatch(const std::shared_ptr<Queue>& queue);
  // Schedules the queues of the session's consumers (its output drained, or its channel-wide
  // prefetch has room again).
  void ScheduleConsumers(const SessionState& session);
  // Settles took the session from `unacked_before` unacked deliveries to fewer: when that
  // freed room under its channel-wide prefetch, its consumers' queues are dispatched again.
  void NoteSettled(const SessionState& session, size_t unacked_before);
  void Dispatch(const std::shared_ptr<Queue>& queue);
  // Counts a delivery of `message` (its receive count and first delivery, the store's
  // delivery mark or entry rewrite, the queue's counters) and builds it with the session's
  // next tag. `settled`: it is acked at once (its entry goes, so it is not rewritten).
  Delivery NewDelivery(SessionState& session, const std::shared_ptr<Queue>& queue,
                       QueuedMessage& message, const Consumer* consumer, bool settled);
  // A delivery to settle later: in the session's unacked, with its lease (kNoLease: none).
  Delivery Track(SessionState& session, const std::shared_ptr<Queue>& queue, QueuedMessage message,
                 const std::shared_ptr<Consumer>& consumer, uint32_t lease_ms);
  // A no-ack delivery: counted as delivered and acked at once (auto-ack consumers, Get).
  Delivery DeliverSettled(SessionState& session, const std::shared_ptr<Queue>& queue,
                          QueuedMessage message, const Consumer* consumer);
  void MarkDirty(SessionState& session);
  // A publish to a reply address (default exchange, kReplyTo + "." prefix): to its consumer.
  PublishOutcome PublishReply(const std::string& routing_key, Message message);
  void DropReplyConsumer(SessionState& session);
  void RemoveConsumer(SessionState& session, const std::string& tag, bool notify,
                      std::string_view reason);
  void DropQueue(const std::shared_ptr<Queue>& queue, std::string_view reason);
  // x-expires (broker_topology.cc): the queue was used (declared, a Receive or Get, its last
  // consumer gone): its idle clock starts again, or stops while it has consumers. O(log n).
  void TouchQueue(Queue& queue);
  // Takes the queue out of idle_queues_ (deleted, or in use).
  void ForgetIdle(Queue& queue);
  // Deletes the queues whose x-expires ran out (at most a bounded number per call).
  void ExpireIdleQueues();
  // Above the sequence number of every message of `queue` that a purge's range must not
  // cover: those in flight, and those whose removal (an earlier purge's) is still queued.
  PurgeFloors PurgeFloor(const Queue& queue) const;
  // Runs `answer` once the current batch's commit is synced (at once without a store).
  void AnswerWhenDurable(std::function<void(const Status&)> answer);
  // Answers a long poll (possibly with nothing) and forgets its deadline.
  void CompleteWaiter(const PullWaiter& waiter, std::vector<Delivery> deliveries);
  void MaybeAutoDeleteExchange(std::string_view vhost, std::string_view name);
  // Deletes an exchange and every binding to or from it.
  void RemoveExchange(std::string_view vhost, std::string_view name);
  // Creates the built-in exchanges of a vhost (amq.direct, amq.fanout, ...).
  void AddBuiltinExchanges(const std::string& vhost);
  // Appends the queues `exchange` routes to, following exchange-to-exchange bindings and
  // alternate exchanges; `visited` stops cycles.
  void RouteThrough(Exchange* exchange, const std::string& routing_key, const Headers& headers,
                    std::vector<Queue*>* targets, std::vector<const Exchange*>* visited);
  // Bind (`bind`) or Unbind in `vhost`.
  Status BindIn(uint64_t session_id, const std::string& vhost, const BindingSpec& binding,
                bool bind);
  // kVhostNotFound when the session's vhost was deleted under it.
  Status VhostUsable(std::string_view vhost) const;
  // Gives every queue and exchange of `vhost` the policy that matches it now (ApplyPolicy).
  void ApplyPolicies(std::string_view vhost);
  // Computes a queue's effective arguments from its declared ones and its policy, and acts on
  // what changed (broker_policies.cc).
  void ApplyPolicy(const std::shared_ptr<Queue>& queue);
  void ApplyPolicy(Exchange& exchange);
  // The QueuePolicy a queue declared with `spec` runs with under the current policies, and the
  // policy's name ("" = none); on a merge the parser refuses, the declared arguments alone.
  QueuePolicy EffectivePolicy(const QueueSpec& spec, const QueuePolicy& declared,
                              std::string* policy_name, Headers* effective_arguments) const;
  // kPreconditionFailed (RabbitMQ's words, naming `queue`) when the vhost holds its max-queues.
  Status CheckVhostQueueLimit(std::string_view vhost, std::string_view queue) const;
  // The exchange-to-exchange half of Bind and Unbind.
  Status AuthorizeBinding(uint64_t session_id, const BindingSpec& binding);
  Status BindExchanges(uint64_t session_id, const BindingSpec& binding, Exchange* source,
                       bool bind);
  uint64_t NextMessageId() { return next_message_id_++; }

  // --- Delayed messages (broker_delay.cc) ---
  // Puts the queue in the scheduler under its timeline's head (or takes it out), and asks
  // for a load when the timeline's RAM runs low.
  void UpdateDelayHead(const std::shared_ptr<Queue>& queue);
  // Releases messages that are due, in due order across queues, within the release rate.
  void ReleaseDue();
  // Now plus `delay_ms`, in Unix ms rounded up (so a message is never released early).
  int64_t DueAfter(uint64_t delay_ms) const {
    return (clock_->WallMicros() + 999) / 1000 + static_cast<int64_t>(delay_ms);
  }
  // Puts a delivered message back on its queue's timeline until `due_ms` (nack with delay).
  void DelayDelivered(Queue& queue, QueuedMessage message, int64_t due_ms);
  // Moves one due message to the tail of its queue's ready messages.
  void ReleaseOne(Queue& queue, DelayKey key, DelayedMessage message);
  void RequestDelayedLoad(const std::shared_ptr<Queue>& queue);
  void OnDelayedLoaded(const std::weak_ptr<Queue>& weak, uint64_t generation,
                       Result<std::vector<store::LoadedMessage>> loaded);
  // Cancels the message if its queue's timeline holds it in RAM; `sync`: the removal must be
  // synced before the answer.
  bool CancelInRam(const std::shared_ptr<Queue>& queue, uint64_t message_id, bool* sync);
  // The store found (or not) a delayed message for CancelDelayed.
  void OnDelayedFound(uint64_t session_id, uint64_t request_id, const std::weak_ptr<Queue>& weak,
                      uint64_t generation, uint64_t message_id,
                      Result<std::optional<store::DelayedRef>> found);
  // Answers a CancelDelayed once what it changed is on disk.
  // `stored`: the removal went to the store (else the answer need not wait for a commit).
  void FinishCancel(uint64_t session_id, uint64_t request_id, bool cancelled, bool sync,
                    bool stored);
  void ForgetDelayHead(Queue* queue);
  // When the scheduler must run next, as a steady deadline.
  std::optional<SteadyTime> NextReleaseDeadline() const;

  // --- Redrive (broker_redrive.cc) ---
  // Runs each redrive's next step within its rate.
  void RunRedrives();
  void RedriveStep(RedriveTask& task, Queue& queue);
  // Looks at one ready message of the walk: moves it, or counts why it stays. False when the
  // rate allows no move now (the walk resumes there). `paged`: it is in the store only.
  bool RedriveOne(RedriveTask& task, Queue& queue, const QueuedMessage& message, bool paged);
  void FinishRedrive(RedriveTask& task, RedriveInfo::State state, std::string detail);
  void ReadRedrive(RedriveTask& task, const Queue& queue);
  // Peek's read of the paged messages of the lane of `at` (broker_peek.cc).
  void PeekDisk(const std::shared_ptr<Queue>& queue, uint64_t at, uint32_t wanted, uint64_t budget,
                bool with_body, PeekPage page, std::function<void(const Result<PeekPage>&)> reply);
  void OnRedriveRead(const std::string& queue_key, uint64_t serial, uint64_t generation,
                     Result<std::vector<store::LoadedMessage>> loaded);
  // Answers a StartRedrive or CancelRedrive once the task's record is on disk.
  // `settled(written)` runs first, when the commit's outcome is known.
  void AnswerRedrive(uint64_t session_id, uint64_t request_id, const RedriveTask& task,
                     std::function<void(bool written)> settled);
  RedriveInfo RedriveView(const RedriveTask& task) const;
  std::optional<SteadyTime> NextRedriveDeadline() const;
  // Appends a message that moves into `target` (dead-lettered, redriven) at its tail, with a
  // new life there: receive count and failures start over.
  void EnqueueMoved(Queue& target, const EnvelopePtr& envelope);

  // --- Store ---
  struct PendingConfirm {
    uint64_t session_id;
    uint64_t request_id;
    PublishResult result;
    SteadyTime at;  // when it was published (confirm latency)
    // The store's answers for the deduplication windows it reached, [first, first + count)
    // of the batch's outcomes: a duplicate in any one sets result.duplicate_of.
    uint32_t dedup_first = 0;
    uint32_t dedup_count = 0;
  };
  // A publish into a queue with a deduplication window, held until the commit holding its
  // PutDedup says whether the queue takes it (docs/lifecycle.md, "Deduplication"). One a
  // publish, walked at the commit: 16 bytes, the rare delayed one apart (docs/benchmarks.md,
  // "Longer runs, and what holding a publish costs").
  struct DedupResolution {
    uint32_t queue = 0;    // in HeldPublishes::queues (ResolutionQueue)
    uint32_t outcome = 0;  // in the batch's outcomes
    uint64_t seq = 0;      // the held message (Queue::EnqueueHeld)
  };
  // A publish to be paged, counted at once and settled at the commit (Queue::PageUndecided):
  // its body's size goes back out of the count if the queue does not take it.
  struct PagedDedupResolution {
    uint32_t queue = 0;
    uint32_t outcome = 0;
    uint64_t seq = 0;
    uint64_t bytes = 0;
  };
  // A delayed publish so held: put on the timeline once accepted.
  struct DelayedDedupResolution {
    uint32_t queue = 0;
    uint32_t outcome = 0;
    DelayKey key;
    DelayedMessage message;
  };
  // The held publishes of a batch, and the queues they are for.
  struct HeldPublishes {
    std::vector<DedupResolution> queued;
    std::vector<PagedDedupResolution> paged;
    std::vector<DelayedDedupResolution> delayed;
    std::vector<std::weak_ptr<Queue>> queues;
    bool empty() const { return queued.empty() && paged.empty() && delayed.empty(); }
  };
  // Adds a PutDedup to the batch: where its outcome will be, or nothing (no store).
  std::optional<uint32_t> PersistDedup(store::StoreBatch::PutDedup op);
  // `queue`'s place in held_.queues: a run of resolutions for one queue shares one entry.
  uint32_t ResolutionQueue(const std::shared_ptr<Queue>& queue);
  // Makes held publishes ready, or drops them (duplicates, or a failed commit), and settles
  // paged ones. Runs before the commit's confirms go out.
  void ResolveDedup(HeldPublishes& held, const store::DedupOutcomes* outcomes,
                    const Status& status);
  template <typename Op>
  void Persist(Op op) {
    if (store_ && !replaying_) batch_.Add(std::move(op));
  }
  // Removes a settled or expired message's entry (and its share of the body) from the store.
  void Unstore(const Queue& queue, const QueuedMessage& message);
  // Hands the batch built since the last call to the store.
  void CommitPending(bool probe = false);
  // kStoreUnavailable/kStoreFull while the store is failing and the message would be stored.
  Status CheckStore(const std::vector<Queue*>& targets, bool persistent) const;
  void OnCommitted(std::vector<PendingConfirm> confirms, const store::DedupOutcomes* outcomes,
                   const Status& status);
  void RequestLoad(const std::shared_ptr<Queue>& queue);
  void OnCounted(uint64_t queue_id, store::CountKind kind, uint64_t count, uint8_t lane);
  // The live queue with this id in the store (recovery and store reports), or null.
  std::shared_ptr<Queue> FindQueueByStoreId(uint64_t store_id) const;
  // A step of a purge's removal from the disk (store::ReclaimCallback).
  void OnReclaimed(uint64_t queue_id, uint64_t removed, bool finished);
  // Bodies per load: a quarter of the RAM a queue may hold before it pages.
  uint64_t LoadBytes() const { return std::max<uint64_t>(options_.page_limits.max_bytes / 4, 1); }
  // kStoreUnavailable/kStoreFull when `persisted` and the store is failing: a durable change
  // answered OK must not be one the disk never saw. Notes a durable change for
  // TakeDurableTopologyChange.
  Status TopologyWritable(bool persisted) const;
  mutable bool durable_topology_change_ = false;
  void OnLoaded(const std::weak_ptr<Queue>& weak, uint64_t generation,
                Result<std::vector<store::LoadedMessage>> loaded);

  BrokerOptions options_;
  const Clock* clock_;
  ThreadChecker thread_checker_;

  // Exchanges and queues by ResourceKey(vhost, name); queues ordered for listing.
  std::unordered_map<std::string, std::unique_ptr<Exchange>> exchanges_;
  std::map<std::string, std::shared_ptr<Queue>, std::less<>> queues_;
  struct VhostState {
    std::string description;
    VhostLimits limits;
    uint64_t queues = 0;  // in queues_
  };
  std::map<std::string, VhostState, std::less<>> vhosts_;
  PolicyTable policies_;
  std::unordered_map<uint64_t, std::unique_ptr<SessionState>> sessions_;
  // The exclusive queues of each owner (SessionState::owner_id), by ResourceKey.
  std::unordered_map<uint64_t, std::vector<std::string>> exclusive_queues_;
  // Every connection, by owner id (a native session's own id), for the listings and metrics.
  struct ConnectionRecord {
    std::string user;
    std::string address;
    int64_t connected_at_ms = 0;
    ConnectionMeta meta;
  };
  std::unordered_map<uint64_t, ConnectionRecord> connections_;

  std::vector<std::shared_ptr<Queue>> pending_dispatch_;
  std::vector<std::pair<uint64_t, std::shared_ptr<SessionPeer>>> dirty_;
  ReceiveDeadlines receive_deadlines_;
  uint64_t next_waiter_id_ = 1;
  uint64_t next_message_id_;
  uint64_t next_generated_name_ = 1;

  store::MessageStore* store_;
  const AccessSource* access_source_ = nullptr;
  store::StoreBatch batch_;  // changes since the last Flush
  bool batch_sync_ = false;  // someone waits for batch_ to be durable
  std::vector<PendingConfirm> pending_confirms_;
  HeldPublishes held_;  // of the batch being built
  uint64_t next_queue_id_ = 1;
  bool replaying_ = false;  // Recover() is rebuilding what the store already holds
  uint64_t commits_in_flight_ = 0;
  uint64_t loads_in_flight_ = 0;
  uint64_t counts_in_flight_ = 0;
  Status store_error_;  // the last commit's failure; cleared by a commit that succeeds
  std::optional<SteadyTime> store_probe_at_;
  std::vector<std::shared_ptr<Queue>> pending_loads_;    // issued after the flush's commit
  std::vector<std::shared_ptr<Queue>> delivered_marks_;  // queues with new first deliveries
  std::vector<std::weak_ptr<Queue>> load_retries_;       // loads that failed
  // The scheduler: each queue with delayed messages in RAM, under its earliest due time.
  std::set<std::pair<int64_t, Queue*>> delay_heads_;
  LeaseTimer leases_;  // every delivery's lease
  // Sessions with an ack timeout and unsettled deliveries, under the time their oldest one
  // times out (or an earlier one: looked at again then), with the session's serial.
  std::set<std::tuple<SteadyTime, uint64_t, uint64_t>> ack_deadlines_;
  // Message groups held by a retry's backoff, and when each goes on (the hold's token: a hold
  // that was released and taken again since is left alone).
  struct GroupWake {
    std::weak_ptr<Queue> queue;
    std::string group;
    uint64_t token = 0;
  };
  std::multimap<SteadyTime, GroupWake> group_wakes_;
  uint64_t next_session_serial_ = 1;
  // Direct reply-to: the session of each reply address's suffix.
  std::unordered_map<std::string, uint64_t> reply_sessions_;
  // x-expires: each queue unused now, under the deadline it is deleted at (Queue::idle_deadline).
  std::set<std::pair<SteadyTime, Queue*>> idle_queues_;
  // Ready messages with an expiry (x-message-ttl, expiration_ms), in RAM.
  struct ExpiryRef {
    std::weak_ptr<Queue> queue;
    uint64_t seq = 0;
    int64_t expires_at_ms = 0;  // wall clock
    SteadyTime deadline;        // when to look, by the steady clock
  };
  BucketTimer<ExpiryRef> expiries_;
  std::mt19937_64 retry_rng_;                                  // full jitter of retry backoffs
  std::mt19937_64 name_rng_{std::random_device{}()};           // RandomName
  std::vector<std::shared_ptr<Queue>> pending_delayed_loads_;  // issued after the commit
  std::vector<std::function<void()>> pending_reads_;  // store reads issued after the commit
  // Run once the commit of the current batch completes (with its status).
  std::vector<std::function<void(const Status&)>> after_commit_;
  // Entries of purged messages that a purged range could not cover (returned messages below
  // one still in flight), removed a slice at a time, each slice once the one before is written
  // (CommitPending), so that many of them never make one long write that holds up confirms.
  // A purge's answer rides on its last entry: it goes once that slice is synced.
  // Each purge's writes (its range, its slices) record their first failure in its `outcome`,
  // so a purge is answered OK only when every part of it was written.
  struct PurgeRemoval {
    store::EntryRef entry;
    std::shared_ptr<Status> outcome;
    std::function<void(const Status&)> answer;  // null but on a purge's last entry
  };
  std::deque<PurgeRemoval> purge_removals_;
  bool purge_removal_in_flight_ = false;
  double release_tokens_ = 0;  // the release rate's bucket
  SteadyTime release_refilled_at_{};
  bool release_backlog_ = false;  // due messages wait for tokens
  std::optional<SteadyTime> load_retry_at_;
  uint64_t run_start_id_ = 0;  // first message id of this run
  bool shutting_down_ = false;
  bool dropping_heads_ = false;        // inside DropHeads (no nested DropHeads from DeadLetter)
  uint64_t deliveries_in_flight_ = 0;  // in every session's unacked
  // Each queue's last redrive, running or not, by the queue's ResourceKey.
  std::map<std::string, RedriveTask, std::less<>> redrives_;
  uint64_t next_redrive_serial_ = 1;
  Histogram confirm_ms_;  // publish to confirm of persistent messages
  // Queue rates (QueueInfo::publish_rate, ...): refreshed at most every kRateWindow, from
  // Flush when busy and from the listings when idle (no timer of their own).
  void RefreshRates() const;
  static constexpr std::chrono::seconds kRateWindow{5};
  mutable std::optional<SteadyTime> rates_at_;
};

// kMessageTooLarge for a message of `count` headers, more than `max_headers`.
Status TooManyHeaders(uint64_t count, uint32_t max_headers);
// kMessageTooLarge when `message` has more than `max_headers` headers, or its body and header
// names and values (HeaderBytes) together exceed `max_message_bytes`.
Status CheckMessageSize(const Message& message, uint64_t max_message_bytes, uint32_t max_headers);
// Names of exchanges, queues and consumer tags: 1-255 bytes of [A-Za-z0-9-_.:].
Status ValidateName(std::string_view kind, std::string_view name);
// The same names for AMQP sessions (RabbitMQ's rule): 1-255 bytes of valid UTF-8 without CR or
// LF (UTF-8 so that native clients, whose names are proto3 strings, can read them).
Status ValidateAmqpName(std::string_view kind, std::string_view name);
// The delay a message published to a delayed-message exchange (ExchangeSpec::delayed) asks
// for: its x-delay header, an integer of ms (any AMQP integer type); absent, not an integer,
// or not above 0: none (the plugin's rule).
uint64_t DelayHeader(const Headers& headers);
// Routing keys (of a publish or a binding) are at most this long.
inline constexpr size_t kMaxRoutingKeyBytes = 255;
// 'name', as error messages show names; cut after 256 bytes (common/log_safe.h), so that an
// error never echoes a megabyte name back.
std::string Quote(std::string_view name);

}  // namespace wharf::broker
