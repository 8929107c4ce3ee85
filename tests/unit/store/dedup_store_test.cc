// The store's side of publish deduplication windows (StoreBatch::PutDedup, store/keys.h's
// "dedup" family, store/dedup_expiry.h), on a real RocksDbStore: a key is recorded once, a
// duplicate's entries are not written, the window survives a reopen, expires, and goes with
// its queue.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "store/dedup_expiry.h"
#include "store/dedup_writer.h"
#include "store/keys.h"
#include "store/rocksdb_store.h"
#include "unit/store/store_test_util.h"

namespace wharf::store {
namespace {

using testing::Mailbox;
using testing::OpenStore;
using testing::PersistentEnvelope;
using testing::TempDir;

using testing::NowMs;

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
  // (DedupWriter::BoundsOf): rising keys are never read, and nothing that is recorded is
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

TEST_F(DedupStoreTest, KeysAboveEveryRecordAreWrittenInRunsThatAreFoundAgainAfterAReopen) {
  // Once a queue has records, a group's keys above all of them (at least kMinDedupRunKeys)
  // are written as one run ('r' key, keys.h). Every key in a run is a duplicate afterwards,
  // a key between two of its keys is not, and the lookups stay exact after a reopen (the
  // bounds read back from the store).
  DeclareQueue(kQueue, "q");
  auto counters = [&] { return store_->counters(); };
  auto key = [](int i) { return "a-" + std::to_string(i); };  // 4 bytes for 10 to 99
  uint64_t seq = 1;
  StoreBatch first;  // an empty window: records of their own
  for (int i = 10; i < 14; ++i) AddPublish(&first, kQueue, seq++, 100 + i, key(i));
  ASSERT_TRUE(Commit(std::move(first)).ok());
  EXPECT_EQ(counters().dedup_runs, 0u);

  StoreBatch rising;  // even keys 20 to 48 (15 of them), each id 100 + key; one twice
  for (int i = 20; i < 50; i += 2) AddPublish(&rising, kQueue, seq++, 100 + i, key(i));
  auto again_in_group = AddPublish(&rising, kQueue, seq++, 999, key(30));
  ASSERT_TRUE(Commit(std::move(rising)).ok());
  EXPECT_EQ(again_in_group->duplicate_of, 130u);
  EXPECT_EQ(counters().dedup_runs, 1u);
  EXPECT_EQ(counters().dedup_reads, 0u);

  // Fewer than kMinDedupRunKeys above everything: a run all the same, as the highest record is
  // in one (DedupWriter::DedupBounds::rising); not so in a queue whose highest is not.
  StoreBatch few;
  for (int i = 60; i < 63; ++i) AddPublish(&few, kQueue, seq++, 100 + i, key(i));
  ASSERT_TRUE(Commit(std::move(few)).ok());
  EXPECT_EQ(counters().dedup_runs, 2u);

  auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    const StoreCounters before = counters();
    StoreBatch retries;
    std::vector<std::pair<testing::DedupOutcomeRef, uint64_t>> expect;
    // Alone, in the first run (its first, a middle and its last key), in the second.
    for (int i : {11, 20, 30, 48, 61}) {
      expect.emplace_back(AddPublish(&retries, kQueue, seq++, 500 + i, key(i)), 100 + i);
    }
    ASSERT_TRUE(Commit(std::move(retries)).ok());
    for (auto& [outcome, holder] : expect) EXPECT_EQ(outcome->duplicate_of, holder);
    // Four of them within the runs' span: looked up among them.
    EXPECT_EQ(counters().dedup_run_lookups - before.dedup_run_lookups, 4u);
    EXPECT_EQ(counters().dedup_reads - before.dedup_reads, 5u);
  };
  check("before a reopen");
  Reopen();
  check("after a reopen");

  // A key in the run's span that the run does not hold is new, and recorded alone; the run,
  // found interleaved with other keys, is rewritten as records of their own in the same write.
  StoreBatch between;
  auto odd = AddPublish(&between, kQueue, seq++, 700, key(25));
  auto in_run = AddPublish(&between, kQueue, seq++, 701, key(26));
  ASSERT_TRUE(Commit(std::move(between)).ok());
  EXPECT_EQ(odd->duplicate_of, 0u);
  EXPECT_EQ(in_run->duplicate_of, 126u);
  EXPECT_EQ(counters().dedup_runs_converted, 1u);
  const StoreCounters converted = counters();
  StoreBatch after_conversion;
  auto odd_retry = AddPublish(&after_conversion, kQueue, seq++, 702, key(25));
  std::vector<std::pair<testing::DedupOutcomeRef, uint64_t>> expect;
  for (int i : {20, 34, 48}) {
    expect.emplace_back(AddPublish(&after_conversion, kQueue, seq++, 800 + i, key(i)), 100 + i);
  }
  ASSERT_TRUE(Commit(std::move(after_conversion)).ok());
  EXPECT_EQ(odd_retry->duplicate_of, 700u);
  for (auto& [outcome, holder] : expect) EXPECT_EQ(outcome->duplicate_of, holder);
  // Read alone now, and in the gap the run left: not looked up among runs.
  EXPECT_EQ(counters().dedup_run_lookups, converted.dedup_run_lookups);
  EXPECT_EQ(counters().dedup_runs_converted, 1u);

