// Unit tests for server/user_changes.h: user changes run one at a time, in order.
#include "server/user_changes.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace wharf::server {
namespace {

TEST(UserChangesTest, AChangeWaitsForTheOneBeforeToFinish) {
  UserChanges changes;
  std::vector<std::string> log;
  std::function<void()> first_done;
  changes.Run([&](std::function<void()> done) {
    log.push_back("first starts");
    first_done = std::move(done);  // its commit answers later
  });
  changes.Run([&](std::function<void()> done) {
    log.push_back("second starts");
    done();
  });
  EXPECT_EQ(log, std::vector<std::string>{"first starts"});
  EXPECT_EQ(changes.waiting(), 1u);
  first_done();
  EXPECT_EQ(log, (std::vector<std::string>{"first starts", "second starts"}));
  first_done();  // a second call changes nothing
  EXPECT_EQ(changes.waiting(), 0u);
  // Idle again: the next one starts at once.
  changes.Run([&](std::function<void()> done) {
    log.push_back("third starts");
    done();
  });
  EXPECT_EQ(log.back(), "third starts");
}

TEST(UserChangesTest, ChangesRefusedAtOnceDoNotDeepenTheStack) {
  UserChanges changes;
  std::function<void()> held;
  changes.Run([&](std::function<void()> done) { held = std::move(done); });
  int ran = 0;
  for (int i = 0; i < 100'000; ++i) {
    changes.Run([&](std::function<void()> done) {
      ++ran;
      done();
    });
  }
  EXPECT_EQ(ran, 0);
  held();
  EXPECT_EQ(ran, 100'000);
}

}  // namespace
}  // namespace wharf::server
