// broker/queue.h
//
// Queue holds one queue's messages and subscriptions. Messages wait in `ready` in publish order.
// A message that comes back (nack with requeue, a connection closing) returns to its original
// position: every message out for delivery was taken from the head, so its sequence number is
// lower than any still waiting, and the returned set (ordered by sequence) is always served
// before the fresh tail.
//
// The queue is a data structure; the broker decides who gets what (broker.cc: Dispatch).
//
// Paging (durable queues only): while a queue holds more than its page limits in RAM (messages
// counted whole: body, headers and properties, Envelope::whole_bytes), newly
// enqueued messages are written to the store and not kept in RAM; only their count is ("paged").
// They always follow everything in RAM, so order holds: when the RAM head runs low the broker
// loads the next paged messages, in sequence order, from `load_from_seq()`. A queue recovered at
// start-up begins with everything paged. So RAM holds at most the page limits plus one load
// batch per queue, however deep the backlog (docs/storage.md).
//
// Held messages (publish deduplication): a publish the store must admit first waits, unseen,
// with everything enqueued behind it, until the store answers (EnqueueHeld, Resolve).
//
// Thread safety: confined to the broker thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/consumer_set.h"
#include "broker/delay_timeline.h"
#include "broker/envelope.h"
#include "broker/queue_policy.h"
#include "common/clock.h"
#include "wharf/types.h"

namespace wharf::broker {

class SessionState;

struct QueuedMessage {
  EnvelopePtr envelope;
  uint64_t seq = 0;            // position in the queue, assigned at enqueue
  uint32_t receive_count = 0;  // deliveries so far
  bool stored = false;         // has an entry in the message store
  uint8_t store_flags = 0;     // the entry's flags (store::kEntryShared, kEntryTransient)
  // Attempt accounting (docs/lifecycle.md): when it was first delivered (Unix ms; 0 = not
  // yet, or not known after a crash) and its failures (null = none).
  int64_t first_received_at_ms = 0;
  FailuresPtr failures;
};

// When a durable queue starts paging to disk: messages in RAM, and their whole size
// (Envelope::whole_bytes: headers and properties count as much as the body).
struct PageLimits {
  uint64_t max_messages = 50'000;
  uint64_t max_bytes = 32u << 20;
};

// What Purge removed, so the broker can remove it from the store (docs/storage.md, "Purge").
// Every purged message with an entry is either in `stored` or in [range_from, range_to), a
// range holding only purged messages (and gaps), which one record purges.
struct PurgeResult {
  uint64_t count = 0;
  // RAM messages with store entries below the range (returned ones below `floor`): removed
  // one by one.
  std::vector<QueuedMessage> stored;
  // [range_from, range_to): the ready messages in RAM from `floor` on and every paged one;
  // empty (from == to) when no stored message is there.
  uint64_t range_from = 0;
  uint64_t range_to = 0;
  uint64_t range_messages = 0;  // stored messages in the range (paged: an upper bound while
                                // the recovered count is estimated)
  uint64_t paged = 0;           // of which paged
};

// Long-poll deadlines: when -> (queue name, waiter id).
using ReceiveDeadlines = std::multimap<SteadyTime, std::pair<std::string, uint64_t>>;

// A long-polling Receive waiting for messages.
struct PullWaiter {
  uint64_t waiter_id = 0;
  uint64_t session_id = 0;
  uint64_t request_id = 0;
  uint32_t max_messages = 1;
  uint32_t lease_ms = 0;  // the deliveries' lease; 0 = the queue's default; kNoLease = none
  ReceiveDeadlines::iterator deadline;  // erased when the waiter completes
};

class Queue {
 public:
  // `store_id` is the queue's id in the message store; 0 when it is not stored (transient or
  // exclusive queues). `owner_id`: the owner (SessionState::owner_id) of an exclusive queue.
  Queue(QueueSpec spec, uint64_t owner_id, uint64_t store_id = 0,
        DelayTimeline::Limits delay_limits = {}, QueuePolicy policy = {})
      : spec_(std::move(spec)),
        owner_id_(owner_id),
        store_id_(store_id),
        policy_(policy),
        consumers_(policy.single_active_consumer),
        delayed_(store_id != 0, delay_limits) {}

