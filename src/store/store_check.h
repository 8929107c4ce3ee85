// store/store_check.h
//
// Finding damage in a message store directory (docs/storage.md, "Corruption"): which file, what
// kind of damage, and what it holds. Used when the store refuses to open (the error names the
// file) and by the repair (store/store_repair.h), which also uses WalkReadable to read every
// key it can around a damaged block.
//
// Thread safety: free functions; run them on a store no process has open (the repair takes
// RocksDB's LOCK first).
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/iterator.h>

#include <cstdarg>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "wharf/status.h"

namespace wharf::store {

// One damaged file, as an operator reads it.
struct Damage {
  std::string file;      // name inside the store directory, e.g. "000012.log"
  std::string kind;      // e.g. "checksum mismatch in a data block", "truncated"
  std::string affected;  // what it holds that may be lost, as far as can be told
};

// A span of keys a walk could not read: every key after `after` and before `resume` may be
// lost (empty `after`: from the start; empty `resume`: to the end).
struct DamagedSpan {
  std::string after;
  std::string resume;
  std::string error;  // RocksDB's message (it names the file and offset)
};

// Makes a fresh iterator over the same data (an iterator is not trusted after an error).
using IteratorFactory = std::function<std::unique_ptr<rocksdb::Iterator>()>;

// Visits every readable key in order. When a read fails (a checksum mismatch in a block), it
// looks for the first key past the damage by seeking forward from the last good key, and
// carries on from there; each skipped span is reported. A key is visited only once it was read
// and checked: a damaged block never yields a wrong key or value. Returns the number of keys
// visited.
uint64_t WalkReadable(
    const IteratorFactory& make,
    const std::function<void(const rocksdb::Slice& key, const rocksdb::Slice& value)>& visit,
    std::vector<DamagedSpan>* damaged);

// The key's meaning for a report: "queue id 3 seq 1001" for an entry key, "message 77" for a
// body key, the printable form of the rest. `family` is the column family's name.
std::string DescribeKey(std::string_view family, std::string_view key);

// Looks at every file of the store at `path` that can be checked without opening it: CURRENT
// and the MANIFEST it names, every table (*.sst: opened and every block's checksum verified)
// and the write-ahead logs (replayed read-only; a damaged record is reported with its file).
// `open_error` is why the store would not open, if it did not: it is reported against the
// MANIFEST when nothing else explains it.
std::vector<Damage> Diagnose(const std::string& path, std::string_view open_error = {});

// One line per damage: "000012.log: checksum mismatch ... (holds: ...)".
std::string DescribeDamage(const std::vector<Damage>& damage);

// Keeps RocksDB's warnings and errors, to tell which write-ahead log a replay found damaged
// (RocksDB names the file only in its log: "<dir>/000012.log: dropping 2104 bytes; ...").
class CapturingLogger final : public rocksdb::Logger {
 public:
  CapturingLogger() : rocksdb::Logger(rocksdb::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override { Logv(rocksdb::INFO_LEVEL, format, ap); }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override;
  std::vector<std::string> lines();

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// The lines of `lines` that report a dropped write-ahead log record.
std::vector<std::string> DroppedLogRecords(const std::vector<std::string>& lines);

// A RocksDB database with its column families by name, closed on destruction.
struct OpenedDb {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  std::unordered_map<std::string, rocksdb::ColumnFamilyHandle*> by_name;
  OpenedDb() = default;
  OpenedDb(const OpenedDb&) = delete;
  OpenedDb& operator=(const OpenedDb&) = delete;
  ~OpenedDb();
};

// Opens the database at `path` read-only with every column family it has (its logs replayed
// into memory as `options` say; nothing is written).
rocksdb::Status OpenReadOnly(const std::string& path, const rocksdb::DBOptions& options,
                             OpenedDb* out);

// Whether the directory holds any file of a RocksDB database (so a missing CURRENT is damage,
// not a new store).
bool HasDatabaseFiles(const std::string& path);

}  // namespace wharf::store
