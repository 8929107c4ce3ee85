// store/power_cut_fs.h: a RocksDB file system that simulates a power cut, for tests.
//
// A process killed with SIGKILL leaves everything it wrote in the OS's page cache: the kernel
// writes it out later. A power cut (or a kernel panic) does not: only what was fsynced is
// certain to be on the disk. PowerCutFileSystem sits under the store (StoreOptions::
// file_system) and records, per file written through it, how many bytes were appended and how
// many of them a Sync/Fsync made durable, and which new files have not had their directory
// fsynced since they were created. Then:
//
//   CutAfter(n)  the power goes off at the n-th mutating call from now (an append, a sync, a
//                new file, a rename, a deletion, a directory sync), from whichever thread
//                makes it: the WAL writer inside a group commit, a flush or a compaction. That
//                call and every later one fail with an I/O error, so nothing more reaches the
//                "disk". CutNow() cuts at once.
//   DropUnsynced once the store is closed: puts the disk in the state a power cut leaves.
//                Every file loses the bytes appended after its last sync (all of them, or a
//                random prefix is kept: a torn tail, as a disk that wrote some pages of the
//                page cache before the cut), and a file created since its directory was last
//                fsynced disappears, synced or not.
//
// What it does not simulate (and why that is safe to leave out, for RocksDB on ext4/xfs):
// renames are durable at once (RocksDB fsyncs the directory right after renaming CURRENT and
// OPTIONS files, and a rename is atomic); a deleted file never comes back (RocksDB deletes only
// files its MANIFEST no longer names, and ignores WALs below the recorded log number); bytes
// are never garbled, only missing (corruption is tested apart, by flipping bytes in files).
// Syncs do not call fsync at all: durability is what this class says it is, so a cycle costs
// no disk flushes and a test can run hundreds of cuts.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <rocksdb/file_system.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>

namespace wharf::store::testing {

class PowerCutFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  explicit PowerCutFileSystem(
      std::shared_ptr<rocksdb::FileSystem> target = rocksdb::FileSystem::Default())
      : FileSystemWrapper(target) {}

  const char* Name() const override { return "WharfPowerCutFileSystem"; }

  // The power goes off at the `ops`-th mutating call from now (1: the next one).
  void CutAfter(uint64_t ops) {
    std::lock_guard lock(mu_);
    countdown_ = ops;
  }
  void CutNow() {
    std::lock_guard lock(mu_);
    Cut("by the test");
  }
  bool cut() const { return cut_.load(); }
  // Where the power went off: the call and the file ("Append 000012.log").
  std::string cut_point() const {
    std::lock_guard lock(mu_);
    return cut_point_;
  }
  // Mutating calls seen so far.
  uint64_t ops() const {
    std::lock_guard lock(mu_);
    return ops_;
  }

