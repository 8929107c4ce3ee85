#include "store/rocksdb_store.h"

#include <pthread.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <type_traits>
#include <unordered_set>

#include "store/keys.h"
#include "store/records.h"
#include "store/rocksdb_status.h"

namespace wharf::store {
namespace {

// Delayed messages removed per write when a queue's timeline is purged or removed, so that
// removing millions of them never builds one enormous batch.
constexpr size_t kRemoveChunk = 16384;

Status ShuttingDown() { return Status(StatusCode::kShuttingDown, "the message store is closed"); }

std::string Prefixed(char prefix, std::string_view name) {
  std::string key(1, prefix);
  key.append(name);
  return key;
}

DiskGuardOptions GuardOptions(const StoreOptions& options) {
  DiskGuardOptions guard;
  guard.path = options.path;  // made by Open before the guard first reads it
  guard.reserve_bytes = options.disk_reserve_bytes;
  guard.ballast_path = options.ballast_path;
  guard.ballast_bytes = options.ballast_bytes;
  guard.free_bytes_for_tests = options.free_bytes_for_tests;
  return guard;
}

}  // namespace

RocksDbStore::RocksDbStore(const StoreOptions& options, PostFn post)
    : options_(options), post_(std::move(post)), disk_(GuardOptions(options)) {}

Result<std::unique_ptr<RocksDbStore>> RocksDbStore::Open(const StoreOptions& options, PostFn post) {
  std::unique_ptr<RocksDbStore> store(new RocksDbStore(options, std::move(post)));
  // Made here, so the guard can read its disk and RocksDB does not log a missing directory
  // as an error at the first start (a failure shows when RocksDB opens it).
  std::error_code ignored;
  std::filesystem::create_directories(options.path, ignored);
  // On a full disk RocksDB cannot even open (it writes a new manifest and log): the ballast
  // makes room, so consumers can drain what is there.
  store->disk_.RefreshNow();
  if (store->disk_.full()) store->disk_.ReleaseBallast();
  Status opened = store->OpenDb();
  if (opened.code() == StatusCode::kStoreFull && store->disk_.ReleaseBallast()) {
    opened = store->OpenDb();
  }
  if (!opened.ok()) return store->Damaged(opened);
  if (options.verify_checksums_at_start) {
    const auto started = std::chrono::steady_clock::now();
    rocksdb::Status verified = store->db_->VerifyChecksum();
    if (!verified.ok()) {
      return store->Damaged(FromRocksDb(verified, "verifying the message store's checksums"));
    }
    spdlog::info("store: every table's checksums verified in {} ms",
                 std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started)
                     .count());
  }
  RocksDbStore* raw = store.get();
  store->writer_ = std::thread([raw] {
    pthread_setname_np(pthread_self(), "wharf-writer");
    // RocksDB counts per-operation statistics in a thread-local context by default; on the
    // writer that was about a tenth of its samples (perf). Wharf does not read them.
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    raw->WriterLoop();
  });
  store->reader_ = std::thread([raw] {
    pthread_setname_np(pthread_self(), "wharf-reader");
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    raw->ReaderLoop();
  });
  return store;
}

RocksDbStore::~RocksDbStore() {
  Close();
  std::unique_lock lock(db_mu_);
  if (db_) {
    if (const rocksdb::Snapshot* snapshot = recovery_snapshot_.exchange(nullptr)) {
      db_->ReleaseSnapshot(snapshot);
    }
    for (auto* handle : AllFamilies()) {
      if (handle) db_->DestroyColumnFamilyHandle(handle);
    }
    db_->Close();
  }
}

void RocksDbStore::Close() {
  if (closed_) return;
  closed_ = true;
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();  // drains every queued commit
  {
    std::lock_guard lock(read_mu_);
    reads_closing_ = true;
  }
  read_cv_.notify_all();
  if (reader_.joinable()) reader_.join();
  // A backup the writer started finishes (a checkpoint cannot be stopped half-way) and posts
  // its answer.
  if (backup_.joinable()) backup_.join();
}

StoreCounters RocksDbStore::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

// --- Recovery (Recover itself: rocksdb_store_recover.cc) -----------------------------------------

void RocksDbStore::CountRecoveredQueues(CountCallback done) {
  CountJob job;
  job.queues = recovered_ranges_;
  job.done = std::move(done);
  {
    std::lock_guard lock(read_mu_);
    reads_.emplace_back(std::in_place_type<CountJob>, std::move(job));
  }
  read_cv_.notify_one();
}