  const std::string& name() const { return spec_.name; }
  const QueueSpec& spec() const { return spec_; }
  // The owner of an exclusive queue (a native session, or an AMQP connection); 0 unless
  // exclusive.
  uint64_t owner_id() const { return owner_id_; }
  uint64_t store_id() const { return store_id_; }
  const QueuePolicy& policy() const { return policy_; }

  // True when the next message enqueued must go to the store only (see Paging above).
  bool ShouldPage(const PageLimits& limits) const {
    return store_id_ != 0 &&
           (paged_ > 0 || held_paged_ > 0 || live_in_ram() >= limits.max_messages ||
            ram_memory_ >= limits.max_bytes);
  }
  // Appends a message and returns its sequence number. With `page` it is counted, not kept:
  // the caller has written it to the store.
  // `receive_count` and the attempt accounting come along for a message that was delivered
  // before (a retry released from the timeline).
  uint64_t Enqueue(EnvelopePtr envelope, bool stored, uint8_t store_flags, bool page,
                   uint32_t receive_count = 0, int64_t first_received_at_ms = 0,
                   FailuresPtr failures = nullptr);
  void Enqueue(EnvelopePtr envelope) { Enqueue(std::move(envelope), false, 0, false); }

  // --- Held messages (publish deduplication; docs/lifecycle.md, "Deduplication") ---
  // A message whose acceptance the store decides (a PutDedup in the same commit) takes its
  // sequence number now and is held out of sight until Resolve. Everything enqueued after it
  // waits behind it, so the queue's order is the publish order; none of it is ready, paged,
  // loaded or delivered until the held messages ahead are resolved.
  uint64_t EnqueueHeld(EnvelopePtr envelope, bool stored, uint8_t store_flags, bool page);
  // The store answered for held message `seq`: kept (`keep`), or dropped (a duplicate, or the
  // commit failed). Returns true when messages became ready or paged. A `seq` no longer held
  // (purged meanwhile) is ignored.
  bool Resolve(uint64_t seq, bool keep);
  // Messages held or waiting behind one.
  size_t held() const { return held_.size(); }
  // Where loads of paged messages stop: entries from here on belong to held messages and to
  // those waiting behind them, which are not paged yet.
  uint64_t load_end_seq() const { return held_.empty() ? next_seq_ : held_.front().message.seq; }
  void Requeue(QueuedMessage message);
  // Takes the next message in RAM, moving expired ones to `expired`. nullopt when none is in
  // RAM (there may be paged ones: see NeedsLoad).
  std::optional<QueuedMessage> Pop(int64_t now_wall_ms,
                                   std::vector<QueuedMessage>* expired = nullptr);
  // Drops every ready message, in RAM and paged. `floor` is above the sequence number of
  // every message of the queue that is in flight (or otherwise must not be in the purged
  // range): the range starts there at the lowest.
  PurgeResult Purge(uint64_t floor = 0);

  uint64_t ready() const { return ready_.size() - tombstones_ + returned_.size() + paged_; }
  // Body bytes of the ready messages (x-max-length-bytes counts bodies only, as RabbitMQ's
  // does); messages recovered at start-up count once loaded.
  uint64_t ready_bytes() const { return ram_bytes_ + returned_bytes_ + paged_bytes_; }
  // The whole size (Envelope::whole_bytes) of the ready messages kept in RAM in publish
  // order (returned ones apart): what the page limit bounds.
  uint64_t ram_memory_bytes() const { return ram_memory_; }
  bool HasReady() const { return ready_.size() > tombstones_ || !returned_.empty(); }

  // --- Expiry (x-message-ttl, expiration_ms; docs/lifecycle.md) ---
  // When a message expires in this queue (Unix ms); 0 = never. Counted from its publish.
  int64_t ExpiresAt(const Envelope& envelope) const;
  bool Expired(const QueuedMessage& m, int64_t now_wall_ms) const;
  // Takes the ready message `seq` out if it is in RAM and expired at `now_wall_ms`.
  std::optional<QueuedMessage> TakeExpired(uint64_t seq, int64_t now_wall_ms);
  // Messages published with AMQP expiration "0" (PublishTiming::expire_undelivered) since the
  // last dispatch: whichever of them that dispatch did not deliver expires then.
  std::vector<uint64_t>& expire_unless_delivered() { return expire_unless_delivered_; }

