// The opening of RocksDbStore's database (store/rocksdb_store.h): the options of each column
// family, which lane families exist and the making of the others when first written, the
// diagnosis of a store that does not open, and the reopening after a failed write. Split from
// rocksdb_store.cc by concern: the column families and how they are configured.
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <rocksdb/write_buffer_manager.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "store/background_errors.h"
#include "store/dedup_expiry.h"
#include "store/keys.h"
#include "store/rocksdb_logger.h"
#include "store/rocksdb_status.h"
#include "store/rocksdb_store.h"
#include "store/store_check.h"
#include "store/store_repair.h"

namespace wharf::store {
namespace {

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

}  // namespace

Status RocksDbStore::Damaged(const Status& error) const {
  // A full disk is not damage; neither is what no file explains (a permission): said as it is.
  if (error.code() == StatusCode::kStoreFull) return error;
  // Diagnose reads every table: not for a store merely locked by another wharfd.
  bool may_be_damage = false;
  for (std::string_view sign :
       {"Corruption", "CURRENT", "MANIFEST", ".sst", ".log", "No such file"}) {
    may_be_damage |= error.message().find(sign) != std::string_view::npos;
  }
  if (!may_be_damage) return error;
  std::vector<Damage> damage = Diagnose(options_.path);
  if (damage.empty()) return error;
  return Status(StatusCode::kStoreUnavailable,
                "the message store at " + options_.path + " is damaged: " + DescribeDamage(damage) +
                    " [" + std::string(error.message()) +
                    "]. wharfd will not start on it. Salvage every readable message with: "
                    "wharfd --repair (with the --config and --data-dir of this start; the "
                    "damaged store is kept aside; docs/operations.md, \"A corrupt store\")");
}

Status RocksDbStore::OpenDb() {
  // The memtables' memory is charged to this cache (the WriteBufferManager below), so its
  // capacity is both budgets: blocks keep block_cache_bytes while the memtables are full. Sized
  // at block_cache_bytes alone, the memtables' charge (up to memtable_bytes, by default twice
  // the cache) evicted nearly every block while publishes ran, and each lookup into a
  // deduplication window read its filter partition from the page cache again
  // (docs/benchmarks.md).
  auto cache = rocksdb::NewLRUCache(options_.block_cache_bytes + options_.memtable_bytes);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));

  rocksdb::Options db_options;
  // A directory with files of a store but no CURRENT is damage, not a new store: RocksDB would
  // make an empty one and delete the files it does not know (docs/storage.md, "Corruption").
  db_options.create_if_missing = true;
  if (auto interrupted = InterruptedRepair(options_.path)) {
    return Status(StatusCode::kStoreUnavailable, *interrupted);
  }
  const bool has_database =
      std::filesystem::exists(std::filesystem::path(options_.path) / "CURRENT");
  if (!has_database && HasDatabaseFiles(options_.path)) {
    return Status(
        StatusCode::kStoreUnavailable,
        "cannot open the message store at " + options_.path + ": its CURRENT file is missing");
  }
  // Replaying the log, a torn last record (a crash or power cut mid-write) is dropped; damage
  // anywhere else refuses the start, where the default (point in time) silently dropped
  // everything after it. Checksums are verified on every read (the default).
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  db_options.paranoid_checks = true;
  db_options.create_missing_column_families = true;
  db_options.max_background_jobs = 2;
  db_options.bytes_per_sync = 1u << 20;
  // The meta family is rarely flushed; without a cap it would keep every WAL file alive.
  db_options.max_total_wal_size = 256u << 20;
  db_options.write_buffer_manager =
      std::make_shared<rocksdb::WriteBufferManager>(options_.memtable_bytes, cache);
  db_options.info_log_level = rocksdb::WARN_LEVEL;
  // RocksDB logs into wharfd's log, never into a file of its own on the data disk.
  db_options.info_log = MakeRocksDbLogger(rocksdb::WARN_LEVEL);
  // One thread writes (the writer), so memtable inserts need no concurrency, and without it
  // they can start from a hint: the last insert of the same prefix (below).
  db_options.allow_concurrent_memtable_write = false;
  db_options.keep_log_file_num = 4;
  // A compaction that runs out of space is retried, not kept as an error (background_errors.h).
  if (!background_errors_) background_errors_ = std::make_shared<BackgroundErrors>();
  db_options.listeners.push_back(background_errors_);
  if (options_.write_faults || options_.file_system) {
    std::shared_ptr<rocksdb::FileSystem> fs =
        options_.file_system ? options_.file_system : rocksdb::FileSystem::Default();
    if (options_.write_faults) fs = std::make_shared<FullDiskFileSystem>(fs, options_.write_faults);
    env_ = rocksdb::NewCompositeEnv(fs);
    db_options.env = env_.get();
  }

  rocksdb::ColumnFamilyOptions meta;
  meta.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  // Off (window 0) until the disk is low: then files made mostly of removals are compacted
  // at once, so a drained queue gives its space back (WatchDisk).
  if (!deletions_) deletions_ = rocksdb::NewCompactOnDeletionCollectorFactory(0, 0);
  meta.table_properties_collector_factories.push_back(deletions_);
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

  // Deduplication records: point lookups (bloom filters, from meta), expired ones dropped by
  // compaction, and every file compacted at least daily so they go without new writes too.
  rocksdb::ColumnFamilyOptions dedup = meta;
  // Keys arrive in no order, so every table overlaps every other: large memtables keep the
  // number of level-0 tables (each one a lookup per publish, and write stalls past 20) low.
  dedup.write_buffer_size = options_.memtable_bytes / 4;
  // Universal (size-tiered) compaction. Records are written once and never updated; leveled
  // compaction merged every few level-0 tables into the whole base level, so each record was
  // rewritten again and again as a window filled (3 to 3.7 µs of compaction a message over
  // 150 s, against 1.2 to 2; docs/benchmarks.md). Tables that do not overlap, as keys that
  // rise with time make, are moved without a rewrite. Everything is merged into one run once
  // the newer runs reach half the oldest: each run is one more filter to probe per lookup, and
  // with keys in no order more runs cost the writer more than the merging saves (RocksDB's
  // default, 200%, ran 11% slower than leveled there). A store compacted the leveled way opens
  // as it is: each of its levels is a sorted run, and the number of levels is unchanged.
  dedup.compaction_style = rocksdb::kCompactionStyleUniversal;
  dedup.compaction_options_universal.allow_trivial_move = true;
  dedup.compaction_options_universal.max_size_amplification_percent = 50;
  dedup.compaction_filter_factory = std::make_shared<DedupExpiryFactory>();
  dedup.periodic_compaction_seconds = 24 * 3600;
  // Nearly every lookup is for a key that is not there (a first publish): a bloom filter over
  // the memtables' keys answers those without searching the skip lists.
  dedup.memtable_whole_key_filtering = true;
  // About 10 bits a key (a 16 MiB memtable holds about 200,000 records); at 5% (26 bits a
  // key) its misses in the CPU cache cost the writer 0.1 µs a message more (docs/benchmarks.md).
  dedup.memtable_prefix_bloom_size_ratio = 0.015;
  // A table of a million keys has a 1.2 MiB filter. Whole, it is larger than a shard of the
  // block cache (32 MiB in 64 shards, and the memtables' charge fills it while publishes run),
  // so it was never kept: every lookup read and checksummed it again (7,000 msg/s after the
  // first million keys). Partitioned, each lookup reads a 4 KiB filter partition and index
  // partition, which the cache keeps; only the small top levels are pinned.
  rocksdb::BlockBasedTableOptions dedup_table = table;
  dedup_table.index_type = rocksdb::BlockBasedTableOptions::IndexType::kTwoLevelIndexSearch;
  dedup_table.partition_filters = true;
  dedup_table.metadata_block_size = 4096;
  dedup_table.cache_index_and_filter_blocks_with_high_priority = true;
  dedup_table.pin_top_level_index_and_filter = true;
  dedup.table_factory.reset(rocksdb::NewBlockBasedTableFactory(dedup_table));

  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, meta},
      {kColumnMessages, messages},
      {kColumnEntries, entries},
      {kColumnDelayed, entries},
      {kColumnDedup, dedup},
  };
  // The lane families made so far (EntriesForWrite makes the others when first written): a
  // store without priority queues has none. Each family made costs RocksDB a rewrite of its
  // OPTIONS file (every family's options, written, synced and parsed back), at every open too.
  std::vector<std::string> existing;
  if (has_database) {
    rocksdb::Status listed = rocksdb::DB::ListColumnFamilies(db_options, options_.path, &existing);
    if (!listed.ok()) {
      return FromRocksDb(listed, "cannot open the message store at " + options_.path);
    }
  }
  std::vector<int> lanes_opened;
  for (int f = 1; f < kLaneFamilies; ++f) {
    if (std::find(existing.begin(), existing.end(), kEntriesFamilies[f]) == existing.end()) {
      continue;
    }
    families.push_back({kEntriesFamilies[f], entries});
    lanes_opened.push_back(f);
  }
  entries_options_ = std::make_unique<rocksdb::ColumnFamilyOptions>(entries);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options_.path, families, &handles, &db);
  if (!s.ok()) return FromRocksDb(s, "cannot open the message store at " + options_.path);
  db_.reset(db);
  meta_ = handles[0];
  messages_ = handles[1];
  entries_[0].store(handles[2], std::memory_order_release);
  delayed_ = handles[3];
  dedup_ = handles[4];
  dedup_writer_.Reset(db_.get(), dedup_);
  for (size_t i = 0; i < lanes_opened.size(); ++i) {
    entries_[lanes_opened[i]].store(handles[5 + i], std::memory_order_release);
  }
  last_resume_ = std::chrono::steady_clock::now();
  return Status::Ok();
}

