// Publish deduplication windows (x-deduplication-window; docs/lifecycle.md, "Deduplication")
// in the broker with the real RocksDB store: duplicates are dropped and confirmed as such, the
// queue's order holds behind a publish the store is still deciding, and the window survives a
// crash, expires, and works with paging, delays, transient messages and purges.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unit/broker/broker_store_fixture.h"

namespace wharf::broker {
namespace {

class BrokerDedupTest : public BrokerStoreTest {
 protected:
  static constexpr int64_t kWindowMs = 60'000;

  void DeclareDeduplicated(const std::string& name, Headers more = {}) {
    more["x-deduplication-window"] = kWindowMs;
    DeclareQueue(name, true, std::move(more));
  }

  // Publishes `body` to `queue` with deduplication id `key` ("" = none) and confirm request
  // `request_id`.
  Result<PublishOutcome> PublishKeyed(const std::string& queue, const std::string& body,
                                      const std::string& key, uint64_t request_id,
                                      bool persistent = true, PublishTiming timing = {}) {
    Message m;
    m.body = body;
    m.persistent = persistent;
    if (!key.empty()) m.headers[std::string(kDedupHeader)] = key;
    return broker_->Publish(kS1, "", queue, std::move(m), request_id, timing);
  }

  QueueMetrics QueueMetricsOf(const std::string& name) {
    for (auto& q : broker_->Metrics().queues) {
      if (q.info.name == name) return q;
    }
    ADD_FAILURE() << "no queue " << name;
    return {};
  }

  // The confirm of `request_id` (after a Drain).
  RecordingPeer::Confirm ConfirmOf(uint64_t request_id) {
    for (const auto& c : peer_->confirms) {
      if (c.request_id == request_id) return c;
    }
    ADD_FAILURE() << "no confirm for request " << request_id;
    return {};
  }
};

TEST_F(BrokerDedupTest, ADuplicateIsDroppedAndItsConfirmNamesTheMessageItDuplicates) {
  DeclareDeduplicated("q");
  auto first = PublishKeyed("q", "first", "order-1", 1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->deferred);
  Drain();
  ASSERT_TRUE(PublishKeyed("q", "again", "order-1", 2).ok());
  ASSERT_TRUE(PublishKeyed("q", "other", "order-2", 3).ok());
  ASSERT_TRUE(PublishKeyed("q", "no key", "", 4).ok());
  Drain();
  EXPECT_TRUE(ConfirmOf(1).status.ok());
  EXPECT_EQ(ConfirmOf(1).result.duplicate_of, 0u);
  EXPECT_TRUE(ConfirmOf(2).status.ok());
  EXPECT_EQ(ConfirmOf(2).result.duplicate_of, first->result.message_id);
  EXPECT_EQ(ConfirmOf(3).result.duplicate_of, 0u);
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"first", "other", "no key"}));
  EXPECT_EQ(QueueMetricsOf("q").duplicates_total, 1u);
}

TEST_F(BrokerDedupTest, OrderHoldsBehindPublishesTheStoreIsStillDeciding) {
  DeclareDeduplicated("q");
  // All in one commit: the unkeyed ones wait behind the keyed ones ahead of them.
  ASSERT_TRUE(PublishKeyed("q", "1", "a", 1).ok());
  ASSERT_TRUE(PublishKeyed("q", "2", "", 2).ok());
  ASSERT_TRUE(PublishKeyed("q", "dup of 1", "a", 3).ok());
  ASSERT_TRUE(PublishKeyed("q", "3", "b", 4).ok());
  ASSERT_TRUE(PublishKeyed("q", "4", "", 5).ok());
  EXPECT_EQ(QueueMetricsOf("q").held, 5u);
  Drain();
  EXPECT_EQ(QueueMetricsOf("q").held, 0u);
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"1", "2", "3", "4"}));
}

