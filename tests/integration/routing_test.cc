// Routing through the real wharfd: every exchange type, alternate exchanges and mandatory
// returns, driven through the client library.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "support/test_server.h"

namespace wharf {
namespace {

using std::chrono::milliseconds;

class RoutingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = server_.Connect();
    ASSERT_NE(client_, nullptr);
  }

  void DeclareQueue(const std::string& name) {
    QueueSpec spec;
    spec.name = name;
    auto info = client_->DeclareQueue(spec);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
  }

  void DeclareExchange(const std::string& name, ExchangeType type,
                       const std::string& alternate = "") {
    ExchangeSpec spec;
    spec.name = name;
    spec.type = type;
    spec.alternate_exchange = alternate;
    Status s = client_->DeclareExchange(spec);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void Bind(const std::string& queue, const std::string& exchange, const std::string& key,
            Headers args = {}) {
    Status s = client_->Bind({queue, exchange, key, std::move(args)});
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  uint32_t Publish(const std::string& exchange, const std::string& key, Headers headers = {}) {
    Message m;
    m.body = "x";
    m.headers = std::move(headers);
    auto r = client_->Publish(exchange, key, m);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->routed_queues : 0;
  }

  uint64_t Ready(const std::string& queue) {
    QueueSpec spec;
    spec.name = queue;
    spec.passive = true;
    auto info = client_->DeclareQueue(spec);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info->ready : 0;
  }

  testing::TestServer server_;
  std::unique_ptr<Client> client_;
};

TEST_F(RoutingTest, DefaultExchangeRoutesByQueueName) {
  DeclareQueue("q1");
  EXPECT_EQ(Publish("", "q1"), 1u);
  EXPECT_EQ(Publish("", "nope"), 0u);
  EXPECT_EQ(Ready("q1"), 1u);
}

TEST_F(RoutingTest, DirectExchangeMatchesKeyExactly) {
  DeclareQueue("red");
  DeclareQueue("blue");
  DeclareExchange("colors", ExchangeType::kDirect);
  Bind("red", "colors", "red");
  Bind("blue", "colors", "blue");
  EXPECT_EQ(Publish("colors", "red"), 1u);
  EXPECT_EQ(Publish("colors", "blue"), 1u);
  EXPECT_EQ(Publish("colors", "green"), 0u);
  EXPECT_EQ(Ready("red"), 1u);
  EXPECT_EQ(Ready("blue"), 1u);
}

TEST_F(RoutingTest, FanoutExchangeCopiesToEveryQueue) {
  DeclareQueue("f1");
  DeclareQueue("f2");
  DeclareExchange("all", ExchangeType::kFanout);
  Bind("f1", "all", "");
  Bind("f2", "all", "ignored");
  EXPECT_EQ(Publish("all", "anything"), 2u);
  EXPECT_EQ(Ready("f1"), 1u);
  EXPECT_EQ(Ready("f2"), 1u);
}

TEST_F(RoutingTest, TopicExchangeUsesWildcards) {
  DeclareQueue("eu");
  DeclareQueue("created");
  DeclareExchange("orders", ExchangeType::kTopic);
  Bind("eu", "orders", "order.*.eu");
  Bind("created", "orders", "order.created.#");
  EXPECT_EQ(Publish("orders", "order.created.eu"), 2u);
  EXPECT_EQ(Publish("orders", "order.created"), 1u);
  EXPECT_EQ(Publish("orders", "order.paid.eu"), 1u);
  EXPECT_EQ(Publish("orders", "order.paid.us"), 0u);
  EXPECT_EQ(Ready("eu"), 2u);
  EXPECT_EQ(Ready("created"), 2u);
}

TEST_F(RoutingTest, HeadersExchangeMatchesAllOrAny) {
  DeclareQueue("all");
  DeclareQueue("any");
  DeclareExchange("hdr", ExchangeType::kHeaders);
  Bind("all", "hdr", "",
       {{"x-match", std::string("all")}, {"format", std::string("pdf")}, {"pages", int64_t{2}}});
  Bind("any", "hdr", "",
       {{"x-match", std::string("any")}, {"format", std::string("pdf")}, {"pages", int64_t{2}}});
  EXPECT_EQ(Publish("hdr", "", {{"format", std::string("pdf")}, {"pages", int64_t{2}}}), 2u);
  EXPECT_EQ(Publish("hdr", "", {{"format", std::string("pdf")}}), 1u);
  EXPECT_EQ(Publish("hdr", "", {{"pages", std::string("2")}}), 0u);  // typed: "2" != 2
  EXPECT_EQ(Ready("all"), 1u);
  EXPECT_EQ(Ready("any"), 2u);
}

TEST_F(RoutingTest, BadXMatchIsRefused) {
  DeclareQueue("h");
  DeclareExchange("hdr2", ExchangeType::kHeaders);
  Status s = client_->Bind({"h", "hdr2", "", {{"x-match", std::string("some")}}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

TEST_F(RoutingTest, AlternateExchangeTakesUnroutableMessages) {
  DeclareQueue("unrouted");
  DeclareExchange("ae", ExchangeType::kFanout);
  Bind("unrouted", "ae", "");
  DeclareExchange("main", ExchangeType::kDirect, "ae");
  EXPECT_EQ(Publish("main", "no-binding"), 1u);
  EXPECT_EQ(Ready("unrouted"), 1u);
}

TEST_F(RoutingTest, ExchangeToExchangeBindingRoutesOn) {
  DeclareQueue("audit");
  DeclareExchange("orders", ExchangeType::kTopic);
  DeclareExchange("everything", ExchangeType::kFanout);
  Bind("audit", "everything", "");
  BindingSpec e2e;
  e2e.exchange = "orders";
  e2e.destination_exchange = "everything";
  e2e.routing_key = "order.#";
  ASSERT_TRUE(client_->Bind(e2e).ok());
  EXPECT_EQ(Publish("orders", "order.created"), 1u);
  EXPECT_EQ(Publish("orders", "invoice.sent"), 0u);
  EXPECT_EQ(Ready("audit"), 1u);
  ASSERT_TRUE(client_->Unbind(e2e).ok());
  EXPECT_EQ(Publish("orders", "order.created"), 0u);
}

TEST_F(RoutingTest, MandatoryUnroutableMessageIsReturnedBeforeItsConfirm) {
  std::mutex mu;
  std::vector<ReturnedMessage> returned;
  client_->SetReturnHandler([&](ReturnedMessage r) {
    std::lock_guard lock(mu);
    returned.push_back(std::move(r));
  });
  DeclareExchange("lonely", ExchangeType::kDirect);
  Message m;
  m.body = "lost";
  PublishOptions options;
  options.mandatory = true;
  auto r = client_->Publish("lonely", "nowhere", m, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->routed_queues, 0u);
  std::lock_guard lock(mu);  // the return is read before the confirm on the same connection
  ASSERT_EQ(returned.size(), 1u);
  EXPECT_EQ(returned[0].reason.code(), StatusCode::kNoRoute);
  EXPECT_EQ(returned[0].message.body, "lost");
  EXPECT_EQ(returned[0].routing_key, "nowhere");
}

TEST_F(RoutingTest, NonMandatoryUnroutableMessageIsDroppedSilently) {
  std::atomic<int> returns{0};
  client_->SetReturnHandler([&](ReturnedMessage) { ++returns; });
  EXPECT_EQ(Publish("amq.direct", "none"), 0u);
  EXPECT_TRUE(client_->Ping().ok());
  EXPECT_EQ(returns.load(), 0);
}

TEST_F(RoutingTest, PublishToMissingExchangeIsAnErrorThatKeepsTheConnection) {
  Message m;
  auto r = client_->Publish("missing", "k", m);
  EXPECT_EQ(r.status().code(), StatusCode::kExchangeNotFound);
  EXPECT_TRUE(client_->Ping().ok());
}

TEST_F(RoutingTest, RedeclareWithOtherArgumentsIsAPreconditionError) {
  DeclareExchange("ex", ExchangeType::kDirect);
  ExchangeSpec other;
  other.name = "ex";
  other.type = ExchangeType::kTopic;
  EXPECT_EQ(client_->DeclareExchange(other).code(), StatusCode::kPreconditionFailed);
  DeclareQueue("dq");
  QueueSpec transient;
  transient.name = "dq";
  transient.durable = false;
  EXPECT_EQ(client_->DeclareQueue(transient).status().code(), StatusCode::kPreconditionFailed);
  DeclareQueue("dq");  // equal arguments: fine
}

TEST_F(RoutingTest, MessageKeepsHeadersAndProperties) {
  DeclareQueue("props");
  Message m;
  m.body = std::string("\0binary\xff", 8);
  m.headers = {{"b", true},
               {"i", int64_t{-7}},
               {"d", 2.5},
               {"s", std::string("v")},
               {"y", Bytes{"\x01\x02"}}};
  m.properties.message_id = "app-1";
  m.properties.correlation_id = "c-1";
  m.properties.reply_to = "replies";
  m.properties.content_type = "application/octet-stream";
  m.properties.timestamp_ms = 1234;
  m.properties.priority = 5;
  m.persistent = true;
  auto r = client_->Publish("", "props", m);
  ASSERT_TRUE(r.ok());
  auto got = client_->Receive("props", 1, milliseconds(1000));
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  const Message& out = (*got)[0].message;
  EXPECT_EQ(out.id, r->message_id);
  EXPECT_EQ(out.body, m.body);
  EXPECT_EQ(out.headers, m.headers);
  EXPECT_EQ(out.properties, m.properties);
  EXPECT_TRUE(out.persistent);
  EXPECT_GT(out.published_at_ms, 0);
  EXPECT_EQ((*got)[0].exchange, "");
  EXPECT_EQ((*got)[0].routing_key, "props");
}

}  // namespace
}  // namespace wharf
