// store/rocksdb_store.h
//
// RocksDbStore is the MessageStore on RocksDB (layout: store/keys.h; design: docs/storage.md).
//
// Two threads of its own:
//   writer - takes every Commit queued since its last write, applies them all to one
//            rocksdb::WriteBatch and writes it with one WAL sync if any of them asked for
//            durability (group commit). While it writes, the next group forms. It is the only
//            thread that writes, so it also owns the reference counts of shared bodies.
//   reader - serves Load: an iterator over one queue's entry range (bounded on both sides, so
//            it never walks the tombstones of acked entries) and a MultiGet of their bodies.
// and one more while a backup runs (wharf-backup: a RocksDB checkpoint, which the writer
// starts once the commits queued before the backup are written; rocksdb_store_backup.cc).
// A Load is queued behind the writes committed before it and handed to the reader only once
// they are written, so it sees them.
//
// Durability failures are sticky (as leveldb's background error): after a failed write every
// Commit fails with that error until RocksDB resumes, which the writer retries each second.
//
// Thread safety: Commit, Load and Close from one thread at a time; Recover before the first
// Commit. Callbacks run through the PostFn.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "common/histogram.h"
#include "store/dedup_writer.h"
#include "store/disk_guard.h"
#include "store/keys.h"
#include "store/message_store.h"
#include "store/write_faults.h"

namespace rocksdb {
class ColumnFamilyHandle;
struct ColumnFamilyOptions;
class CompactOnDeletionCollectorFactory;
class DB;
class Env;
class FileSystem;
class Snapshot;
class WriteBatch;
}  // namespace rocksdb

namespace wharf::store {

class BackgroundErrors;

struct StoreOptions {
  std::string path;  // the RocksDB directory (created if missing)
  // Memory RocksDB may use, whatever the backlog: memtables of all column families together,
  // and the block cache (index and filter blocks are charged to it) beyond the memtables,
  // whose memory is charged to the same cache.
  uint64_t memtable_bytes = 64u << 20;
  uint64_t block_cache_bytes = 32u << 20;
  // Bodies at least this large go to blob files. 0 (the default): none do. Message keys rise
  // with time, so flushed files do not overlap and compaction moves them without rewriting:
  // blob files save no writes here and made 64 KiB drains a third slower (docs/storage.md).
  uint64_t min_blob_bytes = 0;
  // A full disk (store/disk_guard.h, docs/storage.md): no new message is taken while the disk
  // has less than disk_reserve_bytes free; a ballast file of ballast_bytes at ballast_path
  // (none when empty or 0) is deleted when the disk fills anyway, or at a start on a full
  // disk. Below disk_low_bytes free (or twice the reserve) the writer flushes and asks for
  // compaction after writes, at most once a second, so logs and drained messages give their
  // space back at once.
  uint64_t disk_reserve_bytes = 64u << 20;
  std::string ballast_path;
  uint64_t ballast_bytes = 0;
  uint64_t disk_low_bytes = 0;
  // Read every table of the store at start and verify each block's checksum (DB::VerifyChecksum;
  // docs/storage.md, "Corruption"): a damaged table then refuses the start instead of failing
  // the loads that reach it. Costs a read of the whole store at each start.
  bool verify_checksums_at_start = false;
  // Tests only: the free disk space to assume, read at each check (nullopt: the real one).
  std::function<std::optional<uint64_t>()> free_bytes_for_tests;
  // Tests only: makes disk writes fail on demand (store/write_faults.h).
  std::shared_ptr<WriteFaults> write_faults;
  // Tests only: the file system under the store (nullptr: the real one). The power-loss tests
  // put one here that forgets unsynced writes (tests/unit/store/power_cut_fs.h).
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

// Figures for benchmarks and metrics. Monotonic counters, read from any thread.
struct StoreCounters {
  uint64_t writes = 0;         // RocksDB writes (groups)
  uint64_t syncs = 0;          // of which synced
  uint64_t commits = 0;        // Commit() calls written
  uint64_t bytes_written = 0;  // WriteBatch bytes
  uint64_t elided = 0;         // entries put and removed in one group: never written
  // Deduplication keys read from the store: a key above every record of its queue, or in a
  // stream, needs none (store/dedup_writer.h).
  uint64_t dedup_reads = 0;
  uint64_t dedup_runs = 0;            // runs written: new keys no record is between, one value
  uint64_t dedup_runs_converted = 0;  // runs a lookup found interleaved: rewritten as records
  uint64_t dedup_run_lookups = 0;     // keys looked up among runs (only those within their span)
  uint64_t dedup_stream_keys = 0;     // keys below the highest found new in a stream, unread
  uint64_t dedup_streams = 0;         // streams learnt (two seeks each)
  Histogram sync_ms;                  // how long each synced write took (the fsync included)
};

class RocksDbStore final : public MessageStore {
 public:
  static Result<std::unique_ptr<RocksDbStore>> Open(const StoreOptions& options, PostFn post);
  ~RocksDbStore() override;

