// What a queue listing says of each queue (QueueInfo): its arguments, dead-letter target, the
// age of its next ready message and its publish/deliver/ack rates over a 5-second window.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "unit/broker/broker_store_fixture.h"

namespace wharf::broker {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_F(BrokerStoreTest, QueueInfoShowsArgumentsTargetAgeAndRates) {
  DeclareQueue("jobs.dlq");
  DeclareQueue("jobs", true,
               {{"x-dead-letter-queue", std::string("jobs.dlq")}, {"x-lease-ms", int64_t{5'000}}});
  QueueInfo idle = Info("jobs");
  EXPECT_EQ(idle.dead_letter_target, "jobs.dlq");
  EXPECT_EQ(std::get<int64_t>(idle.arguments.at("x-lease-ms")), 5'000);
  EXPECT_EQ(idle.head_published_at_ms, 0) << "nothing ready";
  EXPECT_EQ(idle.publish_rate, 0);

  const int64_t published_at = clock_.WallMillis();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Publish("", "jobs", "m" + std::to_string(i)).ok());
  Drain();
  auto taken = Take("jobs", 10);
  ASSERT_EQ(taken.size(), 10u);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(broker_->Ack(kS1, taken[i].delivery_tag, false).ok());
  Drain();
  clock_.Advance(seconds(5));
  QueueInfo busy = Info("jobs");
  EXPECT_DOUBLE_EQ(busy.publish_rate, 4.0) << "20 in 5 s";
  EXPECT_DOUBLE_EQ(busy.deliver_rate, 2.0);
  EXPECT_DOUBLE_EQ(busy.ack_rate, 1.0);
  EXPECT_EQ(busy.head_published_at_ms, published_at) << "the next ready message's";
  EXPECT_EQ(Info("jobs.dlq").dead_letter_target, "");

  // Within the window the figures stay; a quiet window brings them to zero.
  clock_.Advance(milliseconds(100));
  EXPECT_DOUBLE_EQ(Info("jobs").publish_rate, 4.0);
  clock_.Advance(seconds(10));
  EXPECT_DOUBLE_EQ(Info("jobs").publish_rate, 0.0);
}

}  // namespace
}  // namespace wharf::broker
