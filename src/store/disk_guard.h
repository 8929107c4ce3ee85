// store/disk_guard.h
//
// DiskGuard keeps the message store off a full disk (docs/storage.md, "A full disk"). Two
// defences, because RocksDB's own error path is not to be trusted with the last byte (issue
// 15: Debian's build aborted on an assertion right after the first "no space" error):
//
//   reserve - the store takes no new message while the disk holding it has less than
//             `reserve_bytes` free: RocksDB never sees the disk fill because of Wharf, and what
//             is left is room for acks, flushes, compactions and a restart. The broker asks
//             Accepting() before each publish it would store; the writer refreshes the figure
//             (statvfs) at most every 100 ms and after every `reserve_bytes / 8` written.
//   ballast - a file of `ballast_bytes` beside the store (CockroachDB's "emergency ballast"):
//             when something else fills the disk to the last byte, or wharfd starts on a full
//             disk, deleting it gives RocksDB room to open, take acks and compact, so consumers
//             can drain. It is made again once the disk has room for it and the reserve twice.
//
// Thread safety: Refresh, ReleaseBallast and MakeBallast are called by one thread at a time
// (the store's writer; Open before it starts). Accepting() and free_bytes() are read from any
// thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "wharf/status.h"

namespace wharf::store {

struct DiskGuardOptions {
  std::string path;  // a directory on the disk to watch (the store's)
  uint64_t reserve_bytes = 64u << 20;
  std::string ballast_path;  // empty: no ballast
  uint64_t ballast_bytes = 0;
  // Tests only: the free space to assume instead of asking the file system (nullopt: ask).
  std::function<std::optional<uint64_t>()> free_bytes_for_tests;
};

class DiskGuard {
 public:
  explicit DiskGuard(DiskGuardOptions options);

  // Reads the free space again if 100 ms have passed or `written` bytes (since the last call)
  // may have used a good part of the reserve. Returns true when it changed Accepting().
  bool Refresh(uint64_t written);
  // Reads it now.
  void RefreshNow();

  // Ok, or kStoreFull saying how much is free and what the reserve is.
  Status Accepting() const;
  bool full() const { return full_.load(std::memory_order_relaxed); }
  uint64_t free_bytes() const { return free_.load(std::memory_order_relaxed); }
  uint64_t reserve_bytes() const { return options_.reserve_bytes; }

  // Deletes the ballast file if it is there; returns true if it was.
  bool ReleaseBallast();
  // Makes the ballast file when there is room for it and twice the reserve besides; returns
  // true if it made it. Cheap when it is there already.
  bool MakeBallast();
  bool has_ballast() const { return has_ballast_; }

 private:
  std::optional<uint64_t> ReadFree() const;

  const DiskGuardOptions options_;
  std::atomic<bool> full_{false};
  std::atomic<uint64_t> free_{UINT64_MAX};
  std::chrono::steady_clock::time_point read_at_{};
  uint64_t written_since_read_ = 0;
  bool has_ballast_ = false;
  std::chrono::steady_clock::time_point next_ballast_try_{};  // after a failure to make it
  bool warned_unreadable_ = false;
};

// Free bytes for unprivileged users on the file system holding `path` (statvfs f_bavail).
std::optional<uint64_t> FreeDiskBytes(const std::string& path);

}  // namespace wharf::store