  RocksDbStore(const RocksDbStore&) = delete;
  RocksDbStore& operator=(const RocksDbStore&) = delete;

  Result<RecoveredState> Recover() override;
  void Commit(StoreBatch batch, bool sync, CommitCallback done) override;
  void Load(uint64_t queue_id, uint64_t from_seq, uint64_t to_seq, uint32_t limit,
            uint64_t max_bytes, LoadCallback done) override;
  void LoadDelayed(uint64_t queue_id, int64_t from_due_ms, uint64_t from_message_id, uint32_t limit,
                   uint64_t max_bytes, LoadCallback done) override;
  void FindDelayed(uint64_t queue_id, uint64_t message_id, FindDelayedCallback done) override;
  void CountRecoveredQueues(CountCallback done) override;
  void SetReclaimCallback(ReclaimCallback progress) override;
  void Backup(std::string directory, BackupCallback done) override;
  Status AcceptingMessages() const override { return disk_.Accepting(); }
  void Close() override;

  StoreCounters counters() const;

  // Tests only: runs on the backup thread once the checkpoint is written, before it is moved
  // into place; a status other than OK fails the backup there (a failure midway). Set it
  // before the first Backup.
  void SetBackupHookForTests(std::function<Status()> hook) { backup_hook_ = std::move(hook); }

 private:
  struct CommitRequest {
    StoreBatch batch;
    bool sync = false;
    CommitCallback done;
  };
  struct LoadRequest {
    uint64_t queue_id = 0;
    uint64_t from_seq = 0;
    uint64_t to_seq = 0;
    uint32_t limit = 0;
    uint64_t max_bytes = 0;
    LoadCallback done;
    // A timeline (LoadDelayed) instead of entries: from (from_due, from_id) on.
    bool delayed = false;
    int64_t from_due = 0;
    uint64_t from_id = 0;
  };
  struct FindRequest {
    uint64_t queue_id = 0;
    uint64_t message_id = 0;
    FindDelayedCallback done;
  };
  struct BackupRequest {
    std::string directory;  // absolute, normalised
    BackupCallback done;
    std::chrono::steady_clock::time_point requested;
  };
  using Request = std::variant<CommitRequest, LoadRequest, FindRequest, BackupRequest>;
  // Counting the recovered queues, a slice at a time so that loads are served in between.
  struct CountJob {
    struct Range {
      uint64_t queue_id;
      CountKind kind;
      std::string lower;  // where counting resumes
      std::string upper;
      std::vector<std::pair<uint64_t, uint64_t>> skip;  // purged [from, to) seqs: not counted
      uint8_t lane = 0;                                 // kEntries: the lane counted
    };
    std::vector<Range> queues;  // still to count; the first one resumes at its lower key
    uint64_t counted = 0;       // of the first one so far
    CountCallback done;
  };
  using ReadJob = std::variant<LoadRequest, FindRequest, CountJob>;

  RocksDbStore(const StoreOptions& options, PostFn post);
  Status OpenDb();
  // Why the store at options_.path would not open or verify (`error`), with the damaged files
  // named (store/store_check.h) and the repair command.
  Status Damaged(const Status& error) const;
  // The family holding the entry with sequence number `seq` (its lane's, store/keys.h), or
  // nullptr when that family was never made: no entry of its lanes was ever written.
  rocksdb::ColumnFamilyHandle* EntriesFor(uint64_t seq) const {
    return entries_[LaneFamily(SeqLane(seq))].load(std::memory_order_acquire);
  }
  // Writer thread: the same, made first when it does not exist yet (a lane family is made
  // when one of its lanes is first written; docs/storage.md, "Priority lanes").
  Status EntriesForWrite(uint64_t seq, rocksdb::ColumnFamilyHandle** family);
  // Every open family: meta, messages, the entries' families made so far, delayed, dedup.
  std::vector<rocksdb::ColumnFamilyHandle*> AllFamilies() const;
  // Moves the entries an older format kept in "entries" into their lane's family (format 11;
  // Recover, before anything is read).
  Status MoveLaneEntries();
  // Copies the dedup records of formats 7 to 11 to their format-12 keys (DedupKey), leaving
  // out the expired ones, through `last`, the upgrade's last write (empty when called), which
  // it leaves holding the last copies and the removal of the old keys (Recover, upgrading:
  // one seek when there is none).
  Status CopyLegacyDedupRecords(rocksdb::WriteBatch* last);
  void WriterLoop();
  void ReaderLoop();

