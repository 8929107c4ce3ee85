#include "store/disk_guard.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace wharf::store {
namespace {

constexpr std::chrono::milliseconds kReadEvery{100};

uint64_t Mib(uint64_t bytes) { return bytes >> 20; }

}  // namespace

std::optional<uint64_t> FreeDiskBytes(const std::string& path) {
  struct statvfs fs {};
  if (statvfs(path.c_str(), &fs) != 0) return std::nullopt;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

DiskGuard::DiskGuard(DiskGuardOptions options) : options_(std::move(options)) {
  if (!options_.ballast_path.empty()) {
    struct stat st {};
    has_ballast_ = ::stat(options_.ballast_path.c_str(), &st) == 0 &&
                   static_cast<uint64_t>(st.st_blocks) * 512 >= options_.ballast_bytes &&
                   options_.ballast_bytes > 0;
  }
}

std::optional<uint64_t> DiskGuard::ReadFree() const {
  if (options_.free_bytes_for_tests) {
    if (auto free = options_.free_bytes_for_tests()) return free;
  }
  return FreeDiskBytes(options_.path);
}

bool DiskGuard::Refresh(uint64_t written) {
  written_since_read_ += written;
  const auto now = std::chrono::steady_clock::now();
  if (now - read_at_ < kReadEvery && written_since_read_ < options_.reserve_bytes / 8) {
    return false;
  }
  const bool was_full = full();
  RefreshNow();
  return was_full != full();
}

void DiskGuard::RefreshNow() {
  read_at_ = std::chrono::steady_clock::now();
  written_since_read_ = 0;
  std::optional<uint64_t> free = ReadFree();
  if (!free) {
    // Cannot tell: keep the last reading (RocksDB's own errors still stop writes).
    if (!warned_unreadable_) {
      spdlog::warn("store: cannot read the free disk space at {}: {}", options_.path,
                   std::strerror(errno));
      warned_unreadable_ = true;
    }
    return;
  }
  warned_unreadable_ = false;
  free_.store(*free, std::memory_order_relaxed);
  // A missing ballast is space the store must get back before it takes messages again (or a
  // start on a full disk would spend the ballast on new messages); leaving takes a little more
  // than entering, so the state does not flap at the edge.
  uint64_t needed = options_.reserve_bytes + (has_ballast_ ? 0 : options_.ballast_bytes);
  if (full_.load(std::memory_order_relaxed)) needed += options_.reserve_bytes / 16;
  const bool full = *free < needed;
  if (full != full_.load(std::memory_order_relaxed)) {
    full_.store(full, std::memory_order_relaxed);
    if (full) {
      spdlog::error(
          "store: {} MiB free on the disk of {}, below the reserve of {} MiB ([store] "
          "disk_reserve_bytes{}): new messages are refused, consumers and acks go on",
          Mib(*free), options_.path, Mib(needed),
          has_ballast_ ? "" : " and ballast_bytes: the ballast file is spent");
    } else {
      spdlog::warn("store: {} MiB free on the disk of {} again: new messages are taken", Mib(*free),
                   options_.path);
    }
  }
}

Status DiskGuard::Accepting() const {
  if (!full()) return Status::Ok();
  return Status(StatusCode::kStoreFull,
                "the disk holding the message store has " + std::to_string(Mib(free_bytes())) +
                    " MiB free, below the store's reserve of " +
                    std::to_string(Mib(options_.reserve_bytes)) +
                    " MiB ([store] disk_reserve_bytes, plus ballast_bytes while the ballast "
                    "file is spent): new messages are refused until space is freed; consumers "
                    "and acks go on");
}

bool DiskGuard::ReleaseBallast() {
  if (options_.ballast_path.empty()) return false;
  if (::unlink(options_.ballast_path.c_str()) != 0) {
    has_ballast_ = false;
    return false;
  }
  has_ballast_ = false;
  spdlog::warn(
      "store: deleted the {} MiB ballast file {} to give the store room on a full disk; it is "
      "made again once the disk has room",
      Mib(options_.ballast_bytes), options_.ballast_path);
  RefreshNow();
  return true;
}

bool DiskGuard::MakeBallast() {
  if (has_ballast_ || options_.ballast_path.empty() || options_.ballast_bytes == 0) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_ballast_try_) return false;
  const uint64_t free = free_bytes();
  // As soon as the store would take messages without it (RefreshNow), and no sooner.
  if (free == UINT64_MAX ||
      free < options_.ballast_bytes + options_.reserve_bytes + options_.reserve_bytes / 16) {
    return false;
  }
  int fd = ::open(options_.ballast_path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) {
    spdlog::warn("store: cannot create the ballast file {}: {}", options_.ballast_path,
                 std::strerror(errno));
    next_ballast_try_ = now + std::chrono::minutes(1);
    return false;
  }
  // Real blocks, not a sparse file: deleting it must give space back.
  int err = ::posix_fallocate(fd, 0, static_cast<off_t>(options_.ballast_bytes));
  if (err == 0) err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  if (err != 0) {
    ::unlink(options_.ballast_path.c_str());
    next_ballast_try_ = now + std::chrono::minutes(1);
    spdlog::warn("store: cannot fill the ballast file {}: {}", options_.ballast_path,
                 std::strerror(err));
    return false;
  }
  has_ballast_ = true;
  spdlog::info("store: ballast file {} ({} MiB) in place", options_.ballast_path,
               Mib(options_.ballast_bytes));
  RefreshNow();
  return true;
}

}  // namespace wharf::store