  // --- Walking the ready messages by sequence number (redrive) ---
  // The ready message in RAM with the lowest seq >= `seq`; null when there is none.
  const QueuedMessage* NextReadyInRam(uint64_t seq) const;
  // Takes the ready message `seq` out of RAM, wherever it is; nullopt when it is not there.
  std::optional<QueuedMessage> Take(uint64_t seq);
  // True when the message `seq` would be paged (in the store only), if it still exists.
  bool IsPaged(uint64_t seq) const { return paged_ > 0 && seq >= load_from_seq_ && !loading; }
  // The caller removed the paged message `seq` (of `bytes` body bytes) from the store.
  // REQUIRES: IsPaged(seq).
  void TakePaged(uint64_t bytes);
  // (seq, expires at) of messages that came into RAM since the broker last looked: it arms
  // its expiry timer with them.
  std::vector<std::pair<uint64_t, int64_t>>& new_expiries() { return new_expiries_; }

  // --- Paging ---
  uint64_t paged() const { return paged_; }
  uint64_t load_from_seq() const { return load_from_seq_; }
  uint64_t next_seq() const { return next_seq_; }
  // Paged messages exist and RAM is low enough to take a load of `batch` more.
  bool NeedsLoad(uint32_t batch, uint64_t max_bytes) const {
    // Live messages only: tombstones must not hold a load back (a queue whose RAM is all
    // tombstones would never pop them, nor load).
    return paged_ > 0 && !loading && live_in_ram() < batch && ram_memory_ < max_bytes;
  }
  // Takes the result of a load: `kept` (the next paged messages, in order) go to RAM;
  // `consumed` paged entries were read (kept ones and dropped ones), the last being
  // `last_seq`; `reached_end` when the store had nothing more. Returns false when that
  // contradicts the count (the store and the queue disagree); the count is corrected.
  bool AddLoaded(std::vector<QueuedMessage> kept, uint64_t consumed, uint64_t last_seq,
                 bool reached_end);
  // A load of [load_from_seq(), load_end_seq()) is being sent to the store: messages paged
  // from now on lie beyond it, and stay paged when it reaches its end.
  void BeginLoad() {
    load_to_seq_ = load_end_seq();
    paged_beyond_load_ = 0;
    paged_beyond_load_bytes_ = 0;
  }
  // At recovery: messages on disk in [first_seq, next_seq), at most `estimate` of them; the
  // exact number follows through SetRecoveredCount.
  void Restore(uint64_t first_seq, uint64_t next_seq, uint64_t estimate);
  // The recovered queue held `count` entries (counted in the background). Ignored once the
  // queue was purged or its paged messages all loaded.
  void SetRecoveredCount(uint64_t count);
  bool count_estimated() const { return estimate_ > 0; }
  // Every stored message up to this sequence number has been delivered at least once.
  uint64_t delivered_through() const { return delivered_through_; }
  void NoteDelivered(uint64_t seq) { delivered_through_ = std::max(delivered_through_, seq); }
  // Sequence numbers are never reused below `seq` (after a restart of a drained queue).
  void EnsureNextSeqAbove(uint64_t seq) { next_seq_ = std::max(next_seq_, seq + 1); }
  bool delivered_mark_pending = false;  // in Broker::delivered_marks_
  bool loading = false;                 // a Load is in flight
  uint64_t load_generation = 0;         // bumped by Purge: a Load started before is stale
  // Purged messages the store is still removing from the disk (docs/storage.md, "Purge"),
  // and in how many purged ranges.
  uint64_t purge_reclaiming = 0;
  uint32_t purge_ranges = 0;

  // --- Delayed messages (docs/scheduler.md) ---
  DelayTimeline& delayed() { return delayed_; }
  const DelayTimeline& delayed() const { return delayed_; }
  // The due time under which the broker's scheduler has this queue; nullopt when it is not
  // in the scheduler (nothing delayed in RAM).
  std::optional<int64_t> scheduled_due;
  bool delayed_load_pending = false;  // in Broker::pending_delayed_loads_

