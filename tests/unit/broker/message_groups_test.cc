// broker/message_groups.h: which ready message of a queue with message groups goes next.
#include "broker/message_groups.h"

#include <gtest/gtest.h>

#include <string>

namespace wharf::broker {
namespace {

TEST(MessageGroups, NextIsTheOldestHeadOfAFreeGroupOrAnUngroupedMessage) {
  MessageGroups g;
  EXPECT_FALSE(g.Next());
  g.Add("a", 1);
  g.Add("b", 2);
  g.Add("a", 3);
  g.Add("", 4);
  EXPECT_EQ(g.Next(), 1u);
  g.Remove("a", 1);
  g.Hold("a");
  EXPECT_EQ(g.Next(), 2u) << "a is held: its 3 waits";
  g.Remove("b", 2);
  g.Hold("b");
  EXPECT_EQ(g.Next(), 4u) << "a message of no group goes whatever is held";
  g.Remove("", 4);
  EXPECT_FALSE(g.Next()) << "every ready message is in a held group";
  EXPECT_EQ(g.held(), 2u);
  g.Release("a");
  EXPECT_EQ(g.Next(), 3u);
  EXPECT_EQ(g.ready(), 1u);
}

TEST(MessageGroups, AReturnGoesBackToTheHeadOfItsGroup) {
  MessageGroups g;
  g.Add("a", 1);
  g.Add("a", 2);
  g.Remove("a", 1);
  g.Hold("a");
  g.AddFront("a", 1);
  g.Release("a");
  EXPECT_EQ(g.Next(), 1u);
  g.Remove("a", 1);
  EXPECT_EQ(g.Next(), 2u);
}

TEST(MessageGroups, IdleGroupsAreForgottenAndHeldOnesKept) {
  MessageGroups g;
  for (uint64_t i = 0; i < 1'000; ++i) g.Add("g" + std::to_string(i), i + 1);
  EXPECT_EQ(g.groups(), 1'000u);
  for (uint64_t i = 0; i < 1'000; ++i) {
    ASSERT_EQ(g.Next(), i + 1);
    g.Remove("g" + std::to_string(i), i + 1);
    if (i % 2 == 0) g.Hold("g" + std::to_string(i));
  }
  EXPECT_EQ(g.groups(), 500u) << "the held ones, with nothing ready";
  EXPECT_EQ(g.held(), 500u);
  for (uint64_t i = 0; i < 1'000; i += 2) g.Release("g" + std::to_string(i));
  EXPECT_EQ(g.groups(), 0u) << "an idle group costs nothing";
  EXPECT_EQ(g.held(), 0u);
}

TEST(MessageGroups, AMessageTakenOutOfTheMiddleLeavesTheOrderOfTheRest) {
  MessageGroups g;
  for (uint64_t seq = 1; seq <= 5; ++seq) g.Add("a", seq);
  g.Remove("a", 3);  // expired, or redriven
  std::vector<uint64_t> order;
  while (auto next = g.Next()) {
    order.push_back(*next);
    g.Remove("a", *next);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{1, 2, 4, 5}));
}

TEST(MessageGroups, ALateReleaseOfAnOlderHoldIsIgnored) {
  MessageGroups g;
  g.Add("a", 1);
  g.Remove("a", 1);
  uint64_t backoff = g.Hold("a");
  g.Release("a");  // settled some other way
  g.Add("a", 2);
  g.Remove("a", 2);
  g.Hold("a");  // the next delivery
  g.Release("a", backoff);
  EXPECT_TRUE(g.IsHeld("a")) << "the backoff's timer must not free the new delivery's group";
  g.Add("a", 3);
  EXPECT_FALSE(g.Next());
}

TEST(MessageGroups, APurgeDropsReadyMessagesAndKeepsHolds) {
  MessageGroups g;
  g.Add("a", 1);
  g.Add("a", 2);
  g.Add("b", 3);
  g.Add("", 4);
  g.Remove("a", 1);
  g.Hold("a");
  g.ClearReady();
  EXPECT_FALSE(g.Next());
  EXPECT_EQ(g.ready(), 0u);
  EXPECT_EQ(g.groups(), 1u);
  EXPECT_TRUE(g.IsHeld("a"));
  g.Add("a", 5);
  EXPECT_FALSE(g.Next()) << "still held by the delivery out";
  g.Release("a");
  EXPECT_EQ(g.Next(), 5u);
}

TEST(MessageGroups, ManyGroupsComeAndGo) {
  MessageGroups g;
  constexpr uint64_t kGroups = 200'000;
  for (uint64_t i = 0; i < kGroups; ++i) g.Add(std::to_string(i), i + 1);
  EXPECT_EQ(g.groups(), kGroups);
  for (uint64_t i = 0; i < kGroups; ++i) {
    ASSERT_EQ(g.Next(), i + 1);
    g.Remove(std::to_string(i), i + 1);
  }
  EXPECT_EQ(g.groups(), 0u);
  EXPECT_FALSE(g.Next());
}

}  // namespace
}  // namespace wharf::broker
