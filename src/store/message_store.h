// store/message_store.h
//
// MessageStore is the durable home of the topology (durable exchanges, queues, bindings) and of
// the messages in durable queues. On restart the broker trusts it completely: a publish is
// confirmed to the producer only after the Commit() that wrote it has reported success.
//
// The broker describes changes as a StoreBatch (one per batch of requests it ran) and hands it
// to Commit(). Batches are applied in the order they were committed, each atomically; a store
// is free to merge many batches into one disk write and one sync (group commit), and it must:
// one sync per message would cap a disk at a few hundred confirms per second.
//
// Queues are kept as entries: (queue id, sequence number) -> (message id, receive count, flags).
// A message in one queue is written inside its entry (one write to publish, one to ack); a
// message in several is written once and referenced, and released by the entry removals that
// settle it (store/keys.h has the layout).
//
// Thread safety: Commit() and Load() may be called from one thread at a time (the broker
// thread). Their callbacks run through the `post` function given at Open, never inline.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/envelope.h"
#include "wharf/result.h"
#include "wharf/types.h"

namespace wharf::store {

// Lanes: the top 8 bits of an entry's sequence number name its lane, numbered on its own
// (a priority level of a queue with x-max-priority, lane 0 the highest; every other queue has
// lane 0 only, so its numbers are plain counts from 1). Recovery reports each lane apart, and a
// delivery mark (MarkDelivered) is kept per lane.
inline constexpr int kLaneShift = 56;
inline constexpr uint8_t SeqLane(uint64_t seq) { return static_cast<uint8_t>(seq >> kLaneShift); }
// The lowest sequence number of `lane` (never used: a lane counts from one above it).
inline constexpr uint64_t LaneBaseSeq(uint8_t lane) { return uint64_t{lane} << kLaneShift; }
// One past the highest sequence number of `lane` (lane 255's last is UINT64_MAX - 1).
inline constexpr uint64_t LaneEndSeq(uint8_t lane) {
  return lane == 255 ? UINT64_MAX : LaneBaseSeq(static_cast<uint8_t>(lane + 1));
}

// Entry flags (store/keys.h).
inline constexpr uint8_t kEntryShared = 1;     // the body is shared with other queues' entries
inline constexpr uint8_t kEntryTransient = 2;  // not persistent: dropped at recovery
inline constexpr uint8_t kEntryInline = 4;     // the message is in the entry itself
// Set by the store's encoding only (an AttemptsRecord precedes the message): never in the
// flags the broker passes or gets back.
inline constexpr uint8_t kEntryAttempts = 8;

// Runs a completion on the thread that owns the broker.
using PostFn = std::function<void(std::function<void()>)>;

struct EntryRef {
  uint64_t queue_id = 0;
  uint64_t seq = 0;
  uint64_t message_id = 0;
  uint32_t receive_count = 0;
  uint8_t flags = 0;  // kEntryShared | kEntryTransient | kEntryInline (store/keys.h)
  // PutEntry of an inline entry: the message written into it. Unused otherwise.
  EnvelopePtr envelope = nullptr;
  // Delivery history written with the entry (PutEntry, PutDelayed, DelayEntry); none when 0
  // and null.
  int64_t first_received_at_ms = 0;
  FailuresPtr failures = nullptr;
};

// A user created at runtime (the config file's users are not stored).
struct StoredUser {
  std::string name;
  std::string password_hash;
  bool admin = false;  // the administrator tag, kept for older readers of the record
  UserLimits limits;
  std::vector<std::string> tags;
  std::vector<UserPermission> permissions;
};

// A virtual host's record: every vhost but "/", and "/" once its limits are set (it exists
// without one).
struct StoredVhost {
  std::string name;
  std::string description;
  VhostLimits limits;
};

// A redrive task of a dead-letter queue (docs/lifecycle.md, "Redrive"): what it was asked,
// what it did, and where it is. One per queue: the last one started.
struct StoredRedrive {
  uint64_t queue_id = 0;  // the dead-letter queue
  RedriveInfo info;       // rate_per_second and remaining are not stored
  // The walk: entries below cursor_seq were looked at; it stops at end_seq (the queue's next
  // sequence number when it started, so messages dead-lettered meanwhile are not taken).
  uint64_t cursor_seq = 0;
  uint64_t end_seq = 0;
};

// A purged range of a queue's entries that the store is still removing (docs/storage.md,
// "Purge"): entries in [cursor_seq, to_seq) are gone for every reader already.
struct StoredPurge {
  uint64_t queue_id = 0;
  uint64_t from_seq = 0;    // where the range started (the record's key)
  uint64_t cursor_seq = 0;  // removed below this
  uint64_t to_seq = 0;
  uint64_t messages = 0;  // messages the range held when purged
  uint64_t removed = 0;   // entries removed so far
  // False for the entries of a deleted queue (to_seq UINT64_MAX): no record, as the missing
  // queue record already says that they go (a restart finds them as a deleted queue's).
  bool recorded = true;
};

// The longest deduplication key a queue records (SQS's limit on its deduplication ids).
inline constexpr size_t kMaxDedupKeyBytes = 128;

// What the writer found for a StoreBatch::PutDedup.
struct DedupOutcome {
  uint64_t duplicate_of = 0;  // 0: the key was recorded; else the message that holds it
  // The writer's own (writer thread only): set once its group's lookup decided duplicate_of,
  // and where the op's key is in the group's plan.
  bool decided = false;
  uint32_t plan = 0;
};
// The outcomes of one batch's PutDedups, in the order they were added. The batch and whoever
// waits for its commit share them: the writer fills them in, the commit's callback reads them.
// One vector per batch, not an object per publish.
using DedupOutcomes = std::vector<DedupOutcome>;

namespace detail {
template <typename T>
inline constexpr bool kIsBoxedOp = false;  // StoreBatch::Stored<T> is a box
template <typename T>
inline constexpr bool kIsBoxedOp<std::unique_ptr<const T>> = true;
}  // namespace detail

// A group of changes applied atomically and in order.
class StoreBatch {
 public:
  struct PutMessage {
    EnvelopePtr envelope;
    uint32_t references;  // entries that will point at it
  };
  struct PutEntry {
    EntryRef entry;  // written anew, or rewritten with a higher receive count
  };
  struct RemoveEntry {
    EntryRef entry;  // deletes the entry and releases its message body
  };
  // Purges entries [from_seq, to_seq) of a queue: at once for every reader (loads and counts
  // skip them from this batch on, after a restart too), and removed from the disk in the
  // background in bounded steps between other writes, reported through the ReclaimCallback.
  // `messages` is how many the range holds (for progress).
  struct PurgeRange {
    uint64_t queue_id;
    uint64_t from_seq;
    uint64_t to_seq;
    uint64_t messages;
  };
  struct PutExchange {
    ExchangeSpec spec;
  };
  struct RemoveExchange {
    std::string name;        // and every binding from or to it
    std::string vhost = {};  // "" = "/"
  };
  struct PutQueue {
    QueueSpec spec;
    uint64_t queue_id;
  };
  struct RemoveQueue {
    std::string name;  // and every binding to it, its timeline, its redrive and its purges;
                       // its entries and the bodies they held in the background (a queue of
                       // millions does not hold up other writes)
    uint64_t queue_id;
    std::string vhost = {};  // "" = "/"
  };
  struct PutBinding {
    BindingSpec binding;
  };
  struct RemoveBinding {
    BindingSpec binding;
  };
  struct PutUser {
    StoredUser user;
  };
  // Every message of the queue up to `seq` has been delivered at least once (so a crash
  // brings those still on disk back as redelivered). One small write per queue per batch,
  // instead of rewriting each entry at its first delivery.
  struct MarkDelivered {
    uint64_t queue_id;
    uint64_t seq;
  };
  struct RemoveUser {
    std::string name;
  };
  // A vhost's record (made, or its limits changed). Its removal comes after the removal of
  // everything in it, in the same batch (Broker::DeleteVhost).
  struct PutVhost {
    StoredVhost vhost;
  };
  struct RemoveVhost {
    std::string name;
  };
  // A policy (broker/policy.h), made or changed; and its removal.
  struct PutPolicy {
    PolicyInfo policy;
  };
  struct RemovePolicy {
    std::string vhost;
    std::string name;
  };
  // A message waiting in a queue's timeline until `due_ms` (entry.seq is unused).
  struct PutDelayed {
    EntryRef entry;
    int64_t due_ms;
  };
  // Takes a message off a timeline. With `release` its body is released too (cancelled,
  // purged, dropped); without, the body stays for the PutEntry that moves it to the queue's
  // ready entries in the same batch (released when due).
  struct RemoveDelayed {
    EntryRef entry;
    int64_t due_ms;
    bool release;
  };
  // Moves a delivered message from the queue's entries back to its timeline until `due_ms`
  // (a nack with a delay): the entry goes, its body stays (written into the timeline entry
  // when inline, still referenced when shared).
  struct DelayEntry {
    EntryRef entry;  // as written (seq, flags); receive_count and envelope as they are now
    int64_t due_ms;
  };
  // Empties a queue's timeline (purge, or the remains of a deleted queue).
  struct RemoveAllDelayed {
    uint64_t queue_id;
  };
  // Writes a redrive's state; put in the same batch as the moves it counts, so that after a
  // crash it resumes exactly where its last committed move left it. RemoveQueue removes it.
  struct PutRedrive {
    StoredRedrive redrive;
  };
  // A publish into a queue with a deduplication window (docs/storage.md, "Deduplication"):
  // records `key` for the queue, unless a record of it that has not expired is there already
  // (or an earlier PutDedup of the same write group recorded it). Then it is a duplicate: its
  // outcome's `duplicate_of` says which message holds the key, and the PutEntry and PutDelayed
  // ops that follow in the same batch for this message in this queue are not written. Either
  // way the outcome is filled in before the commit's callback runs. Added with AddDedup, which
  // says where the outcome is in dedup_outcomes(). The message's entries in such
  // a queue must be inline (never kEntryShared), so a skipped one leaves no reference behind.
  // RemoveQueue removes the queue's records.
  struct PutDedup {
    uint64_t queue_id = 0;
    std::string key;  // 1 to kMaxDedupKeyBytes bytes
    uint64_t message_id = 0;
    int64_t expires_at_ms = 0;  // Unix ms: the key is forgotten from then on
    // The publisher's time (Unix ms, the broker's clock): a record that expired by then counts
    // as absent. Compaction drops expired records by the system clock (dedup_expiry.h).
    int64_t now_ms = 0;
    uint32_t outcome = 0;  // its index in the batch's dedup_outcomes() (AddDedup sets it)
  };
  // The large kinds, all rare (topology, users, vhosts, policies, a redrive's state), are kept
  // behind a pointer: an op then takes what the largest common kind does, about a third of a
  // redrive's state, and a batch of publishes (one or two ops each) writes that much less
  // memory (docs/benchmarks.md, "Room for the next batch"). Visit hands each op as added.
  template <typename T>
  static constexpr bool kBoxed =
      std::is_same_v<T, PutExchange> || std::is_same_v<T, PutQueue> ||
      std::is_same_v<T, PutBinding> || std::is_same_v<T, RemoveBinding> ||
      std::is_same_v<T, PutUser> || std::is_same_v<T, PutVhost> || std::is_same_v<T, PutPolicy> ||
      std::is_same_v<T, PutRedrive>;
  template <typename T>
  using Stored = std::conditional_t<kBoxed<T>, std::unique_ptr<const T>, T>;
  using Op =
      std::variant<Stored<PutMessage>, Stored<PutEntry>, Stored<RemoveEntry>, Stored<PurgeRange>,
                   Stored<PutExchange>, Stored<RemoveExchange>, Stored<PutQueue>,
                   Stored<RemoveQueue>, Stored<PutBinding>, Stored<RemoveBinding>, Stored<PutUser>,
                   Stored<RemoveUser>, Stored<MarkDelivered>, Stored<PutDelayed>,
                   Stored<RemoveDelayed>, Stored<DelayEntry>, Stored<RemoveAllDelayed>,
                   Stored<PutRedrive>, Stored<PutDedup>, Stored<PutVhost>, Stored<RemoveVhost>,
                   Stored<PutPolicy>, Stored<RemovePolicy>>;
  // Calls `f` with the op as it was added (a boxed kind's pointee): f(const PutQueue&), etc.
  template <typename F>
  static void Visit(const Op& op, F&& f) {
    std::visit(
        [&f](const auto& o) {
          if constexpr (detail::kIsBoxedOp<std::decay_t<decltype(o)>>) {
            f(*o);
          } else {
            f(o);
          }
        },
        op);
  }