// One commit holds publishes into two queues in turn, then into a queue deleted and declared
// again under its name: each held publish is resolved in its own queue, none in another.
TEST_F(BrokerDedupTest, HeldPublishesOfSeveralQueuesInOneCommitEachResolveInTheirOwn) {
  DeclareDeduplicated("a");
  DeclareDeduplicated("b");
  DeclareDeduplicated("q");
  ASSERT_TRUE(PublishKeyed("a", "a1", "k1", 1).ok());
  ASSERT_TRUE(PublishKeyed("b", "b1", "k1", 2).ok());
  ASSERT_TRUE(PublishKeyed("a", "a2", "k2", 3).ok());
  ASSERT_TRUE(PublishKeyed("a", "a1 again", "k1", 4).ok());
  ASSERT_TRUE(PublishKeyed("b", "b2", "k2", 5).ok());
  ASSERT_TRUE(PublishKeyed("q", "old q", "k1", 6).ok());
  ASSERT_TRUE(broker_->DeleteQueue(kS1, "q", false, false).ok());
  DeclareDeduplicated("q");
  ASSERT_TRUE(PublishKeyed("q", "new q", "k1", 7).ok());
  ASSERT_TRUE(PublishKeyed("q", "new q again", "k1", 8).ok());
  EXPECT_EQ(QueueMetricsOf("q").held, 2u);
  Drain();
  EXPECT_EQ(ConfirmOf(4).result.duplicate_of, ConfirmOf(1).result.message_id);
  EXPECT_EQ(ConfirmOf(7).result.duplicate_of, 0u);  // the old queue's key went with it
  EXPECT_EQ(ConfirmOf(8).result.duplicate_of, ConfirmOf(7).result.message_id);
  for (uint64_t request : {1, 2, 3, 5}) EXPECT_EQ(ConfirmOf(request).result.duplicate_of, 0u);
  EXPECT_EQ(Bodies(Take("a")), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_EQ(Bodies(Take("b")), (std::vector<std::string>{"b1", "b2"}));
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"new q"}));
  EXPECT_EQ(QueueMetricsOf("q").held, 0u);
  EXPECT_EQ(QueueMetricsOf("a").duplicates_total, 1u);
  EXPECT_EQ(QueueMetricsOf("q").duplicates_total, 1u);
}

TEST_F(BrokerDedupTest, AKeyConfirmedBeforeACrashIsStillADuplicateAfterIt) {
  DeclareDeduplicated("q");
  auto first = PublishKeyed("q", "first", "k", 1);
  ASSERT_TRUE(first.ok());
  Drain();
  ASSERT_TRUE(ConfirmOf(1).status.ok());
  Restart();
  ASSERT_TRUE(PublishKeyed("q", "retry", "k", 2).ok());
  Drain();
  EXPECT_EQ(ConfirmOf(2).result.duplicate_of, first->result.message_id);
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"first"}));
}

TEST_F(BrokerDedupTest, TheWindowEndsAndTheKeyIsTakenAgain) {
  DeclareDeduplicated("q");
  ASSERT_TRUE(PublishKeyed("q", "first", "k", 1).ok());
  Drain();
  clock_.StepWall(std::chrono::milliseconds(kWindowMs - 1));
  ASSERT_TRUE(PublishKeyed("q", "inside", "k", 2).ok());
  Drain();
  EXPECT_NE(ConfirmOf(2).result.duplicate_of, 0u);
  clock_.StepWall(std::chrono::milliseconds(2));
  ASSERT_TRUE(PublishKeyed("q", "after", "k", 3).ok());
  Drain();
  EXPECT_EQ(ConfirmOf(3).result.duplicate_of, 0u);
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"first", "after"}));
}

TEST_F(BrokerDedupTest, TransientMessagesAndBodyHashesAreDeduplicatedToo) {
  DeclareDeduplicated("bodies", {{"x-deduplication-source", std::string("body")}});
  auto first = PublishKeyed("bodies", "same", "", 1, /*persistent=*/false);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->deferred);  // its key is durable before it is confirmed
  ASSERT_TRUE(PublishKeyed("bodies", "same", "", 2, false).ok());
  ASSERT_TRUE(PublishKeyed("bodies", "different", "", 3, false).ok());
  Drain();
  EXPECT_EQ(ConfirmOf(2).result.duplicate_of, first->result.message_id);
  EXPECT_EQ(Bodies(Take("bodies")), (std::vector<std::string>{"same", "different"}));
}

