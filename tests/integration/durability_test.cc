// Durability of the real wharfd: restarts, and the crash test (kill -9 under load, repeated).
//
// The crash test's promise: every message the broker confirmed is delivered at least once
// across all the restarts. Duplicates are allowed (an ack that was not yet on disk) and counted.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "support/test_server.h"
#include "wharf/client.h"

namespace wharf {
namespace {

using testing::TestServer;

Message Persistent(const std::string& id, const std::string& body = "payload") {
  Message m;
  m.body = body;
  m.persistent = true;
  m.properties.message_id = id;
  return m;
}

void DeclareDurableQueue(Client& client, const std::string& name) {
  QueueSpec spec;
  spec.name = name;
  spec.durable = true;
  auto info = client.DeclareQueue(spec);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
}

TEST(Durability, GracefulRestartKeepsTopologyAndPersistentMessages) {
  TestServer server;
  {
    auto client = server.Connect();
    ASSERT_NE(client, nullptr);
    DeclareDurableQueue(*client, "orders");
    QueueSpec scratch;
    scratch.name = "scratch";
    scratch.durable = false;
    ASSERT_TRUE(client->DeclareQueue(scratch).ok());
    ExchangeSpec ex;
    ex.name = "events";
    ex.type = ExchangeType::kTopic;
    ASSERT_TRUE(client->DeclareExchange(ex).ok());
    BindingSpec binding;
    binding.queue = "orders";
    binding.exchange = "events";
    binding.routing_key = "order.#";
    ASSERT_TRUE(client->Bind(binding).ok());
    for (int i = 0; i < 10; ++i) {
      auto r = client->Publish("events", "order.new", Persistent("m" + std::to_string(i)));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
    Message transient;
    transient.body = "gone after restart";
    ASSERT_TRUE(client->Publish("events", "order.new", transient).ok());
  }
  ASSERT_EQ(server.Stop(), 0);
  ASSERT_TRUE(server.Restart());
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  auto queues = client->ListQueues();
  ASSERT_TRUE(queues.ok());
  ASSERT_EQ(queues->size(), 1u) << "the transient queue is gone";
  EXPECT_EQ((*queues)[0].name, "orders");
  EXPECT_EQ((*queues)[0].ready, 10u);
  auto batch = client->Receive("orders", 100, std::chrono::seconds(5));
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ((*batch)[i].message.properties.message_id, "m" + std::to_string(i));
    EXPECT_TRUE((*batch)[i].message.persistent);
    EXPECT_EQ((*batch)[i].routing_key, "order.new");
  }
  // The binding survived.
  auto routed = client->Publish("events", "order.paid", Persistent("after"));
  ASSERT_TRUE(routed.ok());
  EXPECT_EQ(routed->routed_queues, 1u);
}

TEST(Durability, MessagesInFlightAtAKillComeBackRedelivered) {
  TestServer server;
  {
    auto client = server.Connect();
    ASSERT_NE(client, nullptr);
    DeclareDurableQueue(*client, "jobs");
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(client->Publish("", "jobs", Persistent("j")).ok());
    auto taken = client->Receive("jobs", 2, std::chrono::seconds(5));
    ASSERT_TRUE(taken.ok());
    ASSERT_EQ(taken->size(), 2u);
    ASSERT_TRUE(client->AckSync((*taken)[0].delivery_tag).ok());
    ASSERT_TRUE(client->Ping().ok());
    server.Kill();  // the second delivery is still unacked
  }
  ASSERT_TRUE(server.Restart());
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  auto after = client->Receive("jobs", 10, std::chrono::seconds(5));
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 2u);
  EXPECT_TRUE((*after)[0].redelivered);
  EXPECT_EQ((*after)[0].receive_count, 2u);
  EXPECT_FALSE((*after)[1].redelivered);
  EXPECT_EQ((*after)[1].receive_count, 1u);
}

// Publishers with confirms and a consumer with acks run flat out; wharfd is killed with
// SIGKILL at a random moment, restarted on the same data directory, and again, kCycles times.
TEST(Durability, KillNineUnderLoadLosesNoConfirmedMessage) {
  int cycles = 20;
  if (const char* env = std::getenv("WHARF_CRASH_CYCLES")) cycles = std::max(1, std::atoi(env));
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> run_ms(50, 400);

  TestServer server;
  {
    auto setup = server.Connect();
    ASSERT_NE(setup, nullptr);
    DeclareDurableQueue(*setup, "crash");
  }
  std::mutex mu;
  std::set<std::string> confirmed;
  std::map<std::string, int> received;  // id -> deliveries
  uint64_t next_id = 0;
  std::atomic<bool> stop{false};
  std::atomic<int> outstanding{0};

  for (int cycle = 0; cycle < cycles; ++cycle) {
    auto publisher = server.Connect();
    auto consumer = server.Connect();
    ASSERT_NE(publisher, nullptr);
    ASSERT_NE(consumer, nullptr);
    Client* consumer_ptr = consumer.get();
    auto tag = consumer->Subscribe("crash", 200, [&, consumer_ptr](Delivery d) {
      {
        std::lock_guard lock(mu);
        ++received[d.message.properties.message_id];
      }
      consumer_ptr->Ack(d.delivery_tag);
    });
    ASSERT_TRUE(tag.ok()) << tag.status().ToString();

    stop = false;
    std::thread publish_loop([&] {
      while (!stop) {
        if (outstanding >= 500) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          continue;
        }
        std::string id;
        {
          std::lock_guard lock(mu);
          id = "c" + std::to_string(next_id++);
        }
        ++outstanding;
        publisher->PublishAsync("", "crash", Persistent(id), [&, id](Result<PublishResult> result) {
          if (result.ok()) {
            std::lock_guard lock(mu);
            confirmed.insert(id);
          }
          --outstanding;
        });
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(run_ms(rng)));
    server.Kill();
    stop = true;
    publish_loop.join();
    publisher.reset();  // their callbacks fail with kUnavailable
    consumer.reset();
    ASSERT_TRUE(server.Restart()) << "cycle " << cycle;
  }

  // Drain what is left.
  auto drain = server.Connect();
  ASSERT_NE(drain, nullptr);
  while (true) {
    auto batch = drain->Receive("crash", 1000, std::chrono::milliseconds(500));
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    if (batch->empty()) break;
    {
      std::lock_guard lock(mu);
      for (const auto& d : *batch) ++received[d.message.properties.message_id];
    }
    ASSERT_TRUE(drain->AckSync(batch->back().delivery_tag, /*multiple=*/true).ok());
  }

  std::lock_guard lock(mu);
  uint64_t lost = 0, duplicates = 0;
  for (const auto& id : confirmed) {
    if (!received.contains(id)) {
      if (++lost <= 10) ADD_FAILURE() << "confirmed message " << id << " was never delivered";
    }
  }
  for (const auto& [id, count] : received) duplicates += count > 1 ? count - 1 : 0;
  std::printf(
      "crash test: %d kills, %llu published, %zu confirmed, %zu distinct received, "
      "%llu duplicate deliveries, %llu lost\n",
      cycles, static_cast<unsigned long long>(next_id), confirmed.size(), received.size(),
      static_cast<unsigned long long>(duplicates), static_cast<unsigned long long>(lost));
  ::testing::Test::RecordProperty("confirmed", static_cast<int>(confirmed.size()));
  ::testing::Test::RecordProperty("duplicates", static_cast<int>(duplicates));
  EXPECT_EQ(lost, 0u);
  EXPECT_GT(confirmed.size(), 0u);
}

}  // namespace
}  // namespace wharf
