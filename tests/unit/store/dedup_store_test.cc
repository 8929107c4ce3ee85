// The store's side of publish deduplication windows (StoreBatch::PutDedup, store/keys.h's
// "dedup" family, store/dedup_expiry.h), on a real RocksDbStore: a key is recorded once, a
// duplicate's entries are not written, the window survives a reopen, expires, and goes with
// its queue.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <chrono>
#include <memory>
#include <string>

#include "store/dedup_expiry.h"
#include "store/keys.h"
#include "store/rocksdb_store.h"
#include "unit/store/store_test_util.h"

namespace wharf::store {
namespace {

using testing::Mailbox;
using testing::OpenStore;
using testing::PersistentEnvelope;
using testing::TempDir;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr uint64_t kQueue = 1;

class DedupStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    store_ = OpenStore(dir_.path(), &mailbox_);
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->Recover().ok());
  }
  void Reopen() {
    store_.reset();
    Open();
  }
  Status Commit(StoreBatch batch) {
    return testing::CommitAndWait(store_.get(), &mailbox_, std::move(batch));
  }
  // Adds a publish of message `id` with deduplication `key` into queue `queue` at `seq`: the
  // PutDedup, then the inline entry. Returns the outcome the writer fills in.
  testing::DedupOutcomeRef AddPublish(StoreBatch* batch, uint64_t queue, uint64_t seq, uint64_t id,
                                      const std::string& key, int64_t expires_at_ms = 0) {
    if (expires_at_ms == 0) expires_at_ms = NowMs() + 3'600'000;
    auto outcome =
        testing::AddDedup(batch, StoreBatch::PutDedup{queue, key, id, expires_at_ms, NowMs()});
    outcome->duplicate_of = UINT64_MAX;  // must be filled in
    batch->Add(StoreBatch::PutEntry{
        EntryRef{queue, seq, id, 0, kEntryInline, PersistentEnvelope(id, "body " + key)}});
    return outcome;
  }
  std::vector<uint64_t> LoadIds(uint64_t queue) {
    bool done = false;
    std::vector<uint64_t> ids;
    store_->Load(queue, 0, UINT64_MAX, 100000, UINT64_MAX,
                 [&](Result<std::vector<LoadedMessage>> r) {
                   EXPECT_TRUE(r.ok()) << r.status().ToString();
                   if (r.ok()) {
                     for (const auto& m : *r) ids.push_back(m.envelope->message.id);
                   }
                   done = true;
                 });
    EXPECT_TRUE(mailbox_.RunUntil([&] { return done; }));
    return ids;
  }
  void DeclareQueue(uint64_t id, const std::string& name) {
    StoreBatch batch;
    QueueSpec spec;
    spec.name = name;
    spec.durable = true;
    batch.Add(StoreBatch::PutQueue{spec, id});
    ASSERT_TRUE(Commit(std::move(batch)).ok());
  }

  TempDir dir_;
  Mailbox mailbox_;
  std::unique_ptr<RocksDbStore> store_;
};

TEST_F(DedupStoreTest, AKeyIsRecordedOnceAndADuplicateIsNotWrittenEvenAfterAReopen) {
  DeclareQueue(kQueue, "q");
  StoreBatch first;
  auto accepted = AddPublish(&first, kQueue, 1, 10, "order-1");
  ASSERT_TRUE(Commit(std::move(first)).ok());
  EXPECT_EQ(accepted->duplicate_of, 0u);

  StoreBatch again;
  auto duplicate = AddPublish(&again, kQueue, 2, 11, "order-1");
  auto other = AddPublish(&again, kQueue, 3, 12, "order-2");
  ASSERT_TRUE(Commit(std::move(again)).ok());
  EXPECT_EQ(duplicate->duplicate_of, 10u);
  EXPECT_EQ(other->duplicate_of, 0u);
  EXPECT_EQ(LoadIds(kQueue), (std::vector<uint64_t>{10, 12}));

  Reopen();  // the window is on disk, not in memory
  StoreBatch after;
  auto still = AddPublish(&after, kQueue, 4, 13, "order-1");
  ASSERT_TRUE(Commit(std::move(after)).ok());
  EXPECT_EQ(still->duplicate_of, 10u);
  EXPECT_EQ(LoadIds(kQueue), (std::vector<uint64_t>{10, 12}));
}

