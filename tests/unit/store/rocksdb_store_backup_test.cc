// Tests for the store's online backup (store/rocksdb_store_backup.cc): real RocksDB checkpoints
// in a temporary directory, opened again as a store of their own.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/rocksdb_store.h"
#include "unit/store/store_test_util.h"

namespace wharf::store {
namespace {

namespace fs = std::filesystem;
using testing::Mailbox;
using testing::OpenStore;
using testing::TempDir;

constexpr uint64_t kBackupQueue = 1;

std::string BackupBody(uint64_t id) {
  return "message " + std::to_string(id) + std::string(200, 'b');
}

EnvelopePtr Numbered(uint64_t id) { return testing::PersistentEnvelope(id, BackupBody(id)); }

// Messages with ids first..last as inline entries of kBackupQueue, sequence number = id.
StoreBatch Entries(uint64_t first, uint64_t last) {
  StoreBatch batch;
  for (uint64_t id = first; id <= last; ++id) {
    batch.Add(StoreBatch::PutEntry{EntryRef{kBackupQueue, id, id, 0, kEntryInline, Numbered(id)}});
  }
  return batch;
}

class RocksDbStoreBackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenStore(dir_.path() + "/data/store", &mailbox_);
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->Recover().ok());
    StoreBatch batch;
    QueueSpec q;
    q.name = "q";
    batch.Add(StoreBatch::PutQueue{q, kBackupQueue});
    ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  }

  Status CommitSync(StoreBatch batch) {
    return testing::CommitAndWait(store_.get(), &mailbox_, std::move(batch));
  }

  Result<BackupInfo> BackupSync(const std::string& directory) {
    std::optional<Result<BackupInfo>> result;
    store_->Backup(directory, [&](Result<BackupInfo> r) { result = std::move(r); });
    EXPECT_TRUE(mailbox_.RunUntil([&] { return result.has_value(); }));
    if (!result) return Status(StatusCode::kDeadlineExceeded, "no answer");
    return std::move(*result);
  }

  // Opens the copy in `directory` as a store and reads every entry of kBackupQueue: id -> body.
  std::map<uint64_t, std::string> OpenCopy(const std::string& directory) {
    Mailbox mailbox;
    auto copy = OpenStore(directory + "/store", &mailbox);
    if (!copy) return {};
    auto state = copy->Recover();
    EXPECT_TRUE(state.ok()) << state.status().ToString();
    std::map<uint64_t, std::string> out;
    bool done = false;
    copy->Load(kBackupQueue, 0, UINT64_MAX, 1'000'000, UINT64_MAX,
               [&](Result<std::vector<LoadedMessage>> r) {
                 EXPECT_TRUE(r.ok()) << r.status().ToString();
                 if (r.ok()) {
                   for (const LoadedMessage& m : *r) {
                     EXPECT_EQ(m.seq, m.message_id);
                     out[m.message_id] = m.envelope ? m.envelope->message.body : "<missing>";
                   }
                 }
                 done = true;
               });
    EXPECT_TRUE(mailbox.RunUntil([&] { return done; }));
    return out;
  }

  // The entries of `dir`'s parent whose names start with "." + `dir`'s name (partial copies).
  static std::vector<std::string> PartialSiblings(const fs::path& dir) {
    std::vector<std::string> out;
    const std::string prefix = "." + dir.filename().string();
    for (const auto& entry : fs::directory_iterator(dir.parent_path())) {
      if (entry.path().filename().string().rfind(prefix, 0) == 0) {
        out.push_back(entry.path().string());
      }
    }
    return out;
  }

  TempDir dir_;
  Mailbox mailbox_;
  std::unique_ptr<RocksDbStore> store_;
};

TEST_F(RocksDbStoreBackupTest, CopyOpensWithEveryCommittedMessage) {
  ASSERT_TRUE(CommitSync(Entries(1, 3000)).ok());
  // A body shared by two queues' entries is copied too (messages family, reference count).
  StoreBatch shared;
  shared.Add(StoreBatch::PutMessage{Numbered(3001), 2});
  shared.Add(StoreBatch::PutEntry{EntryRef{kBackupQueue, 3001, 3001, 0, kEntryShared}});
  shared.Add(StoreBatch::PutEntry{EntryRef{2, 1, 3001, 0, kEntryShared}});
  ASSERT_TRUE(CommitSync(std::move(shared)).ok());

  const std::string target = dir_.path() + "/backup";
  auto info = BackupSync(target);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->directory, target);
  EXPECT_GT(info->files, 3u);      // tables, MANIFEST, CURRENT, OPTIONS, log
  EXPECT_GT(info->bytes, 10000u);  // compressed: the bodies repeat a byte
  EXPECT_GT(info->linked_bytes, 0u) << "same file system: tables are hard links";
  EXPECT_LE(info->linked_bytes, info->bytes);
  EXPECT_EQ(info->max_message_id, 3001u);

  auto copy = OpenCopy(target);
  ASSERT_EQ(copy.size(), 3001u);
  for (const auto& [id, body] : copy) EXPECT_EQ(body, BackupBody(id)) << id;
  EXPECT_TRUE(PartialSiblings(target).empty());
  // The live store goes on as before.
  ASSERT_TRUE(CommitSync(Entries(3002, 3002)).ok());
}

