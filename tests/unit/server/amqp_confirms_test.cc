#include "server/amqp_confirms.h"

#include <gtest/gtest.h>

namespace wharf::server {
namespace {

using S = ConfirmTracker::Settle;

TEST(AmqpConfirms, SeqNumbersCountEveryPublishFromOne) {
  ConfirmTracker t;
  EXPECT_EQ(t.Next(), 1u);
  EXPECT_EQ(t.Next(), 2u);
  EXPECT_EQ(t.last(), 2u);
  EXPECT_EQ(t.outstanding(), 2u);
}

TEST(AmqpConfirms, EverythingBelowTheOldestOutstandingIsOneMultipleAck) {
  ConfirmTracker t;
  for (int i = 0; i < 5; ++i) t.Next();
  t.Ack(1);
  t.Ack(2);
  t.Ack(4);  // 3 is still outstanding
  EXPECT_EQ(t.Take(), (std::vector<S>{{2, true, true}, {4, false, true}}));
  t.Ack(3);
  t.Ack(5);
  // Nothing outstanding: one ack covers the round.
  EXPECT_EQ(t.Take(), (std::vector<S>{{5, true, true}}));
  EXPECT_FALSE(t.has_pending());
}

TEST(AmqpConfirms, AMultipleAckNeverCoversANackOfTheSameRound) {
  ConfirmTracker t;
  for (int i = 0; i < 4; ++i) t.Next();
  t.Ack(1);
  t.Nack(2);
  t.Ack(3);
  t.Ack(4);
  EXPECT_EQ(t.Take(), (std::vector<S>{
                          {2, false, false}, {1, true, true}, {3, false, true}, {4, false, true}}));
}

TEST(AmqpConfirms, ASeqIsSettledOnce) {
  ConfirmTracker t;
  t.Next();
  t.Ack(1);
  t.Nack(1);  // already acked: ignored
  t.Ack(7);   // never published: ignored
  EXPECT_EQ(t.Take(), (std::vector<S>{{1, false, true}}));
}

TEST(AmqpConfirms, ASingleAckIsNeverMultiple) {
  // RabbitMQ's send_confirms: one confirm alone is acked with multiple=false, even when
  // nothing else is outstanding (a publisher that waits for each confirm sees only those).
  ConfirmTracker t;
  t.Next();
  t.Next();
  t.Ack(2);
  EXPECT_EQ(t.Take(), (std::vector<S>{{2, false, true}}));
  t.Ack(1);
  EXPECT_EQ(t.Take(), (std::vector<S>{{1, false, true}}));
}

}  // namespace
}  // namespace wharf::server
