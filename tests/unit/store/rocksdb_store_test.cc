// Tests for store/rocksdb_store.h against real RocksDB in a temporary directory.
#include "store/rocksdb_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/options_util.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/keys.h"
#include "store/records.h"
#include "unit/store/store_test_util.h"

namespace wharf::store {
namespace {

using testing::Mailbox;
using testing::OpenStore;
using testing::TempDir;

EnvelopePtr MakeEnvelope(uint64_t id, const std::string& body, bool persistent = true) {
  Envelope e;
  e.message.id = id;
  e.message.body = body;
  e.message.persistent = persistent;
  e.message.published_at_ms = 1'700'000'000'000;
  e.message.headers["n"] = int64_t{42};
  e.message.headers["s"] = std::string("text");
  e.message.headers["b"] = Bytes{std::string("\0\1", 2)};
  e.message.headers["d"] = 1.5;
  e.message.headers["t"] = true;
  e.message.properties.content_type = "text/plain";
  e.message.properties.correlation_id = "c-1";
  e.message.properties.expiration_ms = 60'000;
  e.exchange = "ex";
  e.routing_key = "key";
  return std::make_shared<const Envelope>(std::move(e));
}

QueueSpec Queue(const std::string& name) {
  QueueSpec spec;
  spec.name = name;
  return spec;
}

class RocksDbStoreTest : public ::testing::Test {
 protected:
  void Open() {
    store_ = OpenStore(dir_.path(), &mailbox_);
    ASSERT_NE(store_, nullptr);
    auto state = store_->Recover();
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    state_ = std::move(state).value();
  }
  void Reopen() {
    store_.reset();
    Open();
  }
  // Counts the background removals (purges, deleted queues' entries) that finish. Call right
  // after opening (before the first commit).
  void CountFinishedRemovals() {
    finished_removals_ = 0;
    store_->SetReclaimCallback(
        [this](uint64_t, uint64_t, bool finished) { finished_removals_ += finished ? 1 : 0; });
  }
  bool WaitForRemovals(uint64_t n) {
    return mailbox_.RunUntil([&] { return finished_removals_ >= n; });
  }
  // Opens the store with fault injection, purges held on disk until `reclaim_steps` allows.
  std::shared_ptr<WriteFaults> OpenHoldingPurges() {
    auto faults = std::make_shared<WriteFaults>();
    faults->reclaim_steps = 0;
    StoreOptions options;
    options.write_faults = faults;
    store_ = OpenStore(dir_.path(), &mailbox_, options);
    if (store_) {
      auto state = store_->Recover();
      EXPECT_TRUE(state.ok()) << state.status().ToString();
      if (state.ok()) state_ = std::move(state).value();
    }
    return faults;
  }
  Status CommitSync(StoreBatch batch, bool sync = true) {
    return testing::CommitAndWait(store_.get(), &mailbox_, std::move(batch), sync);
  }
  // A store with queue 1 ("q"), closed, then marked as format `format` with `fill` writing into
  // its dedup family (a directory an older wharfd left).
  void OlderDedupStore(
      const std::string& format,
      const std::function<void(rocksdb::DB*, rocksdb::ColumnFamilyHandle*)>& fill) {
    Open();
    StoreBatch batch;
    batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
    ASSERT_TRUE(CommitSync(std::move(batch)).ok());
    store_.reset();
    testing::WithRawDbFamilies(dir_.path(), [&](rocksdb::DB* db, const auto& handles) {
      rocksdb::ColumnFamilyHandle* dedup = testing::FamilyNamed(handles, kColumnDedup);
      ASSERT_NE(dedup, nullptr);
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], "F", format).ok());
      fill(db, dedup);
    });
  }
  // Opens an older directory (which upgrades it), checks that it is the current format once
  // closed, and opens it again.
  void OpenUpgraded() {
    Open();
    store_.reset();
    EXPECT_EQ(testing::RawFormatVersion(dir_.path()), std::to_string(kFormatVersion));
    Open();
  }
  // Commits one batch of deduplication keys of queue 1 (key, message id) with windows that never
  // pass; what each duplicated (0: new).
  std::vector<uint64_t> DuplicatesOf(const std::vector<std::pair<std::string, uint64_t>>& keys) {
    StoreBatch batch;
    std::vector<testing::DedupOutcomeRef> outcomes;
    for (const auto& [key, id] : keys) {
      outcomes.push_back(
          testing::AddDedup(&batch, StoreBatch::PutDedup{1, key, id, INT64_MAX, testing::NowMs()}));
    }
    EXPECT_TRUE(CommitSync(std::move(batch)).ok());
    std::vector<uint64_t> duplicate_of;
    for (const auto& outcome : outcomes) duplicate_of.push_back(outcome->duplicate_of);
    return duplicate_of;
  }
  std::vector<LoadedMessage> LoadAll(uint64_t queue_id, uint64_t from = 0, uint64_t to = UINT64_MAX,
                                     uint32_t limit = 1000) {
    bool done = false;
    std::vector<LoadedMessage> out;
    store_->Load(queue_id, from, to, limit, UINT64_MAX, [&](Result<std::vector<LoadedMessage>> r) {
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) out = std::move(r).value();
      done = true;
    });
    EXPECT_TRUE(mailbox_.RunUntil([&] { return done; }));
    return out;
  }
  std::vector<LoadedMessage> LoadDelayedAll(uint64_t queue_id, int64_t from_due = INT64_MIN,
                                            uint64_t from_id = 0, uint32_t limit = 1000) {
    bool done = false;
    std::vector<LoadedMessage> out;
    store_->LoadDelayed(queue_id, from_due, from_id, limit, UINT64_MAX,
                        [&](Result<std::vector<LoadedMessage>> r) {
                          EXPECT_TRUE(r.ok()) << r.status().ToString();
                          if (r.ok()) out = std::move(r).value();
                          done = true;
                        });
    EXPECT_TRUE(mailbox_.RunUntil([&] { return done; }));
    return out;
  }
  std::optional<DelayedRef> FindDelayedSync(uint64_t queue_id, uint64_t message_id) {
    bool done = false;
    std::optional<DelayedRef> out;
    store_->FindDelayed(queue_id, message_id, [&](Result<std::optional<DelayedRef>> r) {
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) out = *r;
      done = true;
    });
    EXPECT_TRUE(mailbox_.RunUntil([&] { return done; }));
    return out;
  }
  // Bodies in the messages column family, read with RocksDB directly (the store is closed
  // for it and reopened).
  uint64_t StoredBodies() {
    store_.reset();
    uint64_t n = 0;
    {
      std::vector<rocksdb::ColumnFamilyDescriptor> families = {
          {rocksdb::kDefaultColumnFamilyName, {}}, {kColumnMessages, {}}, {kColumnEntries, {}}};
      std::vector<rocksdb::ColumnFamilyHandle*> handles;
      rocksdb::DB* db = nullptr;
      EXPECT_TRUE(
          rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir_.path(), families, &handles, &db)
              .ok());
      if (db) {
        std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handles[1]));
        for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
        it.reset();
        for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
        delete db;
      }
    }
    Open();
    return n;
  }
  // The background count of every recovered non-empty queue: queue id -> entries.
  std::map<uint64_t, uint64_t> Counts() {
    size_t expected = 0;
    for (const auto& q : state_.queues) expected += q.estimated_messages() > 0 ? 1 : 0;
    std::map<uint64_t, uint64_t> counts;
    store_->CountRecoveredQueues([&](uint64_t id, CountKind kind, uint64_t n, uint8_t) {
      if (kind == CountKind::kEntries) counts[id] = n;
    });
    EXPECT_TRUE(mailbox_.RunUntil([&] { return counts.size() == expected; }));
    return counts;
  }
  const StoredQueue* FindQueue(const std::string& name) const {
    for (const auto& q : state_.queues) {
      if (q.spec.name == name) return &q;
    }
    return nullptr;
  }

  TempDir dir_;
  uint64_t finished_removals_ = 0;
  Mailbox mailbox_;
  std::unique_ptr<RocksDbStore> store_;
  RecoveredState state_;
};

TEST_F(RocksDbStoreTest, EmptyDirectoryRecoversNothing) {
  Open();
  EXPECT_TRUE(state_.exchanges.empty());
  EXPECT_TRUE(state_.queues.empty());
  EXPECT_TRUE(state_.bindings.empty());
  EXPECT_EQ(state_.next_queue_id, 1u);
  EXPECT_EQ(state_.max_message_id, 0u);
}

TEST_F(RocksDbStoreTest, TopologySurvivesReopen) {
  Open();
  StoreBatch batch;
  ExchangeSpec ex;
  ex.name = "events";
  ex.type = ExchangeType::kTopic;
  ex.alternate_exchange = "lost";
  batch.Add(StoreBatch::PutExchange{ex});
  QueueSpec q = Queue("orders");
  q.auto_delete = true;
  batch.Add(StoreBatch::PutQueue{q, 7});
  BindingSpec b;
  b.queue = "orders";
  b.exchange = "events";
  b.routing_key = "order.#";
  batch.Add(StoreBatch::PutBinding{b});
  BindingSpec h;
  h.queue = "orders";
  h.exchange = "events";
  h.arguments["x-match"] = std::string("any");
  h.arguments["k"] = int64_t{1};
  batch.Add(StoreBatch::PutBinding{h});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  ASSERT_EQ(state_.exchanges.size(), 1u);
  EXPECT_EQ(state_.exchanges[0].name, "events");
  EXPECT_EQ(state_.exchanges[0].type, ExchangeType::kTopic);
  EXPECT_EQ(state_.exchanges[0].alternate_exchange, "lost");
  ASSERT_EQ(state_.queues.size(), 1u);
  EXPECT_EQ(state_.queues[0].spec.name, "orders");
  EXPECT_TRUE(state_.queues[0].spec.auto_delete);
  EXPECT_EQ(state_.queues[0].queue_id, 7u);
  EXPECT_EQ(state_.next_queue_id, 8u);
  ASSERT_EQ(state_.bindings.size(), 2u);
  int with_args = 0;
  for (const auto& binding : state_.bindings) {
    EXPECT_EQ(binding.queue, "orders");
    with_args += binding.arguments.empty() ? 0 : 1;
  }
  EXPECT_EQ(with_args, 1);

  // Removing the queue removes its bindings; removing the exchange removes it.
  StoreBatch removal;
  removal.Add(StoreBatch::RemoveQueue{"orders", 7});
  removal.Add(StoreBatch::RemoveExchange{"events"});
  ASSERT_TRUE(CommitSync(std::move(removal)).ok());
  Reopen();
  EXPECT_TRUE(state_.exchanges.empty());
  EXPECT_TRUE(state_.queues.empty());
  EXPECT_TRUE(state_.bindings.empty());
  EXPECT_EQ(state_.next_queue_id, 8u) << "queue ids are never reused";
}