// --- Writer --------------------------------------------------------------------------------------

void RocksDbStore::KeepUnwrittenTopology(const std::deque<Request>& group) {
  for (const Request& request : group) {
    const auto* commit = std::get_if<CommitRequest>(&request);
    if (!commit) continue;
    for (const StoreBatch::Op& op : commit->batch.ops()) {
      StoreBatch::Visit(op, [this](const auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, StoreBatch::PutExchange> ||
                      std::is_same_v<T, StoreBatch::PutQueue> ||
                      std::is_same_v<T, StoreBatch::PutBinding> ||
                      std::is_same_v<T, StoreBatch::PutUser> ||
                      std::is_same_v<T, StoreBatch::PutVhost> ||
                      std::is_same_v<T, StoreBatch::PutPolicy>) {
          unwritten_topology_.Add(o);
        }
      });
    }
  }
}

void RocksDbStore::Commit(StoreBatch batch, bool sync, CommitCallback done) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      requests_.emplace_back(CommitRequest{std::move(batch), sync, std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  post_([done = std::move(done)] { done(ShuttingDown()); });
}

void RocksDbStore::Load(uint64_t queue_id, uint64_t from_seq, uint64_t to_seq, uint32_t limit,
                        uint64_t max_bytes, LoadCallback done) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      requests_.emplace_back(
          LoadRequest{queue_id, from_seq, to_seq, limit, max_bytes, std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  post_([done = std::move(done)] { done(ShuttingDown()); });
}

void RocksDbStore::LoadDelayed(uint64_t queue_id, int64_t from_due_ms, uint64_t from_message_id,
                               uint32_t limit, uint64_t max_bytes, LoadCallback done) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      LoadRequest load{queue_id, 0, 0, limit, max_bytes, std::move(done)};
      load.delayed = true;
      load.from_due = from_due_ms;
      load.from_id = from_message_id;
      requests_.emplace_back(std::move(load));
      cv_.notify_one();
      return;
    }
  }
  post_([done = std::move(done)] { done(ShuttingDown()); });
}

