#include "store/store_repair.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table_properties.h>
#include <rocksdb/write_batch.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <set>
#include <unordered_map>

#include "store/keys.h"
#include "store/records.h"
#include "store/store_check.h"

namespace wharf::store {
namespace {

namespace fs = std::filesystem;

constexpr size_t kBatchBytes = 4u << 20;

std::string UtcStamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &tm);
  return text;
}

Status Fail(std::string_view what, const rocksdb::Status& s) {
  return Status(StatusCode::kStoreUnavailable, std::string(what) + ": " + s.ToString());
}

void SyncDirectoryBestEffort(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

Status OpenSource(const std::string& path, const std::shared_ptr<rocksdb::Logger>& logger,
                  OpenedDb* out) {
  rocksdb::DBOptions options;
  options.info_log = logger;
  // Every readable record of every log: a damaged one is skipped, not the rest of the log.
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords;
  options.paranoid_checks = true;
  rocksdb::Status s = OpenReadOnly(path, options, out);
  return s.ok() ? Status::Ok() : Fail("cannot open the store read-only", s);
}

// The working copy RepairDB may change: tables and blob files hard-linked (RocksDB never
// writes to them), everything else copied.
Status LinkCopy(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to, ec);
  if (ec) return Status(StatusCode::kIoError, "cannot create " + to.string() + ": " + ec.message());
  for (const auto& entry : fs::directory_iterator(from, ec)) {
    if (!entry.is_regular_file()) continue;
    const fs::path name = entry.path().filename();
    if (name == "LOCK") continue;
    const std::string ext = name.extension().string();
    std::error_code link_ec;
    if (ext == ".sst" || ext == ".blob") fs::create_hard_link(entry.path(), to / name, link_ec);
    if (ext != ".sst" && ext != ".blob") link_ec = std::make_error_code(std::errc::not_supported);
    if (link_ec) fs::copy_file(entry.path(), to / name, ec);
    if (ec) {
      return Status(StatusCode::kIoError,
                    "cannot copy " + entry.path().string() + ": " + ec.message());
    }
  }
  if (ec) return Status(StatusCode::kIoError, "cannot read " + from.string() + ": " + ec.message());
  return Status::Ok();
}

// RepairDB learns the column families from the tables' properties, and drops the log
// records of a family that has none (a family written only since the last flush: recent
// delayed messages, say). So each of Wharf's families without a table gets an empty one
// first: a table holding only a range removal past every key Wharf writes (sixteen 0xff
// bytes then 0xfe, up to seventeen 0xff), written with the family's id as a scratch database
// made in the store's order gives it (default 0, messages 1, entries 2, delayed 3).
Status AddPlaceholderTables(const fs::path& work) {
  std::set<std::string> present;
  uint64_t highest = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(work, ec)) {
    if (entry.path().extension() != ".sst") continue;
    highest = std::max<uint64_t>(highest, std::strtoull(entry.path().stem().c_str(), nullptr, 10));
    rocksdb::SstFileReader reader{rocksdb::Options()};
    if (!reader.Open(entry.path().string()).ok()) continue;
    if (auto props = reader.GetTableProperties()) present.insert(props->column_family_name);
  }
  const fs::path scratch = work / "placeholder-families";
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const char* name : kColumnFamilies) {
    families.push_back({name, rocksdb::ColumnFamilyOptions()});
  }
  Status result;
  {
    OpenedDb db;
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(options, scratch.string(), families, &db.handles, &raw);
    if (!s.ok()) return Fail("cannot make the placeholder tables", s);
    db.db.reset(raw);
    const std::string begin = std::string(16, '\xff') + '\xfe';
    const std::string end(17, '\xff');
    for (size_t i = 0; i < families.size() && result.ok(); ++i) {
      if (present.contains(families[i].name)) continue;
      char name[32];
      std::snprintf(name, sizeof name, "%06llu.sst",
                    static_cast<unsigned long long>(highest + 1 + i));
      rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), rocksdb::Options(), db.handles[i]);
      s = writer.Open((work / name).string());
      if (s.ok()) s = writer.DeleteRange(begin, end);
      if (s.ok()) s = writer.Finish();
      if (!s.ok()) result = Fail("cannot write a placeholder table", s);
    }
  }
  fs::remove_all(scratch, ec);
  return result;
}