  // After the conversion, keys above every record are runs only from kMinDedupRunKeys on.
  StoreBatch after_few;
  for (int i = 70; i < 72; ++i) AddPublish(&after_few, kQueue, seq++, 100 + i, key(i));
  ASSERT_TRUE(Commit(std::move(after_few)).ok());
  EXPECT_EQ(counters().dedup_runs, converted.dedup_runs);

  // Every accepted publish is in the queue, none of the duplicates.
  EXPECT_EQ(LoadIds(kQueue).size(), 4u + 15u + 3u + 1u + 2u);
}

TEST_F(DedupStoreTest, KeysBetweenTwoPublishersRunsConvertTheRunThenFallInAGap) {
  // Two publishers with keys of their own, rising: one group's keys of both above the highest
  // make one run spanning from the lower publisher's keys to the higher's. The lower one's
  // next keys fall between the two inside that run, which is then rewritten as records of
  // their own (DedupWriter::Conversion); from the next group on, the writer knows no
  // run holds keys there and does not look them up (DedupWriter::DedupBounds::gaps). That
  // group's keys of the lower one open a stream above them (DedupBounds::streams), in which
  // its keys after that are new without a read, and a run of their own: inside the gap the
  // conversion left, which is then forgotten.
  DeclareQueue(kQueue, "q");
  uint64_t seq = 1, id = 100;
  StoreBatch start;
  AddPublish(&start, kQueue, seq++, id++, "a-00");
  ASSERT_TRUE(Commit(std::move(start)).ok());
  StoreBatch both;
  for (int i = 10; i < 20; ++i) {
    AddPublish(&both, kQueue, seq++, id++, "a-" + std::to_string(i));
    AddPublish(&both, kQueue, seq++, id++, "b-" + std::to_string(i));
  }
  ASSERT_TRUE(Commit(std::move(both)).ok());
  ASSERT_EQ(store_->counters().dedup_runs, 1u);
  for (int from : {20, 30, 40}) {  // each group: a's next ten keys and b's
    SCOPED_TRACE(from);
    const StoreCounters before = store_->counters();
    StoreBatch next;
    std::vector<testing::DedupOutcomeRef> outcomes;
    for (int i = from; i < from + 10; ++i) {
      outcomes.push_back(AddPublish(&next, kQueue, seq++, id++, "a-" + std::to_string(i)));
      outcomes.push_back(AddPublish(&next, kQueue, seq++, id++, "b-" + std::to_string(i)));
    }
    ASSERT_TRUE(Commit(std::move(next)).ok());
    for (auto& outcome : outcomes) EXPECT_EQ(outcome->duplicate_of, 0u);
    // a's keys: read (below the highest), looked up among runs in the group that finds the
    // mixed run, none after; from the third group on in a stream (unread), and a run. b's:
    // above the highest, a run.
    const StoreCounters after = store_->counters();
    EXPECT_EQ(after.dedup_reads - before.dedup_reads, from == 40 ? 0u : 10u);
    EXPECT_EQ(after.dedup_stream_keys - before.dedup_stream_keys, from == 40 ? 10u : 0u);
    EXPECT_EQ(after.dedup_run_lookups - before.dedup_run_lookups, from == 20 ? 10u : 0u);
    EXPECT_EQ(after.dedup_runs - before.dedup_runs, from == 40 ? 2u : 1u);
    EXPECT_EQ(after.dedup_runs_converted, 1u);
  }
  // And every key is still found: a's and b's of the converted run, b's of the last, a's
  // recorded alone and in the stream's run (looked up: the gap it is in is forgotten); after
  // a reopen too (the gaps and streams are forgotten, then learnt again).
  for (const char* when : {"before a reopen", "after a reopen"}) {
    SCOPED_TRACE(when);
    const StoreCounters before = store_->counters();
    StoreBatch retries;
    auto a = AddPublish(&retries, kQueue, seq++, id++, "a-15");
    auto b_old = AddPublish(&retries, kQueue, seq++, id++, "b-15");
    auto b = AddPublish(&retries, kQueue, seq++, id++, "b-35");
    auto a_new = AddPublish(&retries, kQueue, seq++, id++, "a-35");
    auto a_stream = AddPublish(&retries, kQueue, seq++, id++, "a-45");
    ASSERT_TRUE(Commit(std::move(retries)).ok());
    EXPECT_EQ(a->duplicate_of, 111u);  // ids: a-00 100, then a-10 101, b-10 102, a-11 103...
    EXPECT_EQ(b_old->duplicate_of, 112u);
    EXPECT_EQ(b->duplicate_of, 152u);
    EXPECT_EQ(a_new->duplicate_of, 151u);
    EXPECT_EQ(a_stream->duplicate_of, 171u);
    EXPECT_EQ(store_->counters().dedup_reads - before.dedup_reads, 5u);
    Reopen();
  }
}

TEST_F(DedupStoreTest, ThePublishersBelowTheHighestHaveTheirKeysInRunsOfTheirOwn) {
  // Three publishers with keys of their own that rise: c's are above the highest, a's and b's
  // below it. Their keys, read once and found new, open a stream each (DedupWriter::
  // DedupBounds::streams), in which the next keys are new without a read and written as a run:
  // from the fourth group on, nothing is read and every publisher's keys are a run.
  DeclareQueue(kQueue, "q");
  uint64_t seq = 1, id = 1000;
  std::map<std::string, uint64_t> ids;  // every key recorded, with its message
  auto group = [&](int from, int to) {
    StoreBatch batch;
    std::vector<testing::DedupOutcomeRef> outcomes;
    for (int i = from; i < to; ++i) {
      for (const char* publisher : {"a-", "b-", "c-"}) {
        const std::string key = publisher + std::to_string(i);
        ids[key] = id;
        outcomes.push_back(AddPublish(&batch, kQueue, seq++, id++, key));
      }
    }
    ASSERT_TRUE(Commit(std::move(batch)).ok());
    for (auto& outcome : outcomes) EXPECT_EQ(outcome->duplicate_of, 0u);
  };
  struct Cost {
    uint64_t reads, stream_keys, runs;
  };
  auto cost_of = [&](int from, int to) {
    const StoreCounters before = store_->counters();
    group(from, to);
    const StoreCounters after = store_->counters();
    return Cost{after.dedup_reads - before.dedup_reads,
                after.dedup_stream_keys - before.dedup_stream_keys,
                after.dedup_runs - before.dedup_runs};
  };
  group(100, 101);  // three records of their own (too few for a run)
  // c's: above the highest, a run. a's and b's: read, new, together (one block): a stream
  // opens above b's highest.
  Cost cost = cost_of(101, 111);
  EXPECT_EQ(cost.reads, 20u);
  EXPECT_EQ(cost.stream_keys, 0u);
  EXPECT_EQ(cost.runs, 1u);
  // b's in the stream: a run, unread; a's read, and a stream opens above them.
  cost = cost_of(111, 121);
  EXPECT_EQ(cost.reads, 10u);
  EXPECT_EQ(cost.stream_keys, 10u);
  EXPECT_EQ(cost.runs, 2u);
  // All three in runs, nothing read, however few the keys once a stream's keys are in runs.
  for (auto [from, to] : {std::pair{121, 131}, {131, 133}}) {
    cost = cost_of(from, to);
    EXPECT_EQ(cost.reads, 0u);
    EXPECT_EQ(cost.stream_keys, 2u * (to - from));
    EXPECT_EQ(cost.runs, 3u);
  }
  EXPECT_EQ(store_->counters().dedup_runs_converted, 0u);

  // Every key is a duplicate of its message, in a run or alone; before and after a reopen.
  auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    StoreBatch retries;
    std::vector<std::pair<testing::DedupOutcomeRef, uint64_t>> expect;
    for (const auto& [key, holder] : ids) {
      expect.emplace_back(AddPublish(&retries, kQueue, seq++, id++, key), holder);
    }
    ASSERT_TRUE(Commit(std::move(retries)).ok());
    for (auto& [outcome, holder] : expect) EXPECT_EQ(outcome->duplicate_of, holder);
  };
  check("before a reopen");
  Reopen();
  check("after a reopen");
  group(133, 143);  // the streams are learnt again, one a group
  group(143, 153);
  check("after the streams are learnt again");
  cost = cost_of(153, 163);
  EXPECT_EQ(cost.reads, 0u);
  EXPECT_EQ(store_->counters().dedup_runs_converted, 0u);
  check("at the end");
  EXPECT_EQ(LoadIds(kQueue).size(), ids.size());
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
  StoreBatch run;  // and a run
  for (int i = 0; i < 10; ++i) AddPublish(&run, kQueue, 2 + i, 20 + i, "r-" + std::to_string(i));
  ASSERT_TRUE(Commit(std::move(run)).ok());
  ASSERT_EQ(store_->counters().dedup_runs, 1u);
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

// DedupWriter on a database of its own whose compactions drop expired records, as the store's
// "dedup" family does, so that a test can have records expire and go between two groups
// while the writer keeps what it learnt (a reopen of the store would forget it).
class DedupWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rocksdb::Options options;
    options.create_if_missing = true;
    options.compaction_filter_factory = std::make_shared<DedupExpiryFactory>();
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_.path() + "/db", &raw).ok());
    db_.reset(raw);
    writer_.Reset(db_.get(), db_->DefaultColumnFamily());
  }
  // What a write holds, in order: "put <key>" and "delete-range <begin> <end>" (keys as they
  // are, with their queue id's bytes).
  struct Recorder : rocksdb::WriteBatch::Handler {
    std::vector<std::string> ops;
    rocksdb::Status PutCF(uint32_t, const rocksdb::Slice& key, const rocksdb::Slice&) override {
      ops.push_back("put " + key.ToString());
      return rocksdb::Status::OK();
    }
    rocksdb::Status DeleteRangeCF(uint32_t, const rocksdb::Slice& begin,
                                  const rocksdb::Slice& end) override {
      ops.push_back("delete-range " + begin.ToString() + " " + end.ToString());
      return rocksdb::Status::OK();
    }
  };
  // Decides and writes one group of keys of kQueue, each published once with a message id of
  // its own (from 1 up), expiring at `expires_at_ms` (0: in an hour); with `remove`, the queue
  // is removed after them in the same group. Returns each one's duplicate_of; counts_ holds
  // what the group cost, and written_ what it wrote (Recorder).
  std::vector<uint64_t> Group(const std::vector<std::string>& keys, int64_t expires_at_ms = 0,
                              bool remove = false) {
    const int64_t now = NowMs();
    if (expires_at_ms == 0) expires_at_ms = now + 3'600'000;
    StoreBatch batch;
    std::vector<testing::DedupOutcomeRef> outcomes;
    for (const std::string& key : keys) {
      outcomes.push_back(testing::AddDedup(
          &batch, StoreBatch::PutDedup{kQueue, key, next_id_++, expires_at_ms, now}));
    }
    rocksdb::WriteBatch wb;
    counts_ = writer_.Prefetch({&batch}, &wb);
    for (const StoreBatch::Op& op : batch.ops()) {
      bool duplicate = false;
      EXPECT_TRUE(writer_.Apply(batch, std::get<StoreBatch::PutDedup>(op), &wb, &duplicate).ok());
    }
    if (remove) writer_.RemoveQueue(kQueue, &wb);
    writer_.WriteRecords(&wb);
    Recorder recorder;
    EXPECT_TRUE(wb.Iterate(&recorder).ok());
    written_ = std::move(recorder.ops);
    const bool written = db_->Write(rocksdb::WriteOptions(), &wb).ok();
    EXPECT_TRUE(written);
    writer_.Written(written);
    std::vector<uint64_t> duplicate_of;
    for (auto& outcome : outcomes) duplicate_of.push_back(outcome->duplicate_of);
    return duplicate_of;
  }
  // Compacts everything: expired records and runs go.
  void Compact() {
    ASSERT_TRUE(db_->Flush(rocksdb::FlushOptions()).ok());
    ASSERT_TRUE(db_->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr).ok());
  }
  static std::vector<std::string> Keys(int from, int to) {  // "a-<from>" to "a-<to - 1>"
    std::vector<std::string> keys;
    for (int i = from; i < to; ++i) keys.push_back("a-" + std::to_string(i));
    return keys;
  }
  // `prefix` and `n` in `digits` digits, zeros in front: a publisher's keys rise in this form.
  static std::string Padded(std::string_view prefix, int n, size_t digits) {
    const std::string number = std::to_string(n);
    return std::string(prefix) + std::string(digits - number.size(), '0') + number;
  }
  // Appends Padded(prefix, i, digits) for i from `from` to `to` - 1.
  static void AppendRising(std::vector<std::string>* keys, std::string_view prefix, int from,
                           int to, size_t digits) {
    for (int i = from; i < to; ++i) keys->push_back(Padded(prefix, i, digits));
  }
  // Appends `count` keys in no order across groups: group g's are `prefix` and 900000 - 10g
  // up, each group's below the last one's.
  static void AppendFalling(std::vector<std::string>* keys, std::string_view prefix, int g,
                            int count) {
    for (int i = 0; i < count; ++i) {
      keys->push_back(std::string(prefix) + std::to_string(900000 - g * 10 + i));
    }
  }

  TempDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
  DedupWriter writer_;
  DedupWriter::Counts counts_;
  std::vector<std::string> written_;
  uint64_t next_id_ = 1;
};

