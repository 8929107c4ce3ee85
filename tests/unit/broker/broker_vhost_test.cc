// Unit tests for virtual hosts in the broker (broker_vhosts.cc, docs/security.md "Virtual
// hosts"): each vhost is a namespace of its own; a session uses the one it opened; limits;
// deletion; and, with the real RocksDB store, that all of it survives a restart.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "common/clock.h"
#include "unit/broker/broker_store_fixture.h"
#include "unit/broker/recording_peer.h"

namespace wharf::broker {
namespace {

class BrokerVhostTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kRoot = 1;  // a native session in "/"
  static constexpr uint64_t kShop = 2;  // a native session in "shop"

  BrokerVhostTest() {
    EXPECT_TRUE(broker_.AddVhost("shop", "the shop").ok());
    root_ = Open(kRoot, "/");
    shop_ = Open(kShop, "shop");
  }

  RecordingPeer* Open(uint64_t id, const std::string& vhost, bool amqp = false) {
    auto peer = std::make_shared<RecordingPeer>();
    SessionOptions options;
    options.vhost = vhost;
    options.amqp = amqp;
    Status s = broker_.OpenSession(id, "alice", peer, "127.0.0.1:1", options);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return peer.get();
  }

  Status Declare(uint64_t session, const std::string& name, Headers arguments = {}) {
    QueueSpec spec;
    spec.name = name;
    spec.arguments = std::move(arguments);
    return broker_.DeclareQueue(session, spec).status();
  }

  Status Publish(uint64_t session, const std::string& exchange, const std::string& key,
                 const std::string& body) {
    Message m;
    m.body = body;
    return broker_.Publish(session, exchange, key, std::move(m)).status();
  }

  uint64_t Ready(uint64_t session, const std::string& queue) {
    QueueSpec spec;
    spec.name = queue;
    spec.passive = true;
    auto info = broker_.DeclareQueue(session, spec);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info->ready : 0;
  }

