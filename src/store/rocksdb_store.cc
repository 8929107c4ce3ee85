#include "store/rocksdb_store.h"

#include <pthread.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <rocksdb/write_buffer_manager.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_set>

#include "store/keys.h"
#include "store/records.h"
#include "store/rocksdb_status.h"

namespace wharf::store {
namespace {

// Delayed messages removed per write when a queue's timeline is purged or removed, so that
// removing millions of them never builds one enormous batch.
constexpr size_t kRemoveChunk = 16384;

// A file system whose writes fail with "no space" while WriteFaults::disk_full is set.
class FullDiskFile final : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FullDiskFile(std::unique_ptr<rocksdb::FSWritableFile> file, std::shared_ptr<WriteFaults> faults)
      : FSWritableFileOwnerWrapper(std::move(file)), faults_(std::move(faults)) {}
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    if (faults_->disk_full) return rocksdb::IOStatus::NoSpace("injected: disk full");
    return FSWritableFileOwnerWrapper::Append(data, options, dbg);
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (faults_->disk_full) return rocksdb::IOStatus::NoSpace("injected: disk full");
    return FSWritableFileOwnerWrapper::Append(data, options, info, dbg);
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
    if (faults_->disk_full) return rocksdb::IOStatus::NoSpace("injected: disk full");
    return FSWritableFileOwnerWrapper::Sync(options, dbg);
  }

 private:
  std::shared_ptr<WriteFaults> faults_;
};

class FullDiskFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  FullDiskFileSystem(const std::shared_ptr<rocksdb::FileSystem>& target,
                     std::shared_ptr<WriteFaults> faults)
      : FileSystemWrapper(target), faults_(std::move(faults)) {}
  const char* Name() const override { return "WharfFullDiskFileSystem"; }
  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    if (faults_->disk_full) return rocksdb::IOStatus::NoSpace("injected: disk full");
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOStatus s = target()->NewWritableFile(name, options, &file, dbg);
    if (s.ok()) *result = std::make_unique<FullDiskFile>(std::move(file), faults_);
    return s;
  }

 private:
  std::shared_ptr<WriteFaults> faults_;
};

Status ShuttingDown() { return Status(StatusCode::kShuttingDown, "the message store is closed"); }

std::string Prefixed(char prefix, std::string_view name) {
  std::string key(1, prefix);
  key.append(name);
  return key;
}

}  // namespace

RocksDbStore::RocksDbStore(const StoreOptions& options, PostFn post)
    : options_(options), post_(std::move(post)) {}

Result<std::unique_ptr<RocksDbStore>> RocksDbStore::Open(const StoreOptions& options, PostFn post) {
  std::unique_ptr<RocksDbStore> store(new RocksDbStore(options, std::move(post)));
  WHARF_RETURN_IF_ERROR(store->OpenDb());
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

Status RocksDbStore::OpenDb() {
  auto cache = rocksdb::NewLRUCache(options_.block_cache_bytes);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));

  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.max_background_jobs = 2;
  db_options.bytes_per_sync = 1u << 20;
  // The meta family is rarely flushed; without a cap it would keep every WAL file alive.
  db_options.max_total_wal_size = 256u << 20;
  db_options.write_buffer_manager =
      std::make_shared<rocksdb::WriteBufferManager>(options_.memtable_bytes, cache);
  db_options.info_log_level = rocksdb::WARN_LEVEL;
  // One thread writes (the writer), so memtable inserts need no concurrency, and without it
  // they can start from a hint: the last insert of the same prefix (below).
  db_options.allow_concurrent_memtable_write = false;
  db_options.keep_log_file_num = 4;
  if (options_.write_faults) {
    env_ = rocksdb::NewCompositeEnv(std::make_shared<FullDiskFileSystem>(
        rocksdb::FileSystem::Default(), options_.write_faults));
    db_options.env = env_.get();
  }

  rocksdb::ColumnFamilyOptions meta;
  meta.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  meta.write_buffer_size = 4u << 20;

  rocksdb::ColumnFamilyOptions messages = meta;
  messages.write_buffer_size = options_.memtable_bytes / 2;
  messages.level_compaction_dynamic_level_bytes = true;
  messages.enable_blob_files = options_.min_blob_bytes > 0;
  messages.min_blob_size = options_.min_blob_bytes;
  messages.enable_blob_garbage_collection = true;
  messages.blob_garbage_collection_age_cutoff = 0.25;
  // Message ids rise with time; the top 4 bytes change every 65 s. Inserting next to the
  // previous key skips most of the skip list's comparisons (the writer's biggest cost).
  messages.memtable_insert_with_hint_prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(4));

  rocksdb::ColumnFamilyOptions entries = meta;
  entries.write_buffer_size = options_.memtable_bytes / 4;
  entries.level_compaction_dynamic_level_bytes = true;
  // No insert hint here: RocksDB 7.8 applies the hint to range deletions too and corrupts the
  // range-deletion memtable (DeleteRange is how queues are purged and deleted).

  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, meta},
      {kColumnMessages, messages},
      {kColumnEntries, entries},
      {kColumnDelayed, entries},
  };
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options_.path, families, &handles, &db);
  if (!s.ok()) return FromRocksDb(s, "cannot open the message store at " + options_.path);
  db_.reset(db);
  meta_ = handles[0];
  messages_ = handles[1];
  entries_ = handles[2];
  delayed_ = handles[3];
  last_resume_ = std::chrono::steady_clock::now();
  return Status::Ok();
}

