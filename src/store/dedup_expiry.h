// store/dedup_expiry.h
//
// DedupExpiry drops deduplication records whose window has passed when RocksDB compacts the
// "dedup" column family, so a window of 100 million ids costs disk for the window only, and
// never memory: the ids are not held by wharfd (docs/storage.md, "Deduplication"). The writer
// treats an expired record it reads before compaction got to it as absent. Files that see no
// compaction are compacted periodically (the family's periodic_compaction_seconds), so expired
// records go even from a queue nobody publishes to any more.
//
// Thread safety: Filter is const and reads only the wall clock; RocksDB calls it from its
// compaction threads.
#pragma once

#include <rocksdb/compaction_filter.h>

#include <string>

namespace wharf::store {

class DedupExpiry final : public rocksdb::CompactionFilter {
 public:
  const char* Name() const override { return "WharfDedupExpiry"; }
  // True (drop) for a record whose expiry is at or before now; a value that does not decode
  // is kept (the store's checks report it).
  bool Filter(int level, const rocksdb::Slice& key, const rocksdb::Slice& value,
              std::string* new_value, bool* value_changed) const override;
};

}  // namespace wharf::store