// The backup is taken while the test keeps eight commits in flight, and runs on its own thread:
// commits go on being confirmed while it is in progress. The copy holds every commit confirmed
// before the backup was asked for, and is one moment of the store: a prefix of the commits in
// their order, each message whole.
TEST_F(RocksDbStoreBackupTest, CommitsInFlightGoOnAndTheCopyHoldsEveryConfirmedOne) {
  constexpr uint64_t kPerCommit = 50;
  std::atomic<uint64_t> confirmed_commits{0};
  // The hook runs on the backup thread once the checkpoint is written: it waits for more
  // commits to be confirmed meanwhile, which they could not be if the backup held the writer.
  std::atomic<bool> confirmed_during{false};
  store_->SetBackupHookForTests([&]() {
    const uint64_t needed_during = confirmed_commits.load() + 20;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (confirmed_commits.load() < needed_during) {
      if (std::chrono::steady_clock::now() > deadline) {
        return Status(StatusCode::kDeadlineExceeded, "no commit confirmed during the backup");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    confirmed_during = true;
    return Status::Ok();
  });

  uint64_t next_id = 1;
  uint64_t in_flight = 0;
  uint64_t max_confirmed_before_backup = 0;
  uint64_t highest_confirmed = 0;
  bool backup_asked = false;
  std::optional<Result<BackupInfo>> backup;
  const std::string target = dir_.path() + "/backup";
  auto submit = [&] {
    const uint64_t first = next_id;
    const uint64_t last = next_id + kPerCommit - 1;
    next_id = last + 1;
    ++in_flight;
    store_->Commit(Entries(first, last), true, [&, last](Status s) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      --in_flight;
      highest_confirmed = std::max(highest_confirmed, last);
      ++confirmed_commits;
    });
  };
  // Runs until the backup has answered and everything submitted is confirmed.
  ASSERT_TRUE(mailbox_.RunUntil([&] {
    if (!backup_asked && confirmed_commits >= 40) {
      max_confirmed_before_backup = highest_confirmed;
      backup_asked = true;
      store_->Backup(target, [&](Result<BackupInfo> r) { backup = std::move(r); });
    }
    while (!backup && in_flight < 8) submit();
    return backup.has_value() && in_flight == 0;
  }));
  ASSERT_TRUE(backup->ok()) << backup->status().ToString();
  EXPECT_TRUE(confirmed_during);
  EXPECT_GE((*backup)->max_message_id, max_confirmed_before_backup);

  auto copy = OpenCopy(target);
  ASSERT_FALSE(copy.empty());
  // A prefix 1..N of the commits, whole commits only (each was one atomic write).
  const uint64_t n = copy.rbegin()->first;
  EXPECT_EQ(copy.size(), n) << "a gap: the copy is not one moment of the store";
  EXPECT_EQ(n % kPerCommit, 0u) << "half a commit in the copy";
  EXPECT_GE(n, max_confirmed_before_backup) << "a commit confirmed before the backup is missing";
  for (const auto& [id, body] : copy) {
    ASSERT_EQ(body, BackupBody(id)) << "garbled message " << id;
  }
  std::printf(
      "backup held %llu messages; %llu were confirmed before it was asked for, %llu "
      "by its end\n",
      static_cast<unsigned long long>(n),
      static_cast<unsigned long long>(max_confirmed_before_backup),
      static_cast<unsigned long long>(highest_confirmed));
}

TEST_F(RocksDbStoreBackupTest, FailureMidwayLeavesNothingBehind) {
  ASSERT_TRUE(CommitSync(Entries(1, 100)).ok());
  bool fail = true;
  store_->SetBackupHookForTests([&]() {
    return fail ? Status(StatusCode::kStoreUnavailable, "injected: the copy failed") : Status::Ok();
  });
  // A new directory: made beside the target, removed on failure.
  const fs::path target = dir_.path() + "/backup";
  auto failed = BackupSync(target.string());
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kStoreUnavailable);
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(PartialSiblings(target).empty());
  // An empty directory stays empty.
  const fs::path empty = dir_.path() + "/empty";
  fs::create_directory(empty);
  ASSERT_FALSE(BackupSync(empty.string()).ok());
  EXPECT_TRUE(fs::is_empty(empty));
  // The next backup runs (a failure does not leave one "running").
  fail = false;
  auto info = BackupSync(target.string());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(OpenCopy(target.string()).size(), 100u);
  ASSERT_TRUE(BackupSync(empty.string()).ok());
  EXPECT_EQ(OpenCopy(empty.string()).size(), 100u);
}