TEST_F(BrokerDedupTest, ThePublishIdWinsOverTheHeaderButNotOverABodyHashQueue) {
  DeclareDeduplicated("ids");
  DeclareDeduplicated("bodies", {{"x-deduplication-source", std::string("body")}});
  ExchangeSpec exchange;
  exchange.name = "both";
  exchange.type = ExchangeType::kFanout;
  ASSERT_TRUE(broker_->DeclareExchange(kS1, exchange).ok());
  for (const char* queue : {"ids", "bodies"}) {
    BindingSpec binding;
    binding.queue = queue;
    binding.exchange = "both";
    ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  }
  auto publish = [&](const std::string& body, const std::string& header, std::string_view id,
                     uint64_t request_id) {
    Message m;
    m.body = body;
    m.persistent = true;
    if (!header.empty()) m.headers[std::string(kDedupHeader)] = header;
    return broker_->Publish(kS1, "both", "", std::move(m), request_id, {}, id);
  };
  // "ids" records id-1, not the header's h-1; "bodies" records "a"'s hash.
  auto first = publish("a", "h-1", "id-1", 1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  // id-1 in the header is the same key: a duplicate in "ids"; "bodies" takes "b".
  ASSERT_TRUE(publish("b", "id-1", "", 2).ok());
  // h-1 is new to "ids", which takes "c", as "bodies" does.
  ASSERT_TRUE(publish("c", "", "h-1", 3).ok());
  // A new id: "ids" takes it; "a" is a duplicate in "bodies", whatever the id.
  ASSERT_TRUE(publish("a", "", "id-2", 4).ok());
  Drain();
  EXPECT_EQ(ConfirmOf(1).result.duplicate_of, 0u);
  EXPECT_EQ(ConfirmOf(2).result.duplicate_of, first->result.message_id);
  EXPECT_EQ(ConfirmOf(3).result.duplicate_of, 0u);
  EXPECT_EQ(ConfirmOf(4).result.duplicate_of, first->result.message_id);
  EXPECT_EQ(Bodies(Take("ids")), (std::vector<std::string>{"a", "c", "a"}));
  EXPECT_EQ(Bodies(Take("bodies")), (std::vector<std::string>{"a", "b", "c"}));
  // Too long: refused by name, window or not.
  auto bad = publish("d", "", std::string(129, 'k'), 5);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("deduplication_id"), std::string_view::npos);
  EXPECT_EQ(
      broker_->Publish(kS1, "", "ids", Message{}, 6, {}, std::string(129, 'k')).status().code(),
      StatusCode::kInvalidArgument);
}

TEST_F(BrokerDedupTest, PagedQueuesKeepTheirOrderAndDropDuplicates) {
  BrokerOptions options;
  options.page_limits.max_messages = 2;
  Restart(options);
  DeclareDeduplicated("q");
  std::vector<std::string> expected;
  for (int i = 0; i < 20; ++i) {
    const std::string key = "k" + std::to_string(i % 10);  // the second ten are duplicates
    ASSERT_TRUE(PublishKeyed("q", "m" + std::to_string(i), key, 100 + i).ok());
    if (i < 10) expected.push_back("m" + std::to_string(i));
    if (i % 3 == 0) Drain();
  }
  Drain();
  EXPECT_EQ(TakeAndAck("q", 3, 100), expected);
}