  // Subscriptions, in the order they are offered messages (consumer_set.h).
  ConsumerSet& consumers() { return consumers_; }
  const ConsumerSet& consumers() const { return consumers_; }
  std::deque<PullWaiter>& waiters() { return waiters_; }

  // Counters.
  uint64_t in_flight = 0;
  uint64_t published_total = 0;
  uint64_t delivered_total = 0;
  uint64_t acked_total = 0;
  uint64_t nacked_total = 0;       // nacks and rejects
  uint64_t redelivered_total = 0;  // deliveries with receive_count > 1
  uint64_t expired_total = 0;
  uint64_t lease_expired_total = 0;
  uint64_t dead_lettered_total = 0;  // moved to the dead-letter target, or dropped without one
  uint64_t duplicates_total = 0;     // publishes its deduplication window dropped
  bool deleted = false;
  bool dispatch_scheduled = false;  // in Broker::pending_dispatch_
  // x-expires: when the queue is deleted unless used before; its key in Broker::idle_queues_.
  // nullopt while it is in use (a consumer) or without x-expires.
  std::optional<SteadyTime> idle_deadline;

  // Bindings that point at this queue, so deleting it can remove them: (exchange, key, args).
  std::vector<BindingSpec>& bindings() { return bindings_; }

  QueueInfo Info() const;
  // The Unix ms publish time of the next ready message to deliver; 0 when none is in RAM.
  int64_t HeadPublishedAt() const;
  // Rates per second from the counters' change since the last call, `seconds` ago.
  void UpdateRates(double seconds);

 private:
  void NoteExpiry(const QueuedMessage& m);
  // Makes `message` ready (or paged): Enqueue's work once nothing is held ahead of it.
  void Place(QueuedMessage message, bool page);
  uint64_t live_in_ram() const { return ready_.size() - tombstones_; }
  // Drops tombstones at the front of ready_, so that they never pile up there.
  void TrimFront();

  QueueSpec spec_;
  uint64_t owner_id_;
  uint64_t store_id_;
  QueuePolicy policy_;
  uint64_t next_seq_ = 1;
  uint64_t paged_ = 0;          // messages in the store only, from load_from_seq_ on
  uint64_t load_from_seq_ = 0;  // the first paged message's sequence number, or higher
  // The end of the load in flight (UINT64_MAX: none), and what was paged at or past it.
  uint64_t load_to_seq_ = UINT64_MAX;
  uint64_t paged_beyond_load_ = 0;
  uint64_t paged_beyond_load_bytes_ = 0;
  uint64_t ram_bytes_ = 0;       // body bytes in ready_
  uint64_t ram_memory_ = 0;      // whole bytes (Envelope::whole_bytes) in ready_
  uint64_t returned_bytes_ = 0;  // body bytes in returned_
  uint64_t paged_bytes_ = 0;     // body bytes paged since start (recovered ones are unknown)
  uint64_t tombstones_ = 0;      // entries of ready_ taken out by expiry (no envelope)
  std::vector<std::pair<uint64_t, int64_t>> new_expiries_;
  struct Rates {
    // The counters at the last update (0 before it: a new queue starts from nothing).
    uint64_t published = 0, delivered = 0, acked = 0;
    double publish = 0, deliver = 0, ack = 0;
  } rates_;
  uint64_t estimate_ = 0;  // > 0: paged_ counts a recovery estimate this large
  uint64_t delivered_through_ = 0;
  std::deque<QueuedMessage> ready_;
  struct Held {
    QueuedMessage message;
    bool page = false;
    bool resolved = false;  // the store answered (or it never needed an answer)
    bool keep = true;
  };
  std::deque<Held> held_;
  uint64_t held_paged_ = 0;  // of held_, those to be paged
  std::map<uint64_t, QueuedMessage> returned_;
  ConsumerSet consumers_;
  std::vector<uint64_t> expire_unless_delivered_;
  std::deque<PullWaiter> waiters_;
  std::vector<BindingSpec> bindings_;
  DelayTimeline delayed_;
};

}  // namespace wharf::broker
