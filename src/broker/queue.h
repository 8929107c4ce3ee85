// broker/queue.h
//
// Queue holds one queue's messages and subscriptions. Messages wait in `ready` in publish order.
// A message that comes back (nack with requeue, a connection closing) returns to its original
// position: every message out for delivery was taken from the head, so its sequence number is
// lower than any still waiting, and the returned set (ordered by sequence) is always served
// before the fresh tail.
//
// Priority lanes (x-max-priority, docs/lifecycle.md "Priorities"): the messages of one
// priority wait in their own lane, with everything said here (order, returns, paging, held
// messages) true of each lane on its own. The lane is the top 8 bits of a sequence number
// (store::SeqLane): lane 0 holds the highest priority, so sequence order is delivery order
// across lanes too. A queue without priorities has lane 0 only. A lane exists once a message
// of its priority came: an unused priority costs nothing. Pop serves the first lane with
// ready messages, and waits for its load rather than serve a lower lane while that lane's
// next messages are on disk.
//
// The queue is a data structure; the broker decides who gets what (broker.cc: Dispatch).
//
// Paging (durable queues only): while a queue holds more than its page limits in RAM (messages
// counted whole: body, headers and properties, Envelope::whole_bytes), newly
// enqueued messages are written to the store and not kept in RAM; only their count is ("paged").
// They always follow everything in RAM of their lane, so order holds: when the RAM head runs
// low the broker loads the next paged messages of the first lane with ready messages, in
// sequence order, from its `load_from_seq`. A queue recovered at start-up begins with
// everything paged. So RAM holds at most the page limits plus one load batch per lane, however
// deep the backlog (docs/storage.md).
//
// Message groups (x-message-groups): which ready message goes next is MessageGroups' choice
// (message_groups.h): the oldest of the groups with no delivery out, and of no group; Pop
// takes it from wherever it is in RAM. A queue with groups has no priorities (lane 0 only).
//
// Held messages (publish deduplication): a publish the store must admit first waits, unseen,
// with everything enqueued behind it in its lane, until the store answers (EnqueueHeld,
// Resolve).
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
#include "broker/message_groups.h"
#include "broker/queue_policy.h"
#include "common/clock.h"
#include "store/message_store.h"
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
// Every purged message with an entry is either in `stored` or in one of `ranges`, each a range
// of one lane holding only purged messages (and gaps), which one record purges.
struct PurgedRange {
  uint64_t from = 0;  // [from, to)
  uint64_t to = 0;
  uint64_t messages = 0;  // stored messages in the range (paged: an upper bound while the
                          // recovered count is estimated)
  uint64_t paged = 0;     // of which paged
};
struct PurgeResult {
  uint64_t count = 0;
  // RAM messages with store entries below their lane's range (returned ones below the lane's
  // floor): removed one by one.
  std::vector<QueuedMessage> stored;
  // Per lane with stored messages: the ready messages in RAM from the lane's floor on and
  // every paged one.
  std::vector<PurgedRange> ranges;
  uint64_t paged() const {
    uint64_t n = 0;
    for (const auto& r : ranges) n += r.paged;
    return n;
  }
};

// Per lane, a sequence number above every message of that lane that must stay out of a purged
// range (those in flight); lanes not listed have none.
using PurgeFloors = std::map<uint8_t, uint64_t>;

