// Helpers for tests of the message store: a real RocksDbStore in a temporary directory, and an
// "owner thread" that is the test thread itself: completions queue up in a Mailbox and run when
// the test pumps it.
#pragma once

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "store/keys.h"
#include "store/rocksdb_store.h"

namespace wharf::store::testing {

class Mailbox {
 public:
  PostFn Poster() {
    return [this](std::function<void()> fn) {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(fn));
      cv_.notify_all();
    };
  }
  // Drops every queued completion unrun (their owner is gone).
  void Clear() {
    std::lock_guard lock(mu_);
    items_.clear();
  }
  // Runs posted completions on this thread until `done()` holds or 10 s pass.
  bool RunUntil(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        if (!cv_.wait_until(lock, deadline, [this] { return !items_.empty(); })) return false;
        fn = std::move(items_.front());
        items_.pop_front();
      }
      fn();
    }
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> items_;
};

class TempDir {
 public:
  TempDir() {
    std::string templ = std::filesystem::temp_directory_path().string() + "/wharf-store-XXXXXX";
    path_ = mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Commits `batch` and runs the mailbox until its answer comes back.
inline Status CommitAndWait(MessageStore* store, Mailbox* mailbox, StoreBatch batch,
                            bool sync = true) {
  bool done = false;
  Status result;
  store->Commit(std::move(batch), sync, [&](Status s) {
    result = s;
    done = true;
  });
  EXPECT_TRUE(mailbox->RunUntil([&] { return done; }));
  return result;
}

// A persistent message `id` with `body`, published to the default exchange with key "q".
// A PutDedup's outcome in its batch, read once the commit is done (the batch's outcomes
// outlive the batch: the writer fills them in).
struct DedupOutcomeRef {
  std::shared_ptr<DedupOutcomes> outcomes;
  uint32_t index = 0;
  DedupOutcome* operator->() const { return &(*outcomes)[index]; }
};
inline DedupOutcomeRef AddDedup(StoreBatch* batch, StoreBatch::PutDedup op) {
  uint32_t index = batch->AddDedup(std::move(op));
  return DedupOutcomeRef{batch->dedup_outcomes(), index};
}

// The wall clock in Unix ms, as the broker stamps a deduplication record's times.
inline int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A run's value as format 13 wrote it, byte by byte (docs/storage.md): each key's length, the
// key, then the message id and the expiry as fixed64le. Spelled out here, not with the store's
// helpers, so that it pins the old format whatever the store writes now.
inline std::string Format13Run(const std::vector<std::pair<std::string, DedupValue>>& records) {
  std::string run;
  for (const auto& [key, value] : records) {
    run.push_back(static_cast<char>(key.size()));
    run += key;
    for (uint64_t v : {value.message_id, static_cast<uint64_t>(value.expires_at_ms)}) {
      for (int byte = 0; byte < 8; ++byte) run.push_back(static_cast<char>(v >> (8 * byte)));
    }
  }
  return run;
}

inline EnvelopePtr PersistentEnvelope(uint64_t id, std::string body) {
  Envelope e;
  e.message.id = id;
  e.message.body = std::move(body);
  e.message.persistent = true;
  e.routing_key = "q";
  return std::make_shared<const Envelope>(std::move(e));
}

// The column families the store at `path` has, in the order they were made ("default"
// first): what a raw opening must name. The lane families "entries.1".. "entries.15" are
// made when first written, so a store has only those its queues used.
inline std::vector<rocksdb::ColumnFamilyDescriptor> ExistingFamilies(const std::string& path) {
  std::vector<std::string> names;
  EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names) families.push_back({name, rocksdb::ColumnFamilyOptions()});
  return families;
}

// Opens the store at `path` with RocksDB directly (every column family it has; the store
// itself closed), runs `fn` on it, and flushes every memtable to tables before closing (the
// log is then empty). What a test uses to write what another build (or damage) would have
// left. WithRawDbFamilies hands `fn` every family's handle, in ExistingFamilies' order.
inline void WithRawDbFamilies(
    const std::string& path,
    const std::function<void(rocksdb::DB*, const std::vector<rocksdb::ColumnFamilyHandle*>&)>& fn) {
  std::vector<rocksdb::ColumnFamilyDescriptor> families = ExistingFamilies(path);
  rocksdb::DBOptions options;
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, path, families, &handles, &db).ok());
  fn(db, handles);
  EXPECT_TRUE(db->Flush(rocksdb::FlushOptions(), handles).ok());
  for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
  db->Close();
  delete db;
}

// The handle of the family named `name` among `handles`; nullptr when there is none.
inline rocksdb::ColumnFamilyHandle* FamilyNamed(
    const std::vector<rocksdb::ColumnFamilyHandle*>& handles, std::string_view name) {
  for (auto* handle : handles) {
    if (handle->GetName() == name) return handle;
  }
  return nullptr;
}

inline void WithRawDb(
    const std::string& path,
    const std::function<void(rocksdb::DB*, rocksdb::ColumnFamilyHandle* meta)>& fn) {
  WithRawDbFamilies(path,
                    [&](rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
                      fn(db, handles[0]);
                    });
}

// Makes, with RocksDB directly, a store directory as an older build left it: only `families`
// (the "default" family first) and format version `format` under "F".
inline void MakeOlderStore(const std::string& path, const std::vector<const char*>& families,
                           const std::string& format) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const char* name : families) descriptors.push_back({name, rocksdb::ColumnFamilyOptions()});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, path, descriptors, &handles, &db).ok());
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], "F", format).ok());
  for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
  delete db;
}

// The format version under "F", read with RocksDB directly (the store closed); "" when absent.
inline std::string RawFormatVersion(const std::string& path) {
  std::string value;
  WithRawDb(path, [&](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta) {
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), meta,
                                rocksdb::Slice(kFormatKey.data(), kFormatKey.size()), &value);
    EXPECT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
  });
  return value;
}

inline std::unique_ptr<RocksDbStore> OpenStore(const std::string& path, Mailbox* mailbox,
                                               StoreOptions options = {}) {
  options.path = path;
  auto store = RocksDbStore::Open(options, mailbox->Poster());
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

}  // namespace wharf::store::testing
