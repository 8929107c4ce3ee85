// wharfctl peek against the real wharfd: a dead-letter queue's messages with their headers,
// counters and death records, as a table and as JSON, taking none of them.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "integration/helpers.h"

namespace wharf {
namespace {

using std::chrono::milliseconds;

using testing::Ctl;

TEST(Peek, WharfctlShowsDeadLettersWithTheirStoryAndTakesNothing) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  testing::DeclareWithDeadLetterQueue(*client, "orders", "orders.dlq");
  for (int i = 0; i < 3; ++i) {
    Message m;
    m.body = "order " + std::to_string(i);
    m.persistent = true;
    m.headers["tenant"] = std::string("acme");
    ASSERT_TRUE(client->Publish("", "orders", m).ok());
  }
  auto got = client->Receive("orders", 3, milliseconds(2'000));
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 3u);
  for (const auto& d : *got) {
    NackOptions reject;
    reject.requeue = false;
    reject.error = "no such customer";
    ASSERT_TRUE(client->NackSync(d.delivery_tag, reject).ok());
  }

  int code = -1;
  std::string json = Ctl(server, "peek orders.dlq --json", &code);
  ASSERT_EQ(code, 0) << json;
  EXPECT_TRUE(json.starts_with("[{\"position\":")) << json;
  EXPECT_NE(json.find("\"headers\":{\"tenant\":\"\\\"acme\\\"\"}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"deaths\":[{\"reason\":\"rejected\",\"queue\":\"orders\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"last_error\":\"no such customer\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"body\":\"order 2\""), std::string::npos) << json;
  EXPECT_EQ(json.find("more:"), std::string::npos) << "one page";

  std::string table = Ctl(server, "peek orders.dlq -n 2", &code);
  ASSERT_EQ(code, 0) << table;
  EXPECT_NE(table.find("rejected@orders"), std::string::npos) << table;
  EXPECT_NE(table.find("order 0"), std::string::npos) << table;
  EXPECT_EQ(table.find("order 2"), std::string::npos) << table;
  EXPECT_NE(table.find("more: wharfctl peek orders.dlq -n 2 --after "), std::string::npos) << table;
  std::string rest =
      Ctl(server, "peek orders.dlq --after " + table.substr(table.rfind("--after ") + 8), &code);
  EXPECT_EQ(code, 0) << rest;
  EXPECT_NE(rest.find("order 2"), std::string::npos) << rest;

  // Nothing was taken: a consumer gets all three, each for the first time in this queue.
  auto dead = client->Receive("orders.dlq", 10, milliseconds(2'000));
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 3u);
  for (const auto& d : *dead) EXPECT_EQ(d.receive_count, 1u);

  EXPECT_EQ(Ctl(server, "peek nope", &code).find("'nope' not found") != std::string::npos, true);
  EXPECT_EQ(code, 1);
}

TEST(Wharfctl, QueuesShowTargetsAndAgesQueueShowAndHelpPerCommand) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  testing::DeclareWithDeadLetterQueue(*client, "orders", "orders.dlq");
  Message m;
  m.body = "waiting";
  ASSERT_TRUE(client->Publish("", "orders", m).ok());

  int code = -1;
  std::string json = Ctl(server, "queues --json", &code);
  ASSERT_EQ(code, 0) << json;
  EXPECT_NE(json.find("\"name\":\"orders\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"dead_letter_target\":\"orders.dlq\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"oldest_ready_age_ms\":"), std::string::npos) << json;
  EXPECT_NE(json.find("\"oldest_ready_age_ms\":-1"), std::string::npos) << "the empty DLQ";
  EXPECT_NE(json.find("\"publish_rate\":"), std::string::npos) << json;
  EXPECT_NE(json.find("\"arguments\":{\"x-dead-letter-queue\":\"\\\"orders.dlq\\\"\"}"),
            std::string::npos)
      << json;

  std::string table = Ctl(server, "queues", &code);
  EXPECT_EQ(code, 0) << table;
  EXPECT_NE(table.find("DEAD-LETTERS TO"), std::string::npos) << table;
  std::string show = Ctl(server, "queue show orders", &code);
  EXPECT_EQ(code, 0) << show;
  EXPECT_NE(show.find("dead-letters to:     orders.dlq"), std::string::npos) << show;
  EXPECT_NE(show.find("x-dead-letter-queue = \"orders.dlq\""), std::string::npos) << show;
  EXPECT_NE(show.find("ready:               1"), std::string::npos) << show;
  Ctl(server, "queue show nope", &code);
  EXPECT_EQ(code, 1);

  std::string help = Ctl(server, "peek --help", &code);
  EXPECT_EQ(code, 0) << help;
  EXPECT_NE(help.find("  peek QUEUE [-n N]"), std::string::npos) << help;
  EXPECT_EQ(help.find("redrive"), std::string::npos) << "only that command's lines";
  Ctl(server, "nope --help", &code);
  EXPECT_EQ(code, 2);
}

TEST(Wharfctl, ListsBindingsConsumersAndConnections) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  ExchangeSpec events;
  events.name = "events";
  events.type = ExchangeType::kTopic;
  ASSERT_TRUE(client->DeclareExchange(events).ok());
  QueueSpec audit;
  audit.name = "audit";
  ASSERT_TRUE(client->DeclareQueue(audit).ok());
  ASSERT_TRUE(client->Bind(BindingSpec{"audit", "events", "order.*", {}}).ok());
  auto tag = client->Subscribe(
      "audit", 7, [](Delivery) {}, "auditor");
  ASSERT_TRUE(tag.ok());

  int code = -1;
  std::string bindings = Ctl(server, "bindings --exchange events --json", &code);
  EXPECT_EQ(code, 0) << bindings;
  EXPECT_EQ(bindings,
            "[{\"exchange\":\"events\",\"queue\":\"audit\",\"destination_exchange\":\"\","
            "\"routing_key\":\"order.*\",\"arguments\":{}}]\n");
  std::string consumers = Ctl(server, "consumers audit --json", &code);
  EXPECT_EQ(code, 0) << consumers;
  EXPECT_NE(consumers.find("\"consumer_tag\":\"auditor\""), std::string::npos) << consumers;
  EXPECT_NE(consumers.find("\"prefetch\":7"), std::string::npos) << consumers;
  EXPECT_NE(consumers.find("\"user\":\"guest\""), std::string::npos) << consumers;
  std::string connections = Ctl(server, "connections --json", &code);
  EXPECT_EQ(code, 0) << connections;
  EXPECT_NE(connections.find("\"address\":\"127.0.0.1:"), std::string::npos) << connections;
  EXPECT_NE(connections.find("\"consumers\":1"), std::string::npos) << connections;
  std::string table = Ctl(server, "connections", &code);
  EXPECT_EQ(code, 0) << table;
  EXPECT_NE(table.find("ADDRESS"), std::string::npos) << table;
}

}  // namespace
}  // namespace wharf