// Long-poll deadlines: when -> (queue key (ResourceKey), waiter id).
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
        DelayTimeline::Limits delay_limits = {}, QueuePolicy policy = {});
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;
  ~Queue();

  const std::string& name() const { return spec_.name; }
  const std::string& vhost() const { return spec_.vhost; }
  // ResourceKey(vhost, name): its key in the broker's maps.
  const std::string& key() const { return key_; }
  const QueueSpec& spec() const { return spec_; }
  // The owner of an exclusive queue (a native session, or an AMQP connection); 0 unless
  // exclusive.
  uint64_t owner_id() const { return owner_id_; }
  uint64_t store_id() const { return store_id_; }
  // What the queue runs with: its declared arguments with its policy's merged in.
  const QueuePolicy& policy() const { return policy_; }
  // A policy applies from now on (Broker::ApplyPolicy): `policy` is the merged one, `name`
  // and `definition` the policy's ("" and {} = none), `effective` the merged arguments. The
  // structural fields (priorities, groups, single active consumer, deduplication) come from
  // the declaration only and do not change.
  void SetPolicy(QueuePolicy policy, std::string name, Headers definition, Headers effective);
  const std::string& applied_policy() const { return applied_policy_; }
  const Headers& policy_definition() const { return policy_definition_; }
  const Headers& effective_arguments() const { return effective_arguments_; }
  // Notes every ready message in RAM for expiry again (its TTL changed); paged ones are noted
  // as they are loaded.
  void NoteExpiries();

  // The lane a message waits in: 0 without priorities; else max_priority - its priority (a
  // priority above the maximum counts as the maximum, as RabbitMQ's).
  uint8_t LaneOf(const Message& message) const;
  uint8_t LaneOf(const Envelope& envelope) const { return LaneOf(envelope.message); }

  // True when the next message enqueued into `lane` must go to the store only (see Paging
  // above). Without a lane: whether it would in any lane that has paged messages.
  bool ShouldPage(const PageLimits& limits, std::optional<uint8_t> lane = std::nullopt) const;
  bool ShouldPage(const PageLimits& limits, const Envelope& envelope) const {
    return ShouldPage(limits, LaneOf(envelope));
  }
  // Appends a message to its lane and returns its sequence number. With `page` it is counted,
  // not kept: the caller has written it to the store.
  // `receive_count` and the attempt accounting come along for a message that was delivered
  // before (a retry released from the timeline).
  uint64_t Enqueue(EnvelopePtr envelope, bool stored, uint8_t store_flags, bool page,
                   uint32_t receive_count = 0, int64_t first_received_at_ms = 0,
                   FailuresPtr failures = nullptr);
  void Enqueue(EnvelopePtr envelope) { Enqueue(std::move(envelope), false, 0, false); }

  // --- Held messages (publish deduplication; docs/lifecycle.md, "Deduplication") ---
  // A message whose acceptance the store decides (a PutDedup in the same commit) takes its
  // sequence number now and is held out of sight until Resolve. Everything enqueued after it
  // into its lane waits behind it, so the lane's order is the publish order; none of it is
  // ready, paged, loaded or delivered until the held messages ahead are resolved.
  uint64_t EnqueueHeld(EnvelopePtr envelope, bool stored, uint8_t store_flags, bool page);
  // The store answered for held message `seq`: kept (`keep`), or dropped (a duplicate, or the
  // commit failed). Returns true when messages became ready or paged. A `seq` no longer held
  // (purged meanwhile) is ignored.
  bool Resolve(uint64_t seq, bool keep);
  // A publish to be paged, whose commit has yet to say whether the queue takes it. A paged
  // message is seen only through a load, and no load reads it before its commit answers
  // (loads are sent after the commits before them, and answered after them), so it is counted
  // as paged at once instead of held: returns its sequence number. nullopt when it must be
  // held: something is held ahead of it in its lane, or the queue has a length limit (a
  // duplicate counted for a moment must not push a message out, nor refuse one).
  std::optional<uint64_t> PageUndecided(const Envelope& envelope);
  // The commit answered for PageUndecided's `seq`, of `bytes` body bytes: kept (`keep`), or
  // not (a duplicate, or the commit failed), and then no longer counted, unless a purge took it
  // already. Returns true when it left the count.
  bool SettleUndecided(uint64_t seq, uint64_t bytes, bool keep);
  // Messages held or waiting behind one.
  size_t held() const;
  void Requeue(QueuedMessage message);
  // Takes the next message to deliver: from the first lane with ready messages, moving
  // expired ones to `expired`. nullopt when that lane has none in RAM (there may be paged
  // ones: see NeedsLoad).
  std::optional<QueuedMessage> Pop(int64_t now_wall_ms,
                                   std::vector<QueuedMessage>* expired = nullptr);
  // Drops every ready message, in RAM and paged. `floors` gives per lane a sequence number
  // above every message of the queue that is in flight (or otherwise must not be in the
  // purged range): the lane's range starts there at the lowest.
  PurgeResult Purge(const PurgeFloors& floors = {});

  uint64_t ready() const;
  // Body bytes of the ready messages (x-max-length-bytes counts bodies only, as RabbitMQ's
  // does); messages recovered at start-up count once loaded.
  uint64_t ready_bytes() const;
  // The whole size (Envelope::whole_bytes) of the ready messages kept in RAM in publish
  // order (returned ones apart): what the page limit bounds.
  uint64_t ram_memory_bytes() const;
  // A Pop now would find a message (the first lane with ready messages has one in RAM; with
  // groups, a free group or a message of none has one).
  bool HasReady() const;

  // --- Expiry (x-message-ttl, expiration_ms; docs/lifecycle.md) ---
  // When a message expires in this queue (Unix ms); 0 = never. Counted from its publish.
  int64_t ExpiresAt(const Envelope& envelope) const;
  bool Expired(const QueuedMessage& m, int64_t now_wall_ms) const;
  // Takes the ready message `seq` out if it is in RAM and expired at `now_wall_ms`.
  std::optional<QueuedMessage> TakeExpired(uint64_t seq, int64_t now_wall_ms);
  // Messages published with AMQP expiration "0" (PublishTiming::expire_undelivered) since the
  // last dispatch: whichever of them that dispatch did not deliver expires then.
  std::vector<uint64_t>& expire_unless_delivered() { return expire_unless_delivered_; }

  // --- Walking the ready messages by sequence number (redrive, peek) ---
  // Lane by lane, in sequence order (delivery order): in each, the messages in RAM come
  // first, then the paged ones, [LoadFromSeq(lane), LoadEndSeq(lane)).
  // The ready message in RAM with the lowest seq >= `seq` in the lane of `seq`; null when
  // there is none.
  const QueuedMessage* NextReadyInLane(uint64_t seq) const;
  // The first sequence number of the next lane after that of `seq` that has ready messages;
  // nullopt when there is none.
  std::optional<uint64_t> NextLaneStart(uint64_t seq) const;
  // The ready message in RAM with the lowest seq >= `seq`, in any lane; null when none.
  const QueuedMessage* NextReadyInRam(uint64_t seq) const;
  // Takes the ready message `seq` out of RAM, wherever it is; nullopt when it is not there.
  std::optional<QueuedMessage> Take(uint64_t seq);
  // True when the message `seq` would be paged (in the store only), if it still exists.
  bool IsPaged(uint64_t seq) const;
  // The caller removed the paged message `seq` (of `bytes` body bytes) from the store.
  // REQUIRES: IsPaged(seq).
  void TakePaged(uint64_t seq, uint64_t bytes);
  // (seq, expires at) of messages that came into RAM since the broker last looked: it arms
  // its expiry timer with them.
  std::vector<std::pair<uint64_t, int64_t>>& new_expiries() { return new_expiries_; }

  // --- Paging ---
  uint64_t paged() const;
  // Paged messages of the lane of `seq`, and where they start and end.
  uint64_t PagedInLane(uint64_t seq) const;
  uint64_t LoadFromSeq(uint64_t seq) const;
  uint64_t LoadEndSeq(uint64_t seq) const;
  // One past every sequence number given so far (in the last lane used).
  uint64_t next_seq() const;
  // The lane that needs messages from the disk has room for a load of `batch` more: its paged
  // messages come next, and RAM is low. One load at a time per queue.
  bool NeedsLoad(uint32_t batch, uint64_t max_bytes) const;
  bool loading() const { return loading_lane_ >= 0; }
  // The broker decided to load (NeedsLoad): the lane is chosen now and the load is sent after
  // the flush's commit (BeginLoad).
  void MarkLoading();
  // The load is being sent to the store: returns its range, [from, to). Messages paged from
  // now on lie beyond it, and stay paged when it reaches its end.
  std::pair<uint64_t, uint64_t> BeginLoad();
  // The load failed: it is tried again later.
  void LoadFailed() { loading_lane_ = -1; }
  // Takes the result of the load: `kept` (the next paged messages, in order) go to RAM;
  // `consumed` paged entries were read (kept ones and dropped ones), the last being
  // `last_seq`; `reached_end` when the store had nothing more. Returns false when that
  // contradicts the count (the store and the queue disagree); the count is corrected.
  bool AddLoaded(std::vector<QueuedMessage> kept, uint64_t consumed, uint64_t last_seq,
                 bool reached_end);
  // At recovery: a lane's messages on disk in [first_seq, next_seq), at most `estimate` of
  // them; the exact number follows through SetRecoveredCount. `first_seq` 0: none, but
  // numbers are not reused below `next_seq`.
  void Restore(uint8_t lane, uint64_t first_seq, uint64_t next_seq, uint64_t estimate);
  // The recovered lane held `count` entries (counted in the background). Ignored once the
  // queue was purged or the lane's paged messages all loaded.
  void SetRecoveredCount(uint8_t lane, uint64_t count);
  bool count_estimated() const;
  // Every stored message of the lane of `seq` up to `seq` has been delivered at least once.
  bool DeliveredBefore(uint64_t seq) const;
  void NoteDelivered(uint64_t seq);
  // The delivery marks changed since the last call, one per lane (for MarkDelivered).
  std::vector<uint64_t> TakeDeliveredMarks();
  // Sequence numbers are never reused below `seq` in its lane (after a restart of a drained
  // queue).
  void EnsureNextSeqAbove(uint64_t seq);
  bool delivered_mark_pending = false;  // in Broker::delivered_marks_
  uint64_t load_generation = 0;         // bumped by Purge: a Load started before is stale
  // Purged messages the store is still removing from the disk (docs/storage.md, "Purge"),
  // and in how many purged ranges.
  uint64_t purge_reclaiming = 0;
  uint32_t purge_ranges = 0;

  // --- Message groups (x-message-groups; docs/lifecycle.md, "Message groups") ---
  bool grouped() const { return groups_ != nullptr; }
  // The group of a message of this queue; "" when it has none (or the queue has no groups).
  std::string GroupOf(const Envelope& envelope) const;
  // The same as a view into the message (or `scratch`), without a copy.
  std::string_view GroupView(const Envelope& envelope, std::string& scratch) const;
  // A delivery of `envelope` is out (to be settled): its group is held. The hold's token; 0
  // when the message has no group.
  uint64_t HoldGroup(const Envelope& envelope);
  // Its delivery was settled: its group goes on. With a token: only if that hold still stands
  // (a retry's backoff ending).
  void ReleaseGroup(const Envelope& envelope, std::optional<uint64_t> token = std::nullopt);
  void ReleaseGroup(const std::string& group, std::optional<uint64_t> token);
  // Null without groups.
  const MessageGroups* groups() const { return groups_.get(); }

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
  struct Lane;
  // The lane `tag`, made when first needed.
  Lane& LaneAt(uint8_t tag);
  const Lane* FindLane(uint8_t tag) const {
    return tag < lanes_.size() ? lanes_[tag].get() : nullptr;
  }
  Lane* FindLane(uint8_t tag) { return tag < lanes_.size() ? lanes_[tag].get() : nullptr; }
  // The first lane with ready messages (in RAM or paged); null when none.
  const Lane* HeadLane() const;
  void NoteExpiry(const QueuedMessage& m);
  // Makes `message` ready (or paged) in `lane`: Enqueue's work once nothing is held ahead of
  // it.
  void Place(Lane& lane, QueuedMessage message, bool page);
  // Counts message `seq` (of `body` bytes) as paged in `lane`.
  void CountPaged(Lane& lane, uint64_t seq, uint64_t body);
  std::optional<QueuedMessage> PopFrom(Lane& lane, int64_t now_wall_ms,
                                       std::vector<QueuedMessage>* expired);
  std::optional<QueuedMessage> PopGrouped(int64_t now_wall_ms, std::vector<QueuedMessage>* expired);
  void PurgeLane(Lane& lane, uint64_t floor, PurgeResult* result);
  uint64_t live_in_ram() const;
  // The sum of `of(lane)` over the lanes made.
  template <typename F>
  uint64_t SumLanes(F of) const;

  QueueSpec spec_;  // its vhost filled in ("/" when it came empty)
  std::string key_;
  uint64_t owner_id_;
  uint64_t store_id_;
  QueuePolicy policy_;
  std::string applied_policy_;  // the policy's name; "" = none
  Headers policy_definition_;
  Headers effective_arguments_;  // with a policy only
  // Indexed by lane; null until used. `used_`: the lanes made, in order.
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<uint8_t> used_;
  int loading_lane_ = -1;                  // the lane a load is in flight for; -1: none
  std::unique_ptr<MessageGroups> groups_;  // with x-message-groups
  std::vector<std::pair<uint64_t, int64_t>> new_expiries_;
  struct Rates {
    // The counters at the last update (0 before it: a new queue starts from nothing).
    uint64_t published = 0, delivered = 0, acked = 0;
    double publish = 0, deliver = 0, ack = 0;
  } rates_;
  ConsumerSet consumers_;
  std::vector<uint64_t> expire_unless_delivered_;
  std::deque<PullWaiter> waiters_;
  std::vector<BindingSpec> bindings_;
  DelayTimeline delayed_;
};

}  // namespace wharf::broker
