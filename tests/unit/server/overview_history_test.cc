// Unit tests for server/overview_history.h: totals per vhost, summed over what a caller sees,
// the last kKeep samples.
#include "server/overview_history.h"

#include <gtest/gtest.h>

namespace wharf::server {
namespace {

QueueInfo Queue(const std::string& vhost, uint64_t ready, uint64_t in_flight, double publish) {
  QueueInfo q;
  q.vhost = vhost;
  q.name = "q";
  q.ready = ready;
  q.in_flight = in_flight;
  q.publish_rate = publish;
  q.deliver_rate = publish / 2;
  q.ack_rate = publish / 4;
  return q;
}

TEST(OverviewHistory, SumsTheVhostsACallerSees) {
  OverviewHistory history;
  history.Add({Queue("/", 3, 1, 8), Queue("/", 2, 0, 4), Queue("shop", 100, 10, 40)}, 1000);
  auto everything = history.Samples([](const std::string&) { return true; });
  ASSERT_EQ(everything.size(), 1u);
  EXPECT_EQ(everything[0].at_ms, 1000);
  EXPECT_EQ(everything[0].totals.ready, 105u);
  EXPECT_EQ(everything[0].totals.unacked, 11u);
  EXPECT_DOUBLE_EQ(everything[0].totals.publish_rate, 52);
  EXPECT_DOUBLE_EQ(everything[0].totals.deliver_rate, 26);
  EXPECT_DOUBLE_EQ(everything[0].totals.ack_rate, 13);
  auto root = history.Samples([](const std::string& vhost) { return vhost == "/"; });
  EXPECT_EQ(root[0].totals.ready, 5u);
  EXPECT_DOUBLE_EQ(root[0].totals.publish_rate, 12);
  // A broker without queues still has its samples, of nothing.
  history.Add({}, 6000);
  EXPECT_EQ(history.Samples([](const std::string&) { return true; })[1].totals.ready, 0u);
}

TEST(OverviewHistory, KeepsTheLastSamplesOldestFirst) {
  OverviewHistory history;
  for (size_t i = 0; i < OverviewHistory::kKeep + 10; ++i) {
    history.Add({Queue("/", i, 0, 0)}, static_cast<int64_t>(i) * 5000);
  }
  auto samples = history.Samples([](const std::string&) { return true; });
  ASSERT_EQ(samples.size(), OverviewHistory::kKeep);
  EXPECT_EQ(samples.front().totals.ready, 10u);
  EXPECT_EQ(samples.back().totals.ready, OverviewHistory::kKeep + 9);
  EXPECT_LT(samples.front().at_ms, samples.back().at_ms);
}

}  // namespace
}  // namespace wharf::server