TEST_F(DedupWriterTest, AGroupsRecordsAreWrittenInKeyOrder) {
  // Keys in no order, each read and found new and recorded alone, go into the write sorted:
  // RocksDB inserts each into the memtable from where the one before went in.
  Group({"z-99"});  // the highest key
  EXPECT_EQ(Group({"m-5", "c-1", "q-7", "a-3", "c-1"}), (std::vector<uint64_t>{0, 0, 0, 0, 3}));
  EXPECT_EQ(counts_.reads, 4u);
  std::vector<std::string> expect;
  for (const char* key : {"a-3", "c-1", "m-5", "q-7"})
    expect.push_back("put " + DedupKey(kQueue, key));
  EXPECT_EQ(written_, expect);
  EXPECT_EQ(Group({"q-7", "a-3"}), (std::vector<uint64_t>{4, 5}));
}

TEST_F(DedupWriterTest, AQueueRemovedInTheGroupTakesTheGroupsRecordsWithIt) {
  // Its records of the group, each alone, are written before the removal (as its publishes
  // came first), so none is left behind. (A run is written as its first key is applied,
  // before any removal.)
  Group({"z-99"});
  Group({"m-5", "c-1"}, 0, /*remove=*/true);
  ASSERT_EQ(written_.size(), 4u);
  EXPECT_EQ(written_[0], "put " + DedupKey(kQueue, "c-1"));
  EXPECT_EQ(written_[1], "put " + DedupKey(kQueue, "m-5"));
  EXPECT_TRUE(written_[2].starts_with("delete-range ")) << written_[2];
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}));
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid()) << "a record is left: " << it->key().ToString();
}