TEST_F(RocksDbStoreTest, UsersSurviveReopenUntilRemoved) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutUser{
      StoredUser{"ops", "pbkdf2-sha256$1$aa$bb", true, {}, {"administrator"}, {}}});
  batch.Add(StoreBatch::PutUser{StoredUser{"worker",
                                           "pbkdf2-sha256$1$cc$dd",
                                           false,
                                           UserLimits{3, 0},
                                           {"monitoring"},
                                           {UserPermission{"/", "^w-", "", ".*"}}}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  ASSERT_EQ(state_.users.size(), 2u);
  EXPECT_EQ(state_.users[0].name, "ops");
  EXPECT_TRUE(state_.users[0].admin);
  EXPECT_EQ(state_.users[1].password_hash, "pbkdf2-sha256$1$cc$dd");
  EXPECT_FALSE(state_.users[1].admin);
  // Limits come back, 0 (none allowed) apart from no limit.
  EXPECT_EQ(state_.users[0].limits, UserLimits{});
  EXPECT_EQ(state_.users[1].limits, (UserLimits{3, 0}));
  // Tags and permissions as given: none is none (a new user's, as after add_user).
  EXPECT_EQ(state_.users[0].tags, std::vector<std::string>{"administrator"});
  EXPECT_TRUE(state_.users[0].permissions.empty());
  EXPECT_EQ(state_.users[1].tags, std::vector<std::string>{"monitoring"});
  EXPECT_EQ(state_.users[1].permissions,
            (std::vector<UserPermission>{UserPermission{"/", "^w-", "", ".*"}}));
  StoreBatch removal;
  removal.Add(StoreBatch::RemoveUser{"worker"});
  ASSERT_TRUE(CommitSync(std::move(removal)).ok());
  Reopen();
  ASSERT_EQ(state_.users.size(), 1u);
  EXPECT_EQ(state_.users[0].name, "ops");
}

TEST_F(RocksDbStoreTest, AUserStoredBeforeTagsKeepsTheRightsItHad) {
  Open();
  store_.reset();
  // Records as written before tags and permissions: no access_model.
  testing::WithRawDb(dir_.path(), [&](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta) {
    for (bool admin : {true, false}) {
      pb::UserRecord record;
      record.set_name(admin ? "old-admin" : "old-worker");
      record.set_password_hash("pbkdf2-sha256$1$aa$bb");
      record.set_admin(admin);
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), meta,
                          std::string(1, kUserPrefix) + record.name(), record.SerializeAsString())
                      .ok());
    }
  });
  Reopen();
  ASSERT_EQ(state_.users.size(), 2u);
  const std::vector<UserPermission> everything{UserPermission{"/", ".*", ".*", ".*"}};
  EXPECT_EQ(state_.users[0].name, "old-admin");
  EXPECT_EQ(state_.users[0].tags, std::vector<std::string>{"administrator"});
  EXPECT_EQ(state_.users[0].permissions, everything);
  EXPECT_TRUE(state_.users[1].tags.empty());
  EXPECT_EQ(state_.users[1].permissions, everything);
}

TEST_F(RocksDbStoreTest, MessagesRoundTripWithEveryField) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  auto envelope = MakeEnvelope(100, std::string("body\0with nul", 13));
  batch.Add(StoreBatch::PutMessage{envelope, 1});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 5, 100, 0, 0}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  const StoredQueue* q = FindQueue("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->estimated_messages(), 1u);
  EXPECT_EQ(Counts()[1], 1u);
  EXPECT_EQ(q->lanes[0].first_seq, 5u);
  EXPECT_EQ(q->lanes[0].next_seq, 6u);
  EXPECT_EQ(state_.max_message_id, 100u);
  auto loaded = LoadAll(1);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].seq, 5u);
  const Envelope& got = *loaded[0].envelope;
  EXPECT_EQ(got.message.id, 100u);
  EXPECT_EQ(got.message.body, envelope->message.body);
  EXPECT_EQ(got.message.headers, envelope->message.headers);
  EXPECT_EQ(got.message.properties, envelope->message.properties);
  EXPECT_TRUE(got.message.persistent);
  EXPECT_EQ(got.message.published_at_ms, envelope->message.published_at_ms);
  EXPECT_EQ(got.exchange, "ex");
  EXPECT_EQ(got.routing_key, "key");
}

TEST_F(RocksDbStoreTest, ReceiveCountRewriteSurvives) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  batch.Add(StoreBatch::PutMessage{MakeEnvelope(1, "a"), 1});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 1, 0, 0}});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 1, 3, 0}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  auto loaded = LoadAll(1);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].receive_count, 3u);
}

TEST_F(RocksDbStoreTest, LoadIsBoundedAndOrdered) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("a"), 1});
  batch.Add(StoreBatch::PutQueue{Queue("b"), 2});
  for (uint64_t i = 1; i <= 50; ++i) {
    batch.Add(StoreBatch::PutMessage{MakeEnvelope(i, "m" + std::to_string(i)), 1});
    batch.Add(StoreBatch::PutEntry{EntryRef{i % 2 ? 1u : 2u, i, i, 0, 0}});
  }
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  auto a = LoadAll(1, 10, 30, 5);
  ASSERT_EQ(a.size(), 5u);
  std::vector<uint64_t> seqs;
  for (const auto& m : a) seqs.push_back(m.seq);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{11, 13, 15, 17, 19}));
  EXPECT_EQ(LoadAll(2, 40, 45).size(), 3u);  // 40, 42, 44
  EXPECT_TRUE(LoadAll(1, 60).empty());
}

TEST_F(RocksDbStoreTest, SharedBodyIsKeptUntilItsLastEntryGoes) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("a"), 1});
  batch.Add(StoreBatch::PutQueue{Queue("b"), 2});
  batch.Add(StoreBatch::PutMessage{MakeEnvelope(9, "shared"), 2});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 9, 0, kEntryShared}});
  batch.Add(StoreBatch::PutEntry{EntryRef{2, 1, 9, 0, kEntryShared}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  StoreBatch ack_a;
  ack_a.Add(StoreBatch::RemoveEntry{EntryRef{1, 1, 9, 1, kEntryShared}});
  ASSERT_TRUE(CommitSync(std::move(ack_a)).ok());
  // The reference count is read back from disk after a restart.
  Reopen();
  EXPECT_EQ(FindQueue("a")->estimated_messages(), 0u);
  auto b = LoadAll(2);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].envelope->message.body, "shared");
  StoreBatch ack_b;
  ack_b.Add(StoreBatch::RemoveEntry{EntryRef{2, 1, 9, 1, kEntryShared}});
  ASSERT_TRUE(CommitSync(std::move(ack_b)).ok());
  EXPECT_EQ(StoredBodies(), 0u) << "the body is gone with its last entry";
}

TEST_F(RocksDbStoreTest, PurgeAndRemoveQueueReleaseBodies) {
  Open();
  CountFinishedRemovals();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("a"), 1});
  batch.Add(StoreBatch::PutQueue{Queue("b"), 2});
  for (uint64_t i = 1; i <= 100; ++i) {
    batch.Add(StoreBatch::PutMessage{MakeEnvelope(i, "x"), 2});
    batch.Add(StoreBatch::PutEntry{EntryRef{1, i, i, 0, kEntryShared}});
    batch.Add(StoreBatch::PutEntry{EntryRef{2, i, i, 0, kEntryShared}});
  }
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  StoreBatch purge;
  purge.Add(StoreBatch::PurgeRange{1, 51, 101, 50});
  ASSERT_TRUE(CommitSync(std::move(purge)).ok());
  ASSERT_TRUE(WaitForRemovals(1));
  EXPECT_EQ(LoadAll(1).size(), 50u);
  EXPECT_EQ(LoadAll(2).size(), 100u) << "b still holds every body";
  EXPECT_EQ(StoredBodies(), 100u);  // reopens the store
  CountFinishedRemovals();
  StoreBatch drop;
  drop.Add(StoreBatch::RemoveQueue{"b", 2});
  drop.Add(StoreBatch::RemoveQueue{"a", 1});
  ASSERT_TRUE(CommitSync(std::move(drop)).ok());
  ASSERT_TRUE(WaitForRemovals(2)) << "the queues' entries go in the background";
  Reopen();
  EXPECT_TRUE(state_.queues.empty());
  EXPECT_TRUE(state_.orphaned_queue_ids.empty());
  EXPECT_EQ(StoredBodies(), 0u) << "no body outlives the queues";
}