  // Room for `ops` ops and `dedups` PutDedups before either grows (a hint: the batch before's
  // sizes, so that one built op by op does not move its ops at every doubling).
  void Reserve(size_t ops, size_t dedups) {
    ops_.reserve(ops);
    dedup_hint_ = dedups;
  }
  template <typename T>
  void Add(T op) {
    static_assert(!std::is_same_v<T, PutDedup>, "a PutDedup is added with AddDedup");
    if constexpr (kBoxed<T>) {
      ops_.emplace_back(std::make_unique<const T>(std::move(op)));
    } else {
      ops_.emplace_back(std::move(op));
    }
  }
  // Adds a PutDedup; its outcome will be (*dedup_outcomes())[the index returned].
  uint32_t AddDedup(PutDedup op) {
    if (!dedup_outcomes_) {
      dedup_outcomes_ = std::make_shared<DedupOutcomes>();
      dedup_outcomes_->reserve(dedup_hint_);
    }
    const auto index = static_cast<uint32_t>(dedup_outcomes_->size());
    dedup_outcomes_->emplace_back();
    op.outcome = index;
    ops_.emplace_back(std::move(op));
    return index;
  }
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  const std::vector<Op>& ops() const { return ops_; }
  // Null while the batch has no PutDedup.
  const std::shared_ptr<DedupOutcomes>& dedup_outcomes() const { return dedup_outcomes_; }