TEST_F(DedupWriterTest, AStreamIsNotLearntAgainFromItsLowerEndOnceThatRecordHasGone) {
  // A stream's lower end is a key the writer recorded. Once that record has expired and gone,
  // the same keys read absent again; the block they make must not open a second stream over
  // the first (their keys would then be taken for new in whichever is met first).
  Group({"z-99"});                                              // the highest key: 1
  Group(Keys(10, 18), NowMs() - 1);                             // read, new: a stream (a-17, z-99)
  Compact();                                                    // a-10 to a-17 go
  EXPECT_EQ(Group(Keys(10, 18)), std::vector<uint64_t>(8, 0));  // new again; ids 10 to 17
  EXPECT_EQ(counts_.reads, 8u);
  EXPECT_EQ(Group(Keys(18, 26)), std::vector<uint64_t>(8, 0));  // in the stream: ids 18 to 25
  EXPECT_EQ(counts_.stream_keys, 8u);
  EXPECT_EQ(counts_.runs, 1u);
  EXPECT_EQ(Group({"a-20", "a-17"}), (std::vector<uint64_t>{20, 17}));
  EXPECT_EQ(counts_.reads, 2u);
}

TEST_F(DedupWriterTest, AGapLearntWhenTheRunsHadGoneIsForgottenOnceARunIsWrittenInIt) {
  // The runs above every record expire and go, while the writer still counts them in its
  // runs' span: a lookup then finds no run and learns a gap over the whole queue. A run
  // written above the highest key later lands in that gap, which must not hide it.
  Group({"a-00"});                   // id 1
  Group(Keys(10, 18), NowMs() - 1);  // above the highest: a run (ids 2 to 9)
  EXPECT_EQ(counts_.runs, 1u);
  Compact();                                             // the run goes
  EXPECT_EQ(Group({"a-12"}), std::vector<uint64_t>{0});  // looked up, no run: a gap; id 10
  EXPECT_EQ(counts_.run_lookups, 1u);
  EXPECT_EQ(Group(Keys(20, 28)), std::vector<uint64_t>(8, 0));  // a run above it: ids 11 to 18
  EXPECT_EQ(counts_.runs, 1u);
  EXPECT_EQ(Group({"a-22", "a-12"}), (std::vector<uint64_t>{13, 10}));
  EXPECT_EQ(counts_.run_lookups, 2u);  // both within the runs' span, in no gap
}