TEST_F(DedupStoreTest, DuplicatesWithinOneWriteGroupAreFound) {
  DeclareQueue(kQueue, "q");
  // One batch (always one group), then two commits sent together (most often one group).
  StoreBatch batch;
  auto first = AddPublish(&batch, kQueue, 1, 10, "k");
  auto second = AddPublish(&batch, kQueue, 2, 11, "k");
  ASSERT_TRUE(Commit(std::move(batch)).ok());
  EXPECT_EQ(first->duplicate_of, 0u);
  EXPECT_EQ(second->duplicate_of, 10u);

  StoreBatch a, b;
  auto in_a = AddPublish(&a, kQueue, 3, 12, "j");
  auto in_b = AddPublish(&b, kQueue, 4, 13, "j");
  int done = 0;
  store_->Commit(std::move(a), true, [&](Status s) {
    EXPECT_TRUE(s.ok());
    ++done;
  });
  store_->Commit(std::move(b), true, [&](Status s) {
    EXPECT_TRUE(s.ok());
    ++done;
  });
  ASSERT_TRUE(mailbox_.RunUntil([&] { return done == 2; }));
  EXPECT_EQ(in_a->duplicate_of, 0u);
  EXPECT_EQ(in_b->duplicate_of, 12u);
  EXPECT_EQ(LoadIds(kQueue), (std::vector<uint64_t>{10, 12}));
}