 private:
  std::vector<Op> ops_;
  std::shared_ptr<DedupOutcomes> dedup_outcomes_;
  size_t dedup_hint_ = 0;  // Reserve's: how many outcomes to make room for
};

// One lane of a queue as found on disk at start-up (see kLaneShift). Recovery does not walk a
// queue's entries (that would take seconds for millions of messages): it finds the first and
// last of each lane, and the exact count follows from CountRecoveredQueues.
struct StoredLane {
  uint8_t lane = 0;
  uint64_t first_seq = 0;  // of the first entry; 0 when empty
  uint64_t next_seq = 1;   // one past the last entry, and past every purged range of the lane
  // Messages of the lane up to this sequence number had been delivered (MarkDelivered);
  // 0 = none.
  uint64_t delivered_through = 0;
  // Sequence numbers between first_seq and the last entry that purged ranges hide.
  uint64_t purged_span = 0;
  // An upper bound on the entries (acks leave gaps): the span from the first to the last,
  // less what purges hide.
  uint64_t estimated_messages() const {
    return first_seq == 0 ? 0 : next_seq - first_seq - purged_span;
  }
};

struct StoredQueue {
  QueueSpec spec;
  uint64_t queue_id = 0;
  bool has_delayed = false;  // its timeline is not empty (counted later, like the entries)
  // In lane order: lane 0 always (empty or not), and every other lane that has entries, a
  // delivery mark or a purged range.
  std::vector<StoredLane> lanes = {StoredLane{}};
  uint64_t estimated_messages() const {
    uint64_t n = 0;
    for (const StoredLane& lane : lanes) n += lane.estimated_messages();
    return n;
  }
};

struct RecoveredState {
  std::vector<StoredVhost> vhosts;  // every vhost's record ("/" has one only with limits)
  std::vector<ExchangeSpec> exchanges;
  std::vector<StoredQueue> queues;
  std::vector<BindingSpec> bindings;
  std::vector<StoredUser> users;
  std::vector<PolicyInfo> policies;
  std::vector<StoredRedrive> redrives;  // of existing queues
  std::vector<StoredPurge> purges;      // of existing queues, still being removed
  uint64_t next_queue_id = 1;
  uint64_t max_message_id = 0;
  // Queues that no longer exist but left entries or delayed messages (a deletion the crash
  // interrupted): the store removes their entries in the background (from
  // SetReclaimCallback on); their timelines are the broker's to remove (RemoveAllDelayed).
  std::vector<uint64_t> orphaned_queue_ids;
};

struct LoadedMessage {
  uint64_t seq = 0;
  uint64_t message_id = 0;
  uint32_t receive_count = 0;
  uint8_t flags = 0;
  EnvelopePtr envelope;  // null when the body is missing (the entry should be removed)
  int64_t due_ms = 0;    // LoadDelayed only (seq is then 0)
  int64_t first_received_at_ms = 0;
  FailuresPtr failures;
};

// Where a delayed message is (FindDelayed).
struct DelayedRef {
  int64_t due_ms = 0;
  uint8_t flags = 0;
};

using CommitCallback = std::function<void(Status)>;
// A step of a purge's removal: `removed` more entries of queue `queue_id` are off the disk;
// `finished` when one of its purged ranges is removed entirely.
using ReclaimCallback = std::function<void(uint64_t queue_id, uint64_t removed, bool finished)>;
using LoadCallback = std::function<void(Result<std::vector<LoadedMessage>>)>;
using FindDelayedCallback = std::function<void(Result<std::optional<DelayedRef>>)>;
enum class CountKind { kEntries, kDelayed };
// (queue id, what was counted, how many it had at Recover()); called once per recovered
// non-empty queue and kind, with kCountUnknown when the count could not be finished (the
// database was reopened meanwhile).
// `lane`: the lane counted (kEntries; 0 for kDelayed).
using CountCallback =
    std::function<void(uint64_t queue_id, CountKind kind, uint64_t count, uint8_t lane)>;
using BackupCallback = std::function<void(Result<BackupInfo>)>;
inline constexpr uint64_t kCountUnknown = UINT64_MAX;

class MessageStore {
 public:
  virtual ~MessageStore() = default;