void RocksDbStore::FindDelayed(uint64_t queue_id, uint64_t message_id, FindDelayedCallback done) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      requests_.emplace_back(FindRequest{queue_id, message_id, std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  post_([done = std::move(done)] { done(ShuttingDown()); });
}

void RocksDbStore::WriterLoop() {
  while (true) {
    std::deque<Request> group;
    {
      std::unique_lock lock(mu_);
      // Purges are removed a step at a time whenever no commit waits (and after each group),
      // so a large one delays a confirm by one step at most. Closing leaves the rest, with
      // its records, for the next start.
      // Woken at least each second (each 250 ms on a full disk) to watch the free space.
      cv_.wait_for(lock, disk_.full() ? std::chrono::milliseconds(250) : std::chrono::seconds(1),
                   [this] {
                     return closing_ || !requests_.empty() || !pending_reclaims_.empty() ||
                            (!reclaims_.empty() && error_.ok() && ReclaimAllowed());
                   });
      for (StoredPurge& purge : pending_reclaims_) reclaims_.push_back(purge);
      pending_reclaims_.clear();
      if (requests_.empty() && closing_) return;  // everything is written
      group.swap(requests_);
    }
    if (group.empty()) {
      ReclaimStep();
      WatchDisk();
      continue;
    }
    if (!error_.ok()) TryResume();
    rocksdb::WriteBatch wb;
    bool sync = false;
    size_t commits = 0;
    std::vector<ReadJob> loads;          // loads and finds: they must see this group's writes
    std::vector<BackupRequest> backups;  // so must a backup (at most one runs at a time)
    group_max_id_ = 0;
    PlanGroup(group);
    if (error_.ok()) PrefetchDedup(group, &wb);
    Status status = error_;
    // Topology that failed to reach the disk goes first, so it is written with (or before)
    // anything confirmed into it; later ops of this group (a deletion) override it.
    if (status.ok() && !unwritten_topology_.empty()) status = Apply(unwritten_topology_, &wb);
    for (Request& request : group) {
      if (auto* commit = std::get_if<CommitRequest>(&request)) {
        ++commits;
        sync |= commit->sync;
        if (status.ok()) status = Apply(commit->batch, &wb);
      } else if (auto* load = std::get_if<LoadRequest>(&request)) {
        loads.emplace_back(std::move(*load));
      } else if (auto* find = std::get_if<FindRequest>(&request)) {
        loads.emplace_back(std::move(*find));
      } else {
        backups.push_back(std::move(std::get<BackupRequest>(request)));
      }
    }
    if (status.ok()) dedup_writer_.WriteRecords(&wb);
    if (status.ok() && (wb.Count() > 0 || sync)) status = Write(&wb, sync);
    references_.clear();  // written, or lost with the failed write: either way, read anew
    dedup_writer_.Written(status.ok());
    if (!status.ok()) {
      // Purges of this group are not on disk: nothing to hide or remove (the broker undoes
      // its count of them when it gets the failed commit).
      for (const auto& [queue_id, to_seq] : group_purges_) {
        std::erase_if(reclaims_, [&](const StoredPurge& purge) {
          return purge.queue_id == queue_id && purge.to_seq == to_seq;
        });
        std::lock_guard lock(doomed_mu_);
        if (auto it = doomed_.find(queue_id); it != doomed_.end()) {
          std::erase_if(it->second, [&](const auto& range) { return range.second == to_seq; });
          if (it->second.empty()) doomed_.erase(it);
        }
      }
    }
    group_purges_.clear();
    if (status.ok()) {
      unwritten_topology_ = StoreBatch();
    } else {
      KeepUnwrittenTopology(group);
    }
    if (!status.ok() && error_.ok()) {
      error_ = status;
      spdlog::error(
          "store: write failed, publishing persistent messages is refused until it "
          "recovers: {}",
          status.ToString());
      // The disk filled past the reserve (something else wrote to it): room to resume.
      if (status.code() == StatusCode::kStoreFull) disk_.ReleaseBallast();
    }
    {
      std::lock_guard lock(mu_);
      counters_.commits += commits;
      counters_.elided += plan_.elided_entries.size();
    }
    for (Request& request : group) {
      if (auto* commit = std::get_if<CommitRequest>(&request)) {
        post_([done = std::move(commit->done), status] { done(status); });
      }
    }
    for (BackupRequest& backup : backups) StartBackup(std::move(backup));
    if (!loads.empty()) {
      {
        std::lock_guard lock(read_mu_);
        // Ahead of a count slice that may be waiting: loads are what consumers wait for.
        for (auto& load : loads) reads_.push_front(std::move(load));
      }
      read_cv_.notify_one();
    }
    // A steady stream of commits must not starve a purge: one step after each group.
    if (!reclaims_.empty() && error_.ok()) ReclaimStep();
    WatchDisk();
  }
}

void RocksDbStore::WatchDisk() {
  disk_.Refresh(std::exchange(written_since_watch_, 0));
  const uint64_t reserve = disk_.reserve_bytes();
  const uint64_t free = disk_.free_bytes();
  if (!disk_.full()) {
    disk_.MakeBallast();
  } else if (free < reserve / 2) {
    disk_.ReleaseBallast();  // the reserve is going too: something else fills the disk
  }
  const bool low = free < std::max(options_.disk_low_bytes, 2 * reserve);
  if (low != disk_low_) {
    disk_low_ = low;
    // Files written from now on that are mostly removals are compacted at once.
    deletions_->SetWindowSize(low ? 128 : 0);
    deletions_->SetDeletionTrigger(low ? 32 : 0);
    deletions_->SetDeletionRatio(low ? 0.3 : 0);
    if (low) {
      spdlog::warn(
          "store: {} MiB free on the disk: removals are flushed and compacted each second "
          "to give their space back",
          free >> 20);
    }
  }
  const auto now = std::chrono::steady_clock::now();
  if (!low || !written_since_flush_ || !db_ || !error_.ok() ||
      now - compacted_at_ < std::chrono::seconds(1)) {
    return;
  }
  written_since_flush_ = false;
  compacted_at_ = now;
  // The logs go once every family's memtable is flushed (on a small disk they are a good part
  // of it); removed messages once the flushed removals are compacted with them. RocksDB's threads
  // do both; the writer does not wait.
  rocksdb::FlushOptions flush;
  flush.wait = false;
  flush.allow_write_stall = true;
  const auto families = AllFamilies();
  rocksdb::Status s = db_->Flush(flush, families);
  for (auto* family : families) {
    if (family != meta_ && s.ok()) s = db_->SuggestCompactRange(family, nullptr, nullptr);
  }
  if (!s.ok()) spdlog::warn("store: cannot ask for removed messages' space back: {}", s.ToString());
}

void RocksDbStore::TryResume() {
  auto now = std::chrono::steady_clock::now();
  // More often than the broker probes (each second), so a probe always finds it retried.
  if (now - last_resume_ < std::chrono::milliseconds(250)) return;
  last_resume_ = now;
  // RocksDB resumes by itself from some errors (a failed flush), but not from a failed WAL
  // write, which leaves the database stopped until it is reopened. Reopening replays the WAL,
  // whose torn last record (if any) is dropped: what was written before the failure stays.
  rocksdb::Status s = db_ ? db_->Resume() : rocksdb::Status::Incomplete("not open");
  Status reopened;
  if (!s.ok()) reopened = ReopenDb();
  if (s.ok() || reopened.ok()) {
    spdlog::warn("store: writes work again ({}) after: {}", s.ok() ? "resumed" : "reopened",
                 error_.ToString());
    error_ = Status::Ok();
  }
}

Status RocksDbStore::Write(rocksdb::WriteBatch* wb, bool sync) {
  rocksdb::WriteOptions options;
  options.sync = sync;
  if (group_max_id_ > max_message_id_) {
    // Recovery starts new ids above this, whatever the clock did meanwhile.
    std::string id;
    AppendLittleEndian64(&id, group_max_id_);
    wb->Put(meta_, rocksdb::Slice(kMaxMessageIdKey.data(), kMaxMessageIdKey.size()), id);
  }
  size_t bytes = wb->GetDataSize();
  const auto started = std::chrono::steady_clock::now();
  rocksdb::Status s;
  if (wb->Count() == 0) {
    // Earlier parts of the group were written unsynced (range removals write as they go):
    // syncing the log makes them durable. Nothing written since the last sync: nothing to do.
    if (sync && unsynced_writes_) s = db_->FlushWAL(/*sync=*/true);
  } else {
    s = db_->Write(options, wb);
  }
  if (s.ok()) unsynced_writes_ = !sync && (unsynced_writes_ || wb->Count() > 0);
  written_since_watch_ += bytes;
  written_since_flush_ = true;
  wb->Clear();
  if (!s.ok()) {
    // RocksDB stops writing when a compaction reads a damaged block (it names the file).
    return FromRocksDb(s, s.IsCorruption() ? "message store write failed, the store is damaged "
                                             "(stop wharfd and run wharfd --repair; "
                                             "docs/operations.md)"
                                           : "message store write failed");
  }
  // Purges and deletions applied so far are on disk now: a later failure of the group must
  // not drop them.
  group_purges_.clear();
  max_message_id_ = std::max(max_message_id_, group_max_id_);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  std::lock_guard lock(mu_);
  ++counters_.writes;
  counters_.syncs += sync ? 1 : 0;
  counters_.bytes_written += bytes;
  if (sync) counters_.sync_ms.Observe(ms);
  return Status::Ok();
}

void RocksDbStore::PrefetchDedup(const std::deque<Request>& group, rocksdb::WriteBatch* wb) {
  std::vector<const StoreBatch*> batches;
  for (const Request& request : group) {
    const auto* commit = std::get_if<CommitRequest>(&request);
    if (commit && commit->batch.dedup_outcomes()) batches.push_back(&commit->batch);
  }
  if (batches.empty()) return;
  const DedupWriter::Counts counts = dedup_writer_.Prefetch(batches, wb);
  std::lock_guard lock(mu_);
  counters_.dedup_reads += counts.reads;
  counters_.dedup_runs += counts.runs;
  counters_.dedup_runs_converted += counts.runs_converted;
  counters_.dedup_run_lookups += counts.run_lookups;
  counters_.dedup_stream_keys += counts.stream_keys;
  counters_.dedup_streams += counts.streams;
}

void RocksDbStore::PlanGroup(const std::deque<Request>& group) {
  plan_.removed_entries.clear();
  plan_.elided_entries.clear();
  plan_.settled_messages.clear();
  std::unordered_map<uint64_t, uint32_t> removals;  // message id -> entries removed in group
  std::unordered_set<std::pair<uint64_t, uint64_t>, PairHash> first_puts;
  for (const Request& request : group) {
    const auto* commit = std::get_if<CommitRequest>(&request);
    if (!commit) continue;
    for (const StoreBatch::Op& op : commit->batch.ops()) {
      if (const auto* remove = std::get_if<StoreBatch::RemoveEntry>(&op)) {
        std::pair key{remove->entry.queue_id, remove->entry.seq};
        plan_.removed_entries.insert(key);
        if (first_puts.contains(key)) plan_.elided_entries.insert(key);
        // Only a shared entry holds a reference: an inline copy (a dead-lettered message keeps
        // its id) releases nothing of the shared body.
        if (remove->entry.flags & kEntryShared) ++removals[remove->entry.message_id];
      } else if (const auto* moved = std::get_if<StoreBatch::DelayEntry>(&op)) {
        // Leaves the entries like a removal, without releasing its body.
        std::pair key{moved->entry.queue_id, moved->entry.seq};
        plan_.removed_entries.insert(key);
        if (first_puts.contains(key)) plan_.elided_entries.insert(key);
      } else if (const auto* put = std::get_if<StoreBatch::PutEntry>(&op)) {
        // A first put has receive count 0; later ones rewrite an entry already written.
        if (put->entry.receive_count == 0) first_puts.insert({put->entry.queue_id, put->entry.seq});
      }
    }
  }
  if (removals.empty()) return;
  for (const Request& request : group) {
    const auto* commit = std::get_if<CommitRequest>(&request);
    if (!commit) continue;
    for (const StoreBatch::Op& op : commit->batch.ops()) {
      if (const auto* put = std::get_if<StoreBatch::PutMessage>(&op)) {
        auto it = removals.find(put->envelope->message.id);
        if (it != removals.end() && it->second >= put->references) {
          plan_.settled_messages.insert(it->first);
        }
      }
    }
  }
}

Status RocksDbStore::Apply(const StoreBatch& batch, rocksdb::WriteBatch* wb) {
  duplicates_.clear();
  for (const StoreBatch::Op& op : batch.ops()) {
    Status status;
    StoreBatch::Visit(op, [&](const auto& o) {
      using T = std::decay_t<decltype(o)>;
      if constexpr (std::is_same_v<T, StoreBatch::PutMessage>) {
        // Published and settled in every queue within this group: never written.
        if (plan_.settled_messages.contains(o.envelope->message.id)) return;
        pb::MessageRecord record;
        ToRecord(*o.envelope, &record);
        uint64_t id = o.envelope->message.id;
        wb->Put(messages_, MessageKey(id), record.SerializeAsString());
        group_max_id_ = std::max(group_max_id_, id);
        if (o.references > 1) {
          std::string count;
          AppendLittleEndian32(&count, o.references);
          wb->Put(meta_, RefsKey(id), count);
          references_[id] = o.references;
        }
      } else if constexpr (std::is_same_v<T, StoreBatch::PutEntry>) {
        const EntryRef& e = o.entry;
        // Removed later in this group: the delete alone is enough.
        if (plan_.removed_entries.contains({e.queue_id, e.seq})) return;
        // A duplicate publish (PutDedup above): the queue does not take it.
        if (!duplicates_.empty() && duplicates_.contains({e.queue_id, e.message_id})) return;
        std::string value =
            EncodeEntryValue({e.message_id, e.receive_count, e.flags}, AttemptsBytes(e));
        if (e.flags & kEntryInline) {
          if (!e.envelope) {
            status = Status(StatusCode::kInternal, "inline entry without its message");
            return;
          }
          pb::MessageRecord record;
          ToRecord(*e.envelope, &record);
          record.AppendToString(&value);
          group_max_id_ = std::max(group_max_id_, e.message_id);
        }
        rocksdb::ColumnFamilyHandle* family = nullptr;
        status = EntriesForWrite(e.seq, &family);
        if (status.ok()) wb->Put(family, EntryKey(e.queue_id, e.seq), value);
      } else if constexpr (std::is_same_v<T, StoreBatch::RemoveEntry>) {
        const EntryRef& e = o.entry;
        // Put and removed in this group: neither reaches the disk.
        bool never_written = plan_.elided_entries.contains({e.queue_id, e.seq});
        // No family yet: none of its lanes' entries was ever written.
        rocksdb::ColumnFamilyHandle* family = EntriesFor(e.seq);
        if (!never_written && family) wb->Delete(family, EntryKey(e.queue_id, e.seq));
        if (e.flags & kEntryInline) return;  // nothing else holds the message
        if (plan_.settled_messages.contains(e.message_id)) return;  // never written
        status = Release(e.message_id, e.flags & kEntryShared, wb);
      } else if constexpr (std::is_same_v<T, StoreBatch::PurgeRange>) {
        // The range may start inside an earlier purge's range still being removed (after a
        // restart, a load can stop just short of a recovered one): start past that range,
        // which the earlier purge removes anyway, so no two share a record. One wholly
        // inside this one is fine: steps are written one after the other, so an entry is
        // removed (and its body released) once.
        uint64_t from = o.from_seq;
        for (bool moved = true; moved;) {
          moved = false;
          for (const StoredPurge& earlier : reclaims_) {
            if (earlier.queue_id == o.queue_id && earlier.from_seq <= from &&
                from < earlier.to_seq) {
              from = earlier.to_seq;
              moved = true;
            }
          }
        }
        if (from >= o.to_seq) return;
        // The record makes the purge durable with this write; ReclaimStep does the rest.
        wb->Put(meta_, PurgeKey(o.queue_id, from),
                EncodePurgeValue({from, o.to_seq, o.messages, 0}));
        StoredPurge purge{o.queue_id, from, from, o.to_seq, o.messages, 0};
        reclaims_.push_back(purge);
        group_purges_.emplace_back(o.queue_id, o.to_seq);
        std::lock_guard lock(doomed_mu_);
        doomed_[o.queue_id].emplace_back(from, o.to_seq);
      } else if constexpr (std::is_same_v<T, StoreBatch::PutExchange>) {
        wb->Put(meta_, ExchangeKey(o.spec.vhost, o.spec.name),
                ToRecord(o.spec).SerializeAsString());
      } else if constexpr (std::is_same_v<T, StoreBatch::RemoveExchange>) {
        wb->Delete(meta_, ExchangeKey(o.vhost, o.name));
        const std::string vhost = RecordVhost(o.vhost);
        status = RemoveBindings(
            [&](const pb::BindingRecord& b) {
              return RecordVhost(b.vhost()) == vhost &&
                     (b.exchange() == o.name || b.destination_exchange() == o.name);
            },
            wb);
      } else if constexpr (std::is_same_v<T, StoreBatch::PutQueue>) {
        wb->Put(meta_, QueueKey(o.spec.vhost, o.spec.name),
                ToRecord(o.spec, o.queue_id).SerializeAsString());
        std::string next;
        AppendLittleEndian64(&next, o.queue_id + 1);
        wb->Put(meta_, rocksdb::Slice(kNextQueueIdKey.data(), kNextQueueIdKey.size()), next);
      } else if constexpr (std::is_same_v<T, StoreBatch::RemoveQueue>) {
        wb->Delete(meta_, QueueKey(o.vhost, o.name));
        // Every lane's delivery mark.
        wb->DeleteRange(meta_, DeliveredKey(o.queue_id), DeliveredKey(o.queue_id + 1));
        const std::string vhost = RecordVhost(o.vhost);
        status = RemoveBindings(
            [&](const pb::BindingRecord& b) {
              return RecordVhost(b.vhost()) == vhost && b.destination_exchange().empty() &&
                     b.queue() == o.name;
            },
            wb);
        // Its purges go with it: the removal of all its entries below covers them.
        wb->DeleteRange(meta_, PurgeKey(o.queue_id, 0), PurgeKey(o.queue_id + 1, 0));
        std::erase_if(reclaims_,
                      [&](const StoredPurge& purge) { return purge.queue_id == o.queue_id; });
        {
          std::lock_guard lock(doomed_mu_);
          doomed_.erase(o.queue_id);
        }
        // Its entries go in the background: nothing reads a removed queue's entries (ids
        // are never reused), and a restart before the end finds them as a deleted queue's.
        StoredPurge drop{o.queue_id, 0, 0, UINT64_MAX, 0, 0, /*recorded=*/false};
        reclaims_.push_back(drop);
        group_purges_.emplace_back(o.queue_id, UINT64_MAX);
        if (status.ok()) status = RemoveTimeline(o.queue_id, wb);
        wb->Delete(meta_, RedriveKey(o.queue_id));
        dedup_writer_.RemoveQueue(o.queue_id, wb);  // its deduplication window
      } else if constexpr (std::is_same_v<T, StoreBatch::PutRedrive>) {
        wb->Put(meta_, RedriveKey(o.redrive.queue_id), ToRecord(o.redrive).SerializeAsString());
      } else if constexpr (std::is_same_v<T, StoreBatch::PutDedup>) {
        bool duplicate = false;
        status = dedup_writer_.Apply(batch, o, wb, &duplicate);
        if (duplicate) duplicates_.insert({o.queue_id, o.message_id});
      } else if constexpr (std::is_same_v<T, StoreBatch::PutDelayed>) {
        if (!duplicates_.empty() && duplicates_.contains({o.entry.queue_id, o.entry.message_id})) {
          return;
        }
        group_max_id_ = std::max(group_max_id_, o.entry.message_id);
        status = PutTimelineEntry(o.entry, o.due_ms, wb);
      } else if constexpr (std::is_same_v<T, StoreBatch::DelayEntry>) {
        const EntryRef& e = o.entry;
        rocksdb::ColumnFamilyHandle* family = EntriesFor(e.seq);
        if (!plan_.elided_entries.contains({e.queue_id, e.seq}) && family) {
          wb->Delete(family, EntryKey(e.queue_id, e.seq));
        }
        status = PutTimelineEntry(e, o.due_ms, wb);
      } else if constexpr (std::is_same_v<T, StoreBatch::RemoveDelayed>) {
        const EntryRef& e = o.entry;
        wb->Delete(delayed_, DelayedKey(e.queue_id, o.due_ms, e.message_id));
        wb->Delete(delayed_, DelayedIndexKey(e.queue_id, e.message_id));
        if (o.release && !(e.flags & kEntryInline)) {
          status = Release(e.message_id, e.flags & kEntryShared, wb);
        }
      } else if constexpr (std::is_same_v<T, StoreBatch::RemoveAllDelayed>) {
        status = RemoveTimeline(o.queue_id, wb);
      } else if constexpr (std::is_same_v<T, StoreBatch::PutBinding>) {
        wb->Put(meta_, BindingKey(o.binding), "");
      } else if constexpr (std::is_same_v<T, StoreBatch::RemoveBinding>) {
        wb->Delete(meta_, BindingKey(o.binding));
      } else if constexpr (std::is_same_v<T, StoreBatch::PutUser>) {
        pb::UserRecord record;
        record.set_name(o.user.name);
        record.set_password_hash(o.user.password_hash);
        record.set_admin(o.user.admin);
        if (o.user.limits.max_connections >= 0) {
          record.set_max_connections(o.user.limits.max_connections);
        }
        if (o.user.limits.max_channels >= 0) {
          record.set_max_channels(o.user.limits.max_channels);
        }
        record.set_access_model(1);
        for (const std::string& tag : o.user.tags) record.add_tags(tag);
        for (const UserPermission& p : o.user.permissions) {
          auto* out = record.add_permissions();
          out->set_vhost(p.vhost);
          out->set_configure(p.configure);
          out->set_write(p.write);
          out->set_read(p.read);
        }
        wb->Put(meta_, Prefixed(kUserPrefix, o.user.name), record.SerializeAsString());
      } else if constexpr (std::is_same_v<T, StoreBatch::RemoveUser>) {
        wb->Delete(meta_, Prefixed(kUserPrefix, o.name));
      } else if constexpr (std::is_same_v<T, StoreBatch::PutVhost>) {
        wb->Put(meta_, VhostKey(o.vhost.name), ToRecord(o.vhost).SerializeAsString());
      } else if constexpr (std::is_same_v<T, StoreBatch::RemoveVhost>) {
        wb->Delete(meta_, VhostKey(o.name));
      } else if constexpr (std::is_same_v<T, StoreBatch::PutPolicy>) {
        wb->Put(meta_, PolicyKey(o.policy.vhost, o.policy.name),
                ToRecord(o.policy).SerializeAsString());
      } else if constexpr (std::is_same_v<T, StoreBatch::RemovePolicy>) {
        wb->Delete(meta_, PolicyKey(o.vhost, o.name));
      } else if constexpr (std::is_same_v<T, StoreBatch::MarkDelivered>) {
        std::string seq;
        AppendLittleEndian64(&seq, o.seq);
        wb->Put(meta_, DeliveredKey(o.queue_id, SeqLane(o.seq)), seq);
      }
    });
    WHARF_RETURN_IF_ERROR(status);
  }
  return Status::Ok();
}

Status RocksDbStore::Release(uint64_t message_id, bool shared, rocksdb::WriteBatch* wb) {
  if (!shared) {
    wb->Delete(messages_, MessageKey(message_id));
    return Status::Ok();
  }
  auto it = references_.find(message_id);
  if (it == references_.end()) {
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_, RefsKey(message_id), &value);
    if (s.IsNotFound()) {
      // Already released (a removal that raced a queue deletion): nothing holds it.
      wb->Delete(messages_, MessageKey(message_id));
      return Status::Ok();
    }
    if (!s.ok()) return FromRocksDb(s, "cannot read a reference count");
    it = references_.emplace(message_id, value.size() == 4 ? ReadLittleEndian32(value) : 1).first;
  }
  if (it->second <= 1) {
    wb->Delete(meta_, RefsKey(message_id));
    wb->Delete(messages_, MessageKey(message_id));
    references_.erase(it);
  } else {
    --it->second;
    std::string count;
    AppendLittleEndian32(&count, it->second);
    wb->Put(meta_, RefsKey(message_id), count);
  }
  return Status::Ok();
}