RocksDbStore::~RocksDbStore() {
  Close();
  std::unique_lock lock(db_mu_);
  if (db_) {
    if (const rocksdb::Snapshot* snapshot = recovery_snapshot_.exchange(nullptr)) {
      db_->ReleaseSnapshot(snapshot);
    }
    for (auto* handle : {meta_, messages_, entries_, delayed_}) {
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
}

StoreCounters RocksDbStore::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

// --- Recovery ------------------------------------------------------------------------------------

Result<RecoveredState> RocksDbStore::Recover() {
  RecoveredState state;
  rocksdb::ReadOptions read;
  std::string value;
  rocksdb::Status s =
      db_->Get(read, meta_, rocksdb::Slice(kFormatKey.data(), kFormatKey.size()), &value);
  if (s.IsNotFound()) {
    std::unique_ptr<rocksdb::Iterator> any_meta(db_->NewIterator(read, meta_));
    any_meta->SeekToFirst();
    std::unique_ptr<rocksdb::Iterator> any_entry(db_->NewIterator(read, entries_));
    any_entry->SeekToFirst();
    if (any_meta->Valid() || any_entry->Valid()) {
      return Status(StatusCode::kStoreUnavailable,
                    "the message store at " + options_.path +
                        " has data but no format version: not a wharfd data directory?");
    }
    rocksdb::WriteOptions sync;
    sync.sync = true;
    s = db_->Put(sync, meta_, rocksdb::Slice(kFormatKey.data(), kFormatKey.size()),
                 std::to_string(kFormatVersion));
    if (!s.ok()) return FromRocksDb(s, "cannot initialise the message store");
    spdlog::info("store: created a new message store at {} (format {})", options_.path,
                 kFormatVersion);
  } else if (!s.ok()) {
    return FromRocksDb(s, "cannot read the message store's format version");
  } else if (value == "1" || value == "2" || value == "3" || value == "4") {
    // Formats 2 to 5 only add to format 1 (inline entries, delivery marks; the "delayed"
    // family; redrive records; purge records): everything older reads as it is. Mark the directory
    // as the current format before writing anything of it, so that an older build refuses it
    // instead of misreading it.
    rocksdb::WriteOptions sync;
    sync.sync = true;
    s = db_->Put(sync, meta_, rocksdb::Slice(kFormatKey.data(), kFormatKey.size()),
                 std::to_string(kFormatVersion));
    if (!s.ok()) return FromRocksDb(s, "cannot upgrade the message store's format");
    spdlog::warn("store: upgraded {} from storage format {} to {} (nothing rewritten)",
                 options_.path, value, kFormatVersion);
  } else if (value != std::to_string(kFormatVersion)) {
    return Status(StatusCode::kStoreUnavailable,
                  "the message store at " + options_.path + " has storage format " + value +
                      "; this wharfd reads format " + std::to_string(kFormatVersion) +
                      (std::atoi(value.c_str()) > kFormatVersion
                           ? ": it was written by a newer wharfd. Run that version, or restore "
                             "a backup taken before the upgrade (docs/storage.md)"
                           : ""));
  }

  s = db_->Get(read, meta_, rocksdb::Slice(kNextQueueIdKey.data(), kNextQueueIdKey.size()), &value);
  if (s.ok() && value.size() == 8) state.next_queue_id = ReadLittleEndian64(value);

  // Topology.
  std::unordered_map<uint64_t, size_t> queue_index;  // queue id -> state.queues index
  std::unordered_map<uint64_t, uint64_t> delivered;  // queue id -> delivered through
  std::vector<StoredRedrive> redrives;
  std::vector<StoredPurge> purges;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, meta_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    rocksdb::Slice key = it->key();
    if (key.empty()) continue;
    rocksdb::Slice payload = it->value();
    switch (key[0]) {
      case kExchangePrefix: {
        pb::ExchangeRecord record;
        if (!record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt exchange record");
        }
        WHARF_ASSIGN_OR_RETURN(auto spec, FromRecord(record));
        state.exchanges.push_back(std::move(spec));
        break;
      }
      case kQueuePrefix: {
        pb::QueueRecord record;
        if (!record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt queue record");
        }
        WHARF_ASSIGN_OR_RETURN(auto spec, FromRecord(record));
        StoredQueue queue;
        queue.spec = std::move(spec);
        queue.queue_id = record.queue_id();
        queue_index[queue.queue_id] = state.queues.size();
        state.next_queue_id = std::max(state.next_queue_id, queue.queue_id + 1);
        state.queues.push_back(std::move(queue));
        break;
      }
      case kBindingPrefix: {
        pb::BindingRecord record;
        if (!record.ParseFromArray(key.data() + 1, static_cast<int>(key.size() - 1))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt binding record");
        }
        WHARF_ASSIGN_OR_RETURN(auto binding, FromRecord(record));
        state.bindings.push_back(std::move(binding));
        break;
      }
      case kDeliveredPrefix: {
        if (key.size() == 9 && payload.size() == 8) {
          delivered[ReadBigEndian64(std::string_view(key.data() + 1, 8))] =
              ReadLittleEndian64(std::string_view(payload.data(), 8));
        }
        break;
      }
      case kUserPrefix: {
        pb::UserRecord record;
        if (!record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt user record");
        }
        state.users.push_back(StoredUser{record.name(), record.password_hash(), record.admin()});
        break;
      }
      case kRedrivePrefix: {
        pb::RedriveRecord record;
        if (key.size() != 9 ||
            !record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt redrive record");
        }
        WHARF_ASSIGN_OR_RETURN(auto redrive, FromRecord(record));
        redrive.queue_id = ReadBigEndian64(std::string_view(key.data() + 1, 8));
        redrives.push_back(std::move(redrive));
        break;
      }
      case kPurgePrefix: {
        auto purge = DecodePurgeValue(std::string_view(payload.data(), payload.size()));
        if (key.size() != 17 || !purge) {
          return Status(StatusCode::kStoreUnavailable, "corrupt purge record");
        }
        StoredPurge stored;
        stored.queue_id = ReadBigEndian64(std::string_view(key.data() + 1, 8));
        stored.from_seq = ReadBigEndian64(std::string_view(key.data() + 9, 8));
        stored.cursor_seq = purge->cursor_seq;
        stored.to_seq = purge->to_seq;
        stored.messages = purge->messages;
        stored.removed = purge->removed;
        purges.push_back(stored);
        break;
      }
      default:
        break;
    }
  }
  if (!it->status().ok()) return FromRocksDb(it->status(), "cannot read the topology");
  for (auto& queue : state.queues) {
    if (auto d = delivered.find(queue.queue_id); d != delivered.end()) {
      queue.delivered_through = d->second;
    }
  }
  for (auto& redrive : redrives) {
    // A queue's removal removes its redrive in the same batch: one without its queue is
    // not expected, and not worth failing the start for.
    if (queue_index.contains(redrive.queue_id)) state.redrives.push_back(std::move(redrive));
  }
  {
    // Purged ranges still on disk: hidden from loads and counts from here on, and removed
    // once the broker listens (SetReclaimCallback). RemoveQueue removes a queue's records.
    rocksdb::WriteBatch stale;
    std::lock_guard lock(doomed_mu_);
    for (const StoredPurge& purge : purges) {
      if (!queue_index.contains(purge.queue_id) || purge.cursor_seq >= purge.to_seq) {
        // Its queue was removed (RemoveQueue deletes its records in the same write; this is
        // only a leftover): nothing to hide or remove.
        stale.Delete(meta_, PurgeKey(purge.queue_id, purge.from_seq));
        continue;
      }
      doomed_[purge.queue_id].emplace_back(purge.cursor_seq, purge.to_seq);
      state.purges.push_back(purge);
    }
    if (stale.Count() > 0) {
      s = db_->Write(rocksdb::WriteOptions(), &stale);
      if (!s.ok()) return FromRocksDb(s, "cannot remove a stale purge record");
    }
  }
  recovered_reclaims_ = state.purges;

  // Queues: the first and last entry of each; no walk over the entries, so start-up takes
  // the same time for ten messages or ten million. Counting happens later, in the background,
  // against this snapshot (CountRecoveredQueues).
  const rocksdb::Snapshot* snapshot = db_->GetSnapshot();
  rocksdb::ReadOptions at_snapshot;
  at_snapshot.snapshot = snapshot;
  it.reset(db_->NewIterator(at_snapshot, entries_));
  for (StoredQueue& queue : state.queues) {
    auto doomed = DoomedRanges(queue.queue_id);
    // New sequence numbers start past every purged range, so no new entry lands in one.
    for (const auto& [from, to] : doomed) queue.next_seq = std::max(queue.next_seq, to);
    auto key_seq = [&]() -> std::optional<uint64_t> {
      if (!it->Valid()) return std::nullopt;
      auto parts = ParseEntryKey(std::string_view(it->key().data(), it->key().size()));
      if (!parts || parts->queue_id != queue.queue_id) return std::nullopt;
      return parts->seq;
    };
    auto purged = [&](uint64_t seq) -> const std::pair<uint64_t, uint64_t>* {
      for (const auto& range : doomed) {
        if (seq >= range.first && seq < range.second) return &range;
      }
      return nullptr;
    };
    // The first and last entries outside the purged ranges.
    it->Seek(EntryKey(queue.queue_id, 0));
    auto first = key_seq();
    while (first && purged(*first)) {
      it->Seek(EntryKey(queue.queue_id, purged(*first)->second));
      first = key_seq();
    }
    if (!first) continue;
    it->SeekForPrev(EntryKey(queue.queue_id, UINT64_MAX));
    auto last = key_seq();
    while (last && purged(*last)) {
      uint64_t from = purged(*last)->first;
      if (from == 0) {
        last.reset();
        break;
      }
      it->SeekForPrev(EntryKey(queue.queue_id, from - 1));
      last = key_seq();
    }
    if (!last) continue;
    queue.first_seq = *first;
    // Sequence numbers hidden by purges between the first and the last: not in the estimate;
    // those past the last are counted off the estimate too, as next_seq covers them.
    uint64_t end = std::max(queue.next_seq, *last + 1);
    for (const auto& [from, to] : doomed) {
      uint64_t lo = std::max(from, *first), hi = std::min(to, end);
      if (hi > lo) queue.purged_span += hi - lo;
    }
    queue.next_seq = end;
    recovered_ranges_.push_back({queue.queue_id, CountKind::kEntries,
                                 EntryKey(queue.queue_id, queue.first_seq),
                                 EntryKey(queue.queue_id, *last + 1), doomed});
  }
  // Timelines: whether each has anything; counted later too (the index keys, one per message).
  std::unique_ptr<rocksdb::Iterator> delayed_it(db_->NewIterator(at_snapshot, delayed_));
  for (StoredQueue& queue : state.queues) {
    std::string start = DelayedPrefix(queue.queue_id, kDelayedIndex);
    delayed_it->Seek(start);
    if (!delayed_it->Valid() || !delayed_it->key().starts_with(start)) continue;
    queue.has_delayed = true;
    recovered_ranges_.push_back({queue.queue_id,
                                 CountKind::kDelayed,
                                 start,
                                 DelayedPrefix(queue.queue_id, kDelayedIndex + 1),
                                 {}});
  }
  for (delayed_it->SeekToFirst(); delayed_it->Valid();) {
    if (delayed_it->key().size() < 9) {
      return Status(StatusCode::kStoreUnavailable, "corrupt delayed message key");
    }
    uint64_t queue_id = ReadBigEndian64(std::string_view(delayed_it->key().data(), 8));
    if (!queue_index.contains(queue_id) &&
        std::find(state.orphaned_queue_ids.begin(), state.orphaned_queue_ids.end(), queue_id) ==
            state.orphaned_queue_ids.end()) {
      state.orphaned_queue_ids.push_back(queue_id);
    }
    if (queue_id == UINT64_MAX) break;
    delayed_it->Seek(DelayedPrefix(queue_id + 1, 0));
  }
  if (!delayed_it->status().ok()) {
    return FromRocksDb(delayed_it->status(), "cannot read the delayed messages");
  }
  // Entries of queue ids without a queue record: one seek per distinct id.
  for (it->SeekToFirst(); it->Valid();) {
    auto parts = ParseEntryKey(std::string_view(it->key().data(), it->key().size()));
    if (!parts) return Status(StatusCode::kStoreUnavailable, "corrupt queue entry key");
    if (!queue_index.contains(parts->queue_id) &&
        std::find(state.orphaned_queue_ids.begin(), state.orphaned_queue_ids.end(),
                  parts->queue_id) == state.orphaned_queue_ids.end()) {
      state.orphaned_queue_ids.push_back(parts->queue_id);
    }
    if (parts->queue_id == UINT64_MAX) break;
    it->Seek(EntryKey(parts->queue_id + 1, 0));
  }
  if (!it->status().ok()) return FromRocksDb(it->status(), "cannot read the queues");
  recovery_snapshot_ = snapshot;
  // Entries of deleted queues are removed in the background, as RemoveQueue would have.
  for (uint64_t orphan : state.orphaned_queue_ids) {
    recovered_reclaims_.push_back(StoredPurge{orphan, 0, 0, UINT64_MAX, 0, 0, /*recorded=*/false});
  }

  s = db_->Get(read, meta_, rocksdb::Slice(kMaxMessageIdKey.data(), kMaxMessageIdKey.size()),
               &value);
  if (s.ok() && value.size() == 8) state.max_message_id = ReadLittleEndian64(value);
  max_message_id_ = state.max_message_id;
  return state;
}

void RocksDbStore::SetReclaimCallback(ReclaimCallback progress) {
  {
    std::lock_guard lock(mu_);
    reclaim_callback_ = std::move(progress);
    pending_reclaims_ = std::move(recovered_reclaims_);
  }
  cv_.notify_one();
}

std::vector<std::pair<uint64_t, uint64_t>> RocksDbStore::DoomedRanges(uint64_t queue_id) {
  std::lock_guard lock(doomed_mu_);
  auto it = doomed_.find(queue_id);
  return it == doomed_.end() ? std::vector<std::pair<uint64_t, uint64_t>>() : it->second;
}

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
      cv_.wait(lock, [this] {
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
      continue;
    }
    if (!error_.ok()) TryResume();
    rocksdb::WriteBatch wb;
    bool sync = false;
    size_t commits = 0;
    std::vector<ReadJob> loads;  // loads and finds: they must see this group's writes
    group_max_id_ = 0;
    PlanGroup(group);
    Status status = error_;
    for (Request& request : group) {
      if (auto* commit = std::get_if<CommitRequest>(&request)) {
        ++commits;
        sync |= commit->sync;
        if (status.ok()) status = Apply(commit->batch, &wb);
      } else if (auto* load = std::get_if<LoadRequest>(&request)) {
        loads.emplace_back(std::move(*load));
      } else {
        loads.emplace_back(std::move(std::get<FindRequest>(request)));
      }
    }
    if (status.ok() && (wb.Count() > 0 || sync)) status = Write(&wb, sync);
    references_.clear();  // written, or lost with the failed write: either way, read anew
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
    if (!status.ok() && error_.ok()) {
      error_ = status;
      spdlog::error(
          "store: write failed, publishing persistent messages is refused until it "
          "recovers: {}",
          status.ToString());
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
  }
}

void RocksDbStore::ReclaimStep() {
  // About 4 MiB of entries per step: a few milliseconds of reading and one write.
  constexpr size_t kReclaimEntries = 4096;
  constexpr size_t kReclaimBytes = 4u << 20;
  if (reclaims_.empty() || !error_.ok() || !ReclaimAllowed()) return;
  if (options_.write_faults && options_.write_faults->reclaim_steps > 0) {
    --options_.write_faults->reclaim_steps;
  }
  StoredPurge& purge = reclaims_.front();
  const uint64_t queue_id = purge.queue_id;
  rocksdb::WriteBatch wb;
  group_max_id_ = 0;
  std::string lower = EntryKey(queue_id, purge.cursor_seq);
  std::string upper =
      purge.to_seq == UINT64_MAX ? EntryKey(queue_id + 1, 0) : EntryKey(queue_id, purge.to_seq);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read;
  read.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, entries_));
  size_t entries = 0;
  size_t bytes = 0;
  uint64_t next_cursor = purge.to_seq;
  Status status;
  for (it->Seek(lower); it->Valid(); it->Next()) {
    if (entries == kReclaimEntries || bytes >= kReclaimBytes) {
      auto parts = ParseEntryKey(std::string_view(it->key().data(), it->key().size()));
      if (parts) {
        next_cursor = parts->seq;
      } else {
        status = Status(StatusCode::kStoreUnavailable, "corrupt queue entry key");
      }
      break;
    }
    auto entry = DecodeEntryValue(std::string_view(it->value().data(), it->value().size()));
    if (entry && !(entry->flags & kEntryInline)) {
      status = Release(entry->message_id, entry->flags & kEntryShared, &wb);
      if (!status.ok()) break;
    }
    ++entries;
    bytes += it->key().size() + it->value().size();
  }
  if (status.ok() && !it->status().ok()) {
    status = FromRocksDb(it->status(), "cannot read a purged range to remove it");
  }
  if (!status.ok()) {
    // A read failed (a corrupt block?): writing is not at fault, so nothing else stops. The
    // range stays hidden and recorded, and its removal is tried again at the next start.
    references_.clear();
    spdlog::error(
        "store: cannot read purged queue id {} to remove it (left until the next "
        "start): {}",
        queue_id, status.ToString());
    reclaims_.pop_front();
    return;
  }
  const bool finished = next_cursor >= purge.to_seq;
  const uint64_t removed = purge.removed + entries;
  // The step's entries, the bodies only they held and the record's new position: one atomic
  // write, so a crash resumes exactly here.
  wb.DeleteRange(entries_, lower, finished ? upper : EntryKey(queue_id, next_cursor));
  if (!purge.recorded) {
    // A deleted queue's entries: the missing queue record is their record.
  } else if (finished) {
    wb.Delete(meta_, PurgeKey(queue_id, purge.from_seq));
  } else {
    wb.Put(meta_, PurgeKey(queue_id, purge.from_seq),
           EncodePurgeValue({next_cursor, purge.to_seq, purge.messages, removed}));
  }
  status = Write(&wb, false);
  references_.clear();
  if (!status.ok()) {
    if (error_.ok()) {
      error_ = status;
      spdlog::error(
          "store: removing purged queue id {} failed, writes are refused until it "
          "recovers: {}",
          queue_id, status.ToString());
    }
    return;  // the same step is tried again once writes work again
  }
  purge.cursor_seq = next_cursor;
  purge.removed = removed;
  {
    std::lock_guard lock(doomed_mu_);
    auto& ranges = doomed_[queue_id];
    for (auto range = ranges.begin(); range != ranges.end(); ++range) {
      if (range->second != purge.to_seq) continue;
      if (finished) {
        ranges.erase(range);
      } else {
        range->first = purge.cursor_seq;
      }
      break;
    }
    if (ranges.empty()) doomed_.erase(queue_id);
  }
  if (finished) {
    spdlog::info("store: {} queue id {} removed ({} entries)",
                 purge.recorded ? "purged range of" : "entries of deleted", queue_id,
                 purge.removed);
    // The space comes back once no log file holds the removed entries and compaction has
    // dropped them: after a large removal, flush the memtables (so the logs they pin can go)
    // and ask for the range's compaction now rather than whenever its files would be
    // compacted anyway. Both run on RocksDB's own threads; the writer does not wait. Not for
    // small ones: a client deleting queues by the hundred would pile up tiny files.
    if (purge.removed >= kReclaimEntries) {
      rocksdb::FlushOptions flush;
      flush.wait = false;
      flush.allow_write_stall = true;
      rocksdb::Status s = db_->Flush(flush, {meta_, messages_, entries_, delayed_});
      std::string begin = EntryKey(queue_id, purge.from_seq);
      rocksdb::Slice begin_slice(begin), end_slice(upper);
      if (s.ok()) s = db_->SuggestCompactRange(entries_, &begin_slice, &end_slice);
      if (!s.ok()) {
        spdlog::warn("store: cannot ask for a removed range's space back: {}", s.ToString());
      }
    }
    reclaims_.pop_front();
  } else if (reclaims_.size() > 1) {
    // Purges of several queues take turns, so each one shows progress.
    reclaims_.push_back(std::move(reclaims_.front()));
    reclaims_.pop_front();
  }
  ReclaimCallback callback;
  {
    std::lock_guard lock(mu_);
    callback = reclaim_callback_;
  }
  if (callback) {
    post_([callback = std::move(callback), queue_id, entries, finished] {
      callback(queue_id, entries, finished);
    });
  }
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