TEST_F(DedupWriterTest, KeysInNoOrderLearnStreamsLessAndLessOften) {
  // Each group's keys are read and new, a block that could open a stream above its highest;
  // no later key falls in one (each group's keys are just below the last group's), so streams
  // are learnt at chances 1, 2, 4, 8, 16 and 32 of 40. Once a key falls in one, at every chance.
  Group({"z-99999"});      // the highest key (as long as the others: keys sort by length first)
  auto keys = [](int g) {  // "a-00100" - g, "a-01100" - g, ... "a-07100" - g
    std::vector<std::string> keys;
    for (int i = 0; i < 8; ++i) keys.push_back(Padded("a-", i * 1000 + 100 - g, 5));
    return keys;
  };
  std::vector<int> learnt;
  for (int g = 0; g < 40; ++g) {
    EXPECT_EQ(Group(keys(g)), std::vector<uint64_t>(8, 0));
    EXPECT_EQ(counts_.stream_keys, 0u);
    if (counts_.streams > 0) learnt.push_back(g);
  }
  EXPECT_EQ(learnt, (std::vector<int>{0, 1, 3, 7, 15, 31}));
  // Now a key falls in the stream the first group opened (from its highest key, "a-07100", up
  // to "z-99999"): streams serve again, and the group's block learns one at once.
  std::vector<std::string> group = keys(40);
  group.push_back("a-07200");
  EXPECT_EQ(Group(group), std::vector<uint64_t>(9, 0));
  EXPECT_EQ(counts_.stream_keys, 1u);
  EXPECT_EQ(counts_.streams, 1u);
}

