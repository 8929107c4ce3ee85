// A small tmpfs for tests of full (and read-only) disks: a real file system of a few MiB that
// the test mounts. Mounting needs root (CI runs as root) or unprivileged user namespaces; a
// test checks mounted() and skips, saying why, when neither is there.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/test_server.h"

namespace wharf::testing {

// A tmpfs of `mib` MiB mounted on a fresh directory (read-only when asked); unmounted (lazily)
// at the end.
class SmallDisk {
 public:
  explicit SmallDisk(uint64_t mib, bool read_only = false) : dir_(MakeTempDir("wharf-small-disk")) {
    std::string size = "size=" + std::to_string(mib) + "m";
    const unsigned long flags = read_only ? MS_RDONLY : 0;
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", flags, size.c_str()) == 0) {
      mounted_ = true;
      return;
    }
    error_ = std::strerror(errno);
    // Not allowed here (not root, or a container): a user and mount namespace of this test
    // process's own, which wharfd inherits, may mount it (unprivileged user namespaces).
    if (EnterOwnNamespaces() && ::mount("tmpfs", dir_.c_str(), "tmpfs", flags, size.c_str()) == 0) {
      mounted_ = true;
    } else {
      error_ += std::string("; in a user namespace: ") + std::strerror(errno);
    }
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }  // the mount point
  std::string data_dir() const { return dir_ + "/data"; }
  uint64_t free_bytes() const {
    struct statvfs fs {};
    if (::statvfs(dir_.c_str(), &fs) != 0) return 0;
    return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  }

  // Another program fills the disk to the last byte.
  void Fill() {
    int fd = ::open((dir_ + "/filler").c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    std::string chunk(1 << 16, 'f');
    while (::write(fd, chunk.data(), chunk.size()) > 0) {
    }
    for (size_t n = 4096; n > 0; n /= 2) {
      while (::write(fd, chunk.data(), n) > 0) {
      }
    }
    ::close(fd);
  }
  void Unfill() { std::filesystem::remove(dir_ + "/filler"); }

 private:
  // Maps this process's user to root in a new user namespace, with a mount namespace of its
  // own (gone with the process). Needs a single-threaded process: each test runs alone.
  static bool EnterOwnNamespaces() {
    const uid_t uid = ::geteuid();
    const gid_t gid = ::getegid();
    // Mounts made here must not show outside: every mount private first.
    auto private_mounts = [] {
      return ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
    };
    if (::unshare(CLONE_NEWNS) == 0) return private_mounts();  // root, but not the host's mounts
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
    auto write = [](const char* path, const std::string& text) {
      std::ofstream out(path);
      out << text;
      return static_cast<bool>(out.flush());
    };
    return write("/proc/self/setgroups", "deny") &&
           write("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n") &&
           write("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n") && private_mounts();
  }

  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

}  // namespace wharf::testing
