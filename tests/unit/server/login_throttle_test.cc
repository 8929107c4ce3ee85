// Unit tests for server/login_throttle.h: failed logins per address slow that address down.
#include "server/login_throttle.h"

#include <gtest/gtest.h>

namespace wharf::server {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kLong{60'000};

LoginThrottle::Limits TestLimits(size_t max_addresses = 100) {
  return {milliseconds(100), milliseconds(1000), max_addresses};
}

TEST(LoginThrottle, AnAddressWithoutFailuresWaitsNothing) {
  LoginThrottle throttle(TestLimits());
  SteadyTime t0{};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(throttle.Admit("10.0.0.1", t0, kLong), milliseconds(0));
  EXPECT_EQ(throttle.size(), 0u);
}

TEST(LoginThrottle, EachFailureDoublesTheWaitUpToTheCap) {
  LoginThrottle throttle(TestLimits());
  SteadyTime now{};
  std::vector<int64_t> waits;
  for (int i = 0; i < 7; ++i) {
    auto wait = throttle.Admit("10.0.0.1", now, kLong);
    ASSERT_TRUE(wait);
    now += *wait;
    waits.push_back(wait->count());
    throttle.Failed("10.0.0.1", now);
  }
  EXPECT_EQ(waits, (std::vector<int64_t>{0, 100, 200, 400, 800, 1000, 1000}));
}

TEST(LoginThrottle, ParallelLoginsFromOneAddressAreSpacedOut) {
  LoginThrottle throttle(TestLimits());
  SteadyTime now{};
  throttle.Failed("10.0.0.1", now);
  throttle.Failed("10.0.0.1", now);  // delay now 200 ms
  // Five connections arrive at once: each gets its own slot, 200 ms apart.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(throttle.Admit("10.0.0.1", now, kLong), milliseconds(200 * (i + 1))) << i;
  }
}

TEST(LoginThrottle, OtherAddressesAreNotSlowed) {
  LoginThrottle throttle(TestLimits());
  SteadyTime now{};
  for (int i = 0; i < 5; ++i) throttle.Failed("10.0.0.1", now);
  EXPECT_EQ(throttle.Admit("10.0.0.2", now, kLong), milliseconds(0));
}

TEST(LoginThrottle, AWaitLongerThanAllowedIsRefusedAndReservesNothing) {
  LoginThrottle throttle(TestLimits());
  SteadyTime now{};
  for (int i = 0; i < 5; ++i) throttle.Failed("10.0.0.1", now);  // 1000 ms
  EXPECT_FALSE(throttle.Admit("10.0.0.1", now, milliseconds(500)));
  EXPECT_EQ(throttle.Admit("10.0.0.1", now, kLong), milliseconds(1000));
}

TEST(LoginThrottle, ASuccessForgetsTheFailures) {
  LoginThrottle throttle(TestLimits());
  SteadyTime now{};
  for (int i = 0; i < 3; ++i) throttle.Failed("10.0.0.1", now);
  throttle.Succeeded("10.0.0.1");
  EXPECT_EQ(throttle.Admit("10.0.0.1", now, kLong), milliseconds(0));
  EXPECT_EQ(throttle.size(), 0u);
}

TEST(LoginThrottle, FailuresAreForgottenAfterAWhile) {
  LoginThrottle throttle(TestLimits());
  SteadyTime now{};
  for (int i = 0; i < 5; ++i) throttle.Failed("10.0.0.1", now);
  now += LoginThrottle::kForgetAfter;
  EXPECT_EQ(throttle.Admit("10.0.0.1", now, kLong), milliseconds(0));
  EXPECT_EQ(throttle.size(), 0u);
}

TEST(LoginThrottle, MemoryIsBoundedByForgettingTheLeastRecentlyFailed) {
  LoginThrottle throttle(TestLimits(3));
  SteadyTime now{};
  for (int i = 0; i < 1000; ++i) throttle.Failed("10.0.0." + std::to_string(i), now);
  EXPECT_EQ(throttle.size(), 3u);
  EXPECT_EQ(throttle.Admit("10.0.0.0", now, kLong), milliseconds(0));  // forgotten
  EXPECT_EQ(throttle.Admit("10.0.0.999", now, kLong), milliseconds(100));
  // A repeated failure makes an address the most recent again.
  throttle.Failed("10.0.0.997", now);
  throttle.Failed("10.0.0.1000", now);
  throttle.Failed("10.0.0.1001", now);
  EXPECT_NE(throttle.Admit("10.0.0.997", now, kLong), milliseconds(0));
  EXPECT_EQ(throttle.Admit("10.0.0.998", now, kLong), milliseconds(0));
}

TEST(LoginThrottle, AZeroBaseDelayTurnsItOff) {
  LoginThrottle throttle({milliseconds(0), milliseconds(0), 100});
  SteadyTime now{};
  for (int i = 0; i < 5; ++i) throttle.Failed("10.0.0.1", now);
  EXPECT_EQ(throttle.Admit("10.0.0.1", now, kLong), milliseconds(0));
}

}  // namespace
}  // namespace wharf::server
