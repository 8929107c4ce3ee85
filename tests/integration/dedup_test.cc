// Publish deduplication windows through the real wharfd (docs/lifecycle.md, "Deduplication"):
// a publisher that retries every publish after the broker was killed mid-confirm ends with
// each id exactly once in the queue, and the confirms of the retries say which were
// duplicates.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "support/test_server.h"
#include "wharf/client.h"

namespace wharf {
namespace {

using testing::TestServer;

constexpr int kMessages = 20'000;

Message Keyed(int id) {
  Message m;
  m.persistent = true;
  m.body = "order " + std::to_string(id);
  m.headers["x-deduplication-header"] = "order-" + std::to_string(id);
  return m;
}

// Publishes ids [0, kMessages) with up to 64 unconfirmed; returns the confirmed ids (with
// their results). Stops early, when a publish fails (the broker went away).
std::map<int, PublishResult> PublishAll(Client& client) {
  std::map<int, PublishResult> confirmed;
  std::deque<std::pair<int, std::future<Result<PublishResult>>>> window;
  auto settle = [&]() -> bool {
    auto [id, future] = std::move(window.front());
    window.pop_front();
    auto r = future.get();
    if (!r.ok()) return false;
    confirmed.emplace(id, *r);
    return true;
  };
  bool ok = true;
  for (int id = 0; id < kMessages && ok; ++id) {
    window.emplace_back(id, client.PublishAsync("", "orders", Keyed(id)));
    if (window.size() >= 64) ok = settle();
  }
  while (!window.empty()) settle();
  return confirmed;
}

TEST(Dedup, ARetryingPublisherEndsWithEachIdOnceAfterAKill9MidConfirm) {
  TestServer server;
  {
    auto admin = server.Connect();
    ASSERT_NE(admin, nullptr);
    QueueSpec spec;
    spec.name = "orders";
    spec.durable = true;
    spec.arguments["x-deduplication-window"] = int64_t{600'000};
    ASSERT_TRUE(admin->DeclareQueue(spec).ok());
  }
  // The first run: killed while publishes are in flight.
  std::map<int, PublishResult> before;
  {
    auto publisher = server.Connect();
    ASSERT_NE(publisher, nullptr);
    auto run = std::async(std::launch::async, [&] { return PublishAll(*publisher); });
    // Kill once some are confirmed, so the crash falls among publishes in flight.
    auto watcher = server.Connect();
    ASSERT_NE(watcher, nullptr);
    for (int i = 0; i < 2'000; ++i) {
      auto queues = watcher->ListQueues();
      if (queues.ok() && !queues->empty() && (*queues)[0].ready >= kMessages / 10) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    server.Kill();
    before = run.get();
  }
  ASSERT_GT(before.size(), 0u);
  ASSERT_LT(before.size(), static_cast<size_t>(kMessages)) << "the kill came too late";
  ASSERT_TRUE(server.Restart()) << server.Log();

  // The retry: every publish again, whatever its fate was.
  auto publisher = server.Connect();
  ASSERT_NE(publisher, nullptr);
  std::map<int, PublishResult> after = PublishAll(*publisher);
  ASSERT_EQ(after.size(), static_cast<size_t>(kMessages)) << server.Log();
  size_t duplicates = 0;
  for (const auto& [id, result] : after) {
    if (result.duplicate_of != 0) ++duplicates;
    if (auto first = before.find(id); first != before.end()) {
      // Confirmed before the kill: a duplicate of that very message.
      EXPECT_EQ(result.duplicate_of, first->second.message_id) << "order " << id;
    }
  }
  // At least those confirmed before; more when the kill fell after a write but before its
  // confirm left.
  EXPECT_GE(duplicates, before.size());

  std::multiset<std::string> bodies;
  while (true) {
    auto got = publisher->Receive("orders", 500, std::chrono::milliseconds(500));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    if (got->empty()) break;
    for (const Delivery& d : *got) bodies.insert(d.message.body);
    ASSERT_TRUE(publisher->AckSync(got->back().delivery_tag, /*multiple=*/true).ok());
  }
  EXPECT_EQ(bodies.size(), static_cast<size_t>(kMessages)) << "each id exactly once";
  for (int id = 0; id < kMessages; ++id) {
    EXPECT_EQ(bodies.count("order " + std::to_string(id)), 1u) << "order " << id;
  }
  ASSERT_TRUE(server.running());
}

}  // namespace
}  // namespace wharf