TEST_F(DedupStoreTest, OneGroupFindsKeysInTablesInTheMemtableAndEarlierInItself) {
  // The writer looks a group's keys up in one MultiGet before applying it (PrefetchDedup):
  // keys in tables (partitioned filters) and in the memtable, and keys the group itself
  // records, must all be found.
  DeclareQueue(kQueue, "q");
  constexpr uint64_t kOld = 3000, kRecent = 200, kNew = 100;
  uint64_t seq = 1;
  for (uint64_t from = 0; from < kOld; from += 500) {
    StoreBatch batch;
    for (uint64_t i = from; i < from + 500; ++i) {
      AddPublish(&batch, kQueue, seq++, 10'000 + i, "old-" + std::to_string(i));
    }
    ASSERT_TRUE(Commit(std::move(batch)).ok());
  }
  Reopen();  // recovery flushes the log's keys into tables
  StoreBatch recent;
  for (uint64_t i = 0; i < kRecent; ++i) {
    AddPublish(&recent, kQueue, seq++, 20'000 + i, "recent-" + std::to_string(i));
  }
  ASSERT_TRUE(Commit(std::move(recent)).ok());

  StoreBatch mixed;
  std::vector<std::pair<testing::DedupOutcomeRef, uint64_t>> expect;  // outcome, holder
  for (uint64_t i = 0; i < kNew; ++i) {
    expect.emplace_back(AddPublish(&mixed, kQueue, seq++, 30'000 + i, "new-" + std::to_string(i)),
                        0);
    expect.emplace_back(
        AddPublish(&mixed, kQueue, seq++, 40'000 + i, "old-" + std::to_string(i * 29)),
        10'000 + i * 29);
    expect.emplace_back(
        AddPublish(&mixed, kQueue, seq++, 50'000 + i, "recent-" + std::to_string(i * 2)),
        20'000 + i * 2);
    // A key this group recorded a moment ago.
    expect.emplace_back(AddPublish(&mixed, kQueue, seq++, 60'000 + i, "new-" + std::to_string(i)),
                        30'000 + i);
  }
  ASSERT_TRUE(Commit(std::move(mixed)).ok());
  for (size_t i = 0; i < expect.size(); ++i) {
    EXPECT_EQ(expect[i].first->duplicate_of, expect[i].second) << "publish " << i;
  }
  EXPECT_EQ(LoadIds(kQueue).size(), kOld + kRecent + kNew);
}

TEST_F(DedupStoreTest, KeysAboveEveryRecordOfTheirQueueAreNotReadAndTheRestAreStillFound) {
  // The writer reads a key only when it is not above the highest its queue has recorded
  // (RocksDbStore::DedupHighKey): rising keys are never read, and nothing that is recorded is
  // missed, neither after a reopen (the highest read back from the store) nor with another
  // queue's higher keys about.
  DeclareQueue(kQueue, "q");
  DeclareQueue(2, "r");
  auto reads = [&] { return store_->counters().dedup_reads; };
  uint64_t seq = 1, id = 100;
  StoreBatch rising;  // a higher queue's keys are higher still: they must not count for q
  AddPublish(&rising, 2, 1, id++, "z-99");
  for (int i = 10; i < 20; ++i) AddPublish(&rising, kQueue, seq++, id++, "k-" + std::to_string(i));
  ASSERT_TRUE(Commit(std::move(rising)).ok());
  EXPECT_EQ(reads(), 0u);  // an empty window, then keys above it

  StoreBatch more;
  auto next = AddPublish(&more, kQueue, seq++, id++, "k-20");
  auto top_again = AddPublish(&more, kQueue, seq++, id++, "k-20");  // this group's own
  ASSERT_TRUE(Commit(std::move(more)).ok());
  EXPECT_EQ(next->duplicate_of, 0u);
  EXPECT_EQ(top_again->duplicate_of, 111u);
  EXPECT_EQ(reads(), 0u);

  StoreBatch below;  // the highest, one below it, and a new key below it: each read
  auto highest = AddPublish(&below, kQueue, seq++, id++, "k-20");
  auto lower = AddPublish(&below, kQueue, seq++, id++, "k-12");
  auto gap = AddPublish(&below, kQueue, seq++, id++, "k-1a");  // "k-19" < it < "k-20"
  auto in_r = AddPublish(&below, 2, 2, id++, "k-11");          // q's key, r's window
  ASSERT_TRUE(Commit(std::move(below)).ok());
  EXPECT_EQ(highest->duplicate_of, 111u);
  EXPECT_EQ(lower->duplicate_of, 103u);
  EXPECT_EQ(gap->duplicate_of, 0u);
  EXPECT_EQ(in_r->duplicate_of, 0u);
  EXPECT_EQ(reads(), 4u);

  Reopen();  // the highest is read back from the store, once per queue
  StoreBatch after;
  auto top_after = AddPublish(&after, kQueue, seq++, id++, "k-20");
  auto low_after = AddPublish(&after, kQueue, seq++, id++, "k-10");
  auto r_after = AddPublish(&after, 2, 3, id++, "z-99");
  auto above = AddPublish(&after, kQueue, seq++, id++, "k-21");
  ASSERT_TRUE(Commit(std::move(after)).ok());
  EXPECT_EQ(top_after->duplicate_of, 111u);
  EXPECT_EQ(low_after->duplicate_of, 101u);
  EXPECT_EQ(r_after->duplicate_of, 100u);
  EXPECT_EQ(above->duplicate_of, 0u);
  EXPECT_EQ(store_->counters().dedup_reads, 3u);  // all but "k-21"
}

TEST_F(DedupStoreTest, AnExpiredKeyIsAcceptedAgainAndWindowsArePerQueue) {
  DeclareQueue(kQueue, "q");
  DeclareQueue(2, "r");
  StoreBatch first;
  AddPublish(&first, kQueue, 1, 10, "k", NowMs() - 1);  // its window has passed already
  auto in_r = AddPublish(&first, 2, 1, 11, "k");
  ASSERT_TRUE(Commit(std::move(first)).ok());
  EXPECT_EQ(in_r->duplicate_of, 0u);  // another queue's window

  StoreBatch again;
  auto after_expiry = AddPublish(&again, kQueue, 2, 12, "k");
  auto in_r_again = AddPublish(&again, 2, 2, 13, "k");
  ASSERT_TRUE(Commit(std::move(again)).ok());
  EXPECT_EQ(after_expiry->duplicate_of, 0u);
  EXPECT_EQ(in_r_again->duplicate_of, 11u);
  EXPECT_EQ(LoadIds(kQueue), (std::vector<uint64_t>{10, 12}));
  EXPECT_EQ(LoadIds(2), (std::vector<uint64_t>{11}));
}

TEST_F(DedupStoreTest, ADuplicateDelayedPublishIsNotPutOnTheTimeline) {
  DeclareQueue(kQueue, "q");
  const int64_t due = NowMs() + 60'000;
  auto delayed = [&](StoreBatch* batch, uint64_t id) {
    auto outcome = testing::AddDedup(
        batch, StoreBatch::PutDedup{kQueue, "k", id, NowMs() + 3'600'000, NowMs()});
    batch->Add(StoreBatch::PutDelayed{
        EntryRef{kQueue, 0, id, 0, kEntryInline, PersistentEnvelope(id, "later")}, due});
    return outcome;
  };
  StoreBatch first, second;
  auto accepted = delayed(&first, 10);
  ASSERT_TRUE(Commit(std::move(first)).ok());
  auto duplicate = delayed(&second, 11);
  ASSERT_TRUE(Commit(std::move(second)).ok());
  EXPECT_EQ(accepted->duplicate_of, 0u);
  EXPECT_EQ(duplicate->duplicate_of, 10u);
  bool done = false;
  size_t timeline = 0;
  store_->LoadDelayed(kQueue, INT64_MIN, 0, 100, UINT64_MAX,
                      [&](Result<std::vector<LoadedMessage>> r) {
                        ASSERT_TRUE(r.ok());
                        timeline = r->size();
                        done = true;
                      });
  ASSERT_TRUE(mailbox_.RunUntil([&] { return done; }));
  EXPECT_EQ(timeline, 1u);
}

TEST_F(DedupStoreTest, RemovingTheQueueRemovesItsWindow) {
  DeclareQueue(kQueue, "q");
  StoreBatch first;
  AddPublish(&first, kQueue, 1, 10, "k");
  ASSERT_TRUE(Commit(std::move(first)).ok());
  StoreBatch remove;
  remove.Add(StoreBatch::RemoveQueue{"q", kQueue});
  ASSERT_TRUE(Commit(std::move(remove)).ok());
  store_.reset();
  size_t records = 0;
  std::vector<rocksdb::ColumnFamilyDescriptor> families = testing::ExistingFamilies(dir_.path());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.path(), families, &handles, &db).ok());
  rocksdb::ColumnFamilyHandle* dedup = testing::FamilyNamed(handles, kColumnDedup);
  ASSERT_NE(dedup, nullptr);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator({}, dedup));
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++records;
  it.reset();
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  delete db;
  EXPECT_EQ(records, 0u);
}

// Compaction drops expired records and keeps live ones (and anything it cannot read).
TEST(DedupExpiryTest, CompactionDropsExpiredRecordsOnly) {
  TempDir dir;
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compaction_filter_factory = std::make_shared<DedupExpiryFactory>();
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir.path() + "/db", &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  const int64_t now = NowMs();
  ASSERT_TRUE(db->Put({}, DedupKey(1, "old"), EncodeDedupValue({10, now - 1})).ok());
  ASSERT_TRUE(db->Put({}, DedupKey(1, "live"), EncodeDedupValue({11, now + 3'600'000})).ok());
  ASSERT_TRUE(db->Put({}, DedupKey(1, "odd"), "not a record").ok());
  ASSERT_TRUE(db->Flush({}).ok());
  ASSERT_TRUE(db->CompactRange({}, nullptr, nullptr).ok());
  std::string value;
  EXPECT_TRUE(db->Get({}, DedupKey(1, "old"), &value).IsNotFound());
  EXPECT_TRUE(db->Get({}, DedupKey(1, "live"), &value).ok());
  EXPECT_TRUE(db->Get({}, DedupKey(1, "odd"), &value).ok());
}

// A filter decides by the time it was made with: expired at or before it, dropped.
TEST(DedupExpiryTest, FilterComparesWithTheTimeItWasMadeWith) {
  const DedupExpiry filter(1'000);
  std::string unused;
  bool changed = false;
  auto drops = [&](int64_t expires_at_ms) {
    return filter.Filter(0, "k", EncodeDedupValue({7, expires_at_ms}), &unused, &changed);
  };
  EXPECT_TRUE(drops(999));
  EXPECT_TRUE(drops(1'000));
  EXPECT_FALSE(drops(1'001));
  EXPECT_FALSE(filter.Filter(0, "k", "not a record", &unused, &changed));
  EXPECT_FALSE(changed);
}

// Ids that rise as numbers rise in byte order too (format 12: the key's length first), so a
// window's new records follow its old ones; one queue's records lie between DedupKey(q, "")
// and DedupKey(q + 1, ""); a key parses back, and what is not a key does not.
TEST(DedupKeyTest, RisingNumbersRiseInByteOrder) {
  std::string previous = DedupKey(kQueue, "");
  for (uint64_t id : {1, 2, 9, 10, 11, 99, 100, 12345, 999999}) {
    const std::string key = DedupKey(kQueue, std::to_string(id));
    EXPECT_LT(previous, key) << id;
    previous = key;
  }
  EXPECT_LT(DedupKey(kQueue, std::string(kMaxDedupKeyBytes, '\xff')), DedupKey(kQueue + 1, ""));
  EXPECT_LT(DedupKey(kQueue - 1, std::string(kMaxDedupKeyBytes, '\xff')), DedupKey(kQueue, "1"));

  const std::string key = DedupKey(7, "order-42");
  auto parts = ParseDedupKey(key);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->queue_id, 7u);
  EXPECT_EQ(parts->key, "order-42");
  EXPECT_FALSE(ParseDedupKey(key.substr(0, key.size() - 1)));  // shorter than its length says
  EXPECT_FALSE(ParseDedupKey(key + "x"));
  EXPECT_FALSE(ParseDedupKey(key.substr(1)));  // without its tag
  EXPECT_FALSE(ParseDedupKey(""));
}

}  // namespace
}  // namespace wharf::store
