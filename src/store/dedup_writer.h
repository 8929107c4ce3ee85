// store/dedup_writer.h
//
// DedupWriter is the writer's side of publish deduplication windows (docs/storage.md,
// "Deduplication is decided by the writer"; docs/lifecycle.md, "Deduplication"). Before a
// write group is applied, Prefetch decides every PutDedup of the group: it takes the keys
// above their queue's highest record, and those in a span it knows holds no record (a
// stream), as new without a read, reads the others in one MultiGet, and looks those within
// the span of the queue's runs up among them. Applying each PutDedup (Apply) then writes its
// run's record (keys.h: new keys of a queue with no record between them, in one value), or
// marks its own for WriteRecords to write in key order once the group's ops are applied, or
// reports the duplicate, whose entry RocksDbStore::Apply does not write.
//
// State: what it knows of each window (DedupBounds: three keys, a few gaps and a few streams per
// queue, whatever the window holds) and the group being written. Everything it keeps is read from
// the store again when it is forgotten (Reset, a failed write), so it is never more than a way to
// read less.
//
// Thread safety: the store's writer thread only (RocksDbStore owns one).
#pragma once

#include <algorithm>
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
    uint64_t stream_keys = 0;     // keys below the highest found new in a stream, unread
    uint64_t streams = 0;         // streams learnt
  };

  // The database and its "dedup" family, at each (re)open; forgets every window.
  void Reset(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family);

  // Decides the PutDedups of a write group's batches (in the order they are applied), and
  // writes into `wb` the runs its lookups found interleaved (before the group's ops: a queue
  // removed in the group takes their records with it).
  Counts Prefetch(const std::vector<const StoreBatch*>& batches, rocksdb::WriteBatch* wb);
  // Applies a PutDedup of `batch`: writes its run into `wb` (once), or marks its record to be
  // written by WriteRecords, or sets *duplicate when another message holds the key (nothing
  // written).
  Status Apply(const StoreBatch& batch, const StoreBatch::PutDedup& op, rocksdb::WriteBatch* wb,
               bool* duplicate);
  // Writes into `wb` the records Apply marked, in key order, after the group's ops: RocksDB
  // inserts each into the memtable's skip list from where the one before went in, so a
  // group's keys in no order cost it less than in the order they came (docs/storage.md,
  // "Deduplication is decided by the writer").
  void WriteRecords(rocksdb::WriteBatch* wb);
  // A queue removed in the group: its records and runs go, with what is known of its window
  // (and the records of this group Apply marked are written before they go).
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
    // exclusive, no run key between them. A run the writer writes later may land in one (in a
    // stream, or above the highest key when the runs there have expired): once that write
    // succeeded, the gaps it overlaps are forgotten (Written). At most kMaxGaps, the oldest
    // replaced first.
    std::vector<std::pair<std::string, std::string>> gaps;
    size_t next_gap = 0;  // the one to replace next
    void Learn(std::pair<std::string, std::string> gap);
    // Spans below the highest key that hold no record of the queue at all, alone or in a run
    // (a publisher's own keys that rise, below another's: "streams"). A key in one is new
    // without a read, and a group's keys in one are disjoint from every record, so they are
    // written as a run as the keys above the highest are. Learnt by two seeks above the
    // highest of a block of keys a group read and found new (LearnStream); `lower` then rises
    // to the highest key each group writes in it. At most kMaxStreams, pairwise disjoint (a
    // `lower` whose record has expired and gone is still a bound: no stream is learnt from it
    // up), and every key written stays outside all of them but as a `lower`, so a span never
    // holds a record (the keys of a group are decided before any of its spans is learnt).
    // Kept in key order (by `lower`, which no change reorders: they are disjoint and a lower
    // end only rises within its own span), so a group's sorted keys meet them in turn.
    struct Stream {
      std::string lower;    // exclusive: the highest key written in or below it
      std::string upper;    // exclusive: a record, a run's first key, the highest key, a key
                            // of the group that learnt it, or another stream's lower
      bool rising = false;  // its last keys were a run: the next go in one however few
      uint64_t used = 0;    // the group that last had keys in it, or learnt it (group_)
      bool split = false;   // learnt within a block (LearnStreamsWithin)
    };
    std::vector<Stream> streams;
    // Takes chances 1, 2, 4, 8... of those it is offered, up to every kMaxLearnEvery-th, and
    // every one again after a Reset.
    struct BackOff {
      uint32_t every = 1;
      uint32_t left = 0;  // chances to pass before the next is taken
      // Whether to take this chance.
      bool Take() {
        if (left > 0) {
          --left;
          return false;
        }
        left = every - 1;
        every = std::min(every * 2, kMaxLearnEvery);
        return true;
      }
      void Reset() { *this = BackOff(); }
    };
    // Streams are learnt at every chance (a block of keys read and found new) while they
    // serve (a group with keys in one resets it). Keys in no order, whose streams few later
    // keys fall in, so seldom pay its two seeks: at every group they cost wharfd about 0.4 µs
    // a message more (docs/benchmarks.md, "Streams").
    BackOff learning;
    // The same for learning within blocks (LearnStreamsWithin), whose chances are the blocks
    // learnt from while streams serve that can split (16 keys or more: the top eight and eight
    // below; smaller ones would raise the back-off without a try), and which serve when a
    // stream learnt so has keys: in a queue where some publishers' keys rise and others' are
    // in no order (body hashes), the streams serve at every group, and the splits of the
    // blocks in no order learn spans no key falls in, up to 16 a block, that would push out a
    // publisher's stream idle for as few as 16 groups.
    BackOff splitting;
    // Adds `stream` in its place; with kMaxStreams already, the one that served longest ago
    // goes (a publisher that stopped, or a span between keys in no order that none fell in).
    void Open(Stream stream);
    // Drops the gaps that overlap [low, high], where a run was just written.
    void ForgetGapsOver(const std::string& low, const std::string& high);
  };
  static constexpr size_t kMaxGaps = 16;
  // A queue's publishers below its highest key, each with keys of its own that rise, that keep
  // their keys unread. A stream holds two keys: about 180 bytes with keys of 40 bytes (46 KB a
  // queue), at most about 370 (95 KB) with the longest (kMaxDedupKeyBytes).
  static constexpr size_t kMaxStreams = 256;
  static constexpr uint32_t kMaxLearnEvery = 1024;
  // Two seeks each: a group's block of 64 publishers' keys learns their streams in four groups.
  static constexpr size_t kMaxStreamsLearntInBlock = 16;
  static constexpr uint32_t kNoRun = UINT32_MAX;

  // The group's PutDedup ops with their keys (DedupKey, made once: the record is written under
  // the same string), sorted by key and, within a key, in the order Apply meets them; each op's
  // outcome says where it is here (DedupOutcome::plan).
  struct PlannedDedup {
    std::string key;
    const StoreBatch::PutDedup* op = nullptr;
    DedupOutcome* outcome = nullptr;
    uint32_t run = kNoRun;  // recorded in runs_[run] rather than alone
    bool write = false;     // its record is new and alone: WriteRecords writes it
  };
  // The group's runs, each written whole by the first of its keys that Apply meets.
  struct Run {
    std::string key;          // DedupRunKey of its highest key
    DedupRunBuilder records;  // its records
    bool written = false;
  };
  // A run this group writes: gaps between runs that overlap it, learnt from the store as it
  // was, are no longer gaps once it is written (Written).
  struct NewRun {
    uint64_t queue_id = 0;
    std::string low;   // its first key
    std::string high;  // its last
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
  // Writes the record of `op` under `key` (its DedupKey) into `wb`.
  void PutRecord(const std::string& key, const StoreBatch::PutDedup& op, rocksdb::WriteBatch* wb);
  // Writes `planned`'s record (marked by Apply) into `wb`, and unmarks it.
  void WriteRecord(PlannedDedup& planned, rocksdb::WriteBatch* wb);
  // Opens a stream above `top` (a key this group read and found new, and writes), up to the
  // next record of its queue (alone or in a run), the highest key, the next key of the group
  // (`next`, empty: none) and the next stream, whichever is lowest. `it`: an iterator over the
  // family (made by the caller, reused). Nothing is learnt when `top` is in a run's span (a
  // run this group converts: FindInRun) or a read fails. Whether one was learnt.
  bool LearnStream(rocksdb::Iterator* it, uint64_t queue_id, DedupBounds* bounds,
                   const std::string& top, const std::string& next, bool split = false);
  // Within a block of the group's distinct keys [begin, end) (plan_[firsts[k]].key: the k-th)
  // that were read and found new, besides the stream above its highest key: streams above
  // the highest key of each publisher below, up to the next key of the group (LearnStream),
  // at most kMaxStreamsLearntInBlock tried. How many were learnt.
  size_t LearnStreamsWithin(rocksdb::Iterator* it, uint64_t queue_id, DedupBounds* bounds,
                            const std::vector<size_t>& firsts, size_t begin, size_t end);
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
  uint64_t group_ = 0;  // groups prefetched (Stream::used)
  // The group being written; cleared by Written.
  std::vector<PlannedDedup> plan_;
  std::vector<Run> runs_;
  std::vector<Conversion> conversions_;
  std::vector<NewRun> new_runs_;
  // Keys whose read failed in Prefetch are read again, one Get each, by Apply; those it
  // recorded in this group (DedupKey -> message id).
  std::unordered_map<std::string, uint64_t> unplanned_;
  std::string value_;  // the record being written (reused)
};

}  // namespace wharf::store