  // Reads what the last run left and drops what must not survive a restart. Call once,
  // before the first Commit.
  virtual Result<RecoveredState> Recover() = 0;

  // Applies `batch` after every batch committed before it. `done` gets OK once it is written,
  // and once it is synced to disk when `sync` is set. After a failed write the store refuses
  // every later batch with the same error until it has recovered (it retries by itself).
  virtual void Commit(StoreBatch batch, bool sync, CommitCallback done) = 0;

  // Reads entries of `queue_id` with from_seq <= seq < to_seq, at most `limit` and about
  // `max_bytes` of bodies (at least one), in sequence order, with their messages. Sees every
  // batch committed before the call, and `done` runs after their callbacks (the broker counts
  // a paged publish before its commit answers on that: Queue::PageUndecided).
  virtual void Load(uint64_t queue_id, uint64_t from_seq, uint64_t to_seq, uint32_t limit,
                    uint64_t max_bytes, LoadCallback done) = 0;

  // Reads up to `limit` (and about `max_bytes`) delayed messages of a queue in due order,
  // starting at (from_due_ms, from_message_id) inclusive, with their messages. Sees every batch
  // committed before the call.
  virtual void LoadDelayed(uint64_t queue_id, int64_t from_due_ms, uint64_t from_message_id,
                           uint32_t limit, uint64_t max_bytes, LoadCallback done) = 0;

