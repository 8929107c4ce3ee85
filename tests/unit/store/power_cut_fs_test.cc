// The power-loss simulation itself (store/power_cut_fs.h): it must really drop what a power
// cut drops, or the power-loss tests prove nothing.
#include "unit/store/power_cut_fs.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "unit/store/store_test_util.h"

namespace wharf::store::testing {
namespace {

std::unique_ptr<rocksdb::DB> OpenDb(const std::string& path, rocksdb::Env* env) {
  rocksdb::Options options;
  options.create_if_missing = true;
  if (env) options.env = env;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, path, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::unique_ptr<rocksdb::DB>(db);
}

std::string Get(rocksdb::DB* db, const std::string& key) {
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), key, &value);
  return s.ok() ? value : "<" + s.ToString() + ">";
}

TEST(PowerCutFileSystemTest, AWriteSurvivesOnlyIfSynced) {
  TempDir dir;
  auto fs = std::make_shared<PowerCutFileSystem>();
  auto env = rocksdb::NewCompositeEnv(fs);
  {
    auto db = OpenDb(dir.path(), env.get());
    ASSERT_NE(db, nullptr);
    rocksdb::WriteOptions synced;
    synced.sync = true;
    ASSERT_TRUE(db->Put(synced, "a", "synced").ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "b", "in the page cache only").ok());
    // As kill -9 would leave it, the unsynced write is readable in the files.
    fs->CutNow();
  }
  std::mt19937_64 rng(1);
  auto dropped = fs->DropUnsynced(rng, /*keep_torn=*/false);
  EXPECT_GT(dropped.bytes, 0u);
  auto db = OpenDb(dir.path(), nullptr);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(db.get(), "a"), "synced");
  EXPECT_EQ(Get(db.get(), "b"), "<NotFound: >");
}

TEST(PowerCutFileSystemTest, ANewFileGoesUnlessItsDirectoryWasSynced) {
  TempDir dir;
  PowerCutFileSystem fs;
  rocksdb::IOOptions io;
  for (const char* name : {"/kept", "/lost"}) {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    ASSERT_TRUE(fs.NewWritableFile(dir.path() + name, rocksdb::FileOptions(), &file, nullptr).ok());
    ASSERT_TRUE(file->Append("data", io, nullptr).ok());
    ASSERT_TRUE(file->Sync(io, nullptr).ok());
    ASSERT_TRUE(file->Close(io, nullptr).ok());
    if (std::string(name) == "/kept") {
      std::unique_ptr<rocksdb::FSDirectory> d;
      ASSERT_TRUE(fs.NewDirectory(dir.path(), io, &d, nullptr).ok());
      ASSERT_TRUE(d->Fsync(io, nullptr).ok());
    }
  }
  std::mt19937_64 rng(1);
  auto dropped = fs.DropUnsynced(rng, false);
  EXPECT_EQ(dropped.files_removed, 1u);
  EXPECT_EQ(std::filesystem::file_size(dir.path() + "/kept"), 4u);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/lost"));
}

TEST(PowerCutFileSystemTest, TheCutFailsItsCallAndEveryLaterOneAndATornTailKeepsAPrefix) {
  TempDir dir;
  PowerCutFileSystem fs;
  rocksdb::IOOptions io;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  const std::string path = dir.path() + "/f";
  ASSERT_TRUE(fs.NewWritableFile(path, rocksdb::FileOptions(), &file, nullptr).ok());
  std::unique_ptr<rocksdb::FSDirectory> d;
  ASSERT_TRUE(fs.NewDirectory(dir.path(), io, &d, nullptr).ok());
  ASSERT_TRUE(d->Fsync(io, nullptr).ok());
  ASSERT_TRUE(file->Append("0123", io, nullptr).ok());
  ASSERT_TRUE(file->Sync(io, nullptr).ok());
  fs.CutAfter(3);
  ASSERT_TRUE(file->Append("4567", io, nullptr).ok());
  ASSERT_TRUE(file->Append("89ab", io, nullptr).ok());
  EXPECT_FALSE(file->Append("cdef", io, nullptr).ok()) << "the third call is the cut";
  EXPECT_TRUE(fs.cut());
  EXPECT_EQ(fs.cut_point(), "Append f");
  EXPECT_FALSE(file->Sync(io, nullptr).ok()) << "nothing after the cut";
  EXPECT_FALSE(fs.DeleteFile(path, io, nullptr).ok());
  ASSERT_TRUE(file->Close(io, nullptr).ok());
  std::mt19937_64 rng(7);
  auto dropped = fs.DropUnsynced(rng, /*keep_torn=*/true);
  const uint64_t size = std::filesystem::file_size(path);
  EXPECT_GE(size, 4u);
  EXPECT_LE(size, 12u);
  EXPECT_EQ(dropped.bytes, 12u - size);
  std::string content(size, '\0');
  std::ifstream(path).read(content.data(), static_cast<std::streamsize>(size));
  EXPECT_EQ(content, std::string("0123456789ab").substr(0, size)) << "a prefix, never garbage";
}

}  // namespace
}  // namespace wharf::store::testing
