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
// receive count kept and `redelivered` set.
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
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "broker/exchange.h"
#include "broker/lease_timer.h"
#include "broker/queue.h"
#include "broker/redrive_task.h"
#include "broker/session_state.h"
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
  PageLimits page_limits;                  // durable queues page to disk beyond these
  uint32_t load_batch = 2'000;             // paged messages read back per store Load
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
  uint64_t expired_total = 0;
  uint64_t lease_expired_total = 0;
};

struct BrokerMetrics {
  std::vector<QueueMetrics> queues;
  uint64_t connections = 0;
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
};

struct PublishOutcome {
  PublishResult result;
  EnvelopePtr envelope;  // the accepted message, for a mandatory return
  // The answer comes later, through SessionPeer::PublishDone, once the message is on disk.
  bool deferred = false;
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
  void OpenSession(uint64_t session_id, std::string user, std::shared_ptr<SessionPeer> peer,
                   std::string address = {});
  // Requeues everything the session held, cancels its consumers, deletes its exclusive queues.
  void CloseSession(uint64_t session_id);
  size_t session_count() const { return sessions_.size(); }
  // Entries in the lease timer, stale ones included (tests: they must not pile up).
  size_t lease_entries() const { return leases_.size(); }
  // The server is stopping: the connections it closes from now on hand their deliveries back
  // without counting an attempt (x-max-attempts).
  void BeginShutdown() { shutting_down_ = true; }
  // The session's connection caught up on writing: dispatch to its consumers again.
  void ResumeSession(uint64_t session_id);

  // --- Topology ------------------------------------------------------------------------------
  Status DeclareExchange(const ExchangeSpec& spec);
  Status DeleteExchange(std::string_view name, bool if_unused);
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
  std::vector<QueueInfo> ListQueues(std::string_view prefix) const;
  std::vector<ExchangeInfo> ListExchanges() const;
  // Operators' listings (broker_metrics.cc): bindings from `exchange` and/or to `queue` ("" =
  // any), consumers of `queue` ("" = all), connections.
  std::vector<BindingSpec> ListBindings(std::string_view exchange, std::string_view queue) const;
  std::vector<ConsumerInfo> ListConsumers(std::string_view queue) const;
  std::vector<ConnectionInfo> ListConnections() const;

  // --- Messaging -----------------------------------------------------------------------------
  // `request_id` is the publisher's, when it wants a confirm: a persistent message then gets
  // its answer through PublishDone once durable (outcome.deferred); 0 = no confirm wanted.
  Result<PublishOutcome> Publish(uint64_t session_id, const std::string& exchange,
                                 const std::string& routing_key, Message message,
                                 uint64_t request_id = 0, PublishTiming timing = {});
  // Cancels a delayed message of `queue` that is still waiting. On OK the answer comes later
  // through SessionPeer::CancelDelayedDone, once the removal is on disk; never true for a
  // message that was (or will be) delivered.
  Status CancelDelayed(uint64_t session_id, uint64_t request_id, const std::string& queue,
                       uint64_t message_id);
  // Lists up to `limit` delayed messages of `queue` after (after_due_ms, after_message_id),
  // in delivery order; the answer comes through SessionPeer::ListDelayedDone.
  Status ListDelayed(uint64_t session_id, uint64_t request_id, const std::string& queue,
                     int64_t after_due_ms, uint64_t after_message_id, uint32_t limit);
  // Returns the consumer tag (generated when `consumer_tag` is empty).
  // `lease_ms`: each delivery's lease (0 = the queue's default; at most its maximum).
  Result<std::string> Subscribe(uint64_t session_id, const std::string& queue,
                                std::string consumer_tag, uint32_t prefetch, bool exclusive,
                                uint32_t lease_ms = 0);
  Status Cancel(uint64_t session_id, std::string_view consumer_tag);
  // On OK the answer comes later through SessionPeer::CompleteReceive (at the latest after
  // wait_ms); on error nothing else is sent.
  Status Receive(uint64_t session_id, uint64_t request_id, const std::string& queue,
                 uint32_t max_messages, uint32_t wait_ms, uint32_t lease_ms = 0);
  Status Ack(uint64_t session_id, uint64_t delivery_tag, bool multiple);
  // A failed delivery (docs/lifecycle.md). Without `requeue` the message is rejected (dropped).
  // With it, it comes back: after `delay_ms` when given, else at once when `immediate` or
  // when the queue has no retry policy, else after the policy's backoff. `error` (cut to
  // 1 KiB) becomes the message's last error.
  struct NackOptions {
    bool requeue = true;
    uint64_t delay_ms = 0;
    bool immediate = false;
    std::string_view error;
  };
  Status Nack(uint64_t session_id, uint64_t delivery_tag, bool multiple, NackOptions options);
  Status Nack(uint64_t session_id, uint64_t delivery_tag, bool multiple, bool requeue,
              uint64_t delay_ms = 0) {
    return Nack(session_id, delivery_tag, multiple,
                NackOptions{requeue, delay_ms, /*immediate=*/false, {}});
  }
  // Sets the delivery's lease to end `lease_ms` from now (at most the queue's maximum).
  // kLeaseExpired when it already ran out.
  Status ExtendLease(uint64_t session_id, uint64_t delivery_tag, uint32_t lease_ms);

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
  Result<std::vector<RedriveInfo>> RedriveStatus(uint64_t session_id, std::string_view queue) const;

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