  // Finds a delayed message of a queue by id: nullopt when it is not on the timeline. Sees
  // every batch committed before the call.
  virtual void FindDelayed(uint64_t queue_id, uint64_t message_id, FindDelayedCallback done) = 0;

  // Counts, in the background, the entries each recovered queue had at Recover(), and reports
  // each count through `done`. Loads keep being served meanwhile.
  virtual void CountRecoveredQueues(CountCallback done) = 0;

  // Where the background removal of purged ranges reports (through the PostFn). Call once,
  // after Recover and before the first Commit: the ranges Recover found start then.
  virtual void SetReclaimCallback(ReclaimCallback progress) = 0;

  // Writes a consistent copy of the store into `directory`/store, off the writer thread, while
  // commits go on (docs/operations.md, "Backup and restore"). Every batch committed before the
  // call is in the copy. `directory` must be absolute and must not exist (its parent must), or
  // be an empty directory; nothing is left behind when it fails. One at a time: another one
  // meanwhile gets kResourceLocked.
  virtual void Backup(std::string directory, BackupCallback done) = 0;

  // Writes everything committed so far, runs the remaining callbacks and stops the store's
  // threads. Later calls to Commit or Load fail with kShuttingDown.
  virtual void Close() = 0;

  // Ok while the store takes new messages; kStoreFull (with the reason) while the disk is
  // below its reserve (store/disk_guard.h). Removals, acks and topology still go through.
  // Any thread; cheap.
  virtual Status AcceptingMessages() const { return Status::Ok(); }
};

}  // namespace wharf::store
