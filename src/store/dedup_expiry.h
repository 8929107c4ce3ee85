// store/dedup_expiry.h
//
// DedupExpiry drops deduplication records whose window has passed when RocksDB compacts the
// "dedup" column family, so a window of 100 million ids costs disk for the window only, and
// never memory: the ids are not held by wharfd (docs/storage.md, "Deduplication"). The writer
// treats an expired record it reads before compaction got to it as absent. Files that see no
// compaction are compacted periodically (the family's periodic_compaction_seconds), so expired
// records go even from a queue nobody publishes to any more.
//
// RocksDB asks DedupExpiryFactory for a filter at the start of each compaction, which reads
// the wall clock once: a record that expires while the compaction runs goes in the next one.
// Read per record, the clock was 5% of the compaction thread's time (docs/benchmarks.md).
//
// Thread safety: a DedupExpiry is used by the one compaction it was made for; its Filter is
// const. The factory holds no state; RocksDB calls it from its compaction threads.
#pragma once

#include <rocksdb/compaction_filter.h>

#include <cstdint>
#include <memory>
#include <string>

namespace wharf::store {

class DedupExpiry final : public rocksdb::CompactionFilter {
 public:
  // Records that expire at or before now_ms (Unix ms) are dropped.
  explicit DedupExpiry(int64_t now_ms) : now_ms_(now_ms) {}
  const char* Name() const override { return "WharfDedupExpiry"; }
  // True (drop) for a record whose expiry is at or before now, and for a run (keys.h) whose
  // every record has expired; a value that does not decode is kept (the store's checks report
  // it).
  bool Filter(int level, const rocksdb::Slice& key, const rocksdb::Slice& value,
              std::string* new_value, bool* value_changed) const override;

 private:
  const int64_t now_ms_;
};

class DedupExpiryFactory final : public rocksdb::CompactionFilterFactory {
 public:
  const char* Name() const override { return "WharfDedupExpiry"; }
  // A DedupExpiry at the wall clock's time now.
  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
      const rocksdb::CompactionFilter::Context& context) override;
};

}  // namespace wharf::store
