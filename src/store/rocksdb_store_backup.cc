// store/rocksdb_store_backup.cc: online backups (docs/operations.md, "Backup and restore";
// docs/storage.md, "Checkpoints").
//
// A backup is a RocksDB checkpoint: the live files as of one moment, hard-linked when the
// target is on the store's file system and copied otherwise, the MANIFEST and the last
// write-ahead log copied up to their size at that moment. It runs on a thread of its own
// (wharf-backup), which the writer starts once the commits queued before the request are
// written, so the copy holds all of them while the writer goes on confirming. The checkpoint
// is made in a temporary directory beside the target and renamed into place when complete:
// a failure leaves nothing behind.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/checkpoint.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <memory>

#include "common/log_safe.h"
#include "store/rocksdb_status.h"
#include "store/rocksdb_store.h"

namespace wharf::store {
namespace {

namespace fs = std::filesystem;

// The target holds the store as a data directory does: `wharfd --data-dir TARGET` opens it.
constexpr const char* kStoreDirName = "store";

std::string QuotedPath(const std::string& path) { return QuotedForDisplay(path, PATH_MAX); }

std::string ProcessUser() {
  std::string buffer(4096, '\0');
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buffer.data(), buffer.size(), &found) == 0 && found) {
    return found->pw_name;
  }
  return "uid " + std::to_string(::geteuid());
}

// A failed file system call on the target, as the backup's answer: a full disk is
// kStoreFull, what the operator must allow (permissions, a read-only file system) is
// kPreconditionFailed, anything else kStoreUnavailable.
Status FileError(int error, const std::string& what) {
  std::string message = what + ": " + std::strerror(error);
  switch (error) {
    case ENOSPC:
    case EDQUOT:
      return Status(StatusCode::kStoreFull, message);
    case EACCES:
    case EPERM:
    case EROFS:
      return Status(StatusCode::kPreconditionFailed,
                    message + " (wharfd runs as " + ProcessUser() + ")");
    default:
      return Status(StatusCode::kStoreUnavailable, message);
  }
}

// True when `dir` holds nothing but . and ..; the error (errno) otherwise in `error`.
bool IsEmptyDirectory(const fs::path& dir, int* error) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    *error = errno;
    return false;
  }
  *error = 0;
  bool empty = true;
  while (struct dirent* entry = ::readdir(d)) {
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  return empty;
}

// Makes a rename or a new entry in `dir` durable.
Status SyncDirectory(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return FileError(errno, "cannot open " + QuotedPath(dir) + " to sync it");
  int rc = ::fsync(fd);
  int error = errno;
  ::close(fd);
  if (rc != 0) return FileError(error, "cannot sync " + QuotedPath(dir));
  return Status::Ok();
}

// Checks `target` (absolute, normalised) on disk: its parent must be a directory, and it must
// not exist or be an empty directory. Sets *exists for the latter.
Status CheckTarget(const fs::path& target, bool* exists) {
  const fs::path parent = target.parent_path();
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return Status(StatusCode::kPreconditionFailed,
                    "the parent directory " + QuotedPath(parent) +
                        " does not exist: make it first (a backup makes only the last "
                        "component of its directory)");
    }
    return FileError(errno, "cannot reach the parent directory " + QuotedPath(parent));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status(StatusCode::kPreconditionFailed,
                  "the parent " + QuotedPath(parent) + " is not a directory");
  }
  *exists = false;
  if (::lstat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return FileError(errno, "cannot look at " + QuotedPath(target));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status(StatusCode::kPreconditionFailed,
                  QuotedPath(target) + " exists and is not a directory: give a new directory");
  }
  int error = 0;
  if (!IsEmptyDirectory(target, &error)) {
    if (error != 0) return FileError(error, "cannot read " + QuotedPath(target));
    return Status(StatusCode::kPreconditionFailed,
                  QuotedPath(target) +
                      " already exists and is not empty: give a new directory, or an empty one");
  }
  *exists = true;
  return Status::Ok();
}

// Counts the files of the finished copy, and those that are the live store's own files
// (hard links: same device and inode under the same name), which took no new space.
void CountFiles(const fs::path& copy, const fs::path& live, BackupInfo* info) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(copy, ec)) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    ++info->files;
    info->bytes += static_cast<uint64_t>(st.st_size);
    struct stat original {};
    if (::lstat((live / entry.path().filename()).c_str(), &original) == 0 &&
        original.st_dev == st.st_dev && original.st_ino == st.st_ino) {
      info->linked_bytes += static_cast<uint64_t>(st.st_size);
    }
  }
}

}  // namespace