// Seqs 1-2 stay (in flight when purged), 3-10,002 are purged (9,999 inline and one shared
// with queue "b"), 10,003-10,005 came after the purge.
void FillForPurge(StoreBatch* batch) {
  batch->Add(StoreBatch::PutQueue{Queue("a"), 1});
  batch->Add(StoreBatch::PutQueue{Queue("b"), 2});
  auto body = MakeEnvelope(1, "x");
  for (uint64_t seq = 1; seq <= 10'005; ++seq) {
    if (seq == 10'002) continue;
    batch->Add(StoreBatch::PutEntry{EntryRef{1, seq, seq, 0, kEntryInline, body}});
  }
  batch->Add(StoreBatch::PutMessage{MakeEnvelope(20'000, "shared"), 2});
  batch->Add(StoreBatch::PutEntry{EntryRef{1, 10'002, 20'000, 0, kEntryShared}});
  batch->Add(StoreBatch::PutEntry{EntryRef{2, 1, 20'000, 0, kEntryShared}});
}

std::vector<uint64_t> Seqs(const std::vector<LoadedMessage>& loaded) {
  std::vector<uint64_t> out;
  for (const auto& m : loaded) out.push_back(m.seq);
  return out;
}

TEST_F(RocksDbStoreTest, APurgeIsHiddenAtOnceAndRemovedInStepsAcrossARestart) {
  auto faults = OpenHoldingPurges();
  ASSERT_NE(store_, nullptr);
  uint64_t removed = 0, finished = 0;
  auto listen = [&] {
    store_->SetReclaimCallback([&](uint64_t queue_id, uint64_t n, bool done) {
      EXPECT_EQ(queue_id, 1u);
      removed += n;
      finished += done ? 1 : 0;
    });
  };
  listen();
  StoreBatch batch;
  FillForPurge(&batch);
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  StoreBatch purge;
  purge.Add(StoreBatch::PurgeRange{1, 3, 10'003, 10'000});
  ASSERT_TRUE(CommitSync(std::move(purge)).ok());
  const std::vector<uint64_t> kept = {1, 2, 10'003, 10'004, 10'005};
  EXPECT_EQ(Seqs(LoadAll(1)), kept) << "purged entries are gone for readers at once";
  EXPECT_EQ(Seqs(LoadAll(1, 2, UINT64_MAX, 2)), (std::vector<uint64_t>{2, 10'003}));
  EXPECT_EQ(LoadAll(2).size(), 1u);

  // One step, then the process stops.
  faults->reclaim_steps = 1;
  ASSERT_TRUE(CommitSync(StoreBatch()).ok());
  ASSERT_TRUE(mailbox_.RunUntil([&] { return removed > 0; }));
  EXPECT_EQ(removed, 4096u);
  EXPECT_EQ(finished, 0u);
  store_.reset();

  Open();
  ASSERT_EQ(state_.purges.size(), 1u);
  EXPECT_EQ(state_.purges[0].queue_id, 1u);
  EXPECT_EQ(state_.purges[0].from_seq, 3u);
  EXPECT_EQ(state_.purges[0].cursor_seq, 3u + 4096u);
  EXPECT_EQ(state_.purges[0].removed, 4096u);
  EXPECT_EQ(state_.purges[0].messages, 10'000u);
  const StoredQueue* a = FindQueue("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->lanes[0].first_seq, 1u);
  EXPECT_EQ(a->lanes[0].next_seq, 10'006u);
  EXPECT_EQ(Counts()[1], 5u) << "the count leaves the purged range out";
  EXPECT_EQ(Seqs(LoadAll(1)), kept) << "still hidden after the restart";

  removed = finished = 0;
  listen();  // the recovered purge resumes
  ASSERT_TRUE(mailbox_.RunUntil([&] { return finished == 1; }));
  EXPECT_EQ(removed, 10'000u - 4096u);
  EXPECT_EQ(Seqs(LoadAll(1)), kept);
  EXPECT_EQ(StoredBodies(), 1u) << "the shared body stays for queue b";
  EXPECT_TRUE(state_.purges.empty()) << "the record goes with the last step";
  StoreBatch ack;
  ack.Add(StoreBatch::RemoveEntry{EntryRef{2, 1, 20'000, 0, kEntryShared}});
  ASSERT_TRUE(CommitSync(std::move(ack)).ok());
  EXPECT_EQ(StoredBodies(), 0u) << "the purge released its reference";
}

TEST_F(RocksDbStoreTest, AFailedPurgeStepIsTriedAgainNotSkipped) {
  auto faults = OpenHoldingPurges();
  ASSERT_NE(store_, nullptr);
  uint64_t removed = 0, finished = 0;
  store_->SetReclaimCallback([&](uint64_t, uint64_t n, bool done) {
    removed += n;
    finished += done ? 1 : 0;
  });
  StoreBatch batch;
  FillForPurge(&batch);
  batch.Add(StoreBatch::PurgeRange{1, 3, 10'003, 10'000});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());

  // The first step's write fails (the group before it writes nothing, so it is the step).
  // The empty commit only wakes the writer: if the step ran first (a busy machine), the store
  // refuses it with the step's error, which is as good.
  faults->disk_full = true;
  faults->reclaim_steps = 1;
  const Status wake = CommitSync(StoreBatch(), /*sync=*/false);
  EXPECT_TRUE(wake.ok() || wake.code() == StatusCode::kStoreFull) << wake.ToString();
  for (int i = 0; i < 100 && faults->reclaim_steps != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(faults->reclaim_steps, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // its write fails meanwhile

  // Space is back: the store resumes on a later commit, and the purge goes on from where it
  // was, not from where the failed step would have left it.
  faults->disk_full = false;
  faults->reclaim_steps = -1;
  bool resumed = false;
  for (int i = 0; i < 50 && !resumed; ++i) {
    StoreBatch probe;
    probe.Add(StoreBatch::PutUser{StoredUser{"u", "h", false, {}, {}, {}}});
    resumed = CommitSync(std::move(probe)).ok();
    if (!resumed) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  ASSERT_TRUE(resumed);
  ASSERT_TRUE(mailbox_.RunUntil([&] { return finished == 1; }));
  EXPECT_EQ(removed, 10'000u) << "every purged entry removed, none skipped";
  Reopen();
  EXPECT_EQ(Seqs(LoadAll(1)), (std::vector<uint64_t>{1, 2, 10'003, 10'004, 10'005}));
  EXPECT_EQ(Counts()[1], 5u);
  EXPECT_TRUE(state_.purges.empty());
  EXPECT_EQ(StoredBodies(), 1u) << "the shared body, held by queue b alone now";
}

TEST_F(RocksDbStoreTest, APurgeOnlyOfPagedEntriesLeavesAQueueEmptyWithItsNextSeq) {
  auto faults = OpenHoldingPurges();
  ASSERT_NE(store_, nullptr);
  StoreBatch batch;
  FillForPurge(&batch);
  batch.Add(StoreBatch::PurgeRange{1, 1, 10'006, 10'005});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  store_.reset();
  faults = OpenHoldingPurges();
  ASSERT_NE(store_, nullptr);
  ASSERT_EQ(state_.purges.size(), 1u);
  CountFinishedRemovals();  // hands the recovered purge over, held
  const StoredQueue* a = FindQueue("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->lanes[0].first_seq, 0u) << "empty";
  EXPECT_EQ(a->lanes[0].next_seq, 10'006u) << "new entries must not land in the purged range";
  EXPECT_TRUE(LoadAll(1).empty());
  // Deleting the queue takes its purge along.
  StoreBatch drop;
  drop.Add(StoreBatch::RemoveQueue{"a", 1});
  drop.Add(StoreBatch::RemoveQueue{"b", 2});
  ASSERT_TRUE(CommitSync(std::move(drop)).ok());
  faults->reclaim_steps = -1;
  ASSERT_TRUE(CommitSync(StoreBatch(), /*sync=*/false).ok());  // wakes the writer
  // Exactly the two queues' entries: the purge went with a.
  ASSERT_TRUE(WaitForRemovals(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(CommitSync(StoreBatch()).ok());  // runs what was posted before its completion
  EXPECT_EQ(finished_removals_, 2u) << "no third removal (a's purge) ran";
  Reopen();
  EXPECT_TRUE(state_.purges.empty());
  EXPECT_TRUE(state_.orphaned_queue_ids.empty());
  EXPECT_EQ(StoredBodies(), 0u);
}

// A purge's range can hold an earlier one still being removed (the broker's range starts at
// the first ready message, which can be below an earlier range after requeues). After a
// restart the estimate counts each hidden sequence number once (it wrapped below zero when
// the spans were summed), and every entry is removed, and its body released, once.
TEST_F(RocksDbStoreTest, NestedPurgedRangesAreCountedOnceAndRemovedOnce) {
  OpenHoldingPurges();  // the first store removes nothing
  ASSERT_NE(store_, nullptr);
  StoreBatch batch;
  FillForPurge(&batch);
  batch.Add(StoreBatch::PurgeRange{1, 100, 200, 100});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  StoreBatch outer;
  outer.Add(StoreBatch::PurgeRange{1, 3, 10'004, 9'999});
  ASSERT_TRUE(CommitSync(std::move(outer)).ok());
  Reopen();  // without faults: the removals start with the callback
  ASSERT_EQ(state_.purges.size(), 2u);
  const StoredQueue* a = FindQueue("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->lanes[0].first_seq, 1u);
  EXPECT_EQ(a->estimated_messages(), 4u) << "1, 2, 10,004 and 10,005";
  EXPECT_EQ(Counts()[1], 4u);
  EXPECT_EQ(Seqs(LoadAll(1)), (std::vector<uint64_t>{1, 2, 10'004, 10'005}));
  CountFinishedRemovals();
  ASSERT_TRUE(WaitForRemovals(2));
  Reopen();
  EXPECT_TRUE(state_.purges.empty());
  EXPECT_EQ(Seqs(LoadAll(1)), (std::vector<uint64_t>{1, 2, 10'004, 10'005}));
  EXPECT_EQ(StoredBodies(), 1u) << "the shared body, released once, is held by queue b";
}

TEST_F(RocksDbStoreTest, ADeletedQueuesEntriesAreRemovedInTheBackgroundAcrossARestart) {
  auto faults = OpenHoldingPurges();
  ASSERT_NE(store_, nullptr);
  StoreBatch batch;
  FillForPurge(&batch);
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  StoreBatch drop;
  drop.Add(StoreBatch::RemoveQueue{"a", 1});
  ASSERT_TRUE(CommitSync(std::move(drop)).ok());
  EXPECT_EQ(LoadAll(2).size(), 1u) << "b keeps the shared message";
  store_.reset();  // stopped before any step

  Open();
  EXPECT_EQ(FindQueue("a"), nullptr);
  EXPECT_EQ(state_.orphaned_queue_ids, (std::vector<uint64_t>{1}));
  CountFinishedRemovals();  // the removal resumes
  ASSERT_TRUE(WaitForRemovals(1));
  Reopen();
  EXPECT_TRUE(state_.orphaned_queue_ids.empty());
  EXPECT_EQ(StoredBodies(), 1u) << "the shared body, held by b alone now";
  EXPECT_EQ(LoadAll(2).size(), 1u);
}

TEST_F(RocksDbStoreTest, RecoveryEstimatesThenCountsAndReportsOrphans) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  for (uint64_t i = 1; i <= 10; ++i) {
    batch.Add(StoreBatch::PutMessage{MakeEnvelope(i, "m"), 1});
    batch.Add(StoreBatch::PutEntry{EntryRef{1, i, i, 0, 0}});
  }
  batch.Add(StoreBatch::RemoveEntry{EntryRef{1, 1, 1, 1, 0}});
  batch.Add(StoreBatch::RemoveEntry{EntryRef{1, 5, 5, 1, 0}});
  batch.Add(StoreBatch::PutMessage{MakeEnvelope(11, "of a queue that is gone"), 1});
  batch.Add(StoreBatch::PutEntry{EntryRef{99, 1, 11, 0, 0}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  const StoredQueue* q = FindQueue("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->lanes[0].first_seq, 2u);
  EXPECT_EQ(q->lanes[0].next_seq, 11u);
  EXPECT_EQ(q->estimated_messages(), 9u) << "an upper bound: seq 5 is gone too";
  EXPECT_EQ(state_.orphaned_queue_ids, (std::vector<uint64_t>{99}));
  EXPECT_EQ(state_.max_message_id, 11u);
  // Changes after Recover do not disturb the count, which is of the recovered state.
  StoreBatch later;
  later.Add(StoreBatch::RemoveEntry{EntryRef{1, 2, 2, 1, 0}});
  ASSERT_TRUE(CommitSync(std::move(later)).ok());
  EXPECT_EQ(Counts()[1], 8u);
}

TEST_F(RocksDbStoreTest, EntryWithoutBodyLoadsAsUnreadable) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 500, 2, 0}});  // its body write was lost
  batch.Add(StoreBatch::PutMessage{MakeEnvelope(501, "fine"), 1});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 2, 501, 0, 0}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  auto loaded = LoadAll(1);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].envelope, nullptr);
  EXPECT_EQ(loaded[0].message_id, 500u);
  ASSERT_NE(loaded[1].envelope, nullptr);
  EXPECT_EQ(loaded[1].envelope->message.body, "fine");
}

TEST_F(RocksDbStoreTest, LoadStopsAtTheByteBudget) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  for (uint64_t i = 1; i <= 200; ++i) {
    batch.Add(StoreBatch::PutMessage{MakeEnvelope(i, std::string(1000, 'x')), 1});
    batch.Add(StoreBatch::PutEntry{EntryRef{1, i, i, 0, 0}});
  }
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  bool done = false;
  size_t got = 0;
  store_->Load(1, 0, UINT64_MAX, 1000, 10'000, [&](Result<std::vector<LoadedMessage>> r) {
    ASSERT_TRUE(r.ok());
    got = r->size();
    done = true;
  });
  ASSERT_TRUE(mailbox_.RunUntil([&] { return done; }));
  EXPECT_GE(got, 10u);
  EXPECT_LT(got, 200u) << "bodies are read in small chunks, stopping near the budget";
}

TEST_F(RocksDbStoreTest, MessageSettledInItsOwnWriteGroupIsNeverWritten) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("a"), 1});
  batch.Add(StoreBatch::PutQueue{Queue("b"), 2});
  // 1: published and acked in the same group. 2: in two queues, acked in one only.
  batch.Add(StoreBatch::PutMessage{MakeEnvelope(1, "fast"), 1});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 1, 0, 0}});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 1, 1, 0}});  // delivered
  batch.Add(StoreBatch::RemoveEntry{EntryRef{1, 1, 1, 1, 0}});
  batch.Add(StoreBatch::PutMessage{MakeEnvelope(2, "half"), 2});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 2, 2, 0, kEntryShared}});
  batch.Add(StoreBatch::PutEntry{EntryRef{2, 1, 2, 0, kEntryShared}});
  batch.Add(StoreBatch::RemoveEntry{EntryRef{1, 2, 2, 1, kEntryShared}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  EXPECT_EQ(store_->counters().elided, 2u) << "both entries put and removed in the group";
  EXPECT_TRUE(LoadAll(1).empty());
  auto b = LoadAll(2);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].envelope->message.body, "half");
  EXPECT_EQ(StoredBodies(), 1u) << "only the message still queued in b is on disk";
  StoreBatch ack_b;
  ack_b.Add(StoreBatch::RemoveEntry{EntryRef{2, 1, 2, 1, kEntryShared}});
  ASSERT_TRUE(CommitSync(std::move(ack_b)).ok());
  EXPECT_EQ(StoredBodies(), 0u);
}

// Priority queues keep each priority in a lane: the top byte of the sequence number. Recovery
// reports every lane apart (first and next sequence number, its own delivery mark), each is
// counted apart, and deleting the queue removes every lane's mark.
TEST_F(RocksDbStoreTest, LanesAreRecoveredAndCountedApartWithTheirOwnMarks) {
  Open();
  const uint64_t lane3 = LaneBaseSeq(3), lane7 = LaneBaseSeq(7);
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  for (uint64_t i = 1; i <= 3; ++i) {
    batch.Add(StoreBatch::PutEntry{EntryRef{1, i, i, 0, kEntryInline, MakeEnvelope(i, "a")}});
  }
  for (uint64_t i = 1; i <= 5; ++i) {
    batch.Add(StoreBatch::PutEntry{
        EntryRef{1, lane3 + i, 10 + i, 0, kEntryInline, MakeEnvelope(10 + i, "b")}});
  }
  batch.Add(StoreBatch::MarkDelivered{1, 2});
  batch.Add(StoreBatch::MarkDelivered{1, lane3 + 4});
  // Lane 7: delivered and acked; only its mark says where it got to.
  batch.Add(StoreBatch::MarkDelivered{1, lane7 + 2});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  const StoredQueue* q = FindQueue("q");
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->lanes.size(), 3u);
  EXPECT_EQ(q->lanes[0].lane, 0);
  EXPECT_EQ(q->lanes[0].first_seq, 1u);
  EXPECT_EQ(q->lanes[0].next_seq, 4u);
  EXPECT_EQ(q->lanes[0].delivered_through, 2u);
  EXPECT_EQ(q->lanes[1].lane, 3);
  EXPECT_EQ(q->lanes[1].first_seq, lane3 + 1);
  EXPECT_EQ(q->lanes[1].next_seq, lane3 + 6);
  EXPECT_EQ(q->lanes[1].delivered_through, lane3 + 4);
  EXPECT_EQ(q->lanes[2].lane, 7);
  EXPECT_EQ(q->lanes[2].first_seq, 0u) << "no entries";
  EXPECT_EQ(q->lanes[2].delivered_through, lane7 + 2);
  EXPECT_EQ(q->estimated_messages(), 8u);
  std::map<uint8_t, uint64_t> counts;
  store_->CountRecoveredQueues([&](uint64_t id, CountKind kind, uint64_t n, uint8_t lane) {
    if (id == 1 && kind == CountKind::kEntries) counts[lane] = n;
  });
  ASSERT_TRUE(mailbox_.RunUntil([&] { return counts.size() == 2; }));
  EXPECT_EQ(counts, (std::map<uint8_t, uint64_t>{{0, 3}, {3, 5}}));
  auto lane = LoadAll(1, lane3, LaneEndSeq(3));
  ASSERT_EQ(lane.size(), 5u);
  EXPECT_EQ(lane[0].seq, lane3 + 1);

  StoreBatch remove;
  remove.Add(StoreBatch::RemoveQueue{"q", 1});
  ASSERT_TRUE(CommitSync(std::move(remove)).ok());
  store_.reset();
  size_t marks = 0;
  testing::WithRawDb(dir_.path(), [&](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta) {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), meta));
    for (it->Seek("d"); it->Valid() && it->key().starts_with("d"); it->Next()) ++marks;
  });
  EXPECT_EQ(marks, 0u) << "every lane's delivery mark goes with the queue";
}

// The sequence numbers of every entry in each entries family, read with RocksDB directly (the
// store closed): family name -> seqs of queue `queue_id`.
std::map<std::string, std::vector<uint64_t>> RawEntriesByFamily(const std::string& path,
                                                                uint64_t queue_id) {
  std::map<std::string, std::vector<uint64_t>> out;
  testing::WithRawDbFamilies(
      path, [&](rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
        for (auto* handle : handles) {
          if (!IsEntriesFamily(handle->GetName())) continue;
          std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handle));
          for (it->Seek(EntryKey(queue_id, 0)); it->Valid(); it->Next()) {
            auto parts = ParseEntryKey(std::string_view(it->key().data(), it->key().size()));
            if (!parts || parts->queue_id != queue_id) break;
            out[handle->GetName()].push_back(parts->seq);
          }
        }
      });
  return out;
}

// The names of the column families the store at `path` has, sorted.
std::vector<std::string> FamilyNames(const std::string& path) {
  std::vector<std::string> names;
  for (const auto& family : testing::ExistingFamilies(path)) names.push_back(family.name);
  std::sort(names.begin(), names.end());
  return names;
}

// Format 11: each lane's entries are in the family of its lane (lane % 16), made when the lane
// is first written, so lanes growing side by side never overlap in one family's tables.
// Written, loaded lane by lane, and removed with their queue from every family.
TEST_F(RocksDbStoreTest, EachLaneIsInItsOwnFamily) {
  Open();
  store_.reset();
  // A lane family is made when one of its lanes is first written: none yet.
  const std::vector<std::string> base = {"dedup", "default", "delayed", "entries", "messages"};
  EXPECT_EQ(FamilyNames(dir_.path()), base);
  Open();
  CountFinishedRemovals();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  uint64_t id = 0;
  for (uint8_t lane : {0, 3, 16, 17}) {
    for (uint64_t i = 1; i <= 2; ++i) {
      ++id;
      batch.Add(StoreBatch::PutEntry{
          EntryRef{1, LaneBaseSeq(lane) + i, id, 0, kEntryInline, MakeEnvelope(id, "m")}});
    }
  }
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  for (uint8_t lane : {0, 3, 16, 17}) {
    EXPECT_EQ(Seqs(LoadAll(1, LaneBaseSeq(lane), LaneEndSeq(lane))),
              (std::vector<uint64_t>{LaneBaseSeq(lane) + 1, LaneBaseSeq(lane) + 2}))
        << "lane " << int{lane};
  }
  EXPECT_EQ(Seqs(LoadAll(1)), (std::vector<uint64_t>{1, 2})) << "a load reads one lane";
  store_.reset();
  const auto families = RawEntriesByFamily(dir_.path(), 1);
  const std::map<std::string, std::vector<uint64_t>> expected = {
      {"entries", {1, 2, LaneBaseSeq(16) + 1, LaneBaseSeq(16) + 2}},
      {"entries.1", {LaneBaseSeq(17) + 1, LaneBaseSeq(17) + 2}},
      {"entries.3", {LaneBaseSeq(3) + 1, LaneBaseSeq(3) + 2}}};
  EXPECT_EQ(families, expected);
  EXPECT_EQ(FamilyNames(dir_.path()),
            (std::vector<std::string>{"dedup", "default", "delayed", "entries", "entries.1",
                                      "entries.3", "messages"}));

  Open();
  CountFinishedRemovals();
  StoreBatch remove;
  remove.Add(StoreBatch::RemoveQueue{"q", 1});
  ASSERT_TRUE(CommitSync(std::move(remove)).ok());
  // The deleted queue's entries are removed in the background, from every family.
  ASSERT_TRUE(WaitForRemovals(1));
  store_.reset();
  EXPECT_TRUE(RawEntriesByFamily(dir_.path(), 1).empty());
}

// A format-10 directory keeps every lane in "entries". Opening it moves the entries of lanes
// whose family is another into it, also when an earlier upgrade stopped half way (some lane 3
// entries moved, some not), and a priority queue recovers with all its lanes.
TEST_F(RocksDbStoreTest, FormatTenLanesAreMovedIntoTheirFamilies) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  batch.Add(StoreBatch::PutQueue{Queue("plain"), 2});
  uint64_t id = 0;
  for (uint8_t lane : {0, 3, 16, 255}) {
    for (uint64_t i = 1; i <= 3; ++i) {
      ++id;
      batch.Add(StoreBatch::PutEntry{
          EntryRef{1, LaneBaseSeq(lane) + i, id, 0, kEntryInline, MakeEnvelope(id, "m")}});
    }
  }
  batch.Add(StoreBatch::PutEntry{EntryRef{2, 1, 100, 0, kEntryInline, MakeEnvelope(100, "p")}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  store_.reset();
  // Back to format 10's layout, but for the first lane-3 entry (as an interrupted upgrade
  // would leave it).
  testing::WithRawDbFamilies(
      dir_.path(), [](rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
        rocksdb::ColumnFamilyHandle* entries = testing::FamilyNamed(handles, kColumnEntries);
        ASSERT_NE(entries, nullptr);
        for (auto* handle : handles) {
          if (!IsEntriesFamily(handle->GetName()) || handle == entries) continue;
          std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handle));
          for (it->SeekToFirst(); it->Valid(); it->Next()) {
            if (it->key() == rocksdb::Slice(EntryKey(1, LaneBaseSeq(3) + 1))) continue;
            ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), entries, it->key(), it->value()).ok());
            ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), handle, it->key()).ok());
          }
        }
        ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], "F", "10").ok());
      });
  // Format 10 had no lane families: the upgrade makes those it needs ("entries.15").
  {
    auto families = testing::ExistingFamilies(dir_.path());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.path(), families, &handles, &db).ok());
    if (auto* lane = testing::FamilyNamed(handles, "entries.15")) {
      ASSERT_TRUE(db->DropColumnFamily(lane).ok());
    }
    for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
    delete db;
  }
  ASSERT_EQ(FamilyNames(dir_.path()),
            (std::vector<std::string>{"dedup", "default", "delayed", "entries", "entries.3",
                                      "messages"}));
  ASSERT_EQ(RawEntriesByFamily(dir_.path(), 1).at("entries").size(), 11u);

  Open();
  store_.reset();
  EXPECT_EQ(testing::RawFormatVersion(dir_.path()), std::to_string(kFormatVersion));
  const std::map<std::string, std::vector<uint64_t>> expected = {
      {"entries", {1, 2, 3, LaneBaseSeq(16) + 1, LaneBaseSeq(16) + 2, LaneBaseSeq(16) + 3}},
      {"entries.3", {LaneBaseSeq(3) + 1, LaneBaseSeq(3) + 2, LaneBaseSeq(3) + 3}},
      {"entries.15", {LaneBaseSeq(255) + 1, LaneBaseSeq(255) + 2, LaneBaseSeq(255) + 3}}};
  EXPECT_EQ(RawEntriesByFamily(dir_.path(), 1), expected);
  EXPECT_EQ(RawEntriesByFamily(dir_.path(), 2).at("entries"), (std::vector<uint64_t>{1}));

  Open();
  const StoredQueue* q = FindQueue("q");
  ASSERT_NE(q, nullptr);
  std::vector<std::pair<int, uint64_t>> lanes;
  for (const StoredLane& lane : q->lanes) lanes.emplace_back(lane.lane, lane.next_seq);
  EXPECT_EQ(lanes, (std::vector<std::pair<int, uint64_t>>{{0, 4},
                                                          {3, LaneBaseSeq(3) + 4},
                                                          {16, LaneBaseSeq(16) + 4},
                                                          {255, LaneBaseSeq(255) + 4}}));
  EXPECT_EQ(q->estimated_messages(), 12u);
  for (uint8_t lane : {0, 3, 16, 255}) {
    EXPECT_EQ(LoadAll(1, LaneBaseSeq(lane), LaneEndSeq(lane)).size(), 3u) << int{lane};
  }
  ASSERT_NE(FindQueue("plain"), nullptr);
  EXPECT_EQ(LoadAll(2).size(), 1u);
}

