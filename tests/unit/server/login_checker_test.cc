// Unit tests for server/login_checker.h: password checks on their own threads, bounded queue.
#include "server/login_checker.h"

#include <gtest/gtest.h>

#include <future>

#include "common/password.h"

namespace wharf::server {
namespace {

TEST(LoginChecker, ChecksOnItsOwnThreadAndAnswers) {
  LoginChecker checker(1, 4);
  const std::string hash = HashPassword("right", 1000);
  std::promise<bool> right, wrong;
  ASSERT_TRUE(checker.Submit("right", hash, [&](bool m) { right.set_value(m); }));
  ASSERT_TRUE(checker.Submit("wrong", hash, [&](bool m) { wrong.set_value(m); }));
  EXPECT_TRUE(right.get_future().get());
  EXPECT_FALSE(wrong.get_future().get());
}

TEST(LoginChecker, AnUnknownUserNeverMatches) {
  LoginChecker checker(1, 4);
  std::promise<bool> answer;
  ASSERT_TRUE(checker.Submit("wharf: no such user", "", [&](bool m) { answer.set_value(m); }));
  EXPECT_FALSE(answer.get_future().get());
}

TEST(LoginChecker, AFullQueueRefusesAndStopDropsWhatWaits) {
  LoginChecker checker(1, 2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  // The one thread is held by the first check, so the next two wait and the fourth is refused.
  ASSERT_TRUE(checker.Submit("x", HashPassword("x", 1000), [&, released](bool) {
    started.set_value();
    released.wait();
  }));
  started.get_future().wait();
  int called = 0;
  EXPECT_TRUE(checker.Submit("x", "", [&](bool) { ++called; }));
  EXPECT_TRUE(checker.Submit("x", "", [&](bool) { ++called; }));
  EXPECT_FALSE(checker.Submit("x", "", [&](bool) { ++called; }));
  EXPECT_EQ(checker.queued(), 2u);
  std::thread stopper([&] { checker.Stop(); });
  release.set_value();
  stopper.join();
  EXPECT_LE(called, 2);
  EXPECT_FALSE(checker.Submit("x", "", [&](bool) { ++called; }));
}

}  // namespace
}  // namespace wharf::server
