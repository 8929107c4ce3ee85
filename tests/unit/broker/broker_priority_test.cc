// Priority queues (x-max-priority; docs/lifecycle.md, "Priorities") in the broker with the real
// RocksDB store: strict priority order, a high-priority message ahead of a paged backlog, and
// lanes that survive a crash, purge, peek, redrive and retries with their priorities.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unit/broker/broker_store_fixture.h"

namespace wharf::broker {
namespace {

class BrokerPriorityTest : public BrokerStoreTest {
 protected:
  void DeclarePriority(const std::string& name, int64_t max_priority, Headers more = {}) {
    more["x-max-priority"] = max_priority;
    DeclareQueue(name, true, std::move(more));
  }

  Result<PublishOutcome> PublishAt(const std::string& queue, const std::string& body,
                                   uint32_t priority, bool persistent = true) {
    Message m;
    m.body = body;
    m.persistent = persistent;
    m.properties.priority = priority;
    return broker_->Publish(kS1, "", queue, std::move(m), 0);
  }

  // Durable queues keep 16 messages in RAM and load 8 at a time: the rest is on disk.
  static BrokerOptions Paged() {
    BrokerOptions options;
    options.page_limits.max_messages = 16;
    options.load_batch = 8;
    return options;
  }

  PeekPage PeekAll(const std::string& queue, uint64_t after, uint32_t limit) {
    peer_->peeks.clear();
    EXPECT_TRUE(broker_->Peek(kS1, 3, queue, after, limit, true).ok());
    Drain();
    EXPECT_EQ(peer_->peeks.size(), 1u);
    if (peer_->peeks.empty() || !peer_->peeks[0].second.ok()) return {};
    return *peer_->peeks[0].second;
  }
};

TEST_F(BrokerPriorityTest, ArgumentIsCheckedUnderEachProtocolsRules) {
  for (int64_t bad : {int64_t{0}, int64_t{256}, int64_t{-1}}) {
    QueueSpec spec;
    spec.name = "bad";
    spec.durable = true;
    spec.arguments["x-max-priority"] = bad;
    EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument)
        << bad;
  }
  QueueSpec text;
  text.name = "bad";
  text.arguments["x-max-priority"] = std::string("10");
  EXPECT_EQ(broker_->DeclareQueue(kS1, text).status().code(), StatusCode::kInvalidArgument);
  auto rabbit = ParseQueuePolicy({{"x-max-priority", int64_t{256}}}, QueueRules::kRabbitMq, "q");
  ASSERT_FALSE(rabbit.ok());
  EXPECT_NE(rabbit.status().message().find("{max_value_exceeded,256}"), std::string::npos)
      << rabbit.status().ToString();
  auto zero = ParseQueuePolicy({{"x-max-priority", int64_t{0}}}, QueueRules::kRabbitMq, "q");
  ASSERT_TRUE(zero.ok()) << "RabbitMQ takes 0: one priority";
  EXPECT_EQ(zero->max_priority, 0);
}

TEST_F(BrokerPriorityTest, HigherPrioritiesAreDeliveredFirstInPublishOrderWithinEach) {
  DeclarePriority("q", 10);
  ASSERT_TRUE(PublishAt("q", "p0-a", 0).ok());
  ASSERT_TRUE(PublishAt("q", "p5-a", 5).ok());
  ASSERT_TRUE(PublishAt("q", "p10-a", 10).ok());
  ASSERT_TRUE(PublishAt("q", "p0-b", 0).ok());
  ASSERT_TRUE(PublishAt("q", "p200", 200).ok());  // above the maximum: counts as 10
  ASSERT_TRUE(PublishAt("q", "p5-b", 5).ok());
  Drain();
  EXPECT_EQ(Info("q").ready, 6u);
  EXPECT_EQ(Bodies(Take("q")),
            (std::vector<std::string>{"p10-a", "p200", "p5-a", "p5-b", "p0-a", "p0-b"}));
}

TEST_F(BrokerPriorityTest, AnUrgentMessageBehindADeepPagedBacklogIsTheNextDelivered) {
  Restart(Paged());
  DeclarePriority("q", 9);
  for (int i = 0; i < 2'000; ++i) {
    ASSERT_TRUE(PublishAt("q", "low-" + std::to_string(i), 0).ok());
    if (i % 100 == 0) Drain();
  }
  Drain();
  auto first = TakeAndAck("q", 1, 1);
  ASSERT_EQ(first, (std::vector<std::string>{"low-0"}));
  ASSERT_TRUE(PublishAt("q", "urgent", 9).ok());
  Drain();
  EXPECT_EQ(TakeAndAck("q", 1, 1), (std::vector<std::string>{"urgent"}));
  auto rest = TakeAndAck("q", 50, 5'000);
  ASSERT_EQ(rest.size(), 1'999u);
  for (int i = 1; i < 2'000; ++i) ASSERT_EQ(rest[i - 1], "low-" + std::to_string(i));
}

TEST_F(BrokerPriorityTest, EveryLaneComesBackAfterACrashInPriorityOrder) {
  Restart(Paged());
  DeclarePriority("q", 3);
  std::vector<std::string> expected[4];
  for (int i = 0; i < 120; ++i) {
    const uint32_t priority = i % 4;
    const std::string body = "p" + std::to_string(priority) + "-" + std::to_string(i);
    ASSERT_TRUE(PublishAt("q", body, priority).ok());
    expected[priority].push_back(body);
  }
  Drain();
  // Delivered, not acked: after the crash they are back, counted as received once.
  auto taken = Take("q", 2);
  ASSERT_EQ(Bodies(taken), (std::vector<std::string>{"p3-3", "p3-7"}));
  Restart(Paged());
  EXPECT_EQ(Info("q").ready, 120u);
  std::vector<std::string> order;
  for (int p = 3; p >= 0; --p) order.insert(order.end(), expected[p].begin(), expected[p].end());
  auto again = Take("q", 3);
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[0].envelope->message.body, "p3-3");
  EXPECT_EQ(again[0].receive_count, 2u) << "delivered before the crash (the lane's mark)";
  EXPECT_EQ(again[2].envelope->message.body, "p3-11");
  EXPECT_EQ(again[2].receive_count, 1u);
  for (const auto& d : again) ASSERT_TRUE(broker_->Ack(kS1, d.delivery_tag, false).ok());
  Drain();
  auto rest = TakeAndAck("q", 7, 1'000);
  rest.insert(rest.begin(), {"p3-3", "p3-7", "p3-11"});
  EXPECT_EQ(rest, order);
  EXPECT_EQ(Info("q").ready, 0u);
  // Drained: a new message of any lane is numbered past what the lanes used.
  ASSERT_TRUE(PublishAt("q", "after", 1).ok());
  Drain();
  Restart(Paged());
  EXPECT_EQ(TakeAndAck("q", 10, 10), (std::vector<std::string>{"after"}));
}

TEST_F(BrokerPriorityTest, APurgeEmptiesEveryLaneForGood) {
  Restart(Paged());
  DeclarePriority("q", 5);
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(PublishAt("q", "m" + std::to_string(i), i % 6).ok());
  Drain();
  auto in_flight = Take("q", 1);
  ASSERT_EQ(in_flight.size(), 1u);
  auto purged = broker_->PurgeQueue(kS1, "q");
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 59u);
  Drain();
  ASSERT_TRUE(PublishAt("q", "new-high", 5).ok());
  ASSERT_TRUE(PublishAt("q", "new-low", 0).ok());
  Drain();
  Restart(Paged());
  EXPECT_EQ(Info("q").ready, 3u) << "the one in flight comes back, and the two new ones";
  EXPECT_EQ(TakeAndAck("q", 10, 10),
            (std::vector<std::string>{in_flight[0].envelope->message.body, "new-high", "new-low"}));
}

TEST_F(BrokerPriorityTest, PeekShowsTheLanesInDeliveryOrderFromRamAndDisk) {
  Restart(Paged());
  DeclarePriority("q", 2);
  std::vector<std::string> expected;
  for (int p = 0; p <= 2; ++p) {
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(PublishAt("q", "p" + std::to_string(p) + "-" + std::to_string(i), p).ok());
    }
  }
  for (int p = 2; p >= 0; --p) {
    for (int i = 0; i < 20; ++i)
      expected.push_back("p" + std::to_string(p) + "-" + std::to_string(i));
  }
  Drain();
  std::vector<std::string> seen;
  uint64_t after = 0;
  for (int pages = 0; pages < 100; ++pages) {
    PeekPage page = PeekAll("q", after, 7);
    EXPECT_LE(page.messages.size(), 7u);
    for (const auto& m : page.messages) seen.push_back(m.message.body);
    if (!page.more) break;
    after = page.next_after;
  }
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(Info("q").ready, 60u) << "peek takes nothing";
}

TEST_F(BrokerPriorityTest, RetriesAndRedrivesKeepTheirPriority) {
  Restart(Paged());
  DeclarePriority("dlq", 9);
  DeclarePriority("q", 9, {{"x-dead-letter-queue", std::string("dlq")}});
  ASSERT_TRUE(PublishAt("q", "low", 1).ok());
  ASSERT_TRUE(PublishAt("q", "high", 8).ok());
  Drain();
  // A delayed retry comes back into its own lane, ahead of a lower one published meanwhile.
  auto taken = Take("q", 1);
  ASSERT_EQ(Bodies(taken), (std::vector<std::string>{"high"}));
  ASSERT_TRUE(broker_->Nack(kS1, taken[0].delivery_tag, false, true, /*delay_ms=*/1'000).ok());
  Drain();
  ASSERT_TRUE(PublishAt("q", "mid", 5).ok());
  Tick(std::chrono::milliseconds(1'001));
  auto all = Take("q", 10);
  EXPECT_EQ(Bodies(all), (std::vector<std::string>{"high", "mid", "low"}));
  // Every one to the dead-letter queue; then redriven back, between two published meanwhile.
  for (const auto& d : all) {
    Broker::NackOptions reject;
    reject.requeue = false;
    ASSERT_TRUE(broker_->Nack(kS1, d.delivery_tag, false, reject).ok());
  }
  Drain();
  ASSERT_EQ(Info("dlq").ready, 3u);
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(PublishAt("dlq", "filler-" + std::to_string(i), i % 10).ok());
  }
  ASSERT_TRUE(PublishAt("q", "top", 9).ok());
  ASSERT_TRUE(PublishAt("q", "bottom", 0).ok());
  Drain();
  ASSERT_TRUE(broker_->StartRedrive(kS1, 5, RedriveSpec{"dlq", "", "", 0, 0, false}).ok());
  for (int i = 0; i < 100; ++i) Tick(std::chrono::milliseconds(100));
  auto status = broker_->RedriveStatus(kS1, "dlq");
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->size(), 1u);
  EXPECT_EQ(status->front().state, RedriveInfo::State::kFinished);
  EXPECT_EQ(status->front().moved, 3u) << "the fillers never died anywhere";
  EXPECT_EQ(status->front().skipped_not_matching, 40u) << "every lane was walked";
  EXPECT_EQ(Info("dlq").ready, 40u);
  EXPECT_EQ(TakeAndAck("q", 10, 10),
            (std::vector<std::string>{"top", "high", "mid", "low", "bottom"}));
}

}  // namespace
}  // namespace wharf::broker