  struct Dropped {
    uint64_t files_truncated = 0;
    uint64_t files_removed = 0;
    uint64_t bytes = 0;  // unsynced bytes dropped
  };
  // Leaves the disk as the power cut would. Call once the store is closed: nothing may write
  // through this file system any more. With `keep_torn`, each file keeps a random prefix of its
  // unsynced bytes instead of none.
  Dropped DropUnsynced(std::mt19937_64& rng, bool keep_torn) {
    std::lock_guard lock(mu_);
    Cut("before dropping unsynced data");
    Dropped dropped;
    for (const auto& [name, file] : files_) {
      std::error_code ec;
      if (!std::filesystem::exists(name, ec)) continue;
      if (file.awaits_dir_sync) {
        dropped.bytes += file.size;
        ++dropped.files_removed;
        std::filesystem::remove(name, ec);
        continue;
      }
      if (file.size <= file.synced) continue;
      uint64_t keep = file.synced;
      if (keep_torn) {
        keep += std::uniform_int_distribution<uint64_t>(0, file.size - file.synced)(rng);
      }
      dropped.bytes += file.size - keep;
      ++dropped.files_truncated;
      std::filesystem::resize_file(name, keep, ec);
    }
    files_.clear();
    return dropped;
  }

  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    return Open(
        name, /*reopen=*/false,
        [&](std::unique_ptr<rocksdb::FSWritableFile>* file) {
          return target()->NewWritableFile(name, options, file, dbg);
        },
        result);
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override {
    return Open(
        name, /*reopen=*/true,
        [&](std::unique_ptr<rocksdb::FSWritableFile>* file) {
          return target()->ReopenWritableFile(name, options, file, dbg);
        },
        result);
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string&, const std::string&,
                                      const rocksdb::FileOptions&,
                                      std::unique_ptr<rocksdb::FSWritableFile>*,
                                      rocksdb::IODebugContext*) override {
    return rocksdb::IOStatus::NotSupported("PowerCutFileSystem: recycled log files");
  }
  rocksdb::IOStatus NewRandomRWFile(const std::string&, const rocksdb::FileOptions&,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>*,
                                    rocksdb::IODebugContext*) override {
    // Not used by the store; refused so that nothing is written behind the bookkeeping.
    return rocksdb::IOStatus::NotSupported("PowerCutFileSystem: random read-write files");
  }
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSDirectory> dir;
    rocksdb::IOStatus s = target()->NewDirectory(name, options, &dir, dbg);
    if (s.ok()) *result = std::make_unique<Directory>(std::move(dir), this, Normal(name));
    return s;
  }
  rocksdb::IOStatus DeleteFile(const std::string& name, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override {
    std::lock_guard lock(mu_);
    if (!Step("DeleteFile", name)) return PowerOff();
    rocksdb::IOStatus s = target()->DeleteFile(name, options, dbg);
    if (s.ok()) files_.erase(Normal(name));
    return s;
  }
  rocksdb::IOStatus RenameFile(const std::string& from, const std::string& to,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override {
    std::lock_guard lock(mu_);
    if (!Step("RenameFile", to)) return PowerOff();
    rocksdb::IOStatus s = target()->RenameFile(from, to, options, dbg);
    if (!s.ok()) return s;
    auto it = files_.find(Normal(from));
    if (it == files_.end()) {
      files_.erase(Normal(to));
    } else {
      files_[Normal(to)] = it->second;
      files_.erase(it);
    }
    return s;
  }
  rocksdb::IOStatus LinkFile(const std::string&, const std::string&, const rocksdb::IOOptions&,
                             rocksdb::IODebugContext*) override {
    return rocksdb::IOStatus::NotSupported("PowerCutFileSystem: hard links");
  }
  rocksdb::IOStatus Truncate(const std::string& name, size_t size,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    std::lock_guard lock(mu_);
    if (!Step("Truncate", name)) return PowerOff();
    rocksdb::IOStatus s = target()->Truncate(name, size, options, dbg);
    if (s.ok()) {
      auto it = files_.find(Normal(name));
      if (it != files_.end()) {
        it->second.size = size;
        it->second.synced = std::min<uint64_t>(it->second.synced, size);
      }
    }
    return s;
  }

 private:
  struct FileState {
    uint64_t size = 0;             // bytes written through this file system
    uint64_t synced = 0;           // of which durable
    bool awaits_dir_sync = false;  // created; its directory not fsynced since
  };

  class File final : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> file, PowerCutFileSystem* fs, std::string name)
        : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs), name_(std::move(name)) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
      return fs_->Appending(name_, data.size(),
                            [&] { return FSWritableFileOwnerWrapper::Append(data, options, dbg); });
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             const rocksdb::DataVerificationInfo& info,
                             rocksdb::IODebugContext* dbg) override {
      return fs_->Appending(name_, data.size(), [&] {
        return FSWritableFileOwnerWrapper::Append(data, options, info, dbg);
      });
    }
    rocksdb::IOStatus PositionedAppend(const rocksdb::Slice&, uint64_t, const rocksdb::IOOptions&,
                                       rocksdb::IODebugContext*) override {
      return rocksdb::IOStatus::NotSupported("PowerCutFileSystem: positioned appends");
    }
    rocksdb::IOStatus PositionedAppend(const rocksdb::Slice&, uint64_t, const rocksdb::IOOptions&,
                                       const rocksdb::DataVerificationInfo&,
                                       rocksdb::IODebugContext*) override {
      return rocksdb::IOStatus::NotSupported("PowerCutFileSystem: positioned appends");
    }
    rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override {
      return fs_->Truncating(
          name_, size, [&] { return FSWritableFileOwnerWrapper::Truncate(size, options, dbg); });
    }
    // Durable by decree: no fsync is made (see the top of this file).
    rocksdb::IOStatus Sync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
      return fs_->Syncing(name_);
    }
    rocksdb::IOStatus Fsync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
      return fs_->Syncing(name_);
    }
    // sync_file_range starts writing dirty pages out; it promises nothing after a power cut.
    rocksdb::IOStatus RangeSync(uint64_t, uint64_t, const rocksdb::IOOptions&,
                                rocksdb::IODebugContext*) override {
      return fs_->cut() ? PowerOff() : rocksdb::IOStatus::OK();
    }
    bool IsSyncThreadSafe() const override { return true; }

   private:
    PowerCutFileSystem* fs_;
    const std::string name_;
  };

  class Directory final : public rocksdb::FSDirectoryWrapper {
   public:
    Directory(std::unique_ptr<rocksdb::FSDirectory> dir, PowerCutFileSystem* fs, std::string name)
        : FSDirectoryWrapper(std::move(dir)), fs_(fs), name_(std::move(name)) {}
    rocksdb::IOStatus Fsync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
      return fs_->DirectorySynced(name_);
    }
    rocksdb::IOStatus FsyncWithDirOptions(const rocksdb::IOOptions&, rocksdb::IODebugContext*,
                                          const rocksdb::DirFsyncOptions&) override {
      return fs_->DirectorySynced(name_);
    }

   private:
    PowerCutFileSystem* fs_;
    const std::string name_;
  };

  static rocksdb::IOStatus PowerOff() {
    return rocksdb::IOStatus::IOError("power cut (simulated)");
  }

  static std::string Normal(const std::string& name) {
    std::string normal = std::filesystem::path(name).lexically_normal().string();
    while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
    return normal;
  }
  static std::string Parent(const std::string& name) {
    return std::filesystem::path(name).parent_path().string();
  }

  // Counts a mutating call (mu_ held); false if the power is off, or goes off at this one.
  bool Step(const char* call, const std::string& name) {
    if (cut_) return false;
    ++ops_;
    if (countdown_ > 0 && --countdown_ == 0) {
      Cut(std::string(call) + " " + std::filesystem::path(name).filename().string());
      return false;
    }
    return true;
  }
  void Cut(std::string point) {
    if (cut_) return;
    cut_point_ = std::move(point);
    cut_ = true;
  }

  template <typename OpenFn>
  rocksdb::IOStatus Open(const std::string& name, bool reopen, OpenFn open,
                         std::unique_ptr<rocksdb::FSWritableFile>* result) {
    std::lock_guard lock(mu_);
    if (!Step(reopen ? "ReopenWritableFile" : "NewWritableFile", name)) return PowerOff();
    const std::string normal = Normal(name);
    std::error_code ec;
    const bool existed = std::filesystem::exists(normal, ec);
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOStatus s = open(&file);
    if (!s.ok()) return s;
    FileState state;
    if (reopen && existed) {
      // What is there already survived: durable.
      state.size = state.synced = std::filesystem::file_size(normal, ec);
    } else {
      state.awaits_dir_sync = !existed;
    }
    files_[normal] = state;
    *result = std::make_unique<File>(std::move(file), this, normal);
    return s;
  }

  template <typename AppendFn>
  rocksdb::IOStatus Appending(const std::string& name, uint64_t bytes, AppendFn append) {
    std::lock_guard lock(mu_);
    if (!Step("Append", name)) return PowerOff();
    rocksdb::IOStatus s = append();
    if (s.ok()) files_[name].size += bytes;
    return s;
  }

  template <typename TruncateFn>
  rocksdb::IOStatus Truncating(const std::string& name, uint64_t size, TruncateFn truncate) {
    std::lock_guard lock(mu_);
    if (!Step("Truncate", name)) return PowerOff();
    rocksdb::IOStatus s = truncate();
    if (s.ok()) {
      FileState& file = files_[name];
      file.size = size;
      file.synced = std::min(file.synced, size);
    }
    return s;
  }

  rocksdb::IOStatus Syncing(const std::string& name) {
    std::lock_guard lock(mu_);
    if (!Step("Sync", name)) return PowerOff();
    FileState& file = files_[name];
    file.synced = file.size;
    return rocksdb::IOStatus::OK();
  }

  rocksdb::IOStatus DirectorySynced(const std::string& dir) {
    std::lock_guard lock(mu_);
    if (!Step("FsyncDirectory", dir)) return PowerOff();
    for (auto& [name, file] : files_) {
      if (Parent(name) == dir) file.awaits_dir_sync = false;
    }
    return rocksdb::IOStatus::OK();
  }

  mutable std::mutex mu_;
  std::map<std::string, FileState> files_;  // by normal path
  std::atomic<bool> cut_{false};
  std::string cut_point_;
  uint64_t countdown_ = 0;  // 0: no cut planned
  uint64_t ops_ = 0;
};

}  // namespace wharf::store::testing