// A publish to be paged is counted at once, not held (Queue::PageUndecided): a duplicate
// leaves the count when its commit answers, whatever loads are in flight meanwhile.
TEST_F(BrokerDedupTest, PagedPublishesAreCountedAtOnceAndDuplicatesLeaveTheCount) {
  BrokerOptions options;
  options.page_limits.max_messages = 2;
  // Loads of one never reach the end of what is paged while more is, so they never recount
  // it: the count is what the publishes and their answers made it.
  options.load_batch = 1;
  Restart(options);
  DeclareDeduplicated("q");
  ASSERT_TRUE(PublishKeyed("q", "m0", "k0", 1).ok());
  ASSERT_TRUE(PublishKeyed("q", "m1", "k1", 2).ok());
  Drain();
  ASSERT_TRUE(PublishKeyed("q", "m2", "k2", 3).ok());
  ASSERT_TRUE(PublishKeyed("q", "m1 again", "k1", 4).ok());
  ASSERT_TRUE(PublishKeyed("q", "m3", "k3", 5).ok());
  EXPECT_EQ(QueueMetricsOf("q").held, 0u);
  EXPECT_EQ(Info("q").ready, 5u);
  Drain();
  EXPECT_EQ(ConfirmOf(4).result.duplicate_of, ConfirmOf(2).result.message_id);
  EXPECT_EQ(Info("q").ready, 4u);
  EXPECT_EQ(Info("q").published_total, 4u);
  EXPECT_EQ(QueueMetricsOf("q").duplicates_total, 1u);

  // Pulls take what RAM holds and send loads after each flush's commit, while duplicates of
  // paged publishes are still being decided before and past those loads' ends.
  std::vector<std::string> expected{"m0", "m1", "m2", "m3"};
  for (int i = 4; i < 40; ++i) {
    ASSERT_TRUE(PublishKeyed("q", "m" + std::to_string(i), "k" + std::to_string(i), 10 + i).ok());
    expected.push_back("m" + std::to_string(i));
    ASSERT_TRUE(PublishKeyed("q", "dup", "k" + std::to_string(i - 2), 100 + i).ok());
    if (i % 3 == 0) {
      ASSERT_TRUE(broker_->Receive(kS1, 77, "q", 2, 0).ok());
    }
    broker_->Flush();  // neither its commit nor its load is waited for
    if (i % 7 == 0) Drain();
  }
  Drain();
  std::vector<std::string> got;
  for (auto& c : peer_->completions) {
    for (auto& d : c.deliveries) {
      got.push_back(d.envelope->message.body);
      EXPECT_TRUE(broker_->Ack(kS1, d.delivery_tag, false).ok());
    }
  }
  peer_->completions.clear();
  EXPECT_EQ(Info("q").ready, expected.size() - got.size()) << "the count is what is left";
  EXPECT_EQ(QueueMetricsOf("q").duplicates_total, 37u);
  for (const std::string& body : TakeAndAck("q", 3, 100)) got.push_back(body);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(Info("q").ready, 0u);
}

// A purge between the publish and its commit takes the paged duplicate's count with it; the
// answer then leaves the count of what was paged since alone.
TEST_F(BrokerDedupTest, APurgeBeforeAPagedDuplicateIsDecidedLeavesLaterMessagesCounted) {
  BrokerOptions options;
  options.page_limits.max_messages = 1;
  options.load_batch = 1;  // no load before the answer (RAM holds one), none to recount
  Restart(options);
  DeclareDeduplicated("q");
  ASSERT_TRUE(PublishKeyed("q", "m0", "k0", 1).ok());
  ASSERT_TRUE(PublishKeyed("q", "m1", "k1", 2).ok());
  Drain();
  ASSERT_TRUE(PublishKeyed("q", "m1 again", "k1", 3).ok());
  auto purged = broker_->PurgeQueue(kS1, "q");
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 3u);
  ASSERT_TRUE(PublishKeyed("q", "after", "", 4).ok());
  ASSERT_TRUE(PublishKeyed("q", "after, paged", "", 5).ok());
  Drain();
  EXPECT_NE(ConfirmOf(3).result.duplicate_of, 0u);
  EXPECT_EQ(Info("q").ready, 2u);
  EXPECT_EQ(TakeAndAck("q", 1, 10), (std::vector<std::string>{"after", "after, paged"}));
  EXPECT_EQ(Info("q").ready, 0u);
}

TEST_F(BrokerDedupTest, ADuplicateDelayedPublishNeverBecomesDue) {
  DeclareDeduplicated("q");
  PublishTiming later;
  later.delay_ms = 1'000;
  ASSERT_TRUE(PublishKeyed("q", "first", "k", 1, true, later).ok());
  ASSERT_TRUE(PublishKeyed("q", "dup", "k", 2, true, later).ok());
  Drain();
  EXPECT_NE(ConfirmOf(2).result.duplicate_of, 0u);
  Tick(std::chrono::milliseconds(1'500));
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"first"}));
}