// Counts what is copied into the new store, for the report.
struct Tally {
  std::unordered_map<uint64_t, uint64_t> entries;   // queue id -> entries
  std::unordered_map<uint64_t, uint64_t> delayed;   // queue id -> delayed messages
  std::unordered_map<uint64_t, std::string> names;  // queue id -> name
  uint64_t max_message_id = 0;
  bool has_format = false;

  void Count(const std::string& family, const rocksdb::Slice& key, const rocksdb::Slice& value) {
    std::string_view k(key.data(), key.size()), v(value.data(), value.size());
    if (IsEntriesFamily(family)) {
      if (auto parts = ParseEntryKey(k)) ++entries[parts->queue_id];
      if (auto entry = DecodeEntryValue(v)) {
        max_message_id = std::max(max_message_id, entry->message_id);
      }
    } else if (family == kColumnMessages && k.size() == 8) {
      max_message_id = std::max(max_message_id, ReadBigEndian64(k));
    } else if (family == kColumnDelayed) {
      if (auto parts = ParseDelayedKey(k)) {
        ++delayed[parts->queue_id];
        max_message_id = std::max(max_message_id, parts->message_id);
      }
    } else if (family == rocksdb::kDefaultColumnFamilyName && !k.empty()) {
      if (k == kFormatKey) has_format = true;
      if (k[0] == kQueuePrefix || k[0] == kVhostQueuePrefix) {
        pb::QueueRecord record;
        if (record.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
          names[record.queue_id()] = record.name();
        }
      } else if (k == kMaxMessageIdKey && v.size() == 8) {
        max_message_id = std::max(max_message_id, ReadLittleEndian64(v));
      }
    }
  }
};

// Writes puts in batches of a few MiB, without the log: the new store is flushed and synced
// before it replaces anything.
class Copier {
 public:
  explicit Copier(rocksdb::DB* db) : db_(db) { write_.disableWAL = true; }
  Status Put(rocksdb::ColumnFamilyHandle* family, const rocksdb::Slice& key,
             const rocksdb::Slice& value) {
    batch_.Put(family, key, value);
    return batch_.GetDataSize() >= kBatchBytes ? Flush() : Status::Ok();
  }
  Status Flush() {
    if (batch_.Count() == 0) return Status::Ok();
    rocksdb::Status s = db_->Write(write_, &batch_);
    batch_.Clear();
    return s.ok() ? Status::Ok() : Fail("cannot write the new store", s);
  }

 private:
  rocksdb::DB* db_;
  rocksdb::WriteOptions write_;
  rocksdb::WriteBatch batch_;
};

std::string SpanText(const std::string& family, const DamagedSpan& span) {
  return "column family '" + family + "': keys after " +
         (span.after.empty() ? std::string("the start") : DescribeKey(family, span.after)) +
         " and before " +
         (span.resume.empty() ? std::string("the end") : DescribeKey(family, span.resume)) +
         " could not be read (" + span.error + ")";
}

// The readable keys of a table RepairDB could not use whole, put into the new store where it
// has no value for them.
Status SalvageTable(const fs::path& table, OpenedDb* target, Tally* tally, RepairReport* report) {
  rocksdb::Options options;
  rocksdb::SstFileReader reader(options);
  rocksdb::Status s = reader.Open(table.string());
  if (!s.ok()) {
    report->files_set_aside.push_back(
        table.filename().string() + ": unreadable, every key in it is lost (" + s.ToString() + ")");
    return Status::Ok();
  }
  auto props = reader.GetTableProperties();
  const std::string family = props ? props->column_family_name : "";
  auto handle = target->by_name.find(family);
  if (handle == target->by_name.end()) {
    report->files_set_aside.push_back(table.filename().string() + ": of unknown column family '" +
                                      family + "', not salvaged");
    return Status::Ok();
  }
  Copier copier(target->db.get());
  Status status;
  std::vector<DamagedSpan> spans;
  uint64_t salvaged = 0;
  WalkReadable(
      [&reader] {
        return std::unique_ptr<rocksdb::Iterator>(reader.NewIterator(rocksdb::ReadOptions()));
      },
      [&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
        if (!status.ok()) return;
        std::string existing;
        rocksdb::Status got =
            target->db->Get(rocksdb::ReadOptions(), handle->second, key, &existing);
        if (!got.IsNotFound()) return;  // the store has it: a later version, or the same
        tally->Count(family, key, value);
        status = copier.Put(handle->second, key, value);
        ++salvaged;
      },
      &spans);
  WHARF_RETURN_IF_ERROR(status);
  WHARF_RETURN_IF_ERROR(copier.Flush());
  report->files_set_aside.push_back(table.filename().string() + ": could not be used whole; " +
                                    std::to_string(salvaged) + " keys salvaged from it");
  for (const DamagedSpan& span : spans) report->lost.push_back(SpanText(family, span));
  return Status::Ok();
}

