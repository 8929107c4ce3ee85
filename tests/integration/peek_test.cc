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
using testing::CtlStdout;

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
  nlohmann::json page = testing::ParseJson(CtlStdout(server, "peek orders.dlq --json", &code));
  ASSERT_EQ(code, 0) << page;
  ASSERT_EQ(page["messages"].size(), 3u) << page;
  EXPECT_EQ(page["more"], false) << "one page";
  const nlohmann::json& last = page["messages"][2];
  EXPECT_TRUE(last["position"].is_number_unsigned()) << last;
  EXPECT_EQ(last["queue"], "orders.dlq");
  EXPECT_EQ(last["properties"]["headers"], nlohmann::json({{"tenant", "acme"}}));
  ASSERT_EQ(last["deaths"].size(), 1u);
  EXPECT_EQ(last["deaths"][0]["reason"], "rejected");
  EXPECT_EQ(last["deaths"][0]["queue"], "orders");
  EXPECT_EQ(last["deaths"][0]["last_error"], "no such customer");
  EXPECT_EQ(last["payload"], "order 2");

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
  nlohmann::json queues = testing::ParseJson(CtlStdout(server, "queues --json", &code));
  ASSERT_EQ(code, 0) << queues;
  nlohmann::json orders, dlq;
  for (const auto& q : queues) (q["name"] == "orders" ? orders : dlq) = q;
  EXPECT_EQ(orders["dead_letter_target"], "orders.dlq");
  EXPECT_TRUE(orders["oldest_ready_age_ms"].is_number_integer()) << orders;
  EXPECT_TRUE(dlq["oldest_ready_age_ms"].is_null()) << "the empty DLQ: unknown, not -1";
  EXPECT_TRUE(orders["publish_rate"].is_number());
  EXPECT_EQ(orders["arguments"], nlohmann::json({{"x-dead-letter-queue", "orders.dlq"}}));
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
  EXPECT_NE(help.find("Usage: wharfctl peek"), std::string::npos) << help;
  EXPECT_NE(help.find("--no-body"), std::string::npos) << help;
  EXPECT_EQ(help.find("redrive"), std::string::npos) << "only that command's lines";
  Ctl(server, "nope", &code);
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
  nlohmann::json bindings =
      testing::ParseJson(CtlStdout(server, "bindings --exchange events --json", &code));
  EXPECT_EQ(code, 0) << bindings;
  EXPECT_EQ(bindings, nlohmann::json::parse(R"([{"exchange": "events", "queue": "audit",
      "destination_exchange": null, "routing_key": "order.*", "arguments": {}}])"));
  nlohmann::json consumers = testing::ParseJson(CtlStdout(server, "consumers audit --json", &code));
  EXPECT_EQ(code, 0) << consumers;
  ASSERT_EQ(consumers.size(), 1u);
  EXPECT_EQ(consumers[0]["consumer_tag"], "auditor");
  EXPECT_EQ(consumers[0]["prefetch"], 7);
  EXPECT_EQ(consumers[0]["user"], "guest");
  nlohmann::json connections = testing::ParseJson(CtlStdout(server, "connections --json", &code));
  EXPECT_EQ(code, 0) << connections;
  bool subscriber_listed = false;
  for (const auto& c : connections) {
    EXPECT_TRUE(c["address"].get<std::string>().starts_with("127.0.0.1:")) << c;
    if (c["consumers"] == 1) subscriber_listed = true;
  }
  EXPECT_TRUE(subscriber_listed) << connections;
  std::string table = Ctl(server, "connections", &code);
  EXPECT_EQ(code, 0) << table;
  EXPECT_NE(table.find("ADDRESS"), std::string::npos) << table;
}

}  // namespace
}  // namespace wharf
