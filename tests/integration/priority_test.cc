// Priority queues (x-max-priority; docs/lifecycle.md, "Priorities") through the real wharfd:
// an urgent message published behind a backlog that is mostly on disk is the next delivered,
// and after a kill -9 every lane comes back whole, in priority order, publish order within
// each, with the messages that were in flight marked redelivered at the head of their lane.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "support/test_server.h"
#include "wharf/client.h"

namespace wharf {
namespace {

using testing::TestServer;

Message At(uint32_t priority, int i) {
  Message m;
  m.persistent = true;
  m.properties.priority = priority;
  m.body = "p" + std::to_string(priority) + "-" + std::to_string(i);
  return m;
}

// Takes and acks everything: (body, redelivered) in delivery order.
std::vector<std::pair<std::string, bool>> DrainInOrder(Client& client, const std::string& queue) {
  std::vector<std::pair<std::string, bool>> got;
  while (true) {
    auto batch = client.Receive(queue, 500, std::chrono::milliseconds(1'000));
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok() || batch->empty()) break;
    for (const auto& d : *batch) got.emplace_back(d.message.body, d.redelivered);
    EXPECT_TRUE(client.AckSync(batch->back().delivery_tag, /*multiple=*/true).ok());
  }
  return got;
}

TEST(Priorities, AnUrgentMessageOvertakesAPagedBacklogAndEveryLaneSurvivesKill9) {
  constexpr int kBacklog = 30'000;  // page_max_messages 1,000: nearly all on disk
  constexpr int kPerLane = 200;
  const std::string dir = testing::MakeTempDir("wharf-priority");
  const std::string config = dir + "/wharfd.toml";
  std::ofstream(config) << "[store]\npage_max_messages = 1000\n";
  TestServer server({"--config", config});
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  QueueSpec spec;
  spec.name = "jobs";
  spec.durable = true;
  spec.arguments["x-max-priority"] = int64_t{9};
  ASSERT_TRUE(client->DeclareQueue(spec).ok());
  for (int i = 0; i < kBacklog; ++i) {
    ASSERT_TRUE(client->PublishNoConfirm("", "jobs", At(0, i)).ok());
  }
  ASSERT_TRUE(client->Publish("", "jobs", At(9, 0)).ok());
  auto urgent = client->Receive("jobs", 1, std::chrono::seconds(5));
  ASSERT_TRUE(urgent.ok()) << urgent.status().ToString();
  ASSERT_EQ(urgent->size(), 1u);
  EXPECT_EQ((*urgent)[0].message.body, "p9-0") << "behind " << kBacklog << " paged messages";
  ASSERT_TRUE(client->AckSync((*urgent)[0].delivery_tag).ok());

  // Five lanes more, interleaved; the first three of priority 5 stay in flight at the kill.
  for (int i = 0; i < kPerLane; ++i) {
    for (uint32_t p = 1; p <= 5; ++p)
      ASSERT_TRUE(client->PublishNoConfirm("", "jobs", At(p, i)).ok());
  }
  ASSERT_TRUE(client->Publish("", "jobs", At(0, kBacklog)).ok());
  auto consumer = server.Connect();
  ASSERT_NE(consumer, nullptr);
  // A Receive takes what the lane holds in RAM at that moment; the rest of lane 5 may still be
  // on its way from disk (CI once got two), so the three can take more than one Receive.
  std::vector<std::string> in_flight;
  for (int round = 0; round < 20 && in_flight.size() < 3; ++round) {
    auto batch = consumer->Receive("jobs", 3 - static_cast<uint32_t>(in_flight.size()),
                                   std::chrono::seconds(5));
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    for (const auto& d : *batch) in_flight.push_back(d.message.body);
  }
  ASSERT_EQ(in_flight.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(in_flight[i], "p5-" + std::to_string(i));
  // A confirmed publish elsewhere: the commits before it (the lane's delivery mark) are on
  // disk, so the three come back redelivered.
  QueueSpec other;
  other.name = "other";
  other.durable = true;
  ASSERT_TRUE(client->DeclareQueue(other).ok());
  ASSERT_TRUE(client->Publish("", "other", At(0, -1)).ok());
  server.Kill();
  consumer.reset();
  client.reset();

  ASSERT_TRUE(server.Restart()) << server.Log();
  client = server.Connect();
  ASSERT_NE(client, nullptr);
  std::vector<std::pair<std::string, bool>> expected;
  for (uint32_t p = 5; p >= 1; --p) {
    for (int i = 0; i < kPerLane; ++i) {
      expected.emplace_back(At(p, i).body, p == 5 && i < 3);
    }
  }
  for (int i = 0; i <= kBacklog; ++i) expected.emplace_back(At(0, i).body, false);
  auto got = DrainInOrder(*client, "jobs");
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], expected[i]) << "at " << i << ": an inversion, a loss or a wrong flag";
  }
  ASSERT_TRUE(server.running());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wharf
