// Unit tests for server/user_usage.h: slots per user and kind, RabbitMQ's refusals, given back
// by the slot's end.
#include "server/user_usage.h"

#include <gtest/gtest.h>

#include <vector>

namespace wharf::server {
namespace {

using Kind = UserUsage::Kind;

TEST(UserUsage, AUserGetsUpToItsLimitPerKindAndOthersAreApart) {
  UserUsage usage;
  std::vector<UserUsage::Slot> held;
  for (int i = 0; i < 2; ++i) {
    auto slot = usage.Take(Kind::kConnection, "alice", 2);
    ASSERT_TRUE(slot.ok());
    held.push_back(std::move(*slot));
  }
  auto third = usage.Take(Kind::kConnection, "alice", 2);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(),
            "connection refused for user 'alice': user connection limit (2) is reached");
  // Channels are counted apart, and so is every other user.
  EXPECT_TRUE(usage.Take(Kind::kChannel, "alice", 1).ok());
  EXPECT_TRUE(usage.Take(Kind::kConnection, "bob", 2).ok());
  EXPECT_EQ(usage.Count(Kind::kConnection, "alice"), 2u);
}

TEST(UserUsage, ZeroAllowsNoneAndNegativeIsNoLimit) {
  UserUsage usage;
  auto none = usage.Take(Kind::kChannel, "alice", 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "number of channels opened for user 'alice' has reached the maximum allowed user "
            "limit of (0)");
  EXPECT_EQ(usage.Count(Kind::kChannel, "alice"), 0u);
  std::vector<UserUsage::Slot> held;
  for (int i = 0; i < 1000; ++i) {
    auto slot = usage.Take(Kind::kChannel, "alice", -1);
    ASSERT_TRUE(slot.ok());
    held.push_back(std::move(*slot));
  }
  EXPECT_EQ(usage.Count(Kind::kChannel, "alice"), 1000u);
}

TEST(UserUsage, ASlotIsGivenBackOnceWhenReleasedMovedOrDestroyed) {
  UserUsage usage;
  {
    auto slot = usage.Take(Kind::kConnection, "alice", 1);
    ASSERT_TRUE(slot.ok());
    UserUsage::Slot moved = std::move(*slot);
    EXPECT_TRUE(moved.held());
    EXPECT_FALSE(usage.Take(Kind::kConnection, "alice", 1).ok());
    moved.Release();
    moved.Release();  // once only
    EXPECT_EQ(usage.Count(Kind::kConnection, "alice"), 0u);
    auto again = usage.Take(Kind::kConnection, "alice", 1);
    ASSERT_TRUE(again.ok());
    moved = std::move(*again);  // the old one was released; this one now held
  }                             // destroyed: given back
  EXPECT_EQ(usage.Count(Kind::kConnection, "alice"), 0u);
  EXPECT_TRUE(usage.Take(Kind::kConnection, "alice", 1).ok());
}

}  // namespace
}  // namespace wharf::server