  // --- writer thread ---
  // Finds what this group both writes and removes (plan_), so it need not reach the disk.
  void PlanGroup(const std::deque<Request>& group);
  // Has dedup_writer_ decide the group's PutDedups (its conversions go into `wb`), and counts
  // what that read.
  void PrefetchDedup(const std::deque<Request>& group, rocksdb::WriteBatch* wb);
  // Adds `batch` to `wb`. Ops that must read what is already written (range removals) first
  // write `wb` as it stands.
  Status Apply(const StoreBatch& batch, rocksdb::WriteBatch* wb);
  Status Write(rocksdb::WriteBatch* wb, bool sync);
  Status Release(uint64_t message_id, bool shared, rocksdb::WriteBatch* wb);
  // Removes the next bounded step of the first purge in reclaims_ (entries, bodies, record)
  // in one write, then reports it.
  void ReclaimStep();
  bool ReclaimAllowed() const {
    return !options_.write_faults || options_.write_faults->reclaim_steps != 0;
  }
  // Writes a message into a queue's timeline (both keys).
  Status PutTimelineEntry(const EntryRef& entry, int64_t due_ms, rocksdb::WriteBatch* wb);
  // Deletes a queue's whole timeline and releases the bodies it held.
  Status RemoveTimeline(uint64_t queue_id, rocksdb::WriteBatch* wb);
  // Deletes the binding records that `doomed` selects.
  template <typename Pred>
  Status RemoveBindings(Pred doomed, rocksdb::WriteBatch* wb);
  void TryResume();
  // Between groups: reads the free disk space when due, makes or releases the ballast, and
  // on a low disk flushes and asks for compaction after removals (docs/storage.md).
  void WatchDisk();
  // Closes and opens the database again (after a failed WAL write). Holds db_mu_ exclusively.
  Status ReopenDb();

  // --- reader thread ---
  Result<std::vector<LoadedMessage>> DoLoad(const LoadRequest& request);
  Result<std::optional<DelayedRef>> DoFind(const FindRequest& request);
  // Counts one slice; returns false when the job is finished.
  bool CountSlice(CountJob* job);
  // Reports kCountUnknown for every queue the job has not counted.
  void AbandonCount(CountJob* job);

  // --- backups (rocksdb_store_backup.cc) ---
  // Writer thread, once the group holding the backup request is written: hands it to a new
  // backup thread with the highest message id written so far.
  void StartBackup(BackupRequest request);
  // Backup thread: the checkpoint, into a temporary directory moved into place when complete.
  Result<BackupInfo> RunBackup(const BackupRequest& request, uint64_t max_message_id);

  const StoreOptions options_;
  const PostFn post_;

  std::unique_ptr<rocksdb::Env> env_;  // only with write_faults or file_system: wraps it
  // db_ and the handles are replaced only by ReopenDb on the writer thread, under db_mu_
  // held exclusively; the reader holds it shared while it reads.
  std::shared_mutex db_mu_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;  // "default"
  rocksdb::ColumnFamilyHandle* messages_ = nullptr;
  // "entries", "entries.1"...: "entries" is always open; the others once made (nullptr
  // before). Stored by the writer thread (OpenDb, EntriesForWrite), loaded by the reader.
  std::array<std::atomic<rocksdb::ColumnFamilyHandle*>, kLaneFamilies> entries_{};
  // What a lane family is made with (OpenDb sets it, EntriesForWrite uses it).
  std::unique_ptr<rocksdb::ColumnFamilyOptions> entries_options_;
  rocksdb::ColumnFamilyHandle* delayed_ = nullptr;
  rocksdb::ColumnFamilyHandle* dedup_ = nullptr;

  // Guarded by mu_: the writer's queue.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> requests_;
  bool closing_ = false;
  StoreCounters counters_;  // written by the writer under mu_

