// store/dedup_writer.h
//
// DedupWriter is the writer's side of publish deduplication windows (docs/storage.md,
// "Deduplication is decided by the writer"; docs/lifecycle.md, "Deduplication"). Before a
// write group is applied, Prefetch decides every PutDedup of the group: it reads the keys at
// or below their queue's highest record in one MultiGet, looks those within the span of the
// queue's runs up among them, and takes the keys above the highest as new without a read.
// Applying each PutDedup (Apply) then writes its record, or its run's (keys.h: the keys of a
// queue above every record of it, at least kMinDedupRunKeys, in one value), or reports the
// duplicate, whose entry RocksDbStore::Apply does not write.
//
// State: what it knows of each window (DedupBounds: two or three keys and a few gaps per queue,
// whatever the window holds) and the group being written. Everything it keeps is read from the
// store again when it is forgotten (Reset, a failed write), so it is never more than a way to
// read less.
//
// Thread safety: the store's writer thread only (RocksDbStore owns one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/keys.h"
#include "store/message_store.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Iterator;
class WriteBatch;
}  // namespace rocksdb

namespace wharf::store {

class DedupWriter {
 public:
  // What one group cost (StoreCounters' dedup figures).
  struct Counts {
    uint64_t reads = 0;           // keys read from the store
    uint64_t runs = 0;            // runs made
    uint64_t runs_converted = 0;  // runs found interleaved, rewritten as records of their own
    uint64_t run_lookups = 0;     // keys looked up among runs
  };

  // The database and its "dedup" family, at each (re)open; forgets every window.
  void Reset(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family);

  // Decides the PutDedups of a write group's batches (in the order they are applied), and
  // writes into `wb` the runs its lookups found interleaved (before the group's ops: a queue
  // removed in the group takes their records with it).
  Counts Prefetch(const std::vector<const StoreBatch*>& batches, rocksdb::WriteBatch* wb);
  // Applies a PutDedup of `batch`: writes its record (or its run, once) into `wb`, or sets
  // *duplicate when another message holds the key (nothing written).
  Status Apply(const StoreBatch& batch, const StoreBatch::PutDedup& op, rocksdb::WriteBatch* wb,
               bool* duplicate);
  // A queue removed in the group: its records and runs go, with what is known of its window.
  void RemoveQueue(uint64_t queue_id, rocksdb::WriteBatch* wb);
  // The group's write is done (ok) or failed: the gaps its conversions left are learnt, or
  // every window is forgotten; the group's state is cleared either way.
  void Written(bool ok);

 private:
  // What the writer knows of a queue's window since it was read (BoundsOf).
  struct DedupBounds {
    // The highest record key (DedupKey; empty: none). Every record of the queue is at or below
    // it, so a key above it is new without a read: keys that rise with time (sequence numbers,
    // ULIDs, timestamps) are never read, and they are written in runs.
    std::string high;
    // The lowest and highest keys in a run (DedupKey; empty: no run). Only keys between the
    // two are looked up among runs.
    std::string runs_low;
    std::string runs_high;
    // The highest record is in a run of kMinDedupRunKeys or more keys (or after one, in runs
    // alone), and no run was converted since: keys above the highest go into a run however few
    // they are. Written alone, they would sort before every run key ('k' before 'r'), so the
    // table holding them would overlap every table before it, and RocksDB merges overlapping
    // tables where it moves the others (docs/benchmarks.md, "Runs").
    bool rising = false;
    // Spans between runs, learnt from lookups that fell in one: (lower, upper), both
    // exclusive, no run key between them. Runs are only made above the highest key, so a gap
    // stays one. Several publishers, each with keys of its own that rise, make runs of the
    // highest publisher's keys only, and the others' keys fall in a few such gaps. At most
    // kMaxGaps, the oldest replaced first.
    std::vector<std::pair<std::string, std::string>> gaps;
    size_t next_gap = 0;  // the one to replace next
    void Learn(std::pair<std::string, std::string> gap);
  };
  static constexpr size_t kMaxGaps = 16;
  static constexpr uint32_t kNoRun = UINT32_MAX;

  // The group's PutDedup ops with their keys (DedupKey, made once: the record is written under
  // the same string), sorted by key and, within a key, in the order Apply meets them; each op's
  // outcome says where it is here (DedupOutcome::plan).
  struct PlannedDedup {
    std::string key;
    const StoreBatch::PutDedup* op = nullptr;
    DedupOutcome* outcome = nullptr;
    uint32_t run = kNoRun;  // recorded in runs_[run] rather than alone
  };
  // The group's runs, each written whole by the first of its keys that Apply meets.
  struct Run {
    std::string key;    // DedupRunKey of its highest key
    std::string value;  // its records
    bool written = false;
  };
  // A run that a lookup of this group found interleaved with other keys (a key in its span
  // that it does not hold): rewritten as records of their own in this group's write, so that
  // no later key in its span needs a lookup among runs. A run of keys in no order (made when a
  // window's first group was small) would otherwise cost a lookup for most keys until it
  // expired. With the gap it leaves, learnt once the write succeeded.
  struct Conversion {
    uint64_t queue_id = 0;
    std::string key;                          // the run's
    std::string value;                        // its records
    std::pair<std::string, std::string> gap;  // what no run holds after the write
  };

  // The queue's entry of bounds_, read from the store the first time; null when that read
  // failed (then every key of the queue is read, and looked up among runs).
  DedupBounds* BoundsOf(uint64_t queue_id);
  // The record of `key` (a DedupKey) among the runs of its queue, if one holds it. `runs` is
  // an iterator over the family (made by the caller, reused for a group's keys). With
  // `bounds` (Prefetch's lookups), a key that no run holds teaches it the gap it fell in
  // (between two runs, or above every run), or, in the span of a run, has the run converted.
  Status FindInRun(rocksdb::Iterator* runs, const std::string& key, DedupBounds* bounds,
                   std::optional<DedupValue>* record);
  void WriteConversions(rocksdb::WriteBatch* wb);
  // Of two records of one key (alone and in a run), the one that expires last: the other, if
  // any, had expired when it was written.
  static std::optional<DedupValue> Later(const std::optional<DedupValue>& a,
                                         const std::optional<DedupValue>& b);
  // Whether `key` (at or below its queue's highest) must be looked up among runs.
  static bool MayBeInRun(const DedupBounds* bounds, const std::string& key);
  // Whether `key` is in a gap between runs that `bounds` has learnt.
  static bool InGap(const DedupBounds* bounds, const std::string& key);

  rocksdb::DB* db_ = nullptr;
  rocksdb::ColumnFamilyHandle* family_ = nullptr;
  std::unordered_map<uint64_t, DedupBounds> bounds_;
  // The group being written; cleared by Written.
  std::vector<PlannedDedup> plan_;
  std::vector<Run> runs_;
  std::vector<Conversion> conversions_;
  // Keys whose read failed in Prefetch are read again, one Get each, by Apply; those it
  // recorded in this group (DedupKey -> message id).
  std::unordered_map<std::string, uint64_t> unplanned_;
  std::string value_;  // the record being written (reused)
};

}  // namespace wharf::store
