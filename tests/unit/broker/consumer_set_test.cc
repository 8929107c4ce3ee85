// Unit tests for broker/consumer_set.h: the order in which a queue's consumers are offered
// messages (priorities, round-robin within one, single active consumer).
#include "broker/consumer_set.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace wharf::broker {
namespace {

std::shared_ptr<Consumer> Make(const std::string& tag, int32_t priority = 0) {
  auto c = std::make_shared<Consumer>();
  c->tag = tag;
  c->priority = priority;
  return c;
}

// The tags of the next `n` offers to consumers whose tag is not in `full`.
std::vector<std::string> Offers(ConsumerSet& set, size_t n,
                                const std::set<std::string>& full = {}) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    auto next = set.Next([&](const Consumer& c) { return !full.contains(c.tag); });
    out.push_back(next ? next->tag : "-");
  }
  return out;
}

std::vector<std::string> Order(const ConsumerSet& set) {
  std::vector<std::string> out;
  for (const auto& c : set) out.push_back(c->tag);
  return out;
}

TEST(ConsumerSetTest, EqualPrioritiesShareRoundRobinInSubscriptionOrder) {
  ConsumerSet set;
  set.Add(Make("a"));
  set.Add(Make("b"));
  set.Add(Make("c"));
  EXPECT_EQ(Offers(set, 5), (std::vector<std::string>{"a", "b", "c", "a", "b"}));
  // One that cannot take is skipped; the turn goes on after the one that took.
  EXPECT_EQ(Offers(set, 3, {"a"}), (std::vector<std::string>{"c", "b", "c"}));
  EXPECT_EQ(Offers(set, 1, {"a", "b", "c"}), (std::vector<std::string>{"-"}));
}

TEST(ConsumerSetTest, AHigherPriorityTakesEverythingItCanAndLowerOnesTheRest) {
  ConsumerSet set;
  set.Add(Make("none"));
  set.Add(Make("mid-a", 3));
  set.Add(Make("mid-b", 3));
  set.Add(Make("high", 7));
  set.Add(Make("low", -2));
  EXPECT_EQ(Order(set), (std::vector<std::string>{"high", "mid-a", "mid-b", "none", "low"}));
  EXPECT_EQ(Offers(set, 2), (std::vector<std::string>{"high", "high"}));
  EXPECT_EQ(Offers(set, 3, {"high"}), (std::vector<std::string>{"mid-a", "mid-b", "mid-a"}));
  EXPECT_EQ(Offers(set, 2, {"high", "mid-a", "mid-b"}), (std::vector<std::string>{"none", "none"}));
  EXPECT_EQ(Offers(set, 1, {"high", "mid-a", "mid-b", "none"}), (std::vector<std::string>{"low"}));
  EXPECT_EQ(set.single_active(), nullptr);
  EXPECT_TRUE(set.IsOffered(*set.list().back()));
}

TEST(ConsumerSetTest, RemovingAConsumerKeepsTheOthersTurn) {
  ConsumerSet set;
  auto a = Make("a"), b = Make("b"), c = Make("c");
  set.Add(a);
  set.Add(b);
  set.Add(c);
  EXPECT_EQ(Offers(set, 1), (std::vector<std::string>{"a"}));
  set.Remove(a);  // b's turn was next, and stays so
  EXPECT_EQ(Offers(set, 3), (std::vector<std::string>{"b", "c", "b"}));
  set.Remove(c);  // after b had it: b's turn again
  set.Remove(c);  // twice: nothing more
  EXPECT_EQ(Offers(set, 2), (std::vector<std::string>{"b", "b"}));
  set.Remove(b);
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(Offers(set, 1), (std::vector<std::string>{"-"}));
}

TEST(ConsumerSetTest, EachPriorityKeepsItsOwnTurnAcrossChangesToOthers) {
  ConsumerSet set;
  auto high_a = Make("high-a", 5);
  set.Add(high_a);
  set.Add(Make("high-b", 5));
  set.Add(Make("low-a", -1));
  set.Add(Make("low-b", -1));
  EXPECT_EQ(Offers(set, 1, {"high-a", "high-b"}), (std::vector<std::string>{"low-a"}));
  set.Remove(high_a);
  set.Add(Make("mid", 2));  // a priority between them appears
  EXPECT_EQ(Offers(set, 1, {"high-b", "mid"}), (std::vector<std::string>{"low-b"}));
  EXPECT_EQ(Offers(set, 2), (std::vector<std::string>{"high-b", "high-b"}));
  EXPECT_EQ(Offers(set, 2, {"high-b"}), (std::vector<std::string>{"mid", "mid"}));
}

TEST(ConsumerSetTest, TheSingleActiveConsumerIsTheFirstAndItsSuccessorTheHighestWaiting) {
  ConsumerSet set(/*single_active=*/true);
  auto first = Make("first"), second = Make("second"), third = Make("third", 10);
  set.Add(first);
  set.Add(second);
  set.Add(third);  // a higher priority does not take over from an active consumer
  EXPECT_EQ(set.single_active(), first);
  EXPECT_EQ(Offers(set, 3), (std::vector<std::string>{"first", "first", "first"}));
  // A full active consumer is not replaced: nobody else is offered anything.
  EXPECT_EQ(Offers(set, 1, {"first"}), (std::vector<std::string>{"-"}));
  EXPECT_FALSE(set.IsOffered(*second));
  // RabbitMQ's successor: the highest priority waiting, then the earliest subscribed.
  set.Remove(first);
  EXPECT_EQ(set.single_active(), third);
  set.Remove(second);  // a waiting one leaving changes nothing
  EXPECT_EQ(set.single_active(), third);
  auto fourth = Make("fourth");
  set.Add(fourth);
  set.Remove(third);
  EXPECT_EQ(set.single_active(), fourth);
  EXPECT_EQ(Offers(set, 1), (std::vector<std::string>{"fourth"}));
  set.Remove(fourth);
  EXPECT_EQ(set.single_active(), nullptr);
  auto fifth = Make("fifth");
  set.Add(fifth);
  EXPECT_EQ(set.single_active(), fifth);
}

TEST(ConsumerSetTest, ManyConsumersAreOfferedInTurnsWithoutScanningThemAll) {
  ConsumerSet set;
  for (int i = 0; i < 1000; ++i) set.Add(Make("c" + std::to_string(i), i % 2));
  // 500 of priority 1 come first, in turn; each offer asks only the one whose turn it is.
  size_t asked = 0;
  std::vector<std::string> got;
  for (int i = 0; i < 600; ++i) {
    got.push_back(set.Next([&](const Consumer&) {
                       ++asked;
                       return true;
                     })
                      ->tag);
  }
  EXPECT_EQ(asked, 600u);
  EXPECT_EQ(got[0], "c1");
  EXPECT_EQ(got[499], "c999");
  EXPECT_EQ(got[500], "c1");
}

}  // namespace
}  // namespace wharf::broker
