// Tests for store/disk_guard.h, alone and in a real RocksDbStore (free space made up through
// free_bytes_for_tests; tests/integration/full_disk_test.cc fills a real small disk).
#include "store/disk_guard.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "store/rocksdb_store.h"
#include "unit/store/store_test_util.h"

namespace wharf::store {
namespace {

using testing::Mailbox;
using testing::OpenStore;
using testing::TempDir;

constexpr uint64_t kMiB = 1u << 20;

uint64_t AllocatedBytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

class DiskGuardTest : public ::testing::Test {
 protected:
  DiskGuardOptions Options(uint64_t ballast_bytes = 0) {
    DiskGuardOptions options;
    options.path = dir_.path();
    options.reserve_bytes = 16 * kMiB;
    options.ballast_bytes = ballast_bytes;
    if (ballast_bytes > 0) options.ballast_path = dir_.path() + "/ballast";
    options.free_bytes_for_tests = [this]() -> std::optional<uint64_t> { return free_.load(); };
    return options;
  }
  TempDir dir_;
  std::atomic<uint64_t> free_{1024 * kMiB};
};

TEST_F(DiskGuardTest, RefusesBelowTheReserveAndTakesAgainALittleAboveIt) {
  DiskGuard guard(Options());
  guard.RefreshNow();
  EXPECT_TRUE(guard.Accepting().ok());
  free_ = 15 * kMiB;
  guard.RefreshNow();
  Status full = guard.Accepting();
  EXPECT_EQ(full.code(), StatusCode::kStoreFull);
  EXPECT_NE(full.message().find("15 MiB free"), std::string::npos) << full.ToString();
  EXPECT_NE(full.message().find("disk_reserve_bytes"), std::string::npos) << full.ToString();
  // Just at the reserve is not enough to start again: no flapping at the edge.
  free_ = 16 * kMiB;
  guard.RefreshNow();
  EXPECT_TRUE(guard.full());
  free_ = 17 * kMiB + 1;
  guard.RefreshNow();
  EXPECT_FALSE(guard.full());
}

TEST_F(DiskGuardTest, RereadsTheDiskAfterEnoughBytesWereWrittenNotOnEveryWrite) {
  DiskGuard guard(Options());
  guard.RefreshNow();
  free_ = kMiB;
  // A little written: the reading is kept (each read is a system call).
  EXPECT_FALSE(guard.Refresh(1024));
  EXPECT_FALSE(guard.full());
  // An eighth of the reserve written since: read again at once.
  EXPECT_TRUE(guard.Refresh(2 * kMiB));
  EXPECT_TRUE(guard.full());
}

TEST_F(DiskGuardTest, TheBallastIsRealSpaceMadeWhenThereIsRoomAndReleasedOnDemand) {
  const std::string ballast = dir_.path() + "/ballast";
  {
    DiskGuard guard(Options(4 * kMiB));
    free_ = 19 * kMiB;  // not room for the ballast and the reserve besides
    guard.RefreshNow();
    EXPECT_TRUE(guard.full()) << "a spent ballast is space the store must get back first";
    EXPECT_FALSE(guard.MakeBallast());
    EXPECT_FALSE(std::filesystem::exists(ballast));
    free_ = 64 * kMiB;
    guard.RefreshNow();
    EXPECT_FALSE(guard.full());
    EXPECT_TRUE(guard.MakeBallast());
    EXPECT_TRUE(guard.has_ballast());
    EXPECT_GE(AllocatedBytes(ballast), 4 * kMiB) << "a sparse file would give nothing back";
    EXPECT_FALSE(guard.MakeBallast()) << "made once";
  }
  // A new start finds it in place.
  DiskGuard guard(Options(4 * kMiB));
  EXPECT_TRUE(guard.has_ballast());
  EXPECT_TRUE(guard.ReleaseBallast());
  EXPECT_FALSE(std::filesystem::exists(ballast));
  EXPECT_FALSE(guard.ReleaseBallast());
}

EnvelopePtr Kilobyte(uint64_t id) {
  Envelope e;
  e.message.id = id;
  e.message.body = std::string(1024, 'x');
  e.message.persistent = true;
  return std::make_shared<const Envelope>(std::move(e));
}

// The store refuses no commit itself: it says it takes no new message (the broker asks before
// each publish), and removals still go to disk.
TEST(RocksDbStoreDiskTest, BelowTheReserveNewMessagesAreRefusedAndRemovalsStillWritten) {
  TempDir dir;
  Mailbox mailbox;
  std::atomic<uint64_t> free{1024 * kMiB};
  StoreOptions options;
  options.disk_reserve_bytes = 16 * kMiB;
  options.free_bytes_for_tests = [&]() -> std::optional<uint64_t> { return free.load(); };
  auto store = OpenStore(dir.path() + "/store", &mailbox, options);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Recover().ok());
  auto commit = [&](StoreBatch batch) {
    std::optional<Status> result;
    store->Commit(std::move(batch), true, [&](const Status& s) { result = s; });
    EXPECT_TRUE(mailbox.RunUntil([&] { return result.has_value(); }));
    return result.value_or(Status(StatusCode::kInternal, "no answer"));
  };
  StoreBatch put;
  put.Add(StoreBatch::PutEntry{EntryRef{1, 1, 7, 0, kEntryInline, Kilobyte(7)}});
  ASSERT_TRUE(commit(std::move(put)).ok());
  EXPECT_TRUE(store->AcceptingMessages().ok());

  free = 8 * kMiB;
  // The writer looks again at least each second, and after each write.
  EXPECT_TRUE(commit(StoreBatch()).ok());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (store->AcceptingMessages().ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(store->AcceptingMessages().code(), StatusCode::kStoreFull);
  StoreBatch ack;
  ack.Add(StoreBatch::RemoveEntry{EntryRef{1, 1, 7, 1, kEntryInline}});
  EXPECT_TRUE(commit(std::move(ack)).ok()) << "an ack must land on a tight disk";

  free = 1024 * kMiB;
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!store->AcceptingMessages().ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(store->AcceptingMessages().ok()) << "taken again without a write to wake it";
}

// RocksDB logs through wharfd's log: no LOG file of its own on the data disk (Debian's build
// aborted logging to it again after a failed write, issue 15).
TEST(RocksDbStoreDiskTest, RocksDbWritesNoLogFileOfItsOwn) {
  TempDir dir;
  Mailbox mailbox;
  {
    auto store = OpenStore(dir.path() + "/store", &mailbox);
    ASSERT_NE(store, nullptr);
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() + "/store")) {
    EXPECT_FALSE(entry.path().filename().string().starts_with("LOG")) << entry.path();
  }
}

}  // namespace
}  // namespace wharf::store