Status RocksDbStore::ReopenDb() {
  std::unique_lock lock(db_mu_);  // no load or count runs meanwhile
  if (const rocksdb::Snapshot* snapshot = recovery_snapshot_.exchange(nullptr)) {
    db_->ReleaseSnapshot(snapshot);
  }
  if (db_) {
    for (auto* handle : {meta_, messages_, entries_, delayed_}) {
      if (handle) db_->DestroyColumnFamilyHandle(handle);
    }
  }
  meta_ = messages_ = entries_ = delayed_ = nullptr;
  if (db_) db_->Close();
  db_.reset();
  return OpenDb();
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
  wb->Clear();
  if (!s.ok()) return FromRocksDb(s, "message store write failed");
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
  for (const StoreBatch::Op& op : batch.ops()) {
    Status status;
    std::visit(
        [&](const auto& o) {
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
            wb->Put(entries_, EntryKey(e.queue_id, e.seq), value);
          } else if constexpr (std::is_same_v<T, StoreBatch::RemoveEntry>) {
            const EntryRef& e = o.entry;
            // Put and removed in this group: neither reaches the disk.
            bool never_written = plan_.elided_entries.contains({e.queue_id, e.seq});
            if (!never_written) wb->Delete(entries_, EntryKey(e.queue_id, e.seq));
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
            wb->Put(meta_, Prefixed(kExchangePrefix, o.spec.name),
                    ToRecord(o.spec).SerializeAsString());
          } else if constexpr (std::is_same_v<T, StoreBatch::RemoveExchange>) {
            wb->Delete(meta_, Prefixed(kExchangePrefix, o.name));
            status = RemoveBindings(
                [&](const pb::BindingRecord& b) {
                  return b.exchange() == o.name || b.destination_exchange() == o.name;
                },
                wb);
          } else if constexpr (std::is_same_v<T, StoreBatch::PutQueue>) {
            wb->Put(meta_, Prefixed(kQueuePrefix, o.spec.name),
                    ToRecord(o.spec, o.queue_id).SerializeAsString());
            std::string next;
            AppendLittleEndian64(&next, o.queue_id + 1);
            wb->Put(meta_, rocksdb::Slice(kNextQueueIdKey.data(), kNextQueueIdKey.size()), next);
          } else if constexpr (std::is_same_v<T, StoreBatch::RemoveQueue>) {
            wb->Delete(meta_, Prefixed(kQueuePrefix, o.name));
            wb->Delete(meta_, DeliveredKey(o.queue_id));
            status = RemoveBindings(
                [&](const pb::BindingRecord& b) {
                  return b.destination_exchange().empty() && b.queue() == o.name;
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
          } else if constexpr (std::is_same_v<T, StoreBatch::PutRedrive>) {
            wb->Put(meta_, RedriveKey(o.redrive.queue_id), ToRecord(o.redrive).SerializeAsString());
          } else if constexpr (std::is_same_v<T, StoreBatch::PutDelayed>) {
            group_max_id_ = std::max(group_max_id_, o.entry.message_id);
            status = PutTimelineEntry(o.entry, o.due_ms, wb);
          } else if constexpr (std::is_same_v<T, StoreBatch::DelayEntry>) {
            const EntryRef& e = o.entry;
            if (!plan_.elided_entries.contains({e.queue_id, e.seq})) {
              wb->Delete(entries_, EntryKey(e.queue_id, e.seq));
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
            wb->Put(meta_, Prefixed(kUserPrefix, o.user.name), record.SerializeAsString());
          } else if constexpr (std::is_same_v<T, StoreBatch::RemoveUser>) {
            wb->Delete(meta_, Prefixed(kUserPrefix, o.name));
          } else if constexpr (std::is_same_v<T, StoreBatch::MarkDelivered>) {
            std::string seq;
            AppendLittleEndian64(&seq, o.seq);
            wb->Put(meta_, DeliveredKey(o.queue_id), seq);
          }
        },
        op);
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
