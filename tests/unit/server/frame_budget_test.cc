// Unit tests for server/frame_budget.h: the broker-wide bound on partial frames.
#include "server/frame_budget.h"

#include <gtest/gtest.h>

#include <vector>

namespace wharf::server {
namespace {

TEST(FrameBudget, ReservesWhileItFitsThenQueues) {
  FrameBudget budget(100);
  std::vector<int> granted;
  EXPECT_TRUE(budget.Reserve(1, 60, [&] { granted.push_back(1); }));
  EXPECT_TRUE(budget.Reserve(2, 40, [&] { granted.push_back(2); }));
  EXPECT_FALSE(budget.Reserve(3, 1, [&] { granted.push_back(3); }));
  auto m = budget.Metrics();
  EXPECT_EQ(m.reserved_bytes, 100u);
  EXPECT_EQ(m.waiting, 1u);
  EXPECT_EQ(m.limit_bytes, 100u);
  budget.Release(40);
  EXPECT_EQ(granted, std::vector<int>{3});
  EXPECT_EQ(budget.Metrics().reserved_bytes, 61u);
  EXPECT_EQ(budget.Metrics().waiting, 0u);
}

// First come, first served: a small frame does not overtake a large one that waits, so the
// large one cannot starve; a release grants every waiter that now fits, in order.
TEST(FrameBudget, WaitersAreGrantedInOrder) {
  FrameBudget budget(100);
  std::vector<int> granted;
  ASSERT_TRUE(budget.Reserve(1, 90, [] {}));
  EXPECT_FALSE(budget.Reserve(2, 80, [&] { granted.push_back(2); }));
  EXPECT_FALSE(budget.Reserve(3, 5, [&] { granted.push_back(3); }));  // would fit, but waits
  EXPECT_FALSE(budget.Reserve(4, 15, [&] { granted.push_back(4); }));
  budget.Release(90);
  EXPECT_EQ(granted, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(budget.Metrics().reserved_bytes, 100u);
}

// A frame larger than the whole budget is taken once nothing else is reserved: it never waits
// forever.
TEST(FrameBudget, AFrameLargerThanTheBudgetGoesAlone) {
  FrameBudget budget(100);
  bool granted = false;
  EXPECT_TRUE(budget.Reserve(1, 10, [] {}));
  EXPECT_FALSE(budget.Reserve(2, 500, [&] { granted = true; }));
  budget.Release(10);
  EXPECT_TRUE(granted);
  EXPECT_FALSE(budget.Reserve(3, 1, [] {}));
  budget.Release(500);
  EXPECT_EQ(budget.Metrics().reserved_bytes, 1u);
}

TEST(FrameBudget, ACancelledWaiterIsNotGranted) {
  FrameBudget budget(100);
  bool granted = false;
  ASSERT_TRUE(budget.Reserve(1, 100, [] {}));
  EXPECT_FALSE(budget.Reserve(2, 50, [&] { granted = true; }));
  EXPECT_TRUE(budget.CancelWait(2));
  EXPECT_FALSE(budget.CancelWait(2));
  budget.Release(100);
  EXPECT_FALSE(granted);
  EXPECT_EQ(budget.Metrics().reserved_bytes, 0u);
}

// The head of the queue leaving lets those behind it that fit go at once, not at some later
// release (which may never come).
TEST(FrameBudget, AHeadWaiterLeavingGrantsThoseBehindItThatFit) {
  FrameBudget budget(100);
  bool small = false;
  ASSERT_TRUE(budget.Reserve(1, 60, [] {}));
  EXPECT_FALSE(budget.Reserve(2, 80, [] {}));
  EXPECT_FALSE(budget.Reserve(3, 30, [&] { small = true; }));  // fits, but waits its turn
  EXPECT_TRUE(budget.CancelWait(2));
  EXPECT_TRUE(small);
  EXPECT_EQ(budget.Metrics().reserved_bytes, 90u);
  EXPECT_EQ(budget.Metrics().waiting, 0u);
}

// A grant callback may release at once (its connection is gone): no lock is held then.
TEST(FrameBudget, AGrantMayBeGivenBackFromItsCallback) {
  FrameBudget budget(100);
  bool second = false;
  ASSERT_TRUE(budget.Reserve(1, 100, [] {}));
  EXPECT_FALSE(budget.Reserve(2, 100, [&] { budget.Release(100); }));
  EXPECT_FALSE(budget.Reserve(3, 100, [&] { second = true; }));
  budget.Release(100);
  EXPECT_TRUE(second);
  EXPECT_EQ(budget.Metrics().reserved_bytes, 100u);
}

TEST(FrameBudget, TimeoutsAreCountedAndTheirLinesLimited) {
  FrameBudget budget(100);
  auto t0 = std::chrono::steady_clock::now();
  uint64_t unlogged = 99;
  EXPECT_TRUE(budget.CountTimeout(t0, &unlogged));
  EXPECT_EQ(unlogged, 0u);
  EXPECT_FALSE(budget.CountTimeout(t0 + std::chrono::seconds(1), &unlogged));
  EXPECT_FALSE(budget.CountTimeout(t0 + std::chrono::seconds(2), &unlogged));
  EXPECT_TRUE(budget.CountTimeout(t0 + FrameBudget::kLogInterval, &unlogged));
  EXPECT_EQ(unlogged, 2u);
  EXPECT_EQ(budget.Metrics().timeouts_total, 4u);
  budget.AddHeld(1000);
  budget.AddHeld(-400);
  EXPECT_EQ(budget.Metrics().held_bytes, 600u);
}

}  // namespace
}  // namespace wharf::server