Status BuildNewStore(const std::string& new_path, OpenedDb* source, const fs::path& lost_dir,
                     bool log_damaged, RepairReport* report, Tally* tally) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.error_if_exists = true;
  std::vector<std::string> names(std::begin(kColumnFamilies), std::end(kColumnFamilies));
  for (const auto& [name, handle] : source->by_name) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names) families.push_back({name, rocksdb::ColumnFamilyOptions()});
  OpenedDb target;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, new_path, families, &target.handles, &db);
  if (!s.ok()) return Fail("cannot create the new store at " + new_path, s);
  target.db.reset(db);
  for (size_t i = 0; i < names.size(); ++i) target.by_name[names[i]] = target.handles[i];

  // Every readable key of every family, in key order.
  for (const auto& [family, handle] : source->by_name) {
    Copier copier(target.db.get());
    Status status;
    std::vector<DamagedSpan> spans;
    rocksdb::ColumnFamilyHandle* to = target.by_name[family];
    rocksdb::DB* from = source->db.get();
    rocksdb::ColumnFamilyHandle* from_handle = handle;
    report->keys += WalkReadable(
        [from, from_handle] {
          rocksdb::ReadOptions read;
          read.fill_cache = false;
          return std::unique_ptr<rocksdb::Iterator>(from->NewIterator(read, from_handle));
        },
        [&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
          if (!status.ok()) return;
          tally->Count(family, key, value);
          status = copier.Put(to, key, value);
        },
        &spans);
    WHARF_RETURN_IF_ERROR(status);
    WHARF_RETURN_IF_ERROR(copier.Flush());
    for (const DamagedSpan& span : spans) report->lost.push_back(SpanText(family, span));
  }
  // Tables RepairDB set aside whole: what of them still reads.
  std::error_code ec;
  if (fs::is_directory(lost_dir, ec)) {
    std::vector<fs::path> tables;
    for (const auto& entry : fs::directory_iterator(lost_dir, ec)) {
      if (entry.path().extension() == ".sst") tables.push_back(entry.path());
    }
    std::sort(tables.begin(), tables.end());
    for (const fs::path& table : tables) {
      WHARF_RETURN_IF_ERROR(SalvageTable(table, &target, tally, report));
    }
  }
  // New message ids must start above every id still stored, whatever "M" said.
  rocksdb::WriteBatch fix;
  auto* meta = target.by_name[rocksdb::kDefaultColumnFamilyName];
  // Messages of a queue id with no queue record: in a sound store, a deleted queue's entries
  // still being removed (a start removes them). If anything was lost, the record may have
  // been: the queue comes back as wharf.recovered.<id> rather than have its messages removed
  // at the first start as a deleted queue's (at-least-once: a deleted queue may come back).
  const bool damaged = log_damaged || report->rebuilt_manifest || !report->lost.empty() ||
                       !report->files_set_aside.empty();
  std::set<uint64_t> orphans;
  for (const auto* counts : {&tally->entries, &tally->delayed}) {
    for (const auto& [queue_id, count] : *counts) {
      if (!tally->names.count(queue_id)) orphans.insert(queue_id);
    }
  }
  for (uint64_t queue_id : damaged ? orphans : std::set<uint64_t>{}) {
    QueueSpec spec;
    spec.name = "wharf.recovered." + std::to_string(queue_id);
    spec.durable = true;
    const std::string record = ToRecord(spec, queue_id).SerializeAsString();
    const std::string key = QueueKey("/", spec.name);
    fix.Put(meta, key, record);
    tally->names[queue_id] = spec.name;
    report->recovered_queues.push_back(spec.name);
  }
  std::string id;
  AppendLittleEndian64(&id, tally->max_message_id);
  fix.Put(meta, rocksdb::Slice(kMaxMessageIdKey.data(), kMaxMessageIdKey.size()), id);
  if (!tally->has_format) {
    fix.Put(meta, rocksdb::Slice(kFormatKey.data(), kFormatKey.size()),
            std::to_string(kFormatVersion));
    report->lost.push_back("the storage format version was lost: written anew as " +
                           std::to_string(kFormatVersion));
  }
  rocksdb::WriteOptions sync;
  sync.sync = true;
  s = target.db->Write(sync, &fix);
  if (!s.ok()) return Fail("cannot write the new store", s);
  rocksdb::FlushOptions flush;
  flush.wait = true;
  s = target.db->Flush(flush, target.handles);
  if (!s.ok()) return Fail("cannot flush the new store", s);
  s = target.db->SyncWAL();
  if (!s.ok() && !s.IsNotSupported()) return Fail("cannot sync the new store", s);
  return Status::Ok();
}

}  // namespace