  // Guarded by read_mu_: the reader's queue.
  std::mutex read_mu_;
  std::condition_variable read_cv_;
  std::deque<ReadJob> reads_;
  bool reads_closing_ = false;

  // Writer thread only.
  // Reference counts changed by the group being built (RocksDB cannot read them back from the
  // unwritten batch); cleared after each write, so it never grows with the backlog.
  std::unordered_map<uint64_t, uint32_t> references_;
  uint64_t max_message_id_ = 0;   // highest id written, kept in "M"
  uint64_t group_max_id_ = 0;     // highest id in the group being built
  bool unsynced_writes_ = false;  // written since the last sync
  struct PairHash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& p) const {
      return std::hash<uint64_t>()(p.first * 0x9e3779b97f4a7c15ull ^ p.second);
    }
  };
  // A message published and acked within one write group (a consumer keeping up) is neither
  // written nor deleted: the group is atomic, so no state between the two is ever visible.
  struct GroupPlan {
    std::unordered_set<std::pair<uint64_t, uint64_t>, PairHash> removed_entries;  // (queue, seq)
    std::unordered_set<std::pair<uint64_t, uint64_t>, PairHash> elided_entries;   // put, removed
    std::unordered_set<uint64_t> settled_messages;  // put and removed in all their queues
  } plan_;
  // The (queue id, message id) pairs of the batch being applied whose PutDedup found a
  // duplicate, so their entries are not written.
  std::unordered_set<std::pair<uint64_t, uint64_t>, PairHash> duplicates_;
  // Decides and writes the records of deduplication windows (store/dedup_writer.h).
  DedupWriter dedup_writer_;
  Status error_;  // sticky write error (writer thread)
  // Exchanges, queues, bindings, users and vhosts whose put was in a group that failed to write:
  // the broker keeps them in memory (the client got the error), so they are written again ahead of
  // every later group until one is written. Otherwise a message confirmed into such a queue after
  // the store recovered would lose its queue record, and with it the message, at the next start.
  // Writer thread only; bounded, as durable topology changes are refused while the store is
  // failing.
  StoreBatch unwritten_topology_;
  void KeepUnwrittenTopology(const std::deque<Request>& group);
  // The free-space reserve and ballast: written by the writer (and Open), read by anyone.
  DiskGuard disk_;
  std::shared_ptr<rocksdb::CompactOnDeletionCollectorFactory> deletions_;
  std::shared_ptr<BackgroundErrors> background_errors_;  // kept across reopens
  bool written_since_flush_ = false;  // writer: written since WatchDisk last flushed
  bool disk_low_ = false;             // writer: below disk_low_bytes (or twice the reserve)
  uint64_t written_since_watch_ = 0;  // writer: bytes written since WatchDisk last ran
  std::chrono::steady_clock::time_point compacted_at_{};
  std::chrono::steady_clock::time_point last_resume_;

  // Set by Recover, released when the recovered queues are counted (reader) or at Close.
  std::atomic<const rocksdb::Snapshot*> recovery_snapshot_{nullptr};
  std::vector<CountJob::Range> recovered_ranges_;

  // Purges being removed (docs/storage.md, "Purge"). Writer thread only, but for
  // pending_reclaims_ and reclaim_callback_ (guarded by mu_): the ranges Recover found, handed
  // to the writer with the callback by SetReclaimCallback.
  std::deque<StoredPurge> reclaims_;
  std::vector<std::pair<uint64_t, uint64_t>> group_purges_;  // (queue, to) added by this group
  std::vector<StoredPurge> recovered_reclaims_;  // caller's thread, Recover to SetReclaimCallback
  std::vector<StoredPurge> pending_reclaims_;
  ReclaimCallback reclaim_callback_;
  // Guarded by doomed_mu_: each queue's purged ranges [from, to) not yet removed, which loads
  // skip. Written by the writer (and Recover), read by the reader.
  std::mutex doomed_mu_;
  std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>> doomed_;
  // The purged ranges of a queue now (a copy; empty for most queues).
  std::vector<std::pair<uint64_t, uint64_t>> DoomedRanges(uint64_t queue_id);

  // The backup running (guarded by mu_): its directory, "" when none. Set by Backup, cleared
  // by the backup thread before it posts the answer.
  std::string backup_directory_;
  std::function<Status()> backup_hook_;  // tests only

  std::thread writer_;
  std::thread reader_;
  std::thread backup_;   // started by the writer, joined by the next backup or Close
  bool closed_ = false;  // Close() ran (caller's thread)
};

}  // namespace wharf::store
