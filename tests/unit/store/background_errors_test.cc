// The store's BackgroundErrors listener against a real RocksDB on a file system that can run out
// of space for new table files and reports the little free space a small disk has. Without the
// listener, the first compaction that runs out of space leaves RocksDB refusing every later one
// ("compaction too large") for as long as free space stays below twice its input, which on a
// small disk is for ever (issue 15's full-disk test, seen failing in CI).
#include "store/background_errors.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include <atomic>
#include <memory>
#include <string>

#include "unit/store/store_test_util.h"

namespace wharf::store {
namespace {

// New table files fail with "no space" while `tables_full` is set; free space is always
// `free_bytes` (a small disk), whatever the real disk has.
class SmallDiskFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  explicit SmallDiskFileSystem(uint64_t free_bytes)
      : FileSystemWrapper(rocksdb::FileSystem::Default()), free_bytes_(free_bytes) {}
  const char* Name() const override { return "SmallDiskFileSystem"; }

  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    if (tables_full && name.ends_with(".sst")) return rocksdb::IOStatus::NoSpace("test: disk full");
    return target()->NewWritableFile(name, options, result, dbg);
  }
  rocksdb::IOStatus GetFreeSpace(const std::string&, const rocksdb::IOOptions&, uint64_t* free,
                                 rocksdb::IODebugContext*) override {
    *free = free_bytes_;
    return rocksdb::IOStatus::OK();
  }

  std::atomic<bool> tables_full{false};

 private:
  const uint64_t free_bytes_;
};

class BackgroundErrorsTest : public ::testing::Test {
 protected:
  // A table file of 1 MiB of values, and one removing all but the last few of them, as a
  // drained queue leaves: compacting the two takes about 2 MiB of input and writes a few KiB.
  // The disk says 1 MiB is free: room for the output, not for what RocksDB asks after an error.
  void Open(std::shared_ptr<rocksdb::EventListener> listener) {
    fs_ = std::make_shared<SmallDiskFileSystem>(1u << 20);
    env_ = rocksdb::NewCompositeEnv(fs_);
    rocksdb::Options options;
    options.create_if_missing = true;
    options.env = env_.get();
    options.disable_auto_compactions = true;
    options.compression = rocksdb::kNoCompression;
    if (listener) options.listeners.push_back(listener);
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_.path() + "/db", &db).ok());
    db_.reset(db);
    for (int i = 0; i < 256; ++i) {
      ASSERT_TRUE(db_->Put({}, Key(i), std::string(4096, 'v')).ok());
    }
    ASSERT_TRUE(db_->Flush({}).ok());
    for (int i = 0; i < 250; ++i) ASSERT_TRUE(db_->Delete({}, Key(i)).ok());
    ASSERT_TRUE(db_->Flush({}).ok());
  }
  static std::string Key(int i) { return "k" + std::to_string(1000 + i); }

  rocksdb::Status Compact() {
    rocksdb::CompactRangeOptions compact;
    return db_->CompactRange(compact, nullptr, nullptr);
  }

  testing::TempDir dir_;
  std::shared_ptr<SmallDiskFileSystem> fs_;
  std::unique_ptr<rocksdb::Env> env_;
  std::unique_ptr<rocksdb::DB> db_;
};

TEST_F(BackgroundErrorsTest, ACompactionOutOfSpaceIsRetriedOnceThereIsRoom) {
  auto listener = std::make_shared<BackgroundErrors>();
  Open(listener);
  fs_->tables_full = true;
  rocksdb::Status failed = Compact();
  EXPECT_TRUE(failed.IsNoSpace()) << failed.ToString();
  EXPECT_EQ(listener->compactions_out_of_space(), 1u);
  // Nothing stored is lost, writes go on, and the next compaction runs on the same small disk.
  std::string value;
  ASSERT_TRUE(db_->Get({}, Key(250), &value).ok());
  EXPECT_EQ(value, std::string(4096, 'v'));
  EXPECT_TRUE(db_->Get({}, Key(7), &value).IsNotFound());
  EXPECT_TRUE(db_->Put({}, "after", "x").ok());
  fs_->tables_full = false;
  rocksdb::Status again = Compact();
  EXPECT_TRUE(again.ok()) << again.ToString();
  std::string files;
  ASSERT_TRUE(db_->GetProperty("rocksdb.num-files-at-level0", &files));
  EXPECT_EQ(files, "0");
  uint64_t live = 0;
  ASSERT_TRUE(db_->GetIntProperty("rocksdb.live-sst-files-size", &live));
  EXPECT_LT(live, 256u << 10);  // the removed values' space is back
}

// What the listener is for: RocksDB on its own keeps refusing compactions on a small disk.
TEST_F(BackgroundErrorsTest, WithoutItRocksDbRefusesLaterCompactionsOnASmallDisk) {
  Open(nullptr);
  fs_->tables_full = true;
  EXPECT_TRUE(Compact().IsNoSpace());
  fs_->tables_full = false;
  rocksdb::Status again = Compact();
  EXPECT_FALSE(again.ok());
  EXPECT_TRUE(again.IsCompactionTooLarge() || again.IsNoSpace()) << again.ToString();
}

}  // namespace
}  // namespace wharf::store
