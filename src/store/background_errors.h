// store/background_errors.h
//
// What the store does with an error RocksDB meets in its own threads (a flush or a
// compaction), before RocksDB acts on it.
//
// One case is overridden: a compaction that runs out of disk space. It wrote nothing that
// counts (its partial output is deleted, its input files stay), so it is not an error of the
// store. RocksDB would record it as a "soft" background error and, until it clears, refuse every
// compaction that does not leave twice its input size free, then clear it only once free space
// reaches twice the size of the compactions running when it failed. On a small disk, whose
// space comes back only through compaction (removed messages are dropped when their files are
// compacted), neither ever happens: drained queues never gave their space back (issue 15's full
// disk test, seen in CI). Dropped here, the compaction is retried when RocksDB next picks it
// (after its one-second pause following a failed compaction).
//
// Every other error is left to RocksDB: a failed flush or log write stops writes, and the
// writer resumes or reopens the database (RocksDbStore::TryResume).
//
// Thread safety: RocksDB calls OnBackgroundError from its background threads; the counter is
// atomic.
#pragma once

#include <rocksdb/listener.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace wharf::store {

class BackgroundErrors final : public rocksdb::EventListener {
 public:
  const char* Name() const override { return "WharfBackgroundErrors"; }
  void OnBackgroundError(rocksdb::BackgroundErrorReason reason, rocksdb::Status* error) override;

  // Compactions that ran out of space and were dropped as errors.
  uint64_t compactions_out_of_space() const { return out_of_space_.load(); }

 private:
  std::atomic<uint64_t> out_of_space_{0};
};

}  // namespace wharf::store