void RocksDbStore::Backup(std::string directory, BackupCallback done) {
  Status refused;
  fs::path target(directory);
  if (directory.empty()) {
    refused = Status(StatusCode::kInvalidArgument,
                     "a backup needs a directory: an absolute path on the broker's machine");
  } else if (directory.size() >= PATH_MAX || directory.find('\0') != std::string::npos) {
    refused = Status(StatusCode::kInvalidArgument,
                     "backup directory of " + std::to_string(directory.size()) +
                         " bytes is not a path (at most " + std::to_string(PATH_MAX - 1) +
                         " bytes, no NUL)");
  } else if (!target.is_absolute()) {
    refused = Status(StatusCode::kInvalidArgument,
                     "backup directory " + QuotedPath(directory) +
                         " is not absolute: the broker writes it on its own machine, whose "
                         "working directory is not the client's; give an absolute path");
  } else {
    target = target.lexically_normal();
    if (!target.has_filename()) target = target.parent_path();  // "/a/b/" is "/a/b"
    // Both made absolute and free of symlinks where they exist: data_dir may be relative
    // ("./data", the default), and a symlinked parent must not hide that the target is inside.
    std::error_code ec;
    const fs::path store = fs::weakly_canonical(fs::absolute(options_.path), ec);
    const fs::path resolved = fs::weakly_canonical(target, ec);
    const fs::path inside = resolved.lexically_relative(store);
    if (target == target.root_path()) {
      refused = Status(StatusCode::kPreconditionFailed,
                       "backup directory '/' exists and is not empty: give a new directory");
    } else if (!inside.empty() && *inside.begin() != "..") {
      refused = Status(StatusCode::kInvalidArgument,
                       "backup directory " + QuotedPath(target) + " is inside the live store " +
                           QuotedPath(store) + ": give a directory outside it");
    }
  }
  {
    std::lock_guard lock(mu_);
    if (refused.ok() && closing_) {
      refused = Status(StatusCode::kShuttingDown, "the message store is closed");
    } else if (refused.ok() && !backup_directory_.empty()) {
      refused = Status(StatusCode::kResourceLocked,
                       "a backup to " + QuotedPath(backup_directory_) +
                           " is running: one at a time; try again when it has finished");
    } else if (refused.ok()) {
      backup_directory_ = target.string();
      requests_.emplace_back(
          BackupRequest{target.string(), std::move(done), std::chrono::steady_clock::now()});
      cv_.notify_one();
      return;
    }
  }
  spdlog::error("store: backup to {} refused: {}", LogSafe(directory),
                LogSafe(refused.message(), kLogSafeStatusBytes));
  post_([done = std::move(done), refused] { done(refused); });
}

void RocksDbStore::StartBackup(BackupRequest request) {
  // The last backup has answered already (it cleared backup_directory_ first): this only
  // waits for its thread to return.
  if (backup_.joinable()) backup_.join();
  spdlog::info("store: backup to {} started", LogSafe(request.directory, PATH_MAX));
  const uint64_t max_message_id = max_message_id_;
  backup_ = std::thread([this, request = std::move(request), max_message_id]() mutable {
    pthread_setname_np(pthread_self(), "wharf-backup");
    Result<BackupInfo> result = RunBackup(request, max_message_id);
    if (result.ok()) {
      spdlog::info(
          "store: backup to {} written in {} ms: {} files, {} bytes ({} hard-linked to the "
          "live store), messages up to id {:016x}",
          LogSafe(result->directory, PATH_MAX), result->duration_ms, result->files, result->bytes,
          result->linked_bytes, result->max_message_id);
    } else {
      spdlog::error("store: backup to {} failed, no partial copy left: {}",
                    LogSafe(request.directory, PATH_MAX),
                    LogSafe(result.status().ToString(), kLogSafeStatusBytes));
    }
    {
      std::lock_guard lock(mu_);
      backup_directory_.clear();
    }
    post_([done = std::move(request.done), result = std::move(result)] { done(result); });
  });
}

Result<BackupInfo> RocksDbStore::RunBackup(const BackupRequest& request, uint64_t max_message_id) {
  const fs::path target(request.directory);
  const fs::path parent = target.parent_path();
  bool exists = false;
  WHARF_RETURN_IF_ERROR(CheckTarget(target, &exists));

  // Where the checkpoint is made: a new target is made beside it, as a hidden directory, and
  // renamed into place; an empty one gets store/ itself (RocksDB makes store.tmp and renames
  // it when complete).
  fs::path staging = target;
  if (!exists) {
    std::string name = (parent / ("." + target.filename().string() + ".partial-XXXXXX")).string();
    if (::mkdtemp(name.data()) == nullptr) {
      return FileError(errno, "cannot make a directory in " + QuotedPath(parent));
    }
    staging = name;
  }
  auto remove_partial = [&] {
    std::error_code ec;
    if (!exists) {
      fs::remove_all(staging, ec);
    } else {
      fs::remove_all(target / (std::string(kStoreDirName) + ".tmp"), ec);
      fs::remove_all(target / kStoreDirName, ec);
    }
  };

  Status status;
  uint64_t sequence = 0;
  {
    // A reopen of the database (after a failed write) waits for the checkpoint; commits do not.
    std::shared_lock lock(db_mu_);
    if (!db_) {
      status = Status(StatusCode::kStoreUnavailable, "the message store is not open");
    } else {
      rocksdb::Checkpoint* raw = nullptr;
      rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &raw);
      std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
      // log_size_for_flush 0: the memtables are flushed first, so the copy holds few logs; the
      // last log is copied anyway, up to its size at that moment, with what came since.
      if (s.ok())
        s = checkpoint->CreateCheckpoint((staging / kStoreDirName).string(), 0, &sequence);
      status = FromRocksDb(s, "checkpoint into " + QuotedPath(staging / kStoreDirName) + " failed");
    }
  }
  if (status.ok() && backup_hook_) status = backup_hook_();
  if (status.ok()) status = SyncDirectory(staging);  // its store/ entry
  if (status.ok() && !exists && ::rename(staging.c_str(), target.c_str()) != 0) {
    status = errno == EEXIST || errno == ENOTEMPTY
                 ? Status(StatusCode::kPreconditionFailed,
                          QuotedPath(target) + " was made by something else during the backup")
                 : FileError(errno, "cannot rename the finished copy to " + QuotedPath(target));
  }
  if (status.ok() && !exists) status = SyncDirectory(parent);
  if (!status.ok()) {
    remove_partial();
    return status;
  }

  BackupInfo info;
  info.directory = target.string();
  CountFiles(target / kStoreDirName, options_.path, &info);
  info.max_message_id = max_message_id;
  info.duration_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::steady_clock::now() - request.requested)
                                               .count());
  spdlog::debug("store: backup to {}: RocksDB sequence {}", LogSafe(info.directory, PATH_MAX),
                sequence);
  return info;
}

}  // namespace wharf::store