// One commit holds delayed and immediate publishes into two queues, in turn (resolved apart,
// docs/benchmarks.md, "Longer runs, and what holding a publish costs"): each in its own queue,
// the duplicates of either kind dropped, the delayed ones due in their time.
TEST_F(BrokerDedupTest, DelayedAndImmediatePublishesHeldInOneCommitEachResolveInTheirQueue) {
  DeclareDeduplicated("a");
  DeclareDeduplicated("b");
  PublishTiming later;
  later.delay_ms = 1'000;
  ASSERT_TRUE(PublishKeyed("a", "a now", "k1", 1).ok());
  ASSERT_TRUE(PublishKeyed("b", "b later", "k1", 2, true, later).ok());
  ASSERT_TRUE(PublishKeyed("a", "a later", "k2", 3, true, later).ok());
  ASSERT_TRUE(PublishKeyed("b", "b now", "k2", 4).ok());
  ASSERT_TRUE(PublishKeyed("a", "a now again", "k1", 5, true, later).ok());
  ASSERT_TRUE(PublishKeyed("b", "b later again", "k1", 6).ok());
  ASSERT_TRUE(PublishKeyed("a", "a later again", "k2", 7).ok());
  EXPECT_EQ(QueueMetricsOf("a").held, 2u);  // the immediate ones
  EXPECT_EQ(QueueMetricsOf("b").held, 2u);
  Drain();
  EXPECT_EQ(ConfirmOf(5).result.duplicate_of, ConfirmOf(1).result.message_id);
  EXPECT_EQ(ConfirmOf(6).result.duplicate_of, ConfirmOf(2).result.message_id);
  EXPECT_EQ(ConfirmOf(7).result.duplicate_of, ConfirmOf(3).result.message_id);
  for (uint64_t request : {1, 2, 3, 4}) EXPECT_EQ(ConfirmOf(request).result.duplicate_of, 0u);
  EXPECT_EQ(Bodies(Take("a")), (std::vector<std::string>{"a now"}));
  EXPECT_EQ(Bodies(Take("b")), (std::vector<std::string>{"b now"}));
  Tick(std::chrono::milliseconds(1'500));
  EXPECT_EQ(Bodies(Take("a")), (std::vector<std::string>{"a later"}));
  EXPECT_EQ(Bodies(Take("b")), (std::vector<std::string>{"b later"}));
  EXPECT_EQ(QueueMetricsOf("a").duplicates_total, 2u);
  EXPECT_EQ(QueueMetricsOf("b").duplicates_total, 1u);
}

TEST_F(BrokerDedupTest, APurgeTakesHeldPublishesAndTheyStayPurgedAfterACrash) {
  DeclareDeduplicated("q");
  ASSERT_TRUE(PublishKeyed("q", "held", "k", 1).ok());
  ASSERT_TRUE(PublishKeyed("q", "behind", "", 2).ok());
  auto purged = broker_->PurgeQueue(kS1, "q");
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 2u);
  Drain();
  EXPECT_TRUE(Take("q").empty());
  Restart();
  EXPECT_TRUE(Take("q").empty());
  // The key was accepted before the purge: still in the window.
  ASSERT_TRUE(PublishKeyed("q", "again", "k", 3).ok());
  Drain();
  EXPECT_NE(ConfirmOf(3).result.duplicate_of, 0u);
}

TEST_F(BrokerDedupTest, BadArgumentsAndKeysAreRefusedByName) {
  QueueSpec spec;
  spec.name = "transient";
  spec.durable = false;
  spec.arguments["x-deduplication-window"] = kWindowMs;
  auto transient = broker_->DeclareQueue(kS1, spec);
  ASSERT_FALSE(transient.ok());
  EXPECT_NE(transient.status().message().find("durable"), std::string_view::npos);
  spec.name = "q";
  spec.durable = true;
  spec.arguments["x-deduplication-window"] = int64_t{8} * 86'400'000;
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  spec.arguments["x-deduplication-window"] = kWindowMs;
  spec.arguments["x-deduplication-source"] = std::string("hash");
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);

  DeclareDeduplicated("q");
  Message m;
  m.body = "x";
  m.headers[std::string(kDedupHeader)] = 1.5;
  auto bad = broker_->Publish(kS1, "", "q", m, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  m.headers[std::string(kDedupHeader)] = std::string(129, 'k');
  EXPECT_EQ(broker_->Publish(kS1, "", "q", m, 2).status().code(), StatusCode::kInvalidArgument);
  m.headers[std::string(kDedupHeader)] = int64_t{42};  // integers are keys too
  EXPECT_TRUE(broker_->Publish(kS1, "", "q", m, 3).ok());
}

}  // namespace
}  // namespace wharf::broker