TEST_F(RocksDbStoreTest, InlineEntriesCarryTheirMessage) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  auto first = MakeEnvelope(7, "inline one");
  auto second = MakeEnvelope(8, "inline two");
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 7, 0, kEntryInline, first}});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 2, 8, 0, kEntryInline, second}});
  batch.Add(StoreBatch::MarkDelivered{1, 1});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  // A redelivery rewrites the entry with its message and count.
  StoreBatch again;
  again.Add(StoreBatch::PutEntry{EntryRef{1, 2, 8, 3, kEntryInline, second}});
  ASSERT_TRUE(CommitSync(std::move(again)).ok());
  EXPECT_EQ(StoredBodies(), 0u) << "nothing in the messages family";
  Reopen();
  ASSERT_NE(FindQueue("q"), nullptr);
  EXPECT_EQ(FindQueue("q")->lanes[0].delivered_through, 1u);
  EXPECT_EQ(state_.max_message_id, 8u);
  auto loaded = LoadAll(1);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].envelope->message.body, "inline one");
  EXPECT_EQ(loaded[0].envelope->message.headers, first->message.headers);
  EXPECT_EQ(loaded[1].envelope->message.body, "inline two");
  EXPECT_EQ(loaded[1].receive_count, 3u);
  StoreBatch ack;
  ack.Add(StoreBatch::RemoveEntry{EntryRef{1, 1, 7, 1, kEntryInline}});
  ack.Add(StoreBatch::RemoveQueue{"q", 1});
  ASSERT_TRUE(CommitSync(std::move(ack)).ok());
  Reopen();
  EXPECT_TRUE(state_.queues.empty());
}