TEST_F(RocksDbStoreBackupTest, BadTargetsAreRefusedEachWithItsReason) {
  const std::string root = dir_.path();
  auto expect = [&](const std::string& target, StatusCode code, const std::string& words) {
    auto r = BackupSync(target);
    ASSERT_FALSE(r.ok()) << target;
    EXPECT_EQ(r.status().code(), code) << target << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().ToString();
  };
  expect("", StatusCode::kInvalidArgument, "needs a directory");
  expect("backups/today", StatusCode::kInvalidArgument, "is not absolute");
  expect(root + "/no/such/parent", StatusCode::kPreconditionFailed, "does not exist");
  fs::create_directories(root + "/full/x");
  expect(root + "/full", StatusCode::kPreconditionFailed, "already exists and is not empty");
  std::ofstream(root + "/file") << "x";
  expect(root + "/file", StatusCode::kPreconditionFailed, "is not a directory");
  expect(root + "/file/sub", StatusCode::kPreconditionFailed, "is not a directory");
  expect(root + "/data/store/inside", StatusCode::kInvalidArgument, "inside the live store");
  expect(root + "/data/store", StatusCode::kInvalidArgument, "inside the live store");
  // Regression (issue 20 review): the check was lexical only, so a path through a symlink to
  // the store (or any path, with a relative data_dir) passed it.
  fs::create_directory_symlink(root + "/data/store", root + "/link");
  expect(root + "/link/inside", StatusCode::kInvalidArgument, "inside the live store");
  expect(std::string(5000, '/'), StatusCode::kInvalidArgument, "is not a path");
  // Nothing was made by any of them.
  EXPECT_FALSE(fs::exists(root + "/no"));
  EXPECT_EQ(fs::directory_iterator(root + "/full")->path().filename(), "x");
  // A trailing slash names the same directory.
  auto info = BackupSync(root + "/fresh/");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->directory, root + "/fresh");
}

TEST_F(RocksDbStoreBackupTest, NoPermissionIsSaid) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root may write anywhere (the integration test uses a read-only file system)";
  const fs::path parent = dir_.path() + "/locked";
  fs::create_directory(parent);
  ::chmod(parent.c_str(), 0555);
  auto r = BackupSync((parent / "b").string());
  ::chmod(parent.c_str(), 0755);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPreconditionFailed);
  EXPECT_NE(r.status().message().find("Permission denied"), std::string::npos)
      << r.status().ToString();
  EXPECT_TRUE(fs::is_empty(parent));
}

TEST_F(RocksDbStoreBackupTest, OneAtATime) {
  ASSERT_TRUE(CommitSync(Entries(1, 10)).ok());
  std::atomic<bool> release{false};
  std::atomic<bool> holding{false};
  store_->SetBackupHookForTests([&]() {
    holding = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status::Ok();
  });
  std::optional<Result<BackupInfo>> first;
  store_->Backup(dir_.path() + "/one", [&](Result<BackupInfo> r) { first = std::move(r); });
  while (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto second = BackupSync(dir_.path() + "/two");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kResourceLocked);
  EXPECT_NE(second.status().message().find("/one"), std::string::npos)
      << second.status().ToString();
  EXPECT_FALSE(fs::exists(dir_.path() + "/two"));
  // Commits are confirmed while it runs.
  ASSERT_TRUE(CommitSync(Entries(11, 20)).ok());
  release = true;
  ASSERT_TRUE(mailbox_.RunUntil([&] { return first.has_value(); }));
  ASSERT_TRUE(first->ok()) << first->status().ToString();
  EXPECT_EQ(OpenCopy(dir_.path() + "/one").size(), 10u) << "what was written before it, only";
}

// Close waits for a backup that is running and answers it.
TEST_F(RocksDbStoreBackupTest, CloseFinishesARunningBackup) {
  ASSERT_TRUE(CommitSync(Entries(1, 10)).ok());
  std::optional<Result<BackupInfo>> result;
  store_->Backup(dir_.path() + "/b", [&](Result<BackupInfo> r) { result = std::move(r); });
  store_->Close();
  ASSERT_TRUE(mailbox_.RunUntil([&] { return result.has_value(); }));
  EXPECT_TRUE(result->ok()) << result->status().ToString();
  auto refused = BackupSync(dir_.path() + "/c");
  EXPECT_EQ(refused.status().code(), StatusCode::kShuttingDown);
  store_.reset();
  EXPECT_EQ(OpenCopy(dir_.path() + "/b").size(), 10u);
}

}  // namespace
}  // namespace wharf::store