TEST_F(DedupWriterTest, FortyPublishersBelowTheHighestAllHaveTheirKeysUnread) {
  // Forty publishers with keys of their own that rise, all below the highest key. The first
  // group's keys are read and new, one block: a stream above its highest key (the last
  // publisher's). Once that stream serves, each group learns one above the highest key of
  // each publisher in the block too (up to 16 a block), where the prefix two keys share is
  // shorter than the one the block's highest keys share: in four groups no key is read.
  Group({"z-99999999"});   // the highest (as long as the others: keys sort by length first)
  auto keys = [](int g) {  // "p00-000000".."p39-...": publisher p's keys 8g to 8g + 7
    std::vector<std::string> keys;
    for (int p = 0; p < 40; ++p) AppendRising(&keys, Padded("p", p, 2) + "-", g * 8, g * 8 + 8, 6);
    return keys;
  };
  int g = 0;
  for (; g < 60 && (g == 0 || counts_.reads > 0); ++g) {
    EXPECT_EQ(Group(keys(g)), std::vector<uint64_t>(320, 0));
  }
  EXPECT_EQ(counts_.reads, 0u) << "after " << g << " groups";
  EXPECT_EQ(g, 5);  // four that read, then one that did not
  EXPECT_EQ(counts_.stream_keys, 320u);
  EXPECT_EQ(counts_.runs, 40u);
  // Every key is still a duplicate of its message.
  std::vector<uint64_t> expect;
  for (uint64_t i = 0; i < 320; ++i) expect.push_back(2 + 320 * uint64_t{3} + i);
  EXPECT_EQ(Group(keys(3)), expect);
  // Keys of the first group, written alone, lie between a publisher's stream and the next
  // publisher's first key of the group that learnt it: the stream ends at the first of them.
  EXPECT_EQ(Group({"p38-000003", "p10-000005"}), (std::vector<uint64_t>{2 + 38 * 8 + 3, 2 + 85}));
}

TEST_F(DedupWriterTest, AStreamThatServesIsNotReplacedByOnesThatDoNot) {
  // Two publishers' streams serve every group, while each group also reads a block of keys in
  // no order below theirs and learns a stream above it that no later key falls in. Past the
  // most streams a queue keeps, the ones that stopped serving go, not the two.
  Group({"z-999999"});  // the highest (as long as the others)
  auto keys = [](int g) {
    std::vector<std::string> keys;
    for (const char* publisher : {"a-", "b-"}) AppendRising(&keys, publisher, g * 8, g * 8 + 8, 6);
    AppendFalling(&keys, "0-", g, 8);  // below the publishers'
    return keys;
  };
  int learnt = 0;
  for (int g = 0; g < 300; ++g) {
    EXPECT_EQ(Group(keys(g)), std::vector<uint64_t>(24, 0));
    learnt += static_cast<int>(counts_.streams);
    if (g >= 4) {
      EXPECT_EQ(counts_.stream_keys, 16u) << "group " << g;
      EXPECT_EQ(counts_.reads, 8u) << "group " << g;
    }
  }
  EXPECT_GT(learnt, 280);  // more than a queue keeps
}