std::optional<std::string> InterruptedRepair(const std::string& path) {
  std::error_code ec;
  if (fs::exists(fs::path(path) / "CURRENT", ec)) return std::nullopt;
  const fs::path store = fs::path(path).lexically_normal();
  const std::string prefix = store.filename().string() + ".repair-";
  for (const auto& entry : fs::directory_iterator(store.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !fs::exists(entry.path() / "CURRENT", ec)) continue;
    return "a repair of the message store at " + path +
           " was interrupted before it finished: " + "the repaired store is " +
           entry.path().string() + " (move it to " + path + "; the damaged one is beside it as " +
           store.filename().string() +
           ".corrupt-*); wharfd will not start a new, empty store in its place";
  }
  return std::nullopt;
}

Result<RepairReport> RepairStore(const std::string& path) {
  std::error_code ec;
  if (auto interrupted = InterruptedRepair(path)) {
    return Status(StatusCode::kFailedPrecondition, *interrupted);
  }
  if (!fs::is_directory(path, ec)) {
    return Status(StatusCode::kInvalidConfig, "no message store at " + path);
  }
  RepairReport report;
  report.store = path;
  rocksdb::Env* env = rocksdb::Env::Default();
  rocksdb::FileLock* lock = nullptr;
  rocksdb::Status s = env->LockFile(path + "/LOCK", &lock);
  if (!s.ok()) {
    return Status(StatusCode::kFailedPrecondition,
                  "cannot lock the message store at " + path +
                      " (is a wharfd running on it? stop it first): " + s.ToString());
  }
  const std::string stamp = UtcStamp();
  const std::string new_path = path + ".repair-" + stamp;
  const std::string work_path = path + ".work-" + stamp;
  report.set_aside = path + ".corrupt-" + stamp;
  auto cleanup = [&] {
    std::error_code ignored;
    fs::remove_all(new_path, ignored);
    fs::remove_all(work_path, ignored);  // hard links and copies: the store keeps its files
  };

  auto logger = std::make_shared<CapturingLogger>();
  Status result;
  {
    OpenedDb source;
    Status opened = OpenSource(path, logger, &source);
    fs::path lost_dir;
    if (!opened.ok()) {
      // CURRENT, the MANIFEST or a whole table is unusable: rebuild the MANIFEST from the
      // files, on a copy.
      report.rebuilt_manifest = true;
      report.lost.push_back("the store would not open (" + std::string(opened.message()) +
                            "): its MANIFEST was rebuilt from the files by RocksDB's RepairDB");
      result = LinkCopy(path, work_path);
      if (result.ok()) result = AddPlaceholderTables(work_path);
      if (result.ok()) {
        rocksdb::DBOptions options;
        options.info_log = logger;
        std::vector<rocksdb::ColumnFamilyDescriptor> families;
        for (const char* name : kColumnFamilies) {
          families.push_back({name, rocksdb::ColumnFamilyOptions()});
        }
        s = rocksdb::RepairDB(work_path, options, families, rocksdb::ColumnFamilyOptions());
        if (!s.ok()) result = Fail("RocksDB could not rebuild the store", s);
      }
      if (result.ok()) result = OpenSource(work_path, logger, &source);
      lost_dir = fs::path(work_path) / "lost";
    }
    Tally tally;
    const bool log_damaged = !DroppedLogRecords(logger->lines()).empty();
    if (result.ok()) {
      result = BuildNewStore(new_path, &source, lost_dir, log_damaged, &report, &tally);
    }
    if (result.ok()) {
      for (const auto& [queue_id, count] : tally.entries) {
        auto name = tally.names.find(queue_id);
        if (name == tally.names.end()) {
          report.deleted_leftovers += count;  // a deleted queue's, removed at the next start
          continue;
        }
        report.messages[name->second] += count;
      }
      for (const auto& [queue_id, count] : tally.delayed) {
        auto name = tally.names.find(queue_id);
        if (name == tally.names.end()) {
          report.deleted_leftovers += count;
          continue;
        }
        report.delayed[name->second] += count;
      }
      for (const std::string& line : DroppedLogRecords(logger->lines())) {
        report.lost.push_back("write-ahead log record skipped: " + line);
      }
    }
  }
  env->UnlockFile(lock);
  if (!result.ok()) {
    cleanup();
    return result;
  }
  // Swap: the new store in place and the damaged one out, in one atomic exchange of the two
  // names (renameat2 RENAME_EXCHANGE), so there is no moment without a store at `path`; then
  // the damaged one, now under the new store's temporary name, moves to its .corrupt name.
  // Where the file system cannot exchange, two renames; a start between them is refused by
  // InterruptedRepair (below), which names both directories.
  if (::renameat2(AT_FDCWD, new_path.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
    fs::rename(new_path, report.set_aside, ec);
    if (ec) {
      return Status(StatusCode::kIoError, "the repaired store is in place at " + path +
                                              " but the damaged one could not be moved from " +
                                              new_path + " to " + report.set_aside + ": " +
                                              ec.message());
    }
  } else {
    fs::rename(path, report.set_aside, ec);
    if (ec) {
      cleanup();
      return Status(StatusCode::kIoError, "cannot move the damaged store aside to " +
                                              report.set_aside + ": " + ec.message() +
                                              " (nothing was changed)");
    }
    fs::rename(new_path, path, ec);
    if (ec) {
      return Status(StatusCode::kIoError, "the damaged store is at " + report.set_aside +
                                              " but the repaired one could not be moved from " +
                                              new_path + " to " + path + ": " + ec.message() +
                                              "; move it there by hand");
    }
  }
  SyncDirectoryBestEffort(fs::path(path).parent_path());
  {
    std::error_code ignored;
    fs::remove_all(work_path, ignored);
  }
  return report;
}

std::string FormatRepairReport(const RepairReport& report) {
  std::string out = "repaired the message store at " + report.store + "\n";
  out += "the damaged store is kept at " + report.set_aside + " (remove it once satisfied)\n";
  uint64_t total = 0;
  for (const auto& [queue, count] : report.messages) total += count;
  out += "salvaged " + std::to_string(total) + " stored messages in " +
         std::to_string(report.messages.size()) + " queues (" + std::to_string(report.keys) +
         " keys in all):\n";
  for (const auto& [queue, count] : report.messages) {
    out += "  queue " + queue + ": " + std::to_string(count) + " messages\n";
  }
  for (const auto& [queue, count] : report.delayed) {
    out += "  queue " + queue + ": " + std::to_string(count) + " delayed messages\n";
  }
  for (const std::string& queue : report.recovered_queues) {
    out += "queue " + queue +
           " was made for messages whose queue record could not be read: "
           "consume them, or move them where they belong, then delete it\n";
  }
  if (report.deleted_leftovers > 0) {
    out += "not counted: " + std::to_string(report.deleted_leftovers) +
           " entries of deleted queues, removed at the next start as always\n";
  }
  if (report.lost.empty() && report.files_set_aside.empty()) {
    out += "nothing was lost: every key of the store was read\n";
  }
  for (const std::string& line : report.lost) out += "lost: " + line + "\n";
  for (const std::string& line : report.files_set_aside) out += "file set aside: " + line + "\n";
  return out;
}

}  // namespace wharf::store