TEST_F(RocksDbStoreTest, ManyCommitsShareSyncs) {
  Open();
  constexpr int kCommits = 2000;
  std::atomic<int> done{0};
  int failed = 0;
  for (int i = 1; i <= kCommits; ++i) {
    StoreBatch batch;
    batch.Add(StoreBatch::PutMessage{MakeEnvelope(static_cast<uint64_t>(i), "m"), 1});
    store_->Commit(std::move(batch), true, [&](Status s) {
      failed += s.ok() ? 0 : 1;
      ++done;
    });
  }
  ASSERT_TRUE(mailbox_.RunUntil([&] { return done == kCommits; }));
  EXPECT_EQ(failed, 0);
  StoreCounters counters = store_->counters();
  EXPECT_EQ(counters.commits, static_cast<uint64_t>(kCommits));
  EXPECT_GE(counters.syncs, 1u);
  // Group commit: while one sync runs the next group forms, so far fewer syncs than commits.
  EXPECT_LT(counters.syncs, static_cast<uint64_t>(kCommits) / 2) << counters.syncs;
}

TEST_F(RocksDbStoreTest, CloseWritesEverythingQueued) {
  Open();
  // The queue is declared in its own commit, as the broker does. (Declaring it in the first
  // publish's batch, an `if (i == 1)` Add in the loop, made GCC 12's Release build report a
  // false -Wstringop-overflow in the inlined vector growth of that iteration.)
  StoreBatch declare;
  declare.Add(StoreBatch::PutQueue{Queue("q"), 1});
  ASSERT_TRUE(CommitSync(std::move(declare)).ok());
  int done = 0;
  for (uint64_t i = 1; i <= 100; ++i) {
    StoreBatch batch;
    batch.Add(StoreBatch::PutMessage{MakeEnvelope(i, "m"), 1});
    batch.Add(StoreBatch::PutEntry{EntryRef{1, i, i, 0, 0}});
    store_->Commit(std::move(batch), false, [&](Status s) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      ++done;
    });
  }
  store_->Close();
  EXPECT_TRUE(mailbox_.RunUntil([&] { return done == 100; }));
  bool refused = false;
  store_->Commit(StoreBatch(), true, [&](Status s) {
    EXPECT_EQ(s.code(), StatusCode::kShuttingDown);
    refused = true;
  });
  EXPECT_TRUE(mailbox_.RunUntil([&] { return refused; }));
  Reopen();
  EXPECT_EQ(FindQueue("q")->estimated_messages(), 100u);
  EXPECT_EQ(Counts()[1], 100u);
}

TEST_F(RocksDbStoreTest, NewerFormatIsRefused) {
  Open();
  store_.reset();
  {
    rocksdb::Options options;
    std::vector<rocksdb::ColumnFamilyDescriptor> families = testing::ExistingFamilies(dir_.path());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_.path(), families, &handles, &db).ok());
    ASSERT_TRUE(
        db->Put(rocksdb::WriteOptions(), handles[0], "F", std::to_string(kFormatVersion + 1)).ok());
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    delete db;
  }
  store_ = OpenStore(dir_.path(), &mailbox_);
  ASSERT_NE(store_, nullptr);
  auto state = store_->Recover();
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.status().message().find("newer wharfd"), std::string::npos)
      << state.status().ToString();
}

TEST_F(RocksDbStoreTest, FormatOneIsUpgradedInPlace) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  batch.Add(StoreBatch::PutMessage{MakeEnvelope(1, "from format 1"), 1});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 1, 0, 0}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  store_.reset();
  auto set_format = [&](const char* version) {
    std::vector<rocksdb::ColumnFamilyDescriptor> families = testing::ExistingFamilies(dir_.path());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.path(), families, &handles, &db).ok());
    std::string value;
    if (version) {
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], "F", version).ok());
    } else {
      ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), handles[0], "F", &value).ok());
      EXPECT_EQ(value, std::to_string(kFormatVersion));
    }
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    delete db;
  };
  for (const char* version : {"1", "3", "4", "6"}) {
    set_format(version);
    Open();
    auto loaded = LoadAll(1);
    ASSERT_EQ(loaded.size(), 1u);
    EXPECT_EQ(loaded[0].envelope->message.body, "from format 1");
    store_.reset();
    set_format(nullptr);  // now marked with the current format
  }
}

TEST_F(RocksDbStoreTest, RedrivesAreKeptUntilTheirQueueIsRemoved) {
  Open();
  StoredRedrive redrive;
  redrive.queue_id = 2;
  redrive.info.spec = RedriveSpec{"dlq", "orders", "rejected", 50, 250, false, 0xabc};
  redrive.info.state = RedriveInfo::State::kRunning;
  redrive.info.started_at_ms = 1'700'000'000'000;
  redrive.info.total = 90;
  redrive.info.moved = 7;
  redrive.info.skipped_not_matching = 3;
  redrive.info.skipped_no_target = 2;
  redrive.info.skipped_target_full = 1;
  redrive.info.targets = {{"orders", 7}};
  redrive.cursor_seq = 14;
  redrive.end_seq = 91;
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("orders"), 1});
  batch.Add(StoreBatch::PutQueue{Queue("dlq"), 2});
  batch.Add(StoreBatch::PutRedrive{redrive});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  ASSERT_EQ(state_.redrives.size(), 1u);
  const StoredRedrive& got = state_.redrives[0];
  EXPECT_EQ(got.queue_id, 2u);
  EXPECT_EQ(got.info.spec.queue, "dlq");
  EXPECT_EQ(got.info.spec.to, "orders");
  EXPECT_EQ(got.info.spec.reason, "rejected");
  EXPECT_EQ(got.info.spec.limit, 50u);
  EXPECT_EQ(got.info.spec.rate, 250u);
  EXPECT_EQ(got.info.spec.message_id, 0xabcu);
  EXPECT_EQ(got.info.state, RedriveInfo::State::kRunning);
  EXPECT_EQ(got.info.started_at_ms, 1'700'000'000'000);
  EXPECT_EQ(got.info.total, 90u);
  EXPECT_EQ(got.info.moved, 7u);
  EXPECT_EQ(got.info.skipped_not_matching, 3u);
  EXPECT_EQ(got.info.skipped_no_target, 2u);
  EXPECT_EQ(got.info.skipped_target_full, 1u);
  ASSERT_EQ(got.info.targets.size(), 1u);
  EXPECT_EQ(got.info.targets[0].queue, "orders");
  EXPECT_EQ(got.info.targets[0].messages, 7u);
  EXPECT_EQ(got.cursor_seq, 14u);
  EXPECT_EQ(got.end_seq, 91u);

  batch = StoreBatch();
  batch.Add(StoreBatch::RemoveQueue{"dlq", 2});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  EXPECT_TRUE(state_.redrives.empty());
}