Status RocksDbStore::EntriesForWrite(uint64_t seq, rocksdb::ColumnFamilyHandle** family) {
  const int f = LaneFamily(SeqLane(seq));
  *family = entries_[f].load(std::memory_order_acquire);
  if (*family) return Status::Ok();
  // The writer is the only thread that makes families. The reader finds the handle through
  // the atomic; it never looks for entries that were not written (and confirmed) before.
  rocksdb::ColumnFamilyHandle* made = nullptr;
  rocksdb::Status s = db_->CreateColumnFamily(*entries_options_, kEntriesFamilies[f], &made);
  if (!s.ok()) {
    return FromRocksDb(s, std::string("cannot make the column family ") + kEntriesFamilies[f]);
  }
  spdlog::debug("store: made column family {} (the first entry of lane {})", kEntriesFamilies[f],
                int{SeqLane(seq)});
  entries_[f].store(made, std::memory_order_release);
  *family = made;
  return Status::Ok();
}

std::vector<rocksdb::ColumnFamilyHandle*> RocksDbStore::AllFamilies() const {
  std::vector<rocksdb::ColumnFamilyHandle*> families = {meta_, messages_};
  for (const auto& family : entries_) {
    if (auto* handle = family.load(std::memory_order_acquire)) families.push_back(handle);
  }
  families.push_back(delayed_);
  families.push_back(dedup_);
  return families;
}

Status RocksDbStore::ReopenDb() {
  std::unique_lock lock(db_mu_);  // no load or count runs meanwhile
  if (const rocksdb::Snapshot* snapshot = recovery_snapshot_.exchange(nullptr)) {
    db_->ReleaseSnapshot(snapshot);
  }
  if (db_) {
    for (auto* handle : AllFamilies()) {
      if (handle) db_->DestroyColumnFamilyHandle(handle);
    }
  }
  meta_ = messages_ = delayed_ = dedup_ = nullptr;
  for (auto& family : entries_) family.store(nullptr, std::memory_order_release);
  if (db_) db_->Close();
  db_.reset();
  return OpenDb();
}

}  // namespace wharf::store