TEST_F(DedupWriterTest, SplitsWhoseStreamsServeNoKeyAreTriedLessAndLessOften) {
  // Two publishers' streams serve every group, so a stream is learnt at every chance. Each
  // group's keys in no order, below theirs, make a block of two clusters ("0-1..." and
  // "0-2...") whose keys share a shorter prefix across than within: a split, above the lower
  // one, whose span no later key falls in. Splits are tried at chances 1, 2, 4, 8...
  Group({"z-9999999"});  // the highest (as long as the others)
  auto keys = [](int g) {
    std::vector<std::string> keys;
    for (const char* publisher : {"a-", "b-"}) AppendRising(&keys, publisher, g * 8, g * 8 + 8, 7);
    for (const char* cluster : {"0-1", "0-2"}) AppendFalling(&keys, cluster, g, 8);
    return keys;
  };
  std::vector<int> split;  // the groups that learnt more than the stream above their block
  for (int g = 0; g < 40; ++g) {
    EXPECT_EQ(Group(keys(g)), std::vector<uint64_t>(32, 0));
    if (g >= 2) {
      EXPECT_EQ(counts_.stream_keys, 16u) << "group " << g;
    }
    if (counts_.streams > 1) split.push_back(g);
  }
  // Group 1: b's stream serves, and a's keys top the block (its stream and two splits).
  EXPECT_EQ(split, (std::vector<int>{1, 2, 4, 8, 16, 32}));
}

TEST_F(DedupWriterTest, BlocksTooSmallToSplitAreNoChanceToSplit) {
  // As above, but every odd group's keys in no order are one cluster of ten: a block that
  // cannot split (a split needs the block's top eight keys and eight below), so no chance to
  // split either. The chances are group 1 (its block holds a's keys too) and the even ones,
  // and splits come at chances 1, 2, 4, 8...: groups 1, 2, 6, 14, 30 and 62.
  Group({"z-9999999"});  // the highest (as long as the others)
  auto keys = [](int g) {
    std::vector<std::string> keys;
    for (const char* publisher : {"a-", "b-"}) AppendRising(&keys, publisher, g * 8, g * 8 + 8, 7);
    if (g % 2 == 1) {
      AppendFalling(&keys, "0-1", g, 10);
    } else {
      for (const char* cluster : {"0-1", "0-2"}) AppendFalling(&keys, cluster, g, 8);
    }
    return keys;
  };
  std::vector<int> split;  // the groups that learnt more than the stream above their block
  for (int g = 0; g < 70; ++g) {
    EXPECT_EQ(Group(keys(g)), std::vector<uint64_t>(g % 2 == 1 ? 26 : 32, 0));
    if (counts_.streams > 1) split.push_back(g);
  }
  EXPECT_EQ(split, (std::vector<int>{1, 2, 6, 14, 30, 62}));
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
  // Runs: one whose every record has expired, one with a live record among expired ones;
  // each the format-14 way and the format-13 way.
  DedupRunBuilder expired_run, live_run;
  expired_run.Append("a", {12, now - 2});
  expired_run.Append("b", {13, now - 1});
  live_run.Append("c", {14, now - 1});
  live_run.Append("d", {15, now + 3'600'000});
  ASSERT_TRUE(db->Put({}, DedupRunKey(1, "b"), expired_run.value()).ok());
  ASSERT_TRUE(db->Put({}, DedupRunKey(1, "d"), live_run.value()).ok());
  ASSERT_TRUE(db->Put({}, DedupRunKey(1, "e"), "\x05short").ok());
  ASSERT_TRUE(db->Put({}, DedupRunKey(2, "b"),
                      testing::Format13Run({{"a", {12, now - 2}}, {"b", {13, now - 1}}}))
                  .ok());
  ASSERT_TRUE(db->Put({}, DedupRunKey(2, "d"),
                      testing::Format13Run({{"c", {14, now - 1}}, {"d", {15, now + 3'600'000}}}))
                  .ok());
  ASSERT_TRUE(db->Flush({}).ok());
  ASSERT_TRUE(db->CompactRange({}, nullptr, nullptr).ok());
  std::string value;
  EXPECT_TRUE(db->Get({}, DedupKey(1, "old"), &value).IsNotFound());
  EXPECT_TRUE(db->Get({}, DedupKey(1, "live"), &value).ok());
  EXPECT_TRUE(db->Get({}, DedupKey(1, "odd"), &value).ok());
  EXPECT_TRUE(db->Get({}, DedupRunKey(1, "b"), &value).IsNotFound());
  EXPECT_TRUE(db->Get({}, DedupRunKey(1, "d"), &value).ok());
  EXPECT_TRUE(db->Get({}, DedupRunKey(1, "e"), &value).ok());
  EXPECT_TRUE(db->Get({}, DedupRunKey(2, "b"), &value).IsNotFound());
  EXPECT_TRUE(db->Get({}, DedupRunKey(2, "d"), &value).ok());
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
  EXPECT_FALSE(parts->run);

  // A run's key: the same bytes after its own tag, after every record key.
  const std::string run_key = DedupRunKey(7, "order-42");
  EXPECT_EQ(DedupRunKeyOf(key), run_key);
  EXPECT_EQ(DedupKeyOfRun(run_key), key);
  EXPECT_LT(DedupKey(9, "z"), DedupRunKey(1, "a"));
  auto run_parts = ParseDedupKey(run_key);
  ASSERT_TRUE(run_parts.has_value());
  EXPECT_TRUE(run_parts->run);
  EXPECT_EQ(run_parts->key, "order-42");
}