// A format-2 directory has no "delayed" column family: it is created, and the format raised.
TEST_F(RocksDbStoreTest, FormatTwoWithoutDelayedFamilyIsUpgraded) {
  testing::MakeOlderStore(dir_.path(), {"default", kColumnMessages, kColumnEntries}, "2");
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  batch.Add(
      StoreBatch::PutDelayed{EntryRef{1, 0, 5, 0, kEntryInline, MakeEnvelope(5, "later")}, 1'000});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  ASSERT_EQ(state_.queues.size(), 1u);
  EXPECT_TRUE(state_.queues[0].has_delayed);
}

TEST_F(RocksDbStoreTest, DelayedMessagesLoadInDueOrderAndAreFoundById) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  // Due times out of publish order, one before 1970 (signed order), two at the same time.
  const int64_t due[] = {5'000, -20, 5'000, 100};
  for (uint64_t id = 1; id <= 4; ++id) {
    batch.Add(StoreBatch::PutDelayed{
        EntryRef{1, 0, id, 0, kEntryInline, MakeEnvelope(id, "m" + std::to_string(id))},
        due[id - 1]});
  }
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  auto loaded = LoadDelayedAll(1);
  ASSERT_EQ(loaded.size(), 4u);
  std::vector<std::pair<int64_t, uint64_t>> keys;
  for (const auto& m : loaded) {
    keys.emplace_back(m.due_ms, m.message_id);
    ASSERT_NE(m.envelope, nullptr);
    EXPECT_EQ(m.envelope->message.body, "m" + std::to_string(m.message_id));
  }
  EXPECT_EQ(keys, (std::vector<std::pair<int64_t, uint64_t>>{
                      {-20, 2}, {100, 4}, {5'000, 1}, {5'000, 3}}));
  // From a key: inclusive.
  auto rest = LoadDelayedAll(1, 5'000, 1);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].message_id, 1u);
  EXPECT_EQ(LoadDelayedAll(1, INT64_MIN, 0, 2).size(), 2u);

  auto found = FindDelayedSync(1, 4);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->due_ms, 100);
  EXPECT_EQ(found->flags, kEntryInline);
  EXPECT_FALSE(FindDelayedSync(1, 99).has_value());
  EXPECT_FALSE(FindDelayedSync(2, 4).has_value());

  StoreBatch remove;
  remove.Add(StoreBatch::RemoveDelayed{EntryRef{1, 0, 4, 0, kEntryInline}, 100, true});
  ASSERT_TRUE(CommitSync(std::move(remove)).ok());
  EXPECT_FALSE(FindDelayedSync(1, 4).has_value());
  EXPECT_EQ(LoadDelayedAll(1).size(), 3u);

  Reopen();
  ASSERT_EQ(state_.queues.size(), 1u);
  EXPECT_TRUE(state_.queues[0].has_delayed);
  std::map<uint64_t, uint64_t> delayed_counts;
  size_t reports = 0;
  store_->CountRecoveredQueues([&](uint64_t id, CountKind kind, uint64_t n, uint8_t) {
    ++reports;
    if (kind == CountKind::kDelayed) delayed_counts[id] = n;
  });
  ASSERT_TRUE(mailbox_.RunUntil([&] { return reports == 1; }));
  EXPECT_EQ(delayed_counts[1], 3u);
}

// A message shared by a timeline and a ready entry: moving it (release=false) keeps the body,
// and the last reference releases it; deleting the queue empties its timeline.
TEST_F(RocksDbStoreTest, DelayedSharedBodiesAreReleasedOnceAndQueueRemovalEmptiesTimeline) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("a"), 1});
  batch.Add(StoreBatch::PutQueue{Queue("b"), 2});
  batch.Add(StoreBatch::PutMessage{MakeEnvelope(7, "shared"), 2});
  batch.Add(StoreBatch::PutDelayed{EntryRef{1, 0, 7, 0, kEntryShared}, 50});
  batch.Add(StoreBatch::PutDelayed{EntryRef{2, 0, 7, 0, kEntryShared}, 60});
  batch.Add(StoreBatch::PutDelayed{EntryRef{2, 0, 8, 0, kEntryInline, MakeEnvelope(8, "b8")}, 70});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  ASSERT_EQ(LoadDelayedAll(1).size(), 1u);
  EXPECT_EQ(LoadDelayedAll(1)[0].envelope->message.body, "shared");

  // Queue a: due, moved to its entries at seq 1 (one batch).
  StoreBatch move;
  move.Add(StoreBatch::RemoveDelayed{EntryRef{1, 0, 7, 0, kEntryShared}, 50, false});
  move.Add(StoreBatch::PutEntry{EntryRef{1, 1, 7, 0, kEntryShared}});
  ASSERT_TRUE(CommitSync(std::move(move)).ok());
  EXPECT_TRUE(LoadDelayedAll(1).empty());
  auto ready = LoadAll(1);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].envelope->message.body, "shared");

  // Queue b deleted: its timeline goes and releases its reference; a's entry keeps the body.
  StoreBatch drop;
  drop.Add(StoreBatch::RemoveQueue{"b", 2});
  ASSERT_TRUE(CommitSync(std::move(drop)).ok());
  EXPECT_TRUE(LoadDelayedAll(2).empty());
  EXPECT_FALSE(FindDelayedSync(2, 8).has_value());
  EXPECT_EQ(LoadAll(1)[0].envelope->message.body, "shared");

  StoreBatch ack;
  ack.Add(StoreBatch::RemoveEntry{EntryRef{1, 1, 7, 0, kEntryShared}});
  ASSERT_TRUE(CommitSync(std::move(ack)).ok());
  EXPECT_EQ(StoredBodies(), 0u);
}

// Regression (review): a message in two queues is dead-lettered from one as an inline copy with
// the same id, and that copy is acked, all in one write group. Only removals of shared entries
// count against the shared body: the other queue keeps it.
TEST_F(RocksDbStoreTest, InlineCopyWithASharedIdDoesNotReleaseTheSharedBody) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("a"), 1});
  batch.Add(StoreBatch::PutQueue{Queue("b"), 2});
  batch.Add(StoreBatch::PutQueue{Queue("dlq"), 3});
  batch.Add(StoreBatch::PutMessage{MakeEnvelope(7, "fanout"), 2});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 7, 0, kEntryShared}});
  batch.Add(StoreBatch::PutEntry{EntryRef{2, 1, 7, 0, kEntryShared}});
  batch.Add(StoreBatch::RemoveEntry{EntryRef{1, 1, 7, 1, kEntryShared}});  // rejected in a
  batch.Add(StoreBatch::PutEntry{EntryRef{3, 1, 7, 0, kEntryInline, MakeEnvelope(7, "fanout")}});
  batch.Add(StoreBatch::RemoveEntry{EntryRef{3, 1, 7, 1, kEntryInline}});  // acked in the dlq
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  auto b = LoadAll(2);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_NE(b[0].envelope, nullptr) << "b's copy lost its body";
  EXPECT_EQ(b[0].envelope->message.body, "fanout");
}

// Timeline entries of a queue whose record is gone are reported as orphans.
TEST_F(RocksDbStoreTest, OrphanedTimelineIsReported) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutDelayed{EntryRef{9, 0, 1, 0, kEntryInline, MakeEnvelope(1, "x")}, 5});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  EXPECT_EQ(state_.orphaned_queue_ids, std::vector<uint64_t>{9});
  StoreBatch clean;
  clean.Add(StoreBatch::RemoveAllDelayed{9});
  ASSERT_TRUE(CommitSync(std::move(clean)).ok());
  Reopen();
  EXPECT_TRUE(state_.orphaned_queue_ids.empty());
}

// An AMQP 0-9-1 publisher's content-header property bytes (Message::amqp_properties, format
// 6): a flags word, then values holding every byte value, NULs and 0xff included.
std::string AmqpPropertyBytes(uint8_t seed) {
  std::string bytes("\x98\x00", 2);
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>((i + seed) & 0xff));
  bytes.append(3, '\0');
  return bytes;
}

EnvelopePtr AmqpEnvelope(uint64_t id, const std::string& body, uint8_t seed) {
  Envelope e = *MakeEnvelope(id, body);
  e.message.amqp_properties = AmqpPropertyBytes(seed);
  return std::make_shared<const Envelope>(std::move(e));
}

TEST_F(RocksDbStoreTest, AmqpPropertiesSurviveReopenByteForByte) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("a"), 1});
  batch.Add(StoreBatch::PutQueue{Queue("b"), 2});
  batch.Add(StoreBatch::PutQueue{Queue("later"), 3});
  // Inline (one queue), shared (two queues), a native message beside them, and a delayed one.
  auto inline_one = AmqpEnvelope(10, "inline", 1);
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 10, 0, kEntryInline, inline_one}});
  batch.Add(StoreBatch::PutMessage{AmqpEnvelope(11, "shared", 2), 2});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 2, 11, 0, kEntryShared}});
  batch.Add(StoreBatch::PutEntry{EntryRef{2, 1, 11, 0, kEntryShared}});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 3, 12, 0, kEntryInline, MakeEnvelope(12, "native")}});
  batch.Add(StoreBatch::PutDelayed{
      EntryRef{3, 0, 13, 0, kEntryInline, AmqpEnvelope(13, "delayed", 3)}, 1'000});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  auto a = LoadAll(1);
  ASSERT_EQ(a.size(), 3u);
  for (const auto& m : a) ASSERT_NE(m.envelope, nullptr) << "seq " << m.seq;
  EXPECT_EQ(a[0].envelope->message.amqp_properties, AmqpPropertyBytes(1));
  EXPECT_EQ(a[0].envelope->message.amqp_properties.size(), 261u);
  EXPECT_EQ(a[1].envelope->message.amqp_properties, AmqpPropertyBytes(2));
  EXPECT_TRUE(a[2].envelope->message.amqp_properties.empty()) << "a native publish has none";
  EXPECT_EQ(a[0].envelope->message.body, "inline");
  EXPECT_EQ(a[0].envelope->message.headers, inline_one->message.headers);
  EXPECT_EQ(a[0].envelope->whole_bytes(), inline_one->whole_bytes());
  auto b = LoadAll(2);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_NE(b[0].envelope, nullptr);
  EXPECT_EQ(b[0].envelope->message.amqp_properties, AmqpPropertyBytes(2));
  auto later = LoadDelayedAll(3);
  ASSERT_EQ(later.size(), 1u);
  ASSERT_NE(later[0].envelope, nullptr);
  EXPECT_EQ(later[0].envelope->message.amqp_properties, AmqpPropertyBytes(3));

  // A redelivery rewrites the inline entry from the message in RAM: the bytes stay.
  StoreBatch redelivered;
  redelivered.Add(StoreBatch::PutEntry{EntryRef{1, 1, 10, 2, kEntryInline, a[0].envelope}});
  ASSERT_TRUE(CommitSync(std::move(redelivered)).ok());
  Reopen();
  a = LoadAll(1);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_NE(a[0].envelope, nullptr);
  EXPECT_EQ(a[0].receive_count, 2u);
  EXPECT_EQ(a[0].envelope->message.amqp_properties, AmqpPropertyBytes(1));
}

TEST_F(RocksDbStoreTest, InternalExchangeWithArgumentsSurvivesReopen) {
  Open();
  ExchangeSpec internal;
  internal.name = "audit";
  internal.type = ExchangeType::kFanout;
  internal.alternate_exchange = "lost";
  internal.internal = true;
  internal.arguments["x-custom"] = std::string("value");
  internal.arguments["n"] = int64_t{-7};
  internal.arguments["raw"] = Bytes{std::string("\0\xff", 2)};
  internal.arguments["on"] = true;
  internal.arguments["ratio"] = 0.25;
  ExchangeSpec plain;
  plain.name = "plain";
  StoreBatch batch;
  batch.Add(StoreBatch::PutExchange{internal});
  batch.Add(StoreBatch::PutExchange{plain});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  Reopen();
  ASSERT_EQ(state_.exchanges.size(), 2u);
  std::map<std::string, ExchangeSpec> by_name;
  for (const ExchangeSpec& spec : state_.exchanges) by_name[spec.name] = spec;
  ASSERT_TRUE(by_name.contains("audit"));
  ASSERT_TRUE(by_name.contains("plain"));
  const ExchangeSpec& got = by_name["audit"];
  EXPECT_EQ(got.type, ExchangeType::kFanout);
  EXPECT_EQ(got.alternate_exchange, "lost");
  EXPECT_TRUE(got.internal);
  EXPECT_EQ(got.arguments, internal.arguments);
  EXPECT_FALSE(by_name["plain"].internal);
  EXPECT_TRUE(by_name["plain"].arguments.empty());
}

// A format-5 directory (no record has the AMQP fields) opens as it is, and is marked with the
// current format.
TEST_F(RocksDbStoreTest, FormatFiveIsUpgradedInPlace) {
  Open();
  ExchangeSpec ex;
  ex.name = "events";
  ex.type = ExchangeType::kTopic;
  StoreBatch batch;
  batch.Add(StoreBatch::PutExchange{ex});
  batch.Add(StoreBatch::PutQueue{Queue("a"), 1});
  batch.Add(StoreBatch::PutQueue{Queue("b"), 2});
  batch.Add(
      StoreBatch::PutEntry{EntryRef{1, 1, 1, 0, kEntryInline, MakeEnvelope(1, "from format 5")}});
  batch.Add(StoreBatch::PutMessage{MakeEnvelope(2, "shared in format 5"), 2});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 2, 2, 0, kEntryShared}});
  batch.Add(StoreBatch::PutEntry{EntryRef{2, 1, 2, 0, kEntryShared}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  store_.reset();
  testing::WithRawDb(dir_.path(), [](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), meta, "F", "5").ok());
  });
  ASSERT_EQ(testing::RawFormatVersion(dir_.path()), "5");

  Open();
  ASSERT_EQ(state_.exchanges.size(), 1u);
  EXPECT_EQ(state_.exchanges[0].name, "events");
  EXPECT_FALSE(state_.exchanges[0].internal);
  EXPECT_TRUE(state_.exchanges[0].arguments.empty());
  auto a = LoadAll(1);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_NE(a[0].envelope, nullptr);
  ASSERT_NE(a[1].envelope, nullptr);
  EXPECT_EQ(a[0].envelope->message.body, "from format 5");
  EXPECT_EQ(a[1].envelope->message.body, "shared in format 5");
  EXPECT_TRUE(a[0].envelope->message.amqp_properties.empty());
  auto b = LoadAll(2);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_NE(b[0].envelope, nullptr);
  EXPECT_EQ(b[0].envelope->message.body, "shared in format 5");
  store_.reset();
  EXPECT_EQ(testing::RawFormatVersion(dir_.path()), std::to_string(kFormatVersion));
  Open();  // and opens again
  EXPECT_EQ(LoadAll(1).size(), 2u);
}

