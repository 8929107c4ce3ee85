// Peek (docs/operations.md): a queue's ready messages in delivery order, shown without being
// taken; in RAM, with the real store, and across RAM and disk.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unit/broker/broker_store_fixture.h"

namespace wharf::broker {
namespace {

class BrokerPeekTest : public BrokerStoreTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool durable() const { return GetParam(); }

  PeekPage PeekSync(const std::string& queue, uint64_t after, uint32_t limit,
                    bool with_body = true) {
    peer_->peeks.clear();
    Status s = broker_->Peek(kS1, 3, queue, after, limit, with_body);
    EXPECT_TRUE(s.ok()) << s.ToString();
    Drain();
    EXPECT_EQ(peer_->peeks.size(), 1u);
    if (peer_->peeks.empty() || !peer_->peeks[0].second.ok()) return {};
    return *peer_->peeks[0].second;
  }

  // Every page, `per_page` at a time.
  std::vector<PeekedMessage> PeekAll(const std::string& queue, uint32_t per_page) {
    std::vector<PeekedMessage> all;
    uint64_t after = 0;
    for (int pages = 0; pages < 1'000; ++pages) {
      PeekPage page = PeekSync(queue, after, per_page);
      EXPECT_LE(page.messages.size(), per_page);
      for (auto& m : page.messages) all.push_back(std::move(m));
      if (!page.more) break;
      after = page.next_after;
    }
    return all;
  }

  static std::vector<std::string> BodiesOf(const std::vector<PeekedMessage>& messages) {
    std::vector<std::string> out;
    for (const auto& m : messages) out.push_back(m.message.body);
    return out;
  }
};

INSTANTIATE_TEST_SUITE_P(RamAndStore, BrokerPeekTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Durable" : "Transient"; });

class BrokerPeekStoreTest : public BrokerPeekTest {};
INSTANTIATE_TEST_SUITE_P(Store, BrokerPeekStoreTest, ::testing::Values(true),
                         [](const auto&) { return "Durable"; });

TEST_P(BrokerPeekTest, ShowsReadyMessagesInDeliveryOrderAndChangesNothing) {
  DeclareQueue("jobs", durable());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Publish("", "jobs", "m" + std::to_string(i)).ok());
  Drain();
  // m0 goes out and comes back failed; m1 stays out (in flight, not shown).
  auto first = Take("jobs", 2);
  ASSERT_EQ(first.size(), 2u);
  Broker::NackOptions nack;
  nack.immediate = true;
  nack.error = "timeout talking to billing";
  ASSERT_TRUE(broker_->Nack(kS1, first[0].delivery_tag, false, nack).ok());
  Drain();

  PeekPage page = PeekSync("jobs", 0, 10);
  EXPECT_FALSE(page.more);
  ASSERT_EQ(BodiesOf(page.messages), (std::vector<std::string>{"m0", "m2", "m3", "m4"}));
  const PeekedMessage& m0 = page.messages[0];
  EXPECT_EQ(m0.receive_count, 1u);
  EXPECT_EQ(m0.failure_count, 1u);
  EXPECT_EQ(m0.last_error, "timeout talking to billing");
  EXPECT_GT(m0.first_received_at_ms, 0);
  EXPECT_EQ(m0.body_bytes, 2u);
  EXPECT_EQ(m0.routing_key, "jobs");
  EXPECT_EQ(page.messages[1].receive_count, 0u);
  // Twice the same: nothing changed; and then the consumer gets them in that order.
  EXPECT_EQ(BodiesOf(PeekSync("jobs", 0, 10).messages), BodiesOf(page.messages));
  EXPECT_EQ(Info("jobs").ready, 4u);
  auto taken = Take("jobs", 10);
  EXPECT_EQ(Bodies(taken), (std::vector<std::string>{"m0", "m2", "m3", "m4"}));
  EXPECT_EQ(taken[0].receive_count, 2u) << "peek counted no receive";
  EXPECT_EQ(taken[1].receive_count, 1u);
}

TEST_P(BrokerPeekTest, PagesResumeAfterAPositionAndBodiesAreOptional) {
  DeclareQueue("jobs", durable());
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(Publish("", "jobs", "m" + std::to_string(i)).ok());
  Drain();
  PeekPage first = PeekSync("jobs", 0, 3);
  ASSERT_EQ(BodiesOf(first.messages), (std::vector<std::string>{"m0", "m1", "m2"}));
  EXPECT_TRUE(first.more);
  // The message at the cursor is consumed meanwhile: the next page still starts right after.
  auto taken = Take("jobs", 3);
  for (const auto& d : taken) ASSERT_TRUE(broker_->Ack(kS1, d.delivery_tag, false).ok());
  Drain();
  PeekPage second = PeekSync("jobs", first.next_after, 3, /*with_body=*/false);
  ASSERT_EQ(second.messages.size(), 3u);
  EXPECT_TRUE(second.messages[0].message.body.empty());
  EXPECT_EQ(second.messages[0].body_bytes, 2u);
  EXPECT_EQ(second.messages[0].position, first.messages[2].position + 1);
  EXPECT_EQ(PeekSync("jobs", second.next_after, 3).messages.size(), 1u);
  EXPECT_EQ(broker_->Peek(kS1, 1, "nope", 0, 1, true).code(), StatusCode::kQueueNotFound);
}

// A deep queue is mostly on disk: the pages go on from RAM into the store, in order, and
// the receive counts of messages delivered before a restart show as a load would show them.
TEST_P(BrokerPeekStoreTest, PagesGoOnFromRamToDisk) {
  BrokerOptions options;
  options.page_limits.max_messages = 16;
  options.load_batch = 8;
  Restart(options);
  DeclareQueue("deep");
  std::vector<std::string> want;
  for (int i = 0; i < 100; ++i) {
    want.push_back("m" + std::to_string(i));
    ASSERT_TRUE(Publish("", "deep", want.back()).ok());
  }
  Drain();
  EXPECT_EQ(BodiesOf(PeekAll("deep", 7)), want);
  ASSERT_EQ(Take("deep", 2).size(), 2u);  // delivered, then the broker crashes
  Restart(options);
  auto all = PeekAll("deep", 30);
  EXPECT_EQ(BodiesOf(all), want);
  ASSERT_EQ(all.size(), 100u);
  EXPECT_EQ(all[0].receive_count, 1u);
  EXPECT_EQ(all[1].receive_count, 1u);
  EXPECT_EQ(all[2].receive_count, 0u);
  EXPECT_EQ(TakeAndAck("deep", 1'000, 200), want) << "and nothing moved";
}

}  // namespace
}  // namespace wharf::broker
