// broker/delay_timeline.h
//
// DelayTimeline holds one queue's delayed messages: routed to the queue at publish, invisible
// until their due time, then released to the tail of the queue's ready messages
// (docs/scheduler.md). Keys are (due time, message id), so messages due at the same
// millisecond are released in publish order.
//
// A timeline is "backed" when its queue is durable and there is a store: every message in it
// is then also on disk (store/keys.h, the "delayed" column family), and RAM holds only a prefix
// of the timeline, the next `Limits` worth of messages; the rest is counted, not kept. The
// invariant is that every key in RAM is below `disk_from()` and every key on disk only is at or
// above it, so the RAM head is always the queue's earliest message, and loading more means
// reading the disk in key order from `disk_from()`. A timeline that is not backed keeps
// everything in RAM.
//
// While a load is in flight (BeginLoad .. AddLoaded), new messages at or above `disk_from()`
// go to RAM as well (the load may or may not see them on disk), and nothing is evicted;
// AddLoaded skips loaded copies of messages already in RAM or cancelled meanwhile, then evicts
// what the new boundary and the limits require. Evicting never writes: a backed message is on
// disk already.
//
// Thread safety: confined to the broker thread, like its Queue.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "broker/envelope.h"

namespace wharf::broker {

struct DelayKey {
  int64_t due_ms = 0;  // Unix milliseconds (wall clock)
  uint64_t message_id = 0;
  auto operator<=>(const DelayKey&) const = default;
};
inline constexpr DelayKey kDelayKeyMin{std::numeric_limits<int64_t>::min(), 0};
inline constexpr DelayKey kDelayKeyMax{std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<uint64_t>::max()};

// A delayed message as the timeline keeps it.
struct DelayedMessage {
  EnvelopePtr envelope;
  uint32_t receive_count = 0;
  uint8_t store_flags = 0;           // the on-disk entry's flags (store::kEntry*) when backed
  int64_t first_received_at_ms = 0;  // attempt accounting, kept across the wait
  FailuresPtr failures;
};

class DelayTimeline {
 public:
  struct Limits {
    uint64_t max_messages = 10'000;  // in RAM, per queue, when backed
    uint64_t max_bytes = 8u << 20;
  };
  // One message read back from the store: `message` is null when the broker dropped it
  // (no readable body, or a non-persistent message from before a restart).
  struct Loaded {
    DelayKey key;
    std::optional<DelayedMessage> message;
  };

  DelayTimeline(bool backed, Limits limits) : backed_(backed), limits_(limits) {}

  bool backed() const { return backed_; }

  // Adds a message. Returns false when it is kept on disk only (backed timelines: its key is
  // beyond the RAM prefix); the caller has written it to the store either way.
  bool Add(DelayKey key, DelayedMessage message);
  // Removes and returns, in key order, up to `limit` messages due at or before `now_ms`.
  std::vector<std::pair<DelayKey, DelayedMessage>> TakeDue(int64_t now_ms, size_t limit);
  // The earliest due time in RAM; nullopt when RAM holds nothing (disk may: see NeedsLoad).
  std::optional<int64_t> head_due() const;

  // --- Cancel ---
  // Removes the message if RAM holds it.
  std::optional<std::pair<DelayKey, DelayedMessage>> RemoveFromRam(uint64_t message_id);
  // The store holds `key`: true when it is on disk only (not loaded, not released), in which
  // case it is no longer counted and the caller removes it from the store.
  bool ClaimOnDisk(DelayKey key);

  // --- Loading (backed only) ---
  bool NeedsLoad() const;
  DelayKey disk_from() const { return disk_from_; }
  void BeginLoad() { loading_ = true; }
  bool loading() const { return loading_; }
  // Takes what a load read, in key order from disk_from(); `reached_end` when the store had
  // nothing more.
  void AddLoaded(std::vector<Loaded> loaded, bool reached_end);
  // The load failed: it may be retried.
  void AbortLoad() { AddLoaded({}, false); }

  // --- Recovery ---
  // Everything is on disk and not yet counted (start-up).
  void RestoreFromDisk();
  // The store counted `count` delayed messages at recovery. Ignored once a load reached the
  // end of the disk.
  void SetRecoveredCount(uint64_t count);
  bool count_estimated() const { return count_unknown_; }

  // Drops everything (purge); returns how many messages that was (an estimate while the
  // recovered count is unknown). The caller removes the disk's copy.
  uint64_t Clear();

  uint64_t size() const { return ram_.size() + disk_count(); }
  uint64_t ram_size() const { return ram_.size(); }
  uint64_t disk_count() const;
  uint64_t generation() const { return generation_; }  // bumped by Clear

  // Listing a timeline that is not backed: up to `limit` messages with keys above `after`.
  std::vector<std::pair<DelayKey, DelayedMessage>> ListRam(DelayKey after, size_t limit) const;

 private:
  void Evict(std::map<DelayKey, DelayedMessage>::iterator it);
  void EnforceLimits();
  void NoteDiskAdded() { ++disk_delta_; }
  void NoteDiskRemoved() { --disk_delta_; }

  bool backed_;
  Limits limits_;
  std::map<DelayKey, DelayedMessage> ram_;
  std::unordered_map<uint64_t, int64_t> ram_ids_;  // message id -> due, for cancel
  uint64_t ram_bytes_ = 0;
  DelayKey disk_from_ = kDelayKeyMax;  // kDelayKeyMax: nothing is on disk only
  // Messages on disk only = recovered count (once known) + disk_delta_.
  bool count_unknown_ = false;
  uint64_t recovered_count_ = 0;
  int64_t disk_delta_ = 0;
  bool loading_ = false;
  // Cancelled while on disk only, until a load passes them: id -> key.
  std::unordered_map<uint64_t, DelayKey> claimed_;
  std::unordered_set<uint64_t> added_during_load_;  // added at or beyond disk_from_ meanwhile
  uint64_t generation_ = 0;
};

}  // namespace wharf::broker