// A format-6 directory has no "dedup" family: RocksDB makes it, and the format becomes current.
TEST_F(RocksDbStoreTest, FormatSixWithoutDedupFamilyIsUpgraded) {
  testing::MakeOlderStore(dir_.path(), {"default", kColumnMessages, kColumnEntries, kColumnDelayed},
                          "6");
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  auto outcome = testing::AddDedup(&batch, StoreBatch::PutDedup{1, "k", 5, INT64_MAX, 0});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  EXPECT_EQ(outcome->duplicate_of, 0u);
  store_.reset();
  EXPECT_EQ(testing::RawFormatVersion(dir_.path()), std::to_string(kFormatVersion));
  Open();
  StoreBatch again;
  auto repeated = testing::AddDedup(&again, StoreBatch::PutDedup{1, "k", 6, INT64_MAX, 0});
  ASSERT_TRUE(CommitSync(std::move(again)).ok());
  EXPECT_EQ(repeated->duplicate_of, 5u);
}

// The dedup family used leveled compaction before it used universal. A store whose records
// the leveled way left in the bottom level and in level 0 opens as it is, finds them all, and
// its family is universal from then on (RocksDB's OPTIONS file says so).
TEST_F(RocksDbStoreTest, DedupFamilyCompactedTheLeveledWayOpensUniversal) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  auto first = testing::AddDedup(&batch, StoreBatch::PutDedup{1, "old", 5, INT64_MAX, 0});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  ASSERT_EQ(first->duplicate_of, 0u);
  store_.reset();
  testing::WithRawDbFamilies(dir_.path(), [&](rocksdb::DB* db, const auto& handles) {
    rocksdb::ColumnFamilyHandle* dedup = testing::FamilyNamed(handles, kColumnDedup);
    ASSERT_NE(dedup, nullptr);
    rocksdb::CompactRangeOptions to_bottom;
    to_bottom.change_level = true;
    to_bottom.target_level = 6;
    ASSERT_TRUE(db->CompactRange(to_bottom, dedup, nullptr, nullptr).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), dedup, DedupKey(1, "new"),
                        EncodeDedupValue({7, INT64_MAX}))
                    .ok());
  });
  testing::WithRawDbFamilies(dir_.path(), [&](rocksdb::DB* db, const auto& handles) {
    rocksdb::ColumnFamilyHandle* dedup = testing::FamilyNamed(handles, kColumnDedup);
    ASSERT_NE(dedup, nullptr);
    rocksdb::ColumnFamilyMetaData layout;
    db->GetColumnFamilyMetaData(dedup, &layout);
    ASSERT_EQ(layout.levels.size(), 7u);
    EXPECT_EQ(layout.levels[0].files.size(), 1u);
    EXPECT_EQ(layout.levels[6].files.size(), 1u);
  });

  Open();
  StoreBatch again;
  auto old_key = testing::AddDedup(&again, StoreBatch::PutDedup{1, "old", 8, INT64_MAX, 0});
  auto new_key = testing::AddDedup(&again, StoreBatch::PutDedup{1, "new", 9, INT64_MAX, 0});
  auto other = testing::AddDedup(&again, StoreBatch::PutDedup{1, "other", 10, INT64_MAX, 0});
  ASSERT_TRUE(CommitSync(std::move(again)).ok());
  EXPECT_EQ(old_key->duplicate_of, 5u);
  EXPECT_EQ(new_key->duplicate_of, 7u);
  EXPECT_EQ(other->duplicate_of, 0u);
  store_.reset();

  rocksdb::ConfigOptions config;
  config.ignore_unknown_options = true;
  config.ignore_unsupported_options = true;
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  ASSERT_TRUE(rocksdb::LoadLatestOptions(config, dir_.path(), &db_options, &families).ok());
  auto family = std::find_if(families.begin(), families.end(),
                             [](const auto& f) { return f.name == kColumnDedup; });
  ASSERT_NE(family, families.end());
  EXPECT_EQ(family->options.compaction_style, rocksdb::kCompactionStyleUniversal);
}

// Format 12: a dedup key has its length before it. A format-11 directory's records move to
// their new keys at start (the expired and malformed ones are dropped, not moved) and stay
// duplicates, also when an upgrade that did not finish had copied some of them already.
TEST_F(RocksDbStoreTest, FormatElevenDedupRecordsMoveToTheirKeys) {
  auto legacy_key = [](uint64_t queue_id, const std::string& key) {
    std::string out;
    AppendBigEndian64(&out, queue_id);
    return out + key;
  };
  const int64_t now = testing::NowMs();
  const std::string odd_id = std::string("\x03") + "abc";
  OlderDedupStore("11", [&](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* dedup) {
    const rocksdb::WriteOptions write;
    ASSERT_TRUE(
        db->Put(write, dedup, legacy_key(1, "live"), EncodeDedupValue({5, INT64_MAX})).ok());
    ASSERT_TRUE(db->Put(write, dedup, legacy_key(1, "9"), EncodeDedupValue({6, INT64_MAX})).ok());
    ASSERT_TRUE(db->Put(write, dedup, legacy_key(1, "gone"), EncodeDedupValue({7, now - 1})).ok());
    // A key whose first byte would be a length: the old layout never confuses it.
    ASSERT_TRUE(
        db->Put(write, dedup, legacy_key(1, odd_id), EncodeDedupValue({8, INT64_MAX})).ok());
    // Damage: too short for a queue id and a key. Dropped, and the store opens.
    ASSERT_TRUE(db->Put(write, dedup, std::string(5, '\0'), EncodeDedupValue({9, INT64_MAX})).ok());
    // What an interrupted upgrade leaves: "F" still 11, some records copied already.
    ASSERT_TRUE(db->Put(write, dedup, DedupKey(1, "live"), EncodeDedupValue({5, INT64_MAX})).ok());
  });

  Open();
  store_.reset();
  EXPECT_EQ(testing::RawFormatVersion(dir_.path()), std::to_string(kFormatVersion));
  std::vector<std::string> keys;
  testing::WithRawDbFamilies(dir_.path(), [&](rocksdb::DB* db, const auto& handles) {
    rocksdb::ColumnFamilyHandle* dedup = testing::FamilyNamed(handles, kColumnDedup);
    ASSERT_NE(dedup, nullptr);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), dedup));
    for (it->SeekToFirst(); it->Valid(); it->Next()) keys.push_back(it->key().ToString());
  });
  // In byte order: "9" (1 byte) before odd_id (4) before "live" (4; 'l' after 0x03).
  EXPECT_EQ(keys,
            (std::vector<std::string>{DedupKey(1, "9"), DedupKey(1, odd_id), DedupKey(1, "live")}));

  Open();
  StoreBatch again;
  auto live = testing::AddDedup(&again, StoreBatch::PutDedup{1, "live", 20, INT64_MAX, now});
  auto nine = testing::AddDedup(&again, StoreBatch::PutDedup{1, "9", 21, INT64_MAX, now});
  auto gone = testing::AddDedup(&again, StoreBatch::PutDedup{1, "gone", 22, INT64_MAX, now});
  auto odd = testing::AddDedup(&again, StoreBatch::PutDedup{1, odd_id, 23, INT64_MAX, now});
  auto abc = testing::AddDedup(&again, StoreBatch::PutDedup{1, "abc", 25, INT64_MAX, now});
  ASSERT_TRUE(CommitSync(std::move(again)).ok());
  EXPECT_EQ(live->duplicate_of, 5u);
  EXPECT_EQ(nine->duplicate_of, 6u);
  EXPECT_EQ(gone->duplicate_of, 0u) << "its window had passed";
  EXPECT_EQ(odd->duplicate_of, 8u);
  EXPECT_EQ(abc->duplicate_of, 0u);
}

// Format 13: runs of dedup records ('r' keys). A format-12 directory has none; it is upgraded
// by rewriting "F", and its records stay duplicates.
TEST_F(RocksDbStoreTest, FormatTwelveIsUpgradedAndItsRecordsStayDuplicates) {
  OlderDedupStore("12", [&](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* dedup) {
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), dedup,
                          DedupKey(1, "id-" + std::to_string(10 + i)),
                          EncodeDedupValue({uint64_t(100 + i), INT64_MAX}))
                      .ok());
    }
  });
  OpenUpgraded();
  EXPECT_EQ(DuplicatesOf({{"id-15", 200}, {"id-29", 201}, {"id-30", 202}}),
            (std::vector<uint64_t>{105, 119, 0}));
}