  Result<std::shared_ptr<Queue>> FindQueue(uint64_t session_id, std::string_view name) const;
  Exchange* FindExchange(std::string_view name);
  SessionState* FindSession(uint64_t session_id);
  Status SettleTags(uint64_t session_id, uint64_t delivery_tag, bool multiple, Settle action,
                    const SettleOptions& options = {});
  void SettleOne(InFlight in_flight, Settle action, const SettleOptions& options = {});
  // kInvalidArgument for a delay (or delivery time) past year 9999 or max_delay_ms.
  Status CheckDelay(uint64_t delay_ms, int64_t deliver_at_ms, int64_t now_ms) const;
  // kInvalidArgument when `lease_ms` is beyond the queue's maximum (0: its default).
  Status CheckLease(const Queue& queue, uint32_t lease_ms) const;
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
  // Redelivers the deliveries whose lease ran out (at most a bounded number per call).
  void ExpireLeases();
  void ScheduleDispatch(const std::shared_ptr<Queue>& queue);
  void Dispatch(const std::shared_ptr<Queue>& queue);
  Delivery Track(SessionState& session, const std::shared_ptr<Queue>& queue, QueuedMessage message,
                 const std::shared_ptr<Consumer>& consumer, uint32_t lease_ms);
  void MarkDirty(SessionState& session);
  void RemoveConsumer(SessionState& session, const std::string& tag, bool notify,
                      std::string_view reason);
  void DropQueue(const std::shared_ptr<Queue>& queue, std::string_view reason);
  // Above the sequence number of every message of `queue` that a purge's range must not
  // cover: those in flight, and those whose removal (an earlier purge's) is still queued.
  uint64_t PurgeFloor(const Queue& queue) const;
  // Runs `answer` once the current batch's commit is synced (at once without a store).
  void AnswerWhenDurable(std::function<void(const Status&)> answer);
  // Answers a long poll (possibly with nothing) and forgets its deadline.
  void CompleteWaiter(const PullWaiter& waiter, std::vector<Delivery> deliveries);
  void MaybeAutoDeleteExchange(const std::string& name);
  // Deletes an exchange and every binding to or from it.
  void RemoveExchange(const std::string& name);
  // Appends the queues `exchange` routes to, following exchange-to-exchange bindings and
  // alternate exchanges; `visited` stops cycles.
  void RouteThrough(Exchange* exchange, const std::string& routing_key, const Headers& headers,
                    std::vector<Queue*>* targets, std::vector<const Exchange*>* visited);
  // The exchange-to-exchange half of Bind and Unbind.
  Status BindExchanges(const BindingSpec& binding, Exchange* source, bool bind);
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
  void OnRedriveRead(const std::string& queue_name, uint64_t serial, uint64_t generation,
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
  };
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
  void OnCommitted(std::vector<PendingConfirm> confirms, const Status& status);
  void RequestLoad(const std::shared_ptr<Queue>& queue);
  void OnCounted(uint64_t queue_id, store::CountKind kind, uint64_t count);
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

  std::unordered_map<std::string, std::unique_ptr<Exchange>> exchanges_;
  std::map<std::string, std::shared_ptr<Queue>, std::less<>> queues_;  // ordered for listing
  std::unordered_map<uint64_t, std::unique_ptr<SessionState>> sessions_;

  std::vector<std::shared_ptr<Queue>> pending_dispatch_;
  std::vector<std::pair<uint64_t, std::shared_ptr<SessionPeer>>> dirty_;
  ReceiveDeadlines receive_deadlines_;
  uint64_t next_waiter_id_ = 1;
  uint64_t next_message_id_;
  uint64_t next_generated_name_ = 1;

  store::MessageStore* store_;
  store::StoreBatch batch_;  // changes since the last Flush
  bool batch_sync_ = false;  // someone waits for batch_ to be durable
  std::vector<PendingConfirm> pending_confirms_;
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
  // Ready messages with an expiry (x-message-ttl, expiration_ms), in RAM.
  struct ExpiryRef {
    std::weak_ptr<Queue> queue;
    uint64_t seq = 0;
    int64_t expires_at_ms = 0;  // wall clock
    SteadyTime deadline;        // when to look, by the steady clock
  };
  BucketTimer<ExpiryRef> expiries_;
  std::mt19937_64 retry_rng_;                                  // full jitter of retry backoffs
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
  // Each queue's last redrive, running or not, by queue name.
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
// Routing keys (of a publish or a binding) are at most this long.
inline constexpr size_t kMaxRoutingKeyBytes = 255;
// 'name', as error messages show names; cut after 256 bytes (common/log_safe.h), so that an
// error never echoes a megabyte name back.
std::string Quote(std::string_view name);

}  // namespace wharf::broker