// A run's value lists its records in order, the format-14 way (keys that share a prefix with
// the one before, ids and expiries that fall as well as rise, numbers of any size) and the
// format-13 way; a value cut short lists those before the cut and says it is malformed.
TEST(DedupKeyTest, RunValuesListTheirRecords) {
  const std::vector<std::pair<std::string, DedupValue>> records = {
      {"9", {1, 100}},
      {"10", {2, 200}},
      {"order-000100", {UINT64_MAX, INT64_MAX}},
      {"order-000101", {5, INT64_MIN}},
      {"order-000101x", {4, -1}},
      {"order-1", {0, 0}},
      {std::string(kMaxDedupKeyBytes, 'z'), {1'000'000, 1'780'000'000'000}},
  };
  using Seen = std::vector<std::pair<std::string, DedupValue>>;
  auto list = [](std::string_view run, Seen* seen) {
    return ForEachDedupRunEntry(run, [&](std::string_view key, const DedupValue& value) {
      seen->emplace_back(std::string(key), value);
      return true;
    });
  };
  DedupRunBuilder builder;
  for (const auto& [key, value] : records) builder.Append(key, value);
  const std::string compact = builder.value();
  const std::string legacy = testing::Format13Run(records);
  for (const std::string& run : {compact, legacy}) {
    Seen seen;
    EXPECT_TRUE(list(run, &seen));
    EXPECT_TRUE(seen == records) << seen.size();
    // Cut anywhere: the records wholly before the cut, and malformed unless the cut falls
    // between two records.
    for (size_t cut = 0; cut < run.size(); ++cut) {
      Seen before;
      const bool whole = list(std::string_view(run).substr(0, cut), &before);
      EXPECT_TRUE(before == Seen(records.begin(), records.begin() + before.size())) << cut;
      if (whole) {
        EXPECT_GT(before.size(), 0u) << cut;
        EXPECT_LT(before.size(), records.size()) << cut;
      }
    }
  }
  // Stopping early is not malformed.
  size_t calls = 0;
  EXPECT_TRUE(ForEachDedupRunEntry(
      compact, [&](std::string_view, const DedupValue&) { return ++calls < 2; }));
  EXPECT_EQ(calls, 2u);

  // Rising keys cost a few bytes each (format 13: 17 and the key).
  DedupRunBuilder rising;
  for (int i = 0; i < 100; ++i) {
    rising.Append("1733580000000000000-3-" + std::to_string(1000 + i),
                  {uint64_t(5'000'000 + 4 * i), 1'780'000'000'000});
  }
  EXPECT_LT(rising.value().size(), 100 * 7u);

  Seen none;
  EXPECT_FALSE(list("", &none));
  EXPECT_FALSE(list(std::string(1, '\0'), &none)) << "the format-14 mark and no record";
  EXPECT_FALSE(list(std::string("\0\0\0", 3) + std::string(2, '\0'), &none)) << "an empty key";
  EXPECT_FALSE(list(std::string("\0\1\1x\0\0", 6), &none)) << "sharing more than the key before";
  EXPECT_FALSE(
      list(std::string("\0\0\x81\1", 4) + std::string(129, 'k') + std::string(2, '\0'), &none))
      << "a key over kMaxDedupKeyBytes";
  EXPECT_FALSE(list(std::string("\0\0\1k", 4) + std::string(10, '\xff') + "\1\0", &none))
      << "a varint over ten bytes";
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace wharf::store