// Format 14: runs written compactly. A format-13 directory's runs are read as they are (their
// keys stay duplicates, and the highest is still the highest); runs written after the upgrade
// are compact, and both kinds are found after a restart.
TEST_F(RocksDbStoreTest, FormatThirteenIsUpgradedAndItsRunsStayDuplicates) {
  OlderDedupStore("13", [&](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* dedup) {
    std::vector<std::pair<std::string, DedupValue>> records;
    for (int i = 0; i < 20; ++i) {
      records.push_back({"id-" + std::to_string(10 + i), {uint64_t(100 + i), INT64_MAX}});
    }
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), dedup, DedupRunKey(1, "id-29"),
                        testing::Format13Run(records))
                    .ok());
  });
  OpenUpgraded();
  // id-15 and id-29 are in the old run; ten keys above it make a run of their own.
  std::vector<std::pair<std::string, uint64_t>> keys = {{"id-15", 200}, {"id-29", 201}};
  for (int i = 30; i < 40; ++i) keys.emplace_back("id-" + std::to_string(i), uint64_t(300 + i));
  std::vector<uint64_t> expected(keys.size(), 0);
  expected[0] = 105;
  expected[1] = 119;
  EXPECT_EQ(DuplicatesOf(keys), expected);
  store_.reset();

  std::map<std::string, std::string> runs;  // raw: the old run and the new one
  testing::WithRawDbFamilies(dir_.path(), [&](rocksdb::DB* db, const auto& handles) {
    rocksdb::ColumnFamilyHandle* dedup = testing::FamilyNamed(handles, kColumnDedup);
    ASSERT_NE(dedup, nullptr);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), dedup));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      runs[it->key().ToString()] = it->value().ToString();
    }
  });
  ASSERT_EQ(runs.size(), 2u);
  ASSERT_TRUE(runs.contains(DedupRunKey(1, "id-39")));
  const std::string& compact = runs[DedupRunKey(1, "id-39")];
  EXPECT_EQ(compact[0], '\0') << "written the format-14 way";
  // After the leading 0, the first record spells its key and expiry out (19 bytes); each next
  // one shares "id-3", adds a digit and moves its id by one: five bytes. Format 13: 220.
  EXPECT_EQ(compact.size(), 1 + 19 + 9 * 5u);

  Open();
  EXPECT_EQ(DuplicatesOf({{"id-10", 400}, {"id-35", 401}, {"id-40", 402}}),
            (std::vector<uint64_t>{100, 335, 0}));
}

TEST_F(RocksDbStoreTest, FormatFifteenIsRefusedAsNewer) {
  Open();
  store_.reset();
  testing::WithRawDb(dir_.path(), [](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), meta, "F", "15").ok());
  });
  store_ = OpenStore(dir_.path(), &mailbox_);
  ASSERT_NE(store_, nullptr);
  auto state = store_->Recover();
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), StatusCode::kStoreUnavailable);
  const std::string message(state.status().message());
  EXPECT_NE(message.find("has storage format 15; this wharfd reads format 14"), std::string::npos)
      << message;
  EXPECT_NE(message.find("written by a newer wharfd"), std::string::npos) << message;
  store_.reset();
  EXPECT_EQ(testing::RawFormatVersion(dir_.path()), "15") << "a refused directory is left as it is";
}

// Policies (format 10): stored per vhost, replaced by name, removed alone or with nothing else,
// and read back with their definitions typed as written.
TEST_F(RocksDbStoreTest, PoliciesAreStoredPerVhost) {
  Open();
  PolicyInfo limit{"/", "limit", "^q\\.", "queues", 5, {{"max-length", int64_t{10}}}};
  PolicyInfo other = limit;
  other.vhost = "shop";
  other.definition = {{"dead-letter-exchange", std::string("dlx")},
                      {"ha-mode", std::string("all")}};
  PolicyInfo gone{"/", "gone", ".*", "all", 0, {{"message-ttl", int64_t{1000}}}};
  StoreBatch batch;
  batch.Add(StoreBatch::PutVhost{StoredVhost{"shop", "", {}}});
  batch.Add(StoreBatch::PutPolicy{limit});
  batch.Add(StoreBatch::PutPolicy{other});
  batch.Add(StoreBatch::PutPolicy{gone});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  limit.priority = 7;  // replaced by name
  StoreBatch change;
  change.Add(StoreBatch::PutPolicy{limit});
  change.Add(StoreBatch::RemovePolicy{"/", "gone"});
  ASSERT_TRUE(CommitSync(std::move(change)).ok());
  store_.reset();
  Open();
  ASSERT_EQ(state_.policies.size(), 2u);
  // Keys sort by vhost, then name.
  EXPECT_EQ(state_.policies[0], limit);
  EXPECT_EQ(state_.policies[1], other);
}

// Vhosts (format 9): the same names in two vhosts are two records, each vhost's bindings are its
// own, and the removal of one vhost's queue or exchange leaves the other's alone.
TEST_F(RocksDbStoreTest, VhostsKeepTheirOwnTopology) {
  Open();
  auto in = [](QueueSpec spec, const std::string& vhost) {
    spec.vhost = vhost;
    return spec;
  };
  ExchangeSpec root_events;
  root_events.name = "events";
  ExchangeSpec other_events = root_events;
  other_events.vhost = "shop";
  BindingSpec root_binding{"q", "events", "k", {}};
  BindingSpec other_binding = root_binding;
  other_binding.vhost = "shop";
  StoreBatch batch;
  batch.Add(StoreBatch::PutVhost{StoredVhost{"shop", "the shop", VhostLimits{5, 10}}});
  batch.Add(StoreBatch::PutExchange{root_events});
  batch.Add(StoreBatch::PutExchange{other_events});
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  batch.Add(StoreBatch::PutQueue{in(Queue("q"), "shop"), 2});
  batch.Add(StoreBatch::PutBinding{root_binding});
  batch.Add(StoreBatch::PutBinding{other_binding});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  store_.reset();
  Open();
  ASSERT_EQ(state_.vhosts.size(), 1u);
  EXPECT_EQ(state_.vhosts[0].name, "shop");
  EXPECT_EQ(state_.vhosts[0].description, "the shop");
  EXPECT_EQ(state_.vhosts[0].limits, (VhostLimits{5, 10}));
  ASSERT_EQ(state_.queues.size(), 2u);
  std::set<std::pair<std::string, uint64_t>> queues;
  for (const auto& q : state_.queues) queues.emplace(q.spec.vhost, q.queue_id);
  EXPECT_EQ(queues, (std::set<std::pair<std::string, uint64_t>>{{"/", 1}, {"shop", 2}}));
  ASSERT_EQ(state_.exchanges.size(), 2u);
  ASSERT_EQ(state_.bindings.size(), 2u);

  // The shop's queue and exchange go; "/"'s stay, with their binding.
  StoreBatch removal;
  removal.Add(StoreBatch::RemoveQueue{"q", 2, "shop"});
  removal.Add(StoreBatch::RemoveExchange{"events", "shop"});
  removal.Add(StoreBatch::RemoveVhost{"shop"});
  ASSERT_TRUE(CommitSync(std::move(removal)).ok());
  store_.reset();
  Open();
  EXPECT_TRUE(state_.vhosts.empty());
  ASSERT_EQ(state_.queues.size(), 1u);
  EXPECT_EQ(state_.queues[0].spec.vhost, "/");
  ASSERT_EQ(state_.exchanges.size(), 1u);
  EXPECT_EQ(state_.exchanges[0].vhost, "/");
  ASSERT_EQ(state_.bindings.size(), 1u);
  EXPECT_EQ(state_.bindings[0].vhost, "/");
  EXPECT_EQ(state_.bindings[0].queue, "q");
}

// A format-8 directory (before vhosts) opens with everything in "/", rewritten not at all: the
// keys and records of "/" are those of format 8.
TEST_F(RocksDbStoreTest, FormatEightIsUpgradedIntoTheDefaultVhost) {
  Open();
  ExchangeSpec events;
  events.name = "events";
  StoreBatch batch;
  batch.Add(StoreBatch::PutExchange{events});
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  batch.Add(StoreBatch::PutBinding{BindingSpec{"q", "events", "k", {}}});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 7, 0, kEntryInline, MakeEnvelope(7, "old")}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  store_.reset();
  testing::WithRawDb(dir_.path(), [](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), meta, "F", "8").ok());
    std::string value;
    // Exactly format 8's keys.
    EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), meta, "qq", &value).ok());
    EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), meta, "xevents", &value).ok());
  });
  OpenUpgraded();
  EXPECT_TRUE(state_.vhosts.empty());
  ASSERT_EQ(state_.queues.size(), 1u);
  EXPECT_EQ(state_.queues[0].spec.vhost, "/");
  ASSERT_EQ(state_.exchanges.size(), 1u);
  EXPECT_EQ(state_.exchanges[0].vhost, "/");
  ASSERT_EQ(state_.bindings.size(), 1u);
  EXPECT_EQ(state_.bindings[0].vhost, "/");
  auto loaded = LoadAll(1);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].envelope->message.body, "old");
}

// Format 10 adds policy records only: a format-9 directory reads as it is, with no policies.
TEST_F(RocksDbStoreTest, FormatNineIsUpgradedWithoutPolicies) {
  Open();
  StoreBatch batch;
  batch.Add(StoreBatch::PutVhost{StoredVhost{"shop", "", {}}});
  batch.Add(StoreBatch::PutQueue{Queue("q"), 1});
  batch.Add(StoreBatch::PutEntry{EntryRef{1, 1, 7, 0, kEntryInline, MakeEnvelope(7, "old")}});
  ASSERT_TRUE(CommitSync(std::move(batch)).ok());
  store_.reset();
  testing::WithRawDb(dir_.path(), [](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), meta, "F", "9").ok());
  });
  OpenUpgraded();
  EXPECT_TRUE(state_.policies.empty());
  ASSERT_EQ(state_.vhosts.size(), 1u);
  ASSERT_EQ(state_.queues.size(), 1u);
  auto loaded = LoadAll(1);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].envelope->message.body, "old");
}

TEST(StoreKeysTest, DelayedKeysSortByDueTimeThenId) {
  EXPECT_LT(DelayedKey(1, -1, 9), DelayedKey(1, 0, 1));
  EXPECT_LT(DelayedKey(1, 0, UINT64_MAX), DelayedKey(1, 1, 0));
  EXPECT_LT(DelayedKey(1, INT64_MAX, UINT64_MAX), DelayedKey(2, INT64_MIN, 0));
  EXPECT_LT(DelayedIndexKey(1, UINT64_MAX), DelayedKey(1, INT64_MIN, 0));
  auto parts = ParseDelayedKey(DelayedKey(3, -123, 77));
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->queue_id, 3u);
  EXPECT_EQ(parts->due_ms, -123);
  EXPECT_EQ(parts->message_id, 77u);
  EXPECT_FALSE(ParseDelayedKey(DelayedIndexKey(3, 77)).has_value());
}

TEST(StoreKeysTest, EntryKeysSortBySequence) {
  EXPECT_LT(EntryKey(1, 255), EntryKey(1, 256));
  EXPECT_LT(EntryKey(1, UINT64_MAX), EntryKey(2, 0));
  auto parts = ParseEntryKey(EntryKey(7, 1ull << 40));
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->queue_id, 7u);
  EXPECT_EQ(parts->seq, 1ull << 40);
  auto value = DecodeEntryValue(EncodeEntryValue({123, 4, kEntryShared}));
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(value->message_id, 123u);
  EXPECT_EQ(value->receive_count, 4u);
  EXPECT_EQ(value->flags, kEntryShared);
  EXPECT_FALSE(DecodeEntryValue("short").has_value());
}

}  // namespace
}  // namespace wharf::store
