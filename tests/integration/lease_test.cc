// Leases and attempt accounting through the real wharfd and client (docs/lifecycle.md): an
// unsettled delivery comes back when its lease runs out, the late ack is refused with
// LEASE_EXPIRED and the connection stays, a lease can be extended, and every delivery says
// how often the message was received and failed, and why.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "integration/helpers.h"
#include "support/test_server.h"

namespace wharf {
namespace {

using std::chrono::milliseconds;

QueueSpec LeasedQueue(const std::string& name, int64_t lease_ms) {
  QueueSpec spec;
  spec.name = name;
  spec.durable = true;
  spec.arguments["x-lease-ms"] = lease_ms;
  spec.arguments["x-max-lease-ms"] = int64_t{10'000};
  return spec;
}

TEST(Lease, ExpiryRedeliversAndTheLateAckIsRefused) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->DeclareQueue(LeasedQueue("jobs", 300)).ok());
  ASSERT_TRUE(client->Publish("", "jobs", testing::PersistentMessage("work")).ok());
  auto first = client->Receive("jobs", 1, milliseconds(2'000));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].lease_ms, 300u);
  EXPECT_GT((*first)[0].first_received_at_ms, 0);
  EXPECT_EQ((*first)[0].failure_count, 0u);
  // Not settled: back after 300 ms (within the scheduler's 10 ms granularity).
  auto second = client->Receive("jobs", 1, milliseconds(3'000));
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->size(), 1u);
  const Delivery& d = (*second)[0];
  EXPECT_EQ(d.receive_count, 2u);
  EXPECT_TRUE(d.redelivered);
  EXPECT_EQ(d.failure_count, 1u);
  EXPECT_EQ(d.last_error, "lease of 300 ms expired");
  EXPECT_EQ(d.first_received_at_ms, (*first)[0].first_received_at_ms);
  Status late = client->AckSync((*first)[0].delivery_tag);
  EXPECT_EQ(late.code(), StatusCode::kLeaseExpired) << late.ToString();
  EXPECT_TRUE(client->AckSync(d.delivery_tag).ok()) << "the connection is still there";
}

TEST(Lease, ExtensionKeepsTheMessageAndNackCarriesTheError) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->DeclareQueue(LeasedQueue("slow", 300)).ok());
  ASSERT_TRUE(client->Publish("", "slow", testing::PersistentMessage("long job")).ok());
  auto got = client->Receive("slow", 1, milliseconds(2'000), milliseconds(400));
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  uint64_t tag = (*got)[0].delivery_tag;
  EXPECT_EQ((*got)[0].lease_ms, 400u) << "the consumer's own lease";
  for (int i = 0; i < 4; ++i) {  // 800 ms of work, extending every 200 ms
    std::this_thread::sleep_for(milliseconds(200));
    ASSERT_TRUE(client->ExtendLease(tag, milliseconds(400)).ok());
  }
  EXPECT_EQ(client->ExtendLease(tag, milliseconds(10'001)).code(), StatusCode::kInvalidArgument);
  auto nothing = client->Receive("slow", 1, milliseconds(0));
  ASSERT_TRUE(nothing.ok());
  EXPECT_TRUE(nothing->empty()) << "still leased";
  NackOptions nack;
  nack.error = "upstream returned 503";
  nack.immediate = true;
  ASSERT_TRUE(client->NackSync(tag, nack).ok());
  auto again = client->Receive("slow", 1, milliseconds(2'000));
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].failure_count, 1u);
  EXPECT_EQ((*again)[0].last_error, "upstream returned 503");
  EXPECT_GT((*again)[0].last_failed_at_ms, 0);
  EXPECT_TRUE(client->AckSync((*again)[0].delivery_tag).ok());
}

// The poison message, end to end: three failed attempts, then the dead-letter queue, where the
// death record says why, how often, and the consumer's last error; wharfctl shows it.
TEST(DeadLetter, PoisonMessageEndsInTheDeadLetterQueueWithItsStory) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  QueueSpec dlq;
  dlq.name = "orders.dlq";
  dlq.durable = true;
  ASSERT_TRUE(client->DeclareQueue(dlq).ok());
  QueueSpec orders = LeasedQueue("orders", 5'000);
  orders.arguments["x-max-attempts"] = int64_t{3};
  orders.arguments["x-dead-letter-queue"] = std::string("orders.dlq");
  ASSERT_TRUE(client->DeclareQueue(orders).ok());
  Message poison = testing::PersistentMessage("{not json");
  poison.headers["tenant"] = std::string("acme");
  auto published = client->Publish("", "orders", poison);
  ASSERT_TRUE(published.ok());
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto got = client->Receive("orders", 1, milliseconds(2'000));
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->size(), 1u) << attempt;
    NackOptions nack;
    nack.error = "cannot parse order (attempt " + std::to_string(attempt) + ")";
    ASSERT_TRUE(client->NackSync((*got)[0].delivery_tag, nack).ok());
  }
  auto none = client->Receive("orders", 1, milliseconds(200));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  server.Kill();  // the move is on disk
  ASSERT_TRUE(server.Restart());
  int code = -1;
  std::string json = testing::RunCommand(
      std::string(WHARFCTL_PATH) + " --server " + server.address() + " consume orders.dlq --json",
      &code);
  ASSERT_EQ(code, 0) << json;
  char id[24];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(published->message_id));
  nlohmann::json dead = testing::ParseJson(json);
  EXPECT_EQ(dead["message_id"], id);
  ASSERT_EQ(dead["deaths"].size(), 1u) << json;
  const nlohmann::json& death = dead["deaths"][0];
  EXPECT_EQ(death["reason"], "max_attempts");
  EXPECT_EQ(death["queue"], "orders");
  EXPECT_EQ(death["count"], 1);
  EXPECT_EQ(death["receive_count"], 3);
  EXPECT_EQ(death["failure_count"], 3);
  EXPECT_EQ(death["last_error"], "cannot parse order (attempt 3)");
  EXPECT_EQ(dead["properties"]["headers"]["tenant"], "acme");
  EXPECT_EQ(dead["payload"], "{not json");
  EXPECT_EQ(dead["payload_encoding"], "string");
}

TEST(Lease, UnknownQueueArgumentIsRefusedByName) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  QueueSpec spec = LeasedQueue("typo", 300);
  spec.arguments["x-leese-ms"] = int64_t{5};
  auto declared = client->DeclareQueue(spec);
  ASSERT_FALSE(declared.ok());
  EXPECT_EQ(declared.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(declared.status().message().find("x-leese-ms"), std::string::npos);
}

}  // namespace
}  // namespace wharf