  ManualClock clock_;
  Broker broker_{BrokerOptions{}, &clock_};
  RecordingPeer* root_ = nullptr;
  RecordingPeer* shop_ = nullptr;
};

TEST_F(BrokerVhostTest, TheSameNameInTwoVhostsIsTwoQueues) {
  ASSERT_TRUE(Declare(kRoot, "orders").ok());
  ASSERT_TRUE(Declare(kShop, "orders").ok());
  ASSERT_TRUE(Publish(kShop, "", "orders", "to the shop").ok());
  ASSERT_TRUE(Publish(kShop, "", "orders", "again").ok());
  ASSERT_TRUE(Publish(kRoot, "", "orders", "to the root").ok());
  EXPECT_EQ(Ready(kShop, "orders"), 2u);
  EXPECT_EQ(Ready(kRoot, "orders"), 1u);

  ASSERT_TRUE(broker_.Subscribe(kShop, "orders", "", 10, false).ok());
  broker_.Flush();
  ASSERT_EQ(shop_->deliveries.size(), 2u);
  EXPECT_EQ(shop_->deliveries[0].envelope->message.body, "to the shop");
  EXPECT_EQ(shop_->deliveries[0].queue, "orders");

  // A queue of one vhost is not found from another.
  ASSERT_TRUE(Declare(kShop, "only-in-shop").ok());
  QueueSpec passive;
  passive.name = "only-in-shop";
  passive.passive = true;
  EXPECT_EQ(broker_.DeclareQueue(kRoot, passive).status().code(), StatusCode::kQueueNotFound);
  EXPECT_EQ(broker_.PurgeQueue(kRoot, "only-in-shop").status().code(), StatusCode::kQueueNotFound);
  EXPECT_EQ(broker_.Get(kRoot, "only-in-shop", true).status().code(), StatusCode::kQueueNotFound);
  EXPECT_EQ(broker_.DeleteQueue(kRoot, "only-in-shop", false, false).status().code(),
            StatusCode::kQueueNotFound);
  EXPECT_EQ(broker_.ListQueues("", "shop").size(), 2u);
  EXPECT_EQ(broker_.ListQueues("", "/").size(), 1u);
  EXPECT_EQ(broker_.ListQueues("").size(), 3u);
  EXPECT_EQ(broker_.ListQueues("only", "/").size(), 0u);
  ASSERT_EQ(broker_.ListQueues("only", "shop").size(), 1u);
  EXPECT_EQ(broker_.ListQueues("only", "shop")[0].vhost, "shop");
}

TEST_F(BrokerVhostTest, ExchangesAndBindingsAreTheVhosts) {
  ASSERT_TRUE(Declare(kRoot, "q").ok());
  ASSERT_TRUE(Declare(kShop, "q").ok());
  // Each vhost has its own amq.direct: a binding in the shop's routes only the shop's publishes.
  ASSERT_TRUE(broker_.Bind(kShop, BindingSpec{"q", "amq.direct", "k", {}}).ok());
  ASSERT_TRUE(Publish(kRoot, "amq.direct", "k", "root").ok());
  ASSERT_TRUE(Publish(kShop, "amq.direct", "k", "shop").ok());
  EXPECT_EQ(Ready(kRoot, "q"), 0u);
  EXPECT_EQ(Ready(kShop, "q"), 1u);

  ExchangeSpec events;
  events.name = "events";
  events.type = ExchangeType::kFanout;
  ASSERT_TRUE(broker_.DeclareExchange(kShop, events).ok());
  EXPECT_EQ(Publish(kRoot, "events", "", "x").code(), StatusCode::kExchangeNotFound);
  EXPECT_EQ(broker_.Bind(kRoot, BindingSpec{"q", "events", "", {}}).code(),
            StatusCode::kExchangeNotFound);
  ASSERT_TRUE(broker_.Bind(kShop, BindingSpec{"q", "events", "", {}}).ok());
  // The same name declared in "/" with another type is another exchange.
  events.type = ExchangeType::kTopic;
  ASSERT_TRUE(broker_.DeclareExchange(kRoot, events).ok());

  auto shop_bindings = broker_.ListBindings("", "", "shop");
  ASSERT_EQ(shop_bindings.size(), 2u);
  for (const auto& b : shop_bindings) EXPECT_EQ(b.vhost, "shop");
  EXPECT_TRUE(broker_.ListBindings("", "", "/").empty());
  size_t root_exchanges = broker_.ListExchanges("/").size();
  size_t shop_exchanges = broker_.ListExchanges("shop").size();
  EXPECT_EQ(root_exchanges, shop_exchanges);  // the default, amq.*, events
  EXPECT_EQ(broker_.ListExchanges().size(), root_exchanges + shop_exchanges);

  // Deleting the shop's exchange leaves "/"'s.
  ASSERT_TRUE(broker_.DeleteExchange(kShop, "events", false).ok());
  ExchangeSpec check;
  check.name = "events";
  check.passive = true;
  EXPECT_TRUE(broker_.DeclareExchange(kRoot, check).ok());
  EXPECT_EQ(broker_.DeclareExchange(kShop, check).code(), StatusCode::kExchangeNotFound);
}

TEST_F(BrokerVhostTest, DeadLetteringStaysInTheQueuesVhost) {
  ASSERT_TRUE(Declare(kRoot, "dlq").ok());
  ASSERT_TRUE(Declare(kShop, "dlq").ok());
  ASSERT_TRUE(Declare(kShop, "work", {{"x-dead-letter-queue", std::string("dlq")}}).ok());
  ASSERT_TRUE(Publish(kShop, "", "work", "poison").ok());
  auto got = broker_.Get(kShop, "work", false);
  ASSERT_TRUE(got.ok() && got->delivery);
  ASSERT_TRUE(broker_.Nack(kShop, got->delivery->delivery_tag, false, false).ok());
  EXPECT_EQ(Ready(kShop, "dlq"), 1u);
  EXPECT_EQ(Ready(kRoot, "dlq"), 0u);
}

TEST_F(BrokerVhostTest, RabbitMqTextsNameTheSessionsVhost) {
  const uint64_t kChannel = 7;
  auto peer = std::make_shared<RecordingPeer>();
  SessionOptions options;
  options.vhost = "shop";
  options.amqp = true;
  options.owner_id = 700;
  ASSERT_TRUE(
      broker_
          .OpenConnection(700, "alice", "127.0.0.1:2", ConnectionMeta{"amqp", "pika", "1", "shop"})
          .ok());
  ASSERT_TRUE(broker_.OpenSession(kChannel, "alice", peer, "127.0.0.1:2", options).ok());
  QueueSpec passive;
  passive.name = "missing";
  passive.passive = true;
  auto missing = broker_.DeclareQueue(kChannel, passive);
  EXPECT_EQ(missing.status().message(), "no queue 'missing' in vhost 'shop'");
  ASSERT_TRUE(broker_.DeclareQueue(kChannel, QueueSpec{"q", true, false, false, {}, false}).ok());
  EXPECT_EQ(broker_.Bind(kChannel, BindingSpec{"q", "nowhere", "k", {}}).message(),
            "no exchange 'nowhere' in vhost 'shop'");
  auto connections = broker_.ListConnections("shop");
  ASSERT_EQ(connections.size(), 2u);  // the native session's and the AMQP connection
  for (const auto& c : connections) EXPECT_EQ(c.vhost, "shop");
  EXPECT_EQ(broker_.ListConnections("/").size(), 1u);
}

TEST_F(BrokerVhostTest, AnUnknownVhostCannotBeOpened) {
  auto peer = std::make_shared<RecordingPeer>();
  SessionOptions options;
  options.vhost = "nowhere";
  Status s = broker_.OpenSession(9, "alice", peer, "127.0.0.1:3", options);
  EXPECT_EQ(s.code(), StatusCode::kVhostNotFound);
  EXPECT_EQ(broker_.session_count(), 2u) << "a refused session is not opened";
  EXPECT_EQ(
      broker_.OpenConnection(900, "alice", "127.0.0.1:4", ConnectionMeta{"amqp", "", "", "nowhere"})
          .code(),
      StatusCode::kVhostNotFound);
  EXPECT_TRUE(broker_.AddVhost("shop", "another").ok()) << "as rabbitmqctl add_vhost: a no-op";
  EXPECT_EQ(broker_.ListVhosts()[1].description, "the shop");
  EXPECT_EQ(broker_.AddVhost(std::string("bad\nname")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_.AddVhost("").code(), StatusCode::kInvalidArgument);
}

TEST_F(BrokerVhostTest, MaxConnectionsAndMaxQueues) {
  ASSERT_TRUE(broker_.SetVhostLimits("shop", VhostLimits{2, 2}).ok());
  // One connection is open in the shop (the fixture's): one more may open.
  auto peer = std::make_shared<RecordingPeer>();
  SessionOptions options;
  options.vhost = "shop";
  ASSERT_TRUE(broker_.OpenSession(3, "alice", peer, "127.0.0.1:5", options).ok());
  Status full = broker_.OpenSession(4, "alice", peer, "127.0.0.1:6", options);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(), "connection limit (2) is reached");
  EXPECT_EQ(
      broker_.OpenConnection(400, "alice", "127.0.0.1:7", ConnectionMeta{"amqp", "", "", "shop"})
          .code(),
      StatusCode::kResourceExhausted);
  // "/" has no limit.
  ASSERT_TRUE(broker_.OpenSession(5, "alice", peer, "127.0.0.1:8").ok());
  broker_.CloseSession(3);
  EXPECT_TRUE(broker_.OpenSession(4, "alice", peer, "127.0.0.1:6", options).ok());

  ASSERT_TRUE(Declare(kShop, "a").ok());
  ASSERT_TRUE(Declare(kShop, "b").ok());
  Status over = Declare(kShop, "c");
  EXPECT_EQ(over.code(), StatusCode::kPreconditionFailed);
  EXPECT_EQ(over.message(), "cannot declare queue 'c': queue limit in vhost 'shop' (2) is reached");
  EXPECT_TRUE(Declare(kShop, "a").ok()) << "redeclaring one that exists is not a new queue";
  EXPECT_TRUE(Declare(kRoot, "c").ok());
  ASSERT_TRUE(broker_.DeleteQueue(kShop, "b", false, false).ok());
  EXPECT_TRUE(Declare(kShop, "c").ok());
  auto vhosts = broker_.ListVhosts();
  ASSERT_EQ(vhosts.size(), 2u);
  EXPECT_EQ(vhosts[0].name, "/");
  EXPECT_EQ(vhosts[1].name, "shop");
  EXPECT_EQ(vhosts[1].queues, 2u);
  EXPECT_EQ(vhosts[1].connections, 2u);
  EXPECT_EQ(vhosts[1].limits, (VhostLimits{2, 2}));
  EXPECT_EQ(vhosts[1].description, "the shop");
  // Limits of 0 allow none.
  ASSERT_TRUE(broker_.SetVhostLimits("shop", VhostLimits{-1, 0}).ok());
  EXPECT_EQ(Declare(kShop, "d").code(), StatusCode::kPreconditionFailed);
}

TEST_F(BrokerVhostTest, AnInternalSessionIsNoConnection) {
  // The HTTP API's sessions (server/api_session.h): not listed, not counted against
  // max-connections, and refused into a vhost that does not exist.
  ASSERT_TRUE(broker_.SetVhostLimits("shop", VhostLimits{1, -1}).ok());
  auto peer = std::make_shared<RecordingPeer>();
  SessionOptions options;
  options.vhost = "shop";
  options.internal = true;
  ASSERT_TRUE(broker_.OpenSession(7, "alice", peer, "http:127.0.0.1:9", options).ok());
  EXPECT_EQ(broker_.ListConnections().size(), 2u);  // the fixture's two
  ASSERT_TRUE(Declare(7, "api").ok());
  EXPECT_EQ(Ready(kShop, "api"), 0u) << "in the shop";
  broker_.CloseSession(7);
  EXPECT_EQ(broker_.ListConnections().size(), 2u);
  options.vhost = "nowhere";
  Status missing = broker_.OpenSession(8, "alice", peer, "http:127.0.0.1:9", options);
  EXPECT_EQ(missing.code(), StatusCode::kVhostNotFound);
  EXPECT_EQ(missing.message(), "vhost 'nowhere' not found");
}

TEST_F(BrokerVhostTest, DeletingAVhostDeletesWhatIsInIt) {
  ASSERT_TRUE(Declare(kShop, "orders").ok());
  ASSERT_TRUE(Declare(kRoot, "orders").ok());
  ASSERT_TRUE(Publish(kShop, "", "orders", "gone").ok());
  ASSERT_TRUE(broker_.Subscribe(kShop, "orders", "c1", 10, false).ok());
  broker_.Flush();
  EXPECT_EQ(broker_.DeleteVhost("/").code(), StatusCode::kReservedName);
  EXPECT_EQ(broker_.DeleteVhost("nowhere").code(), StatusCode::kVhostNotFound);
  ASSERT_TRUE(broker_.DeleteVhost("shop").ok());
  broker_.Flush();
  EXPECT_FALSE(broker_.HasVhost("shop"));
  ASSERT_EQ(shop_->cancellations.size(), 1u) << "its consumers are told";
  EXPECT_EQ(broker_.ListQueues("").size(), 1u);
  EXPECT_EQ(broker_.ListExchanges("shop").size(), 0u);
  // A session still open there (the server closes them) can do nothing more.
  EXPECT_EQ(Declare(kShop, "again").code(), StatusCode::kVhostNotFound);
  ExchangeSpec e;
  e.name = "e";
  EXPECT_EQ(broker_.DeclareExchange(kShop, e).code(), StatusCode::kVhostNotFound);
  EXPECT_EQ(Publish(kShop, "", "orders", "x").code(), StatusCode::kOk)
      << "the default exchange routes to nothing there";
  EXPECT_EQ(Ready(kRoot, "orders"), 0u);
  // Made again, it is empty.
  ASSERT_TRUE(broker_.AddVhost("shop").ok());
  EXPECT_EQ(broker_.ListQueues("", "shop").size(), 0u);
  EXPECT_EQ(broker_.ListExchanges("shop").size(), broker_.ListExchanges("/").size());
}

// With the real store: vhosts, their queues (with messages), exchanges, bindings and limits
// come back after a crash, each in its vhost; a deleted vhost does not.
class BrokerVhostStoreTest : public BrokerStoreTest {
 protected:
  static constexpr uint64_t kShop = 2;
  RecordingPeer* OpenShop() {
    auto peer = std::make_shared<RecordingPeer>();
    SessionOptions options;
    options.vhost = "shop";
    EXPECT_TRUE(broker_->OpenSession(kShop, "alice", peer, "127.0.0.1:1", options).ok());
    return peer.get();
  }
};

TEST_F(BrokerVhostStoreTest, VhostsSurviveARestart) {
  ASSERT_TRUE(broker_->AddVhost("shop", "", VhostLimits{-1, 5}).ok());
  ASSERT_TRUE(broker_->AddVhost("gone").ok());
  OpenShop();
  DeclareQueue("orders");
  QueueSpec spec;
  spec.name = "orders";
  ASSERT_TRUE(broker_->DeclareQueue(kShop, spec).ok());
  ExchangeSpec events;
  events.name = "events";
  events.type = ExchangeType::kFanout;
  ASSERT_TRUE(broker_->DeclareExchange(kShop, events).ok());
  ASSERT_TRUE(broker_->Bind(kShop, BindingSpec{"orders", "events", "", {}}).ok());
  Message m;
  m.body = "kept in the shop";
  m.persistent = true;
  ASSERT_TRUE(broker_->Publish(kShop, "events", "", std::move(m)).ok());
  ASSERT_TRUE(Publish("", "orders", "kept in the root").ok());
  Drain();
  ASSERT_TRUE(broker_->DeleteVhost("gone").ok());
  Drain();

  Restart();
  EXPECT_TRUE(broker_->HasVhost("shop"));
  EXPECT_FALSE(broker_->HasVhost("gone"));
  auto vhosts = broker_->ListVhosts();
  ASSERT_EQ(vhosts.size(), 2u);
  EXPECT_EQ(vhosts[1].limits.max_queues, 5);
  EXPECT_EQ(vhosts[1].queues, 1u);
  RecordingPeer* shop = OpenShop();
  // The binding came back in the shop: a publish there reaches the shop's queue.
  Message again;
  again.body = "routed after the restart";
  ASSERT_TRUE(broker_->Publish(kShop, "events", "", std::move(again)).ok());
  ASSERT_TRUE(broker_->Subscribe(kShop, "orders", "", 10, false).ok());
  Drain();
  EXPECT_EQ(Bodies(shop->deliveries),
            (std::vector<std::string>{"kept in the shop", "routed after the restart"}));
  ASSERT_TRUE(broker_->Subscribe(kS1, "orders", "", 10, false).ok());
  Drain();
  EXPECT_EQ(Bodies(peer_->deliveries), (std::vector<std::string>{"kept in the root"}));
}

}  // namespace
}  // namespace wharf::broker