Status RocksDbStore::PutTimelineEntry(const EntryRef& e, int64_t due_ms, rocksdb::WriteBatch* wb) {
  std::string value = EncodeEntryValue({e.message_id, e.receive_count, e.flags}, AttemptsBytes(e));
  if (e.flags & kEntryInline) {
    if (!e.envelope) {
      return Status(StatusCode::kInternal, "inline delayed entry without its message");
    }
    pb::MessageRecord record;
    ToRecord(*e.envelope, &record);
    record.AppendToString(&value);
  }
  wb->Put(delayed_, DelayedKey(e.queue_id, due_ms, e.message_id), value);
  wb->Put(delayed_, DelayedIndexKey(e.queue_id, e.message_id),
          EncodeDelayedIndexValue(due_ms, e.flags));
  return Status::Ok();
}

Status RocksDbStore::RemoveTimeline(uint64_t queue_id, rocksdb::WriteBatch* wb) {
  if (wb->Count() > 0) WHARF_RETURN_IF_ERROR(Write(wb, false));
  std::string lower = DelayedPrefix(queue_id, kDelayedTimeline);
  std::string upper = DelayedPrefix(queue_id, kDelayedTimeline + 1);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read;
  read.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, delayed_));
  std::string chunk_start = lower;
  size_t in_chunk = 0;
  for (it->Seek(lower); it->Valid(); it->Next()) {
    auto entry = DecodeEntryValue(std::string_view(it->value().data(), it->value().size()));
    if (!entry) continue;
    wb->Delete(delayed_, DelayedIndexKey(queue_id, entry->message_id));
    if (!(entry->flags & kEntryInline)) {
      WHARF_RETURN_IF_ERROR(Release(entry->message_id, entry->flags & kEntryShared, wb));
    }
    if (++in_chunk == kRemoveChunk) {
      // Each chunk removes its messages, their index keys and their bodies in one write.
      std::string chunk_end = it->key().ToString() + '\0';
      wb->DeleteRange(delayed_, chunk_start, chunk_end);
      WHARF_RETURN_IF_ERROR(Write(wb, false));
      chunk_start = chunk_end;
      in_chunk = 0;
    }
  }
  if (!it->status().ok()) return FromRocksDb(it->status(), "cannot read a timeline to remove it");
  // The rest of the timeline, and any index key left without its timeline key.
  wb->DeleteRange(delayed_, chunk_start, DelayedPrefix(queue_id, kDelayedTimeline + 1));
  wb->DeleteRange(delayed_, DelayedPrefix(queue_id, kDelayedIndex),
                  DelayedPrefix(queue_id, kDelayedIndex + 1));
  return Status::Ok();
}

template <typename Pred>
Status RocksDbStore::RemoveBindings(Pred doomed, rocksdb::WriteBatch* wb) {
  if (wb->Count() > 0) WHARF_RETURN_IF_ERROR(Write(wb, false));
  std::string lower(1, kBindingPrefix);
  std::string upper(1, static_cast<char>(kBindingPrefix + 1));
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read;
  read.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, meta_));
  for (it->Seek(lower); it->Valid(); it->Next()) {
    pb::BindingRecord record;
    if (record.ParseFromArray(it->key().data() + 1, static_cast<int>(it->key().size() - 1)) &&
        doomed(record)) {
      wb->Delete(meta_, it->key());
    }
  }
  return FromRocksDb(it->status(), "cannot read the bindings");
}

}  // namespace wharf::store
