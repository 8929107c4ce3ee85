// store/write_faults.h
//
// WriteFaults is the store's fault-injection seam: tests hand one to RocksDbStore (through
// StoreOptions) and flip it to make every disk write fail as a full disk does (ENOSPC), then
// flip it back, to check that the broker stops confirming, keeps its data intact and resumes
// on its own; and hold a purge's background removal part-way. Production code never sets it.
//
// Thread safety: the flag is atomic; flip it from any thread.
#pragma once

#include <atomic>

namespace wharf::store {

struct WriteFaults {
  std::atomic<bool> disk_full{false};
  // Steps of purge removal the writer may still take; -1: any. At 0 purges stay on disk
  // (as if the process stopped there); raise it, then commit anything to wake the writer.
  std::atomic<int> reclaim_steps{-1};
};

}  // namespace wharf::store
