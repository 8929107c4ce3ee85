// store/write_faults.h
//
// WriteFaults is the store's fault-injection seam: tests hand one to RocksDbStore (through
// StoreOptions) and flip it to make every disk write fail as a full disk does (ENOSPC), then
// flip it back, to check that the broker stops confirming, keeps its data intact and resumes
// on its own. Production code never sets it.
//
// Thread safety: the flag is atomic; flip it from any thread.
#pragma once

#include <atomic>

namespace wharf::store {

struct WriteFaults {
  std::atomic<bool> disk_full{false};
};

}  // namespace wharf::store
