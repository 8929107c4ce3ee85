// Unit tests for broker/broker.h, driven with a ManualClock and a recording SessionPeer.
//
// Operations only schedule dispatch: every test calls broker_.Flush() before looking at what a
// peer received, and OnTimer() after advancing the clock past a long-poll deadline.
#include "broker/broker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "unit/broker/recording_peer.h"

namespace wharf::broker {
namespace {

using std::chrono::milliseconds;

class BrokerTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kS1 = 1;
  static constexpr uint64_t kS2 = 2;

  BrokerTest() { Reset(BrokerOptions{}); }

  void Reset(BrokerOptions options) {
    broker_ = std::make_unique<Broker>(options, &clock_);
    auto p1 = std::make_shared<RecordingPeer>();
    auto p2 = std::make_shared<RecordingPeer>();
    peer1_ = p1.get();
    peer2_ = p2.get();
    EXPECT_TRUE(broker_->OpenSession(kS1, "alice", p1).ok());
    EXPECT_TRUE(broker_->OpenSession(kS2, "bob", p2).ok());
  }

  Broker& broker() { return *broker_; }

  QueueInfo DeclareQueue(const std::string& name, uint64_t session = kS1, bool exclusive = false,
                         bool auto_delete = false) {
    QueueSpec spec;
    spec.name = name;
    spec.exclusive = exclusive;
    spec.auto_delete = auto_delete;
    auto result = broker_->DeclareQueue(session, spec);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : QueueInfo{};
  }

  void DeclareExchange(const std::string& name, ExchangeType type,
                       const std::string& alternate = "", bool auto_delete = false) {
    ExchangeSpec spec;
    spec.name = name;
    spec.type = type;
    spec.alternate_exchange = alternate;
    spec.auto_delete = auto_delete;
    Status s = broker_->DeclareExchange(spec);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void Bind(const std::string& queue, const std::string& exchange, const std::string& key,
            uint64_t session = kS1) {
    BindingSpec binding;
    binding.queue = queue;
    binding.exchange = exchange;
    binding.routing_key = key;
    Status s = broker_->Bind(session, binding);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  PublishResult Publish(const std::string& exchange, const std::string& key,
                        const std::string& body, uint64_t session = kS1) {
    Message message;
    message.body = body;
    auto result = broker_->Publish(session, exchange, key, std::move(message));
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? result->result : PublishResult{};
  }

  // Publishes through the default exchange straight to `queue`.
  void PublishTo(const std::string& queue, const std::vector<std::string>& bodies) {
    for (const auto& body : bodies) {
      EXPECT_EQ(Publish("", queue, body).routed_queues, 1u) << body;
    }
  }

  std::string Subscribe(const std::string& queue, uint32_t prefetch, uint64_t session = kS1,
                        const std::string& tag = "", bool exclusive = false) {
    auto result = broker_->Subscribe(session, queue, tag, prefetch, exclusive);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : "";
  }

  // A pull Receive that is expected to be accepted.
  void Receive(const std::string& queue, uint32_t max_messages, uint32_t wait_ms,
               uint64_t request_id = 7, uint64_t session = kS1) {
    Status s = broker_->Receive(session, request_id, queue, max_messages, wait_ms);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // Receives up to `max` ready messages right now on `session` (Receive + Flush).
  std::vector<Delivery> Pull(const std::string& queue, uint32_t max, uint64_t session = kS1) {
    RecordingPeer* peer = session == kS1 ? peer1_ : peer2_;
    size_t before = peer->completions.size();
    Status s = broker_->Receive(session, 99, queue, max, 0);
    EXPECT_TRUE(s.ok()) << s.ToString();
    broker_->Flush();
    if (peer->completions.size() == before) {
      // Nothing was ready: let the zero wait run out so the waiter does not linger.
      broker_->OnTimer();
      broker_->Flush();
    }
    EXPECT_EQ(peer->completions.size(), before + 1);
    if (peer->completions.size() != before + 1) return {};
    return peer->completions.back().deliveries;
  }

  QueueInfo Info(const std::string& name) {
    for (const QueueInfo& info : broker_->ListQueues(name)) {
      if (info.name == name) return info;
    }
    ADD_FAILURE() << "queue " << name << " not listed";
    return QueueInfo{};
  }

  bool QueueExists(const std::string& name, uint64_t session = kS1) {
    QueueSpec spec;
    spec.name = name;
    spec.passive = true;
    auto result = broker_->DeclareQueue(session, spec);
    if (!result.ok()) {
      EXPECT_EQ(result.status().code(), StatusCode::kQueueNotFound) << result.status().ToString();
    }
    return result.ok();
  }

  bool ExchangeExists(const std::string& name) {
    ExchangeSpec spec;
    spec.name = name;
    spec.passive = true;
    return broker_->DeclareExchange(spec).ok();
  }

  ManualClock clock_;
  std::unique_ptr<Broker> broker_;
  RecordingPeer* peer1_ = nullptr;
  RecordingPeer* peer2_ = nullptr;
};

// --- Declare --------------------------------------------------------------------------------

TEST_F(BrokerTest, RedeclareQueueWithEqualSpecIsOk) {
  DeclareQueue("q");
  PublishTo("q", {"m"});
  QueueInfo again = DeclareQueue("q");
  EXPECT_EQ(again.name, "q");
  EXPECT_EQ(again.ready, 1u);  // the same queue, not a new one
}

TEST_F(BrokerTest, RedeclareQueueWithDifferentSpecIsPreconditionFailed) {
  DeclareQueue("q");
  for (int field = 0; field < 3; ++field) {
    QueueSpec spec;
    spec.name = "q";
    if (field == 0) spec.durable = false;
    if (field == 1) spec.auto_delete = true;
    if (field == 2) spec.exclusive = true;
    auto result = broker().DeclareQueue(kS1, spec);
    EXPECT_EQ(result.status().code(), StatusCode::kPreconditionFailed) << field;
  }
}

TEST_F(BrokerTest, DeclareQueueWithUnknownArgumentIsInvalidArgument) {
  QueueSpec spec;
  spec.name = "q";
  spec.arguments["x-bogus"] = int64_t{1};
  EXPECT_EQ(broker().DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(QueueExists("q"));
}

TEST_F(BrokerTest, DeclareQueueWithBadNameIsInvalidArgument) {
  for (const std::string& name :
       {std::string("has space"), std::string("slash/"), std::string(256, 'a')}) {
    QueueSpec spec;
    spec.name = name;
    EXPECT_EQ(broker().DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument)
        << name;
  }
  QueueSpec longest;
  longest.name = std::string(255, 'a');
  EXPECT_TRUE(broker().DeclareQueue(kS1, longest).ok());
}

TEST_F(BrokerTest, DeclareQueueWithEmptyNameGeneratesDistinctNames) {
  QueueInfo a = DeclareQueue("");
  QueueInfo b = DeclareQueue("");
  EXPECT_FALSE(a.name.empty());
  EXPECT_NE(a.name, b.name);
  EXPECT_TRUE(QueueExists(a.name));
  EXPECT_TRUE(QueueExists(b.name));
}

TEST_F(BrokerTest, RedeclareExchangeWithEqualSpecIsOk) {
  DeclareExchange("ex", ExchangeType::kTopic);
  DeclareExchange("ex", ExchangeType::kTopic);
}

TEST_F(BrokerTest, RedeclareExchangeWithDifferentSpecIsPreconditionFailed) {
  DeclareExchange("ex", ExchangeType::kTopic);
  ExchangeSpec spec;
  spec.name = "ex";
  spec.type = ExchangeType::kDirect;
  EXPECT_EQ(broker().DeclareExchange(spec).code(), StatusCode::kPreconditionFailed);
  spec.type = ExchangeType::kTopic;
  spec.durable = false;
  EXPECT_EQ(broker().DeclareExchange(spec).code(), StatusCode::kPreconditionFailed);
  spec.durable = true;
  spec.alternate_exchange = "alt";
  EXPECT_EQ(broker().DeclareExchange(spec).code(), StatusCode::kPreconditionFailed);
  spec.alternate_exchange = "";
  spec.auto_delete = true;
  EXPECT_EQ(broker().DeclareExchange(spec).code(), StatusCode::kPreconditionFailed);
}

TEST_F(BrokerTest, PassiveDeclareOfMissingQueueIsQueueNotFound) {
  QueueSpec spec;
  spec.name = "missing";
  spec.passive = true;
  EXPECT_EQ(broker().DeclareQueue(kS1, spec).status().code(), StatusCode::kQueueNotFound);
  EXPECT_TRUE(broker().ListQueues("").empty());  // and it did not create one
}

TEST_F(BrokerTest, PassiveDeclareOfExistingQueueReturnsItsInfo) {
  DeclareQueue("q");
  PublishTo("q", {"a", "b"});
  QueueSpec spec;
  spec.name = "q";
  spec.passive = true;
  spec.durable = false;  // a passive declare does not compare the spec
  auto result = broker().DeclareQueue(kS1, spec);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->ready, 2u);
}

TEST_F(BrokerTest, PassiveDeclareOfMissingExchangeIsExchangeNotFound) {
  ExchangeSpec spec;
  spec.name = "missing";
  spec.passive = true;
  EXPECT_EQ(broker().DeclareExchange(spec).code(), StatusCode::kExchangeNotFound);
  EXPECT_FALSE(ExchangeExists("missing"));
  spec.name = "amq.topic";
  EXPECT_TRUE(broker().DeclareExchange(spec).ok());
}

TEST_F(BrokerTest, AmqPrefixIsReserved) {
  ExchangeSpec exchange;
  exchange.name = "amq.custom";
  EXPECT_EQ(broker().DeclareExchange(exchange).code(), StatusCode::kReservedName);
  EXPECT_FALSE(ExchangeExists("amq.custom"));
  exchange.name = "amq.direct";
  exchange.type = ExchangeType::kFanout;  // a built-in one with other arguments
  EXPECT_EQ(broker().DeclareExchange(exchange).code(), StatusCode::kReservedName);
  EXPECT_EQ(broker().DeleteExchange(0, "amq.direct", false).code(), StatusCode::kReservedName);
  EXPECT_EQ(broker().DeleteExchange(0, "amq.custom", false).code(), StatusCode::kReservedName);
  QueueSpec queue;
  queue.name = "amq.q";
  EXPECT_EQ(broker().DeclareQueue(kS1, queue).status().code(), StatusCode::kReservedName);
}

TEST_F(BrokerTest, RedeclaringBuiltInExchangeWithItsOwnSpecIsOk) {
  ExchangeSpec exchange;
  exchange.name = "amq.topic";
  exchange.type = ExchangeType::kTopic;
  Status s = broker().DeclareExchange(exchange);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(BrokerTest, BuiltInExchangesExist) {
  std::vector<std::string> names;
  for (const ExchangeInfo& info : broker().ListExchanges()) names.push_back(info.name);
  EXPECT_EQ(names, (std::vector<std::string>{"", "amq.direct", "amq.fanout", "amq.headers",
                                             "amq.match", "amq.topic"}));
}

// --- Default exchange and routing -------------------------------------------------------------

TEST_F(BrokerTest, DefaultExchangeRoutesByQueueName) {
  DeclareQueue("orders");
  DeclareQueue("other");
  EXPECT_EQ(Publish("", "orders", "m").routed_queues, 1u);
  EXPECT_EQ(Publish("", "nobody", "m").routed_queues, 0u);
  EXPECT_EQ(Info("orders").ready, 1u);
  EXPECT_EQ(Info("other").ready, 0u);
}

TEST_F(BrokerTest, DefaultExchangeRefusesBindings) {
  DeclareQueue("q");
  BindingSpec binding;
  binding.queue = "q";
  binding.exchange = "";
  binding.routing_key = "k";
  EXPECT_EQ(broker().Bind(kS1, binding).code(), StatusCode::kReservedName);
  EXPECT_EQ(broker().Unbind(kS1, binding).code(), StatusCode::kReservedName);
  ExchangeSpec spec;  // name ""
  EXPECT_EQ(broker().DeclareExchange(spec).code(), StatusCode::kReservedName);
  EXPECT_EQ(broker().DeleteExchange(0, "", false).code(), StatusCode::kReservedName);
}

TEST_F(BrokerTest, DefaultExchangeExistsForPassiveDeclare) {
  ExchangeSpec spec;  // name ""
  spec.passive = true;
  EXPECT_TRUE(broker().DeclareExchange(spec).ok());
}

TEST_F(BrokerTest, PublishToMissingExchangeIsExchangeNotFound) {
  Message message;
  EXPECT_EQ(broker().Publish(kS1, "missing", "k", message).status().code(),
            StatusCode::kExchangeNotFound);
}

TEST_F(BrokerTest, BindToMissingQueueOrExchangeFails) {
  DeclareQueue("q");
  BindingSpec binding;
  binding.queue = "q";
  binding.exchange = "missing";
  EXPECT_EQ(broker().Bind(kS1, binding).code(), StatusCode::kExchangeNotFound);
  binding.queue = "missing";
  binding.exchange = "amq.direct";
  EXPECT_EQ(broker().Bind(kS1, binding).code(), StatusCode::kQueueNotFound);
}

TEST_F(BrokerTest, TopicExchangeRoutesToBoundQueuesOnce) {
  DeclareQueue("q1");
  DeclareQueue("q2");
  Bind("q1", "amq.topic", "a.*");
  Bind("q1", "amq.topic", "a.#");  // two matching bindings: still one copy
  Bind("q2", "amq.topic", "#.b");
  EXPECT_EQ(Publish("amq.topic", "a.b", "m").routed_queues, 2u);
  EXPECT_EQ(Info("q1").ready, 1u);
  EXPECT_EQ(Info("q2").ready, 1u);
  EXPECT_EQ(Publish("amq.topic", "a.c", "m").routed_queues, 1u);
  EXPECT_EQ(Publish("amq.topic", "x.y", "m").routed_queues, 0u);
}

TEST_F(BrokerTest, UnbindStopsRouting) {
  DeclareQueue("q");
  Bind("q", "amq.direct", "k");
  EXPECT_EQ(Publish("amq.direct", "k", "m").routed_queues, 1u);
  BindingSpec binding;
  binding.queue = "q";
  binding.exchange = "amq.direct";
  binding.routing_key = "k";
  ASSERT_TRUE(broker().Unbind(kS1, binding).ok());
  EXPECT_EQ(Publish("amq.direct", "k", "m").routed_queues, 0u);
  // Unbinding again succeeds, as in AMQP.
  EXPECT_TRUE(broker().Unbind(kS1, binding).ok());
}

TEST_F(BrokerTest, MandatoryUnroutableIsVisibleAsZeroRoutedQueues) {
  DeclareExchange("ex", ExchangeType::kDirect);
  Message message;
  message.body = "lost";
  auto result = broker().Publish(kS1, "ex", "nowhere", message);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->result.routed_queues, 0u);
  EXPECT_NE(result->result.message_id, 0u);
  // The accepted envelope is handed back so the server can return it.
  ASSERT_NE(result->envelope, nullptr);
  EXPECT_EQ(result->envelope->message.body, "lost");
  EXPECT_EQ(result->envelope->exchange, "ex");
  EXPECT_EQ(result->envelope->routing_key, "nowhere");
}

TEST_F(BrokerTest, AlternateExchangeReceivesUnroutableMessages) {
  DeclareExchange("alt", ExchangeType::kFanout);
  DeclareExchange("main", ExchangeType::kDirect, "alt");
  DeclareQueue("routed");
  DeclareQueue("unrouted");
  Bind("routed", "main", "good");
  Bind("unrouted", "alt", "");
  EXPECT_EQ(Publish("main", "good", "m1").routed_queues, 1u);
  EXPECT_EQ(Publish("main", "bad", "m2").routed_queues, 1u);
  EXPECT_EQ(Bodies(Pull("routed", 10)), BodyList{"m1"});
  auto unrouted = Pull("unrouted", 10);
  EXPECT_EQ(Bodies(unrouted), BodyList{"m2"});
  // The message keeps the exchange and key it was published with.
  ASSERT_EQ(unrouted.size(), 1u);
  EXPECT_EQ(unrouted[0].envelope->exchange, "main");
  EXPECT_EQ(unrouted[0].envelope->routing_key, "bad");
}

TEST_F(BrokerTest, AlternateExchangeChainIsFollowed) {
  DeclareExchange("c", ExchangeType::kFanout);
  DeclareExchange("b", ExchangeType::kDirect, "c");
  DeclareExchange("a", ExchangeType::kDirect, "b");
  DeclareQueue("end");
  Bind("end", "c", "");
  EXPECT_EQ(Publish("a", "k", "m").routed_queues, 1u);
  EXPECT_EQ(Info("end").ready, 1u);
}

TEST_F(BrokerTest, AlternateExchangeCycleDoesNotHang) {
  DeclareExchange("a", ExchangeType::kDirect, "b");
  DeclareExchange("b", ExchangeType::kDirect, "a");
  DeclareExchange("self", ExchangeType::kTopic, "self");
  EXPECT_EQ(Publish("a", "k", "m").routed_queues, 0u);
  EXPECT_EQ(Publish("self", "k", "m").routed_queues, 0u);
}

TEST_F(BrokerTest, MissingAlternateExchangeMeansUnroutable) {
  DeclareExchange("ex", ExchangeType::kDirect, "not-there");
  EXPECT_EQ(Publish("ex", "k", "m").routed_queues, 0u);
}

TEST_F(BrokerTest, MessageTooLargeIsRefused) {
  BrokerOptions options;
  options.max_message_bytes = 10;
  Reset(options);
  DeclareQueue("q");
  Message big;
  big.body = std::string(11, 'x');
  EXPECT_EQ(broker().Publish(kS1, "", "q", big).status().code(), StatusCode::kMessageTooLarge);
  Message fits;
  fits.body = std::string(10, 'x');
  EXPECT_TRUE(broker().Publish(kS1, "", "q", fits).ok());
  EXPECT_EQ(Info("q").ready, 1u);
}

// max_message_bytes counts header names and values with the body; max_headers bounds how many.
TEST_F(BrokerTest, HeadersCountTowardsTheMessageLimits) {
  BrokerOptions options;
  options.max_message_bytes = 20;
  options.max_headers = 3;
  Reset(options);
  DeclareQueue("q");
  Message heavy;
  heavy.body = std::string(10, 'x');
  heavy.headers["name"] = std::string(7, 'v');  // 4 + 7 = 11 bytes: 21 in all
  auto refused = broker().Publish(kS1, "", "q", heavy);
  EXPECT_EQ(refused.status().code(), StatusCode::kMessageTooLarge);
  EXPECT_NE(refused.status().message().find("11 bytes of headers"), std::string::npos)
      << refused.status().ToString();
  heavy.headers["name"] = std::string(6, 'v');  // exactly 20
  EXPECT_TRUE(broker().Publish(kS1, "", "q", heavy).ok());
  Message many;
  for (const char* key : {"a", "b", "c", "d"}) many.headers[key] = true;
  auto too_many = broker().Publish(kS1, "", "q", many);
  EXPECT_EQ(too_many.status().code(), StatusCode::kMessageTooLarge);
  EXPECT_NE(too_many.status().message().find("4 headers, more than max_headers 3"),
            std::string::npos)
      << too_many.status().ToString();
  many.headers.erase("d");
  EXPECT_TRUE(broker().Publish(kS1, "", "q", many).ok());
  EXPECT_EQ(Info("q").ready, 2u);
}

TEST_F(BrokerTest, RoutingKeyLongerThan255BytesIsInvalidArgument) {
  Message message;
  EXPECT_EQ(broker().Publish(kS1, "amq.direct", std::string(256, 'k'), message).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(broker().Publish(kS1, "amq.direct", std::string(255, 'k'), message).ok());
}

TEST_F(BrokerTest, MessageIdsAreUniqueAndIncreasing) {
  DeclareQueue("q");
  uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    if (i == 100) clock_.Advance(milliseconds(5));
    uint64_t id = Publish(i % 2 ? "" : "amq.fanout", "q", "m").message_id;
    EXPECT_GT(id, last) << i;
    last = id;
  }
}

TEST_F(BrokerTest, PublishStampsIdAndReceiveTime) {
  DeclareQueue("q");
  clock_.Advance(milliseconds(1234));
  Message message;
  message.id = 5;                // ignored
  message.published_at_ms = 17;  // ignored
  auto result = broker().Publish(kS1, "", "q", message);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->envelope->message.published_at_ms, clock_.WallMillis());
  EXPECT_EQ(result->envelope->message.id, result->result.message_id);
  EXPECT_NE(result->result.message_id, 5u);
}

// --- Push consumers -------------------------------------------------------------------------

TEST_F(BrokerTest, OperationsOnlyScheduleDispatchUntilFlush) {
  DeclareQueue("q");
  Subscribe("q", 0);
  PublishTo("q", {"a", "b", "c"});
  EXPECT_TRUE(peer1_->deliveries.empty());
  EXPECT_EQ(peer1_->flushes, 0);
  broker().Flush();
  EXPECT_EQ(peer1_->DeliveredBodies(), (BodyList{"a", "b", "c"}));
  EXPECT_EQ(peer1_->flushes, 1);  // one hand-over for the whole batch
  EXPECT_EQ(peer2_->flushes, 0);  // nothing for the idle session
  broker().Flush();
  EXPECT_EQ(peer1_->flushes, 1);  // nothing new, no flush
}

TEST_F(BrokerTest, DeliveryCarriesTagsAndMetadata) {
  DeclareQueue("q");
  std::string tag = Subscribe("q", 0, kS1, "my-consumer");
  EXPECT_EQ(tag, "my-consumer");
  PublishTo("q", {"a", "b"});
  broker().Flush();
  ASSERT_EQ(peer1_->deliveries.size(), 2u);
  const Delivery& d = peer1_->deliveries[0];
  EXPECT_EQ(d.consumer_tag, "my-consumer");
  EXPECT_EQ(d.queue, "q");
  EXPECT_EQ(d.receive_count, 1u);
  EXPECT_FALSE(d.redelivered);
  EXPECT_EQ(d.envelope->exchange, "");
  EXPECT_EQ(d.envelope->routing_key, "q");
  EXPECT_LT(peer1_->deliveries[0].delivery_tag, peer1_->deliveries[1].delivery_tag);
}

TEST_F(BrokerTest, GeneratedConsumerTagsAreDistinct) {
  DeclareQueue("q");
  std::string a = Subscribe("q", 0);
  std::string b = Subscribe("q", 0);
  EXPECT_FALSE(a.empty());
  EXPECT_NE(a, b);
}

TEST_F(BrokerTest, DuplicateConsumerTagIsConsumerTagInUse) {
  DeclareQueue("q");
  Subscribe("q", 0, kS1, "c");
  EXPECT_EQ(broker().Subscribe(kS1, "q", "c", 0, false).status().code(),
            StatusCode::kConsumerTagInUse);
  // The same tag on another connection is fine.
  EXPECT_TRUE(broker().Subscribe(kS2, "q", "c", 0, false).ok());
}

TEST_F(BrokerTest, ASessionHoldsAtMostMaxConsumersPerSession) {
  BrokerOptions options;
  options.max_consumers_per_session = 2;
  Reset(options);
  DeclareQueue("q");
  Subscribe("q", 0, kS1, "a");
  Subscribe("q", 0, kS1, "b");
  auto third = broker().Subscribe(kS1, "q", "c", 0, false);
  ASSERT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(),
            "this connection has 2 consumers, the most [limits] max_consumers_per_channel allows; "
            "cancel one first");
  // Checked before the queue: RabbitMQ's order. A tag in use is still said to be in use.
  EXPECT_EQ(broker().Subscribe(kS1, "nowhere", "c", 0, false).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(broker().Subscribe(kS1, "q", "a", 0, false).status().code(),
            StatusCode::kConsumerTagInUse);
  // Per session: another one has its own two; a cancel makes room.
  EXPECT_TRUE(broker().Subscribe(kS2, "q", "c", 0, false).ok());
  ASSERT_TRUE(broker().Cancel(kS1, "a").ok());
  EXPECT_TRUE(broker().Subscribe(kS1, "q", "c", 0, false).ok());
}

TEST_F(BrokerTest, CancelOfUnknownConsumerIsConsumerNotFound) {
  EXPECT_EQ(broker().Cancel(kS1, "nope").code(), StatusCode::kConsumerNotFound);
  DeclareQueue("q");
  Subscribe("q", 0, kS1, "c");
  EXPECT_EQ(broker().Cancel(kS2, "c").code(), StatusCode::kConsumerNotFound);
  EXPECT_TRUE(broker().Cancel(kS1, "c").ok());
  EXPECT_EQ(broker().Cancel(kS1, "c").code(), StatusCode::kConsumerNotFound);
}

TEST_F(BrokerTest, CancelledConsumerGetsNoMoreMessages) {
  DeclareQueue("q");
  Subscribe("q", 0, kS1, "c");
  ASSERT_TRUE(broker().Cancel(kS1, "c").ok());
  PublishTo("q", {"m"});
  broker().Flush();
  EXPECT_TRUE(peer1_->deliveries.empty());
  EXPECT_EQ(Info("q").ready, 1u);
  EXPECT_EQ(Info("q").consumers, 0u);
}

TEST_F(BrokerTest, CancelledConsumersDeliveriesCanStillBeSettled) {
  DeclareQueue("q");
  Subscribe("q", 0, kS1, "c");
  PublishTo("q", {"1", "2"});
  broker().Flush();
  ASSERT_EQ(peer1_->deliveries.size(), 2u);
  ASSERT_TRUE(broker().Cancel(kS1, "c").ok());
  EXPECT_TRUE(broker().Ack(kS1, peer1_->deliveries[0].delivery_tag, false).ok());
  EXPECT_TRUE(broker().Nack(kS1, peer1_->deliveries[1].delivery_tag, false, true).ok());
  QueueInfo info = Info("q");
  EXPECT_EQ(info.acked_total, 1u);
  EXPECT_EQ(info.in_flight, 0u);
  EXPECT_EQ(info.ready, 1u);
}

TEST_F(BrokerTest, PrefetchLimitsUnackedDeliveriesPerConsumer) {
  DeclareQueue("q");
  Subscribe("q", 2);
  PublishTo("q", {"1", "2", "3", "4", "5"});
  broker().Flush();
  EXPECT_EQ(peer1_->DeliveredBodies(), (BodyList{"1", "2"}));
  broker().Flush();
  PublishTo("q", {"6"});
  broker().Flush();
  EXPECT_EQ(peer1_->deliveries.size(), 2u);  // still no credit
  EXPECT_EQ(Info("q").ready, 4u);
  EXPECT_EQ(Info("q").in_flight, 2u);
}

TEST_F(BrokerTest, AckFreesCreditAndTriggersNextDelivery) {
  DeclareQueue("q");
  Subscribe("q", 2);
  PublishTo("q", {"1", "2", "3", "4"});
  broker().Flush();
  ASSERT_EQ(peer1_->deliveries.size(), 2u);
  ASSERT_TRUE(broker().Ack(kS1, peer1_->deliveries[0].delivery_tag, false).ok());
  EXPECT_EQ(peer1_->deliveries.size(), 2u);  // not before Flush
  broker().Flush();
  EXPECT_EQ(peer1_->DeliveredBodies(), (BodyList{"1", "2", "3"}));
  // Settle everything one at a time; never more than two unacked.
  size_t next_to_ack = 1;
  while (next_to_ack < peer1_->deliveries.size()) {
    EXPECT_LE(peer1_->deliveries.size() - next_to_ack, 2u);
    ASSERT_TRUE(broker().Ack(kS1, peer1_->deliveries[next_to_ack++].delivery_tag, false).ok());
    broker().Flush();
  }
  EXPECT_EQ(peer1_->DeliveredBodies(), (BodyList{"1", "2", "3", "4"}));
  QueueInfo info = Info("q");
  EXPECT_EQ(info.ready, 0u);
  EXPECT_EQ(info.in_flight, 0u);
  EXPECT_EQ(info.acked_total, 4u);
  EXPECT_EQ(info.delivered_total, 4u);
}

TEST_F(BrokerTest, CompetingConsumersAreServedRoundRobin) {
  DeclareQueue("q");
  Subscribe("q", 0, kS1, "a");
  Subscribe("q", 0, kS2, "b");
  Subscribe("q", 0, kS1, "c");
  PublishTo("q", {"1", "2", "3", "4", "5", "6"});
  broker().Flush();
  std::vector<std::string> order;
  // Each peer records in delivery order; merge by the body (published in order).
  std::vector<std::pair<std::string, std::string>> all;
  for (const auto& d : peer1_->deliveries)
    all.emplace_back(d.envelope->message.body, d.consumer_tag);
  for (const auto& d : peer2_->deliveries)
    all.emplace_back(d.envelope->message.body, d.consumer_tag);
  std::sort(all.begin(), all.end());
  for (const auto& [body, tag] : all) order.push_back(tag);
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "c", "a", "b", "c"}));
}

TEST_F(BrokerTest, UnwritablePeerGetsNoPushDeliveriesUntilResumed) {
  DeclareQueue("q");
  Subscribe("q", 0, kS1);
  peer1_->writable = false;
  PublishTo("q", {"1", "2"});
  broker().Flush();
  EXPECT_TRUE(peer1_->deliveries.empty());
  EXPECT_EQ(Info("q").ready, 2u);
  peer1_->writable = true;
  broker().ResumeSession(kS1);
  EXPECT_TRUE(peer1_->deliveries.empty());  // only scheduled
  broker().Flush();
  EXPECT_EQ(peer1_->DeliveredBodies(), (BodyList{"1", "2"}));
}

TEST_F(BrokerTest, UnwritablePeerIsSkippedForOtherConsumers) {
  DeclareQueue("q");
  Subscribe("q", 0, kS1);
  Subscribe("q", 0, kS2);
  peer1_->writable = false;
  PublishTo("q", {"1", "2", "3"});
  broker().Flush();
  EXPECT_TRUE(peer1_->deliveries.empty());
  EXPECT_EQ(peer2_->DeliveredBodies(), (BodyList{"1", "2", "3"}));
}

TEST_F(BrokerTest, ResumeUnknownSessionIsHarmless) {
  broker().ResumeSession(42);
  broker().Flush();
  EXPECT_EQ(peer1_->flushes, 0);
}

TEST_F(BrokerTest, RoundRobinSkipsConsumersWithoutCredit) {
  DeclareQueue("q");
  Subscribe("q", 1, kS1, "one");
  Subscribe("q", 0, kS2, "many");
  PublishTo("q", {"1", "2", "3", "4"});
  broker().Flush();
  EXPECT_EQ(peer1_->DeliveredBodies(), BodyList{"1"});
  EXPECT_EQ(peer2_->DeliveredBodies(), (BodyList{"2", "3", "4"}));
  // Once "one" acks it is back in the rotation.
  ASSERT_TRUE(broker().Ack(kS1, peer1_->deliveries[0].delivery_tag, false).ok());
  PublishTo("q", {"5"});
  broker().Flush();
  EXPECT_EQ(peer1_->DeliveredBodies(), (BodyList{"1", "5"}));
}

TEST_F(BrokerTest, NackWithRequeueReturnsMessageToOriginalPositionAsRedelivered) {
  DeclareQueue("q");
  Subscribe("q", 1);
  PublishTo("q", {"1", "2", "3"});
  broker().Flush();
  ASSERT_EQ(peer1_->DeliveredBodies(), BodyList{"1"});
  ASSERT_TRUE(broker().Nack(kS1, peer1_->deliveries[0].delivery_tag, false, true).ok());
  broker().Flush();
  ASSERT_EQ(peer1_->DeliveredBodies(), (BodyList{"1", "1"}));  // ahead of "2"
  const Delivery& again = peer1_->deliveries[1];
  EXPECT_EQ(again.receive_count, 2u);
  EXPECT_TRUE(again.redelivered);
  EXPECT_NE(again.delivery_tag, peer1_->deliveries[0].delivery_tag);
  ASSERT_TRUE(broker().Ack(kS1, again.delivery_tag, false).ok());
  broker().Flush();
  ASSERT_EQ(peer1_->DeliveredBodies(), (BodyList{"1", "1", "2"}));
  EXPECT_EQ(peer1_->deliveries[2].receive_count, 1u);
  EXPECT_FALSE(peer1_->deliveries[2].redelivered);
}

TEST_F(BrokerTest, NackRequeuedMessagesKeepOriginalOrder) {
  DeclareQueue("q");
  PublishTo("q", {"1", "2", "3", "4"});
  auto first = Pull("q", 3);
  ASSERT_EQ(Bodies(first), (BodyList{"1", "2", "3"}));
  // Requeue newest first; they still come back in publish order, ahead of "4".
  ASSERT_TRUE(broker().Nack(kS1, first[2].delivery_tag, false, true).ok());
  ASSERT_TRUE(broker().Nack(kS1, first[0].delivery_tag, false, true).ok());
  PublishTo("q", {"5"});
  auto second = Pull("q", 10);
  EXPECT_EQ(Bodies(second), (BodyList{"1", "3", "4", "5"}));
  ASSERT_EQ(second.size(), 4u);
  EXPECT_EQ(second[0].receive_count, 2u);
  EXPECT_TRUE(second[0].redelivered);
  EXPECT_EQ(second[1].receive_count, 2u);
  EXPECT_EQ(second[2].receive_count, 1u);
  EXPECT_FALSE(second[2].redelivered);
}

TEST_F(BrokerTest, NackWithoutRequeueDropsTheMessage) {
  DeclareQueue("q");
  PublishTo("q", {"1", "2"});
  auto got = Pull("q", 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(broker().Nack(kS1, got[0].delivery_tag, false, false).ok());
  QueueInfo info = Info("q");
  EXPECT_EQ(info.ready, 1u);
  EXPECT_EQ(info.in_flight, 0u);
  EXPECT_EQ(info.acked_total, 0u);
  EXPECT_EQ(Bodies(Pull("q", 10)), BodyList{"2"});
}

TEST_F(BrokerTest, NackMultipleRequeuesEverythingUpToTheTag) {
  DeclareQueue("q");
  PublishTo("q", {"1", "2", "3"});
  auto got = Pull("q", 3);
  ASSERT_EQ(got.size(), 3u);
  ASSERT_TRUE(broker().Nack(kS1, got[1].delivery_tag, true, true).ok());
  QueueInfo info = Info("q");
  EXPECT_EQ(info.ready, 2u);
  EXPECT_EQ(info.in_flight, 1u);
}

TEST_F(BrokerTest, AckMultipleSettlesEverythingUpToTheTag) {
  DeclareQueue("q");
  PublishTo("q", {"1", "2", "3", "4"});
  auto got = Pull("q", 4);
  ASSERT_EQ(got.size(), 4u);
  ASSERT_TRUE(broker().Ack(kS1, got[2].delivery_tag, true).ok());
  QueueInfo info = Info("q");
  EXPECT_EQ(info.in_flight, 1u);
  EXPECT_EQ(info.acked_total, 3u);
  EXPECT_EQ(broker().Ack(kS1, got[0].delivery_tag, false).code(), StatusCode::kUnknownDeliveryTag);
  EXPECT_TRUE(broker().Ack(kS1, got[3].delivery_tag, false).ok());
  EXPECT_EQ(Info("q").acked_total, 4u);
}

TEST_F(BrokerTest, AckMultipleWithTagZeroSettlesAll) {
  DeclareQueue("q");
  PublishTo("q", {"1", "2", "3"});
  ASSERT_EQ(Pull("q", 3).size(), 3u);
  ASSERT_TRUE(broker().Ack(kS1, 0, true).ok());
  EXPECT_EQ(Info("q").in_flight, 0u);
  EXPECT_EQ(Info("q").acked_total, 3u);
  // Nothing outstanding any more.
  EXPECT_EQ(broker().Ack(kS1, 0, true).code(), StatusCode::kUnknownDeliveryTag);
}

TEST_F(BrokerTest, AckUnknownOrSettledTagIsUnknownDeliveryTagAndHarmless) {
  DeclareQueue("q");
  PublishTo("q", {"1", "2"});
  auto got = Pull("q", 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(broker().Ack(kS1, 12345, false).code(), StatusCode::kUnknownDeliveryTag);
  EXPECT_EQ(broker().Ack(kS1, 0, false).code(), StatusCode::kUnknownDeliveryTag);
  EXPECT_EQ(Info("q").in_flight, 2u);
  ASSERT_TRUE(broker().Ack(kS1, got[0].delivery_tag, false).ok());
  EXPECT_EQ(broker().Ack(kS1, got[0].delivery_tag, false).code(), StatusCode::kUnknownDeliveryTag);
  EXPECT_EQ(broker().Nack(kS1, got[0].delivery_tag, false, true).code(),
            StatusCode::kUnknownDeliveryTag);
  // The other delivery is untouched and still settles.
  EXPECT_EQ(Info("q").in_flight, 1u);
  EXPECT_EQ(Info("q").acked_total, 1u);
  EXPECT_TRUE(broker().Ack(kS1, got[1].delivery_tag, false).ok());
}

TEST_F(BrokerTest, DeliveryTagsBelongToTheirSession) {
  DeclareQueue("q");
  PublishTo("q", {"1"});
  auto got = Pull("q", 1, kS1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(broker().Ack(kS2, got[0].delivery_tag, false).code(), StatusCode::kUnknownDeliveryTag);
  EXPECT_TRUE(broker().Ack(kS1, got[0].delivery_tag, false).ok());
}

TEST_F(BrokerTest, AckMultipleBelowEveryOutstandingTagIsUnknownDeliveryTag) {
  DeclareQueue("q");
  PublishTo("q", {"1", "2"});
  auto got = Pull("q", 2);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(broker().Ack(kS1, got[0].delivery_tag, false).ok());
  EXPECT_EQ(broker().Ack(kS1, got[0].delivery_tag, true).code(), StatusCode::kUnknownDeliveryTag);
  EXPECT_EQ(Info("q").in_flight, 1u);
}

// --- Sessions -------------------------------------------------------------------------------

TEST_F(BrokerTest, CloseSessionRequeuesUnackedAtOriginalPositionsAsRedelivered) {
  DeclareQueue("q");
  PublishTo("q", {"1", "2", "3"});
  auto got = Pull("q", 2, kS1);
  ASSERT_EQ(Bodies(got), (BodyList{"1", "2"}));
  PublishTo("q", {"4"});
  broker().CloseSession(kS1);
  EXPECT_EQ(broker().session_count(), 1u);
  EXPECT_EQ(Info("q").in_flight, 0u);
  auto again = Pull("q", 10, kS2);
  EXPECT_EQ(Bodies(again), (BodyList{"1", "2", "3", "4"}));
  ASSERT_EQ(again.size(), 4u);
  EXPECT_TRUE(again[0].redelivered);
  EXPECT_EQ(again[0].receive_count, 2u);
  EXPECT_TRUE(again[1].redelivered);
  EXPECT_FALSE(again[2].redelivered);
  EXPECT_FALSE(again[3].redelivered);
}

TEST_F(BrokerTest, CloseSessionMovesPushedMessagesToAnotherConsumer) {
  DeclareQueue("q");
  Subscribe("q", 1, kS1);
  PublishTo("q", {"1", "2"});
  broker().Flush();
  ASSERT_EQ(peer1_->DeliveredBodies(), BodyList{"1"});
  Subscribe("q", 0, kS2);
  broker().Flush();
  ASSERT_EQ(peer2_->DeliveredBodies(), BodyList{"2"});
  broker().CloseSession(kS1);
  broker().Flush();
  ASSERT_EQ(peer2_->DeliveredBodies(), (BodyList{"2", "1"}));
  EXPECT_TRUE(peer2_->deliveries[1].redelivered);
  EXPECT_EQ(Info("q").consumers, 1u);
}

TEST_F(BrokerTest, CloseUnknownSessionIsHarmless) {
  broker().CloseSession(42);
  EXPECT_EQ(broker().session_count(), 2u);
}

TEST_F(BrokerTest, ExclusiveQueueIsLockedToItsOwner) {
  DeclareQueue("mine", kS1, /*exclusive=*/true);
  QueueSpec spec;
  spec.name = "mine";
  spec.exclusive = true;
  EXPECT_EQ(broker().DeclareQueue(kS2, spec).status().code(), StatusCode::kResourceLocked);
  spec.passive = true;
  EXPECT_EQ(broker().DeclareQueue(kS2, spec).status().code(), StatusCode::kResourceLocked);
  EXPECT_EQ(broker().Subscribe(kS2, "mine", "", 0, false).status().code(),
            StatusCode::kResourceLocked);
  EXPECT_EQ(broker().Receive(kS2, 1, "mine", 1, 0).code(), StatusCode::kResourceLocked);
  EXPECT_EQ(broker().PurgeQueue(kS2, "mine").status().code(), StatusCode::kResourceLocked);
  EXPECT_EQ(broker().DeleteQueue(kS2, "mine", false, false).status().code(),
            StatusCode::kResourceLocked);
  BindingSpec binding;
  binding.queue = "mine";
  binding.exchange = "amq.direct";
  EXPECT_EQ(broker().Bind(kS2, binding).code(), StatusCode::kResourceLocked);
  // The owner uses it freely.
  EXPECT_EQ(Publish("", "mine", "m", kS1).routed_queues, 1u);
  Subscribe("mine", 0, kS1);
}

TEST_F(BrokerTest, AnyoneMayPublishToAnExclusiveQueue) {
  // An RPC reply queue is exclusive to the caller but written by the server.
  DeclareQueue("replies", kS1, /*exclusive=*/true);
  EXPECT_EQ(Publish("", "replies", "answer", kS2).routed_queues, 1u);
  EXPECT_EQ(Bodies(Pull("replies", 1, kS1)), BodyList{"answer"});
}

TEST_F(BrokerTest, ExclusiveQueueIsDeletedWhenOwnerCloses) {
  DeclareQueue("mine", kS1, /*exclusive=*/true);
  DeclareQueue("shared", kS1);
  Bind("mine", "amq.fanout", "");
  broker().CloseSession(kS1);
  EXPECT_FALSE(QueueExists("mine", kS2));
  EXPECT_TRUE(QueueExists("shared", kS2));
  EXPECT_EQ(Publish("amq.fanout", "", "m", kS2).routed_queues, 0u);
  // The name is free again.
  DeclareQueue("mine", kS2, /*exclusive=*/true);
}

// Regression: CloseSession once walked exclusive_queues while DropQueue erased from it.
TEST_F(BrokerTest, AllExclusiveQueuesAreDeletedWhenOwnerCloses) {
  DeclareQueue("ex1", kS1, /*exclusive=*/true);
  DeclareQueue("ex2", kS1, /*exclusive=*/true);
  DeclareQueue("ex3", kS1, /*exclusive=*/true);
  broker().CloseSession(kS1);
  std::vector<std::string> left;
  for (const QueueInfo& info : broker().ListQueues("ex")) left.push_back(info.name);
  EXPECT_EQ(left, std::vector<std::string>{});
}

TEST_F(BrokerTest, ExclusiveQueueDeletedByOwnerCanBeRedeclared) {
  DeclareQueue("mine", kS1, /*exclusive=*/true);
  ASSERT_TRUE(broker().DeleteQueue(kS1, "mine", false, false).ok());
  DeclareQueue("mine", kS2, /*exclusive=*/true);
  broker().CloseSession(kS1);  // must not touch kS2's queue
  EXPECT_TRUE(QueueExists("mine", kS2));
}

TEST_F(BrokerTest, ExclusiveConsumerLocksOutOthers) {
  DeclareQueue("q");
  Subscribe("q", 0, kS1, "solo", /*exclusive=*/true);
  EXPECT_EQ(broker().Subscribe(kS2, "q", "", 0, false).status().code(),
            StatusCode::kResourceLocked);
  DeclareQueue("r");
  Subscribe("r", 0, kS1, "first");
  EXPECT_EQ(broker().Subscribe(kS2, "r", "", 0, true).status().code(), StatusCode::kResourceLocked);
}

TEST_F(BrokerTest, ExclusiveConsumerLocksOutReceive) {
  DeclareQueue("q");
  Subscribe("q", 0, kS1, "solo", /*exclusive=*/true);
  EXPECT_EQ(broker().Receive(kS2, 1, "q", 1, 0).code(), StatusCode::kResourceLocked);
  EXPECT_EQ(broker().Receive(kS1, 1, "q", 1, 0).code(), StatusCode::kResourceLocked);
  ASSERT_TRUE(broker().Cancel(kS1, "solo").ok());
  EXPECT_TRUE(broker().Receive(kS2, 1, "q", 1, 0).ok());
}

TEST_F(BrokerTest, AutoDeleteQueueIsDeletedWhenLastConsumerCancels) {
  DeclareQueue("temp", kS1, false, /*auto_delete=*/true);
  Subscribe("temp", 0, kS1, "a");
  Subscribe("temp", 0, kS2, "b");
  ASSERT_TRUE(broker().Cancel(kS1, "a").ok());
  EXPECT_TRUE(QueueExists("temp"));
  ASSERT_TRUE(broker().Cancel(kS2, "b").ok());
  EXPECT_FALSE(QueueExists("temp"));
}

TEST_F(BrokerTest, AutoDeleteQueueWithoutConsumersStays) {
  DeclareQueue("temp", kS1, false, /*auto_delete=*/true);
  PublishTo("temp", {"m"});
  broker().Flush();
  EXPECT_TRUE(QueueExists("temp"));
}

TEST_F(BrokerTest, AutoDeleteQueueIsDeletedWhenItsConsumersSessionCloses) {
  DeclareQueue("temp", kS2, false, /*auto_delete=*/true);
  Subscribe("temp", 0, kS1);
  broker().CloseSession(kS1);
  EXPECT_FALSE(QueueExists("temp", kS2));
}

TEST_F(BrokerTest, AutoDeleteExchangeIsDeletedWhenLastBindingGoes) {
  DeclareExchange("temp-ex", ExchangeType::kDirect, "", /*auto_delete=*/true);
  DeclareQueue("q");
  Bind("q", "temp-ex", "k");
  BindingSpec binding;
  binding.queue = "q";
  binding.exchange = "temp-ex";
  binding.routing_key = "k";
  ASSERT_TRUE(broker().Unbind(kS1, binding).ok());
  EXPECT_FALSE(ExchangeExists("temp-ex"));
}

// --- Delete and purge -----------------------------------------------------------------------

TEST_F(BrokerTest, DeleteQueueWithConsumersSendsConsumerCancelled) {
  DeclareQueue("q");
  Subscribe("q", 0, kS1, "c1");
  Subscribe("q", 0, kS2, "c2");
  auto dropped = broker().DeleteQueue(kS1, "q", false, false);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  broker().Flush();
  ASSERT_EQ(peer1_->cancellations.size(), 1u);
  EXPECT_EQ(peer1_->cancellations[0].consumer_tag, "c1");
  EXPECT_FALSE(peer1_->cancellations[0].reason.empty());
  ASSERT_EQ(peer2_->cancellations.size(), 1u);
  EXPECT_EQ(peer2_->cancellations[0].consumer_tag, "c2");
  EXPECT_EQ(peer1_->flushes, 1);
  EXPECT_EQ(peer2_->flushes, 1);
  // The consumers are gone from their sessions.
  EXPECT_EQ(broker().Cancel(kS1, "c1").code(), StatusCode::kConsumerNotFound);
  EXPECT_FALSE(QueueExists("q"));
}

TEST_F(BrokerTest, DeleteQueueReturnsDroppedCountAndRemovesBindings) {
  DeclareQueue("q");
  Bind("q", "amq.fanout", "");
  PublishTo("q", {"1", "2"});
  auto dropped = broker().DeleteQueue(kS1, "q", false, false);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 2u);
  EXPECT_EQ(Publish("amq.fanout", "", "m").routed_queues, 0u);
  EXPECT_EQ(broker().DeleteQueue(kS1, "q", false, false).status().code(),
            StatusCode::kQueueNotFound);
}

// Regression: bindings made with arguments outlived their queue (a dangling Queue*).
TEST_F(BrokerTest, DeletedQueueBoundWithArgumentsIsNoLongerRouted) {
  DeclareQueue("q");
  BindingSpec binding;
  binding.queue = "q";
  binding.exchange = "amq.direct";
  binding.routing_key = "k";
  binding.arguments["note"] = std::string("any argument at all");
  ASSERT_TRUE(broker().Bind(kS1, binding).ok());
  ASSERT_TRUE(broker().DeleteQueue(kS1, "q", false, false).ok());
  EXPECT_EQ(Publish("amq.direct", "k", "m").routed_queues, 0u);
}

TEST_F(BrokerTest, DeleteQueueCompletesWaitingReceiveEmpty) {
  DeclareQueue("q");
  Receive("q", 1, 10'000, /*request_id=*/5);
  ASSERT_TRUE(broker().DeleteQueue(kS1, "q", false, false).ok());
  broker().Flush();
  ASSERT_EQ(peer1_->completions.size(), 1u);
  EXPECT_EQ(peer1_->completions[0].request_id, 5u);
  EXPECT_TRUE(peer1_->completions[0].deliveries.empty());
  // Its deadline passing later sends nothing more.
  clock_.Advance(milliseconds(10'000));
  broker().OnTimer();
  broker().Flush();
  EXPECT_EQ(peer1_->completions.size(), 1u);
}

TEST_F(BrokerTest, SettleAfterQueueDeletedSucceedsAndRequeuesNothing) {
  DeclareQueue("q");
  PublishTo("q", {"1"});
  auto got = Pull("q", 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(broker().DeleteQueue(kS1, "q", false, false).ok());
  EXPECT_TRUE(broker().Nack(kS1, got[0].delivery_tag, false, true).ok());
  broker().Flush();
  EXPECT_FALSE(QueueExists("q"));
}

TEST_F(BrokerTest, DeleteQueueIfUnusedRefusesWhileConsumersExist) {
  DeclareQueue("q");
  Subscribe("q", 0, kS1, "c");
  EXPECT_EQ(broker().DeleteQueue(kS1, "q", /*if_unused=*/true, false).status().code(),
            StatusCode::kPreconditionFailed);
  EXPECT_TRUE(QueueExists("q"));
  ASSERT_TRUE(broker().Cancel(kS1, "c").ok());
  EXPECT_TRUE(broker().DeleteQueue(kS1, "q", /*if_unused=*/true, false).ok());
}

TEST_F(BrokerTest, DeleteQueueIfEmptyRefusesWhileMessagesAreReady) {
  DeclareQueue("q");
  PublishTo("q", {"m"});
  EXPECT_EQ(broker().DeleteQueue(kS1, "q", false, /*if_empty=*/true).status().code(),
            StatusCode::kPreconditionFailed);
  EXPECT_TRUE(QueueExists("q"));
  auto purged = broker().PurgeQueue(kS1, "q");
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 1u);
  EXPECT_TRUE(broker().DeleteQueue(kS1, "q", false, /*if_empty=*/true).ok());
}

TEST_F(BrokerTest, DeleteExchangeIfUnusedRefusesWhileBound) {
  DeclareExchange("ex", ExchangeType::kDirect);
  DeclareQueue("q");
  Bind("q", "ex", "k");
  EXPECT_EQ(broker().DeleteExchange(0, "ex", /*if_unused=*/true).code(),
            StatusCode::kPreconditionFailed);
  EXPECT_TRUE(broker().DeleteExchange(0, "ex", false).ok());
  EXPECT_FALSE(ExchangeExists("ex"));
  EXPECT_EQ(broker().DeleteExchange(0, "ex", false).code(), StatusCode::kExchangeNotFound);
  // The queue survives and can be deleted without tripping over the old binding.
  EXPECT_TRUE(broker().DeleteQueue(kS1, "q", false, false).ok());
}

TEST_F(BrokerTest, PurgeLeavesInFlightMessagesAlone) {
  DeclareQueue("q");
  PublishTo("q", {"1", "2", "3"});
  auto got = Pull("q", 1);
  ASSERT_EQ(got.size(), 1u);
  auto purged = broker().PurgeQueue(kS1, "q");
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 2u);
  EXPECT_EQ(Info("q").in_flight, 1u);
  EXPECT_EQ(broker().PurgeQueue(kS1, "missing").status().code(), StatusCode::kQueueNotFound);
}

// --- Receive (long poll) --------------------------------------------------------------------

TEST_F(BrokerTest, ReceiveCompletesImmediatelyWhenMessagesAreReady) {
  DeclareQueue("q");
  PublishTo("q", {"1", "2", "3"});
  Receive("q", 2, 30'000, /*request_id=*/11);
  broker().Flush();
  ASSERT_EQ(peer1_->completions.size(), 1u);
  EXPECT_EQ(peer1_->completions[0].request_id, 11u);
  EXPECT_EQ(Bodies(peer1_->completions[0].deliveries), (BodyList{"1", "2"}));
  const Delivery& d = peer1_->completions[0].deliveries[0];
  EXPECT_EQ(d.consumer_tag, "");
  EXPECT_EQ(d.queue, "q");
  EXPECT_EQ(d.receive_count, 1u);
  EXPECT_EQ(peer1_->flushes, 1);
}

TEST_F(BrokerTest, ReceiveCompletesEmptyAfterDeadline) {
  DeclareQueue("q");
  Receive("q", 1, 1000, /*request_id=*/3);
  broker().Flush();
  EXPECT_TRUE(peer1_->completions.empty());
  ASSERT_TRUE(broker().NextDeadline().has_value());
  EXPECT_EQ(*broker().NextDeadline(), clock_.Now() + milliseconds(1000));
  clock_.Advance(milliseconds(999));
  broker().OnTimer();
  broker().Flush();
  EXPECT_TRUE(peer1_->completions.empty());
  clock_.Advance(milliseconds(1));
  broker().OnTimer();
  broker().Flush();
  ASSERT_EQ(peer1_->completions.size(), 1u);
  EXPECT_EQ(peer1_->completions[0].request_id, 3u);
  EXPECT_TRUE(peer1_->completions[0].deliveries.empty());
  EXPECT_EQ(peer1_->flushes, 1);
  EXPECT_FALSE(broker().NextDeadline().has_value());
}

TEST_F(BrokerTest, ReceiveCompletesAsSoonAsAMessageIsPublished) {
  DeclareQueue("q");
  Receive("q", 5, 60'000, /*request_id=*/8);
  broker().Flush();
  EXPECT_TRUE(peer1_->completions.empty());
  clock_.Advance(milliseconds(10));
  PublishTo("q", {"hello"});
  broker().Flush();
  ASSERT_EQ(peer1_->completions.size(), 1u);
  EXPECT_EQ(peer1_->completions[0].request_id, 8u);
  EXPECT_EQ(Bodies(peer1_->completions[0].deliveries), BodyList{"hello"});
  // The deadline passing later sends nothing more.
  clock_.Advance(milliseconds(60'000));
  broker().OnTimer();
  broker().Flush();
  EXPECT_EQ(peer1_->completions.size(), 1u);
}

TEST_F(BrokerTest, NextDeadlineIsTheEarliestWaitingReceive) {
  DeclareQueue("q");
  EXPECT_FALSE(broker().NextDeadline().has_value());
  Receive("q", 1, 5000, /*request_id=*/1);
  Receive("q", 1, 2000, /*request_id=*/2);
  ASSERT_TRUE(broker().NextDeadline().has_value());
  EXPECT_EQ(*broker().NextDeadline(), clock_.Now() + milliseconds(2000));
  clock_.Advance(milliseconds(2000));
  broker().OnTimer();
  broker().Flush();
  ASSERT_EQ(peer1_->completions.size(), 1u);
  EXPECT_EQ(peer1_->completions[0].request_id, 2u);
  EXPECT_EQ(*broker().NextDeadline(), clock_.Now() + milliseconds(3000));
}

TEST_F(BrokerTest, ReceiveWaitIsCappedByOptions) {
  BrokerOptions options;
  options.max_receive_wait_ms = 500;
  Reset(options);
  DeclareQueue("q");
  Receive("q", 1, 60'000);
  ASSERT_TRUE(broker().NextDeadline().has_value());
  EXPECT_EQ(*broker().NextDeadline(), clock_.Now() + milliseconds(500));
  clock_.Advance(milliseconds(500));
  broker().OnTimer();
  broker().Flush();
  EXPECT_EQ(peer1_->completions.size(), 1u);
}

TEST_F(BrokerTest, ReceiveMaxMessagesOverLimitIsInvalidArgument) {
  BrokerOptions options;
  options.max_receive_batch = 10;
  Reset(options);
  DeclareQueue("q");
  EXPECT_EQ(broker().Receive(kS1, 1, "q", 11, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(broker().Receive(kS1, 1, "q", 10, 0).ok());
  EXPECT_EQ(broker().Receive(kS1, 1, "missing", 1, 0).code(), StatusCode::kQueueNotFound);
}

TEST_F(BrokerTest, ReceiveBatchStaysWithinMaxMessageBytes) {
  BrokerOptions options;
  // Each message counts as its body plus a fixed allowance for its envelope (128 bytes here,
  // with no headers or properties): a, b and c weigh 228, d weighs 428.
  options.max_message_bytes = 500;
  Reset(options);
  DeclareQueue("q");
  const std::string a(100, 'a'), b(100, 'b'), c(100, 'c'), d(300, 'd');
  PublishTo("q", {a, b, c, d});
  Receive("q", 10, 1000, /*request_id=*/1);
  broker().Flush();
  ASSERT_EQ(peer1_->completions.size(), 1u);
  EXPECT_EQ(Bodies(peer1_->completions[0].deliveries), (BodyList{a, b}));
  // What did not fit stays at the head, in order; a single message may fill a batch alone.
  EXPECT_EQ(Bodies(Pull("q", 10)), BodyList{c});
  EXPECT_EQ(Bodies(Pull("q", 10)), BodyList{d});
  EXPECT_EQ(Info("q").ready, 0u);
}

TEST_F(BrokerTest, OutstandingReceivesPerConnectionAreCapped) {
  BrokerOptions options;
  options.max_receives_per_session = 3;
  Reset(options);
  DeclareQueue("q");
  for (uint64_t id = 1; id <= 3; ++id) Receive("q", 1, 10'000, id);
  EXPECT_EQ(broker().Receive(kS1, 4, "q", 1, 10'000).code(), StatusCode::kResourceExhausted);
  // Another connection has its own allowance.
  EXPECT_TRUE(broker().Receive(kS2, 5, "q", 1, 10'000).ok());
  // Answering one frees a slot.
  PublishTo("q", {"m"});
  broker().Flush();
  EXPECT_TRUE(broker().Receive(kS1, 6, "q", 1, 10'000).ok());
}

// Regression: a served long poll left its deadline behind until it expired.
TEST_F(BrokerTest, ServedReceiveLeavesNoDeadlineBehind) {
  DeclareQueue("q");
  Receive("q", 1, 60'000);
  ASSERT_TRUE(broker().NextDeadline().has_value());
  PublishTo("q", {"m"});
  broker().Flush();
  ASSERT_EQ(peer1_->completions.size(), 1u);
  // Only the delivery's lease (30 s by default) is left, not the long poll's 60 s.
  auto next = broker().NextDeadline();
  ASSERT_TRUE(next.has_value());
  EXPECT_LE(*next, clock_.Now() + milliseconds(30'010));
}

TEST_F(BrokerTest, ReceiveWithZeroMaxMessagesTakesOne) {
  DeclareQueue("q");
  PublishTo("q", {"1", "2"});
  Receive("q", 0, 1000);
  broker().Flush();
  ASSERT_EQ(peer1_->completions.size(), 1u);
  EXPECT_EQ(peer1_->completions[0].deliveries.size(), 1u);
}

TEST_F(BrokerTest, WaitingReceiveIsServedBeforePushConsumers) {
  DeclareQueue("q");
  Subscribe("q", 0, kS2);
  Receive("q", 1, 1000, /*request_id=*/4, kS1);
  PublishTo("q", {"1", "2"});
  broker().Flush();
  ASSERT_EQ(peer1_->completions.size(), 1u);
  EXPECT_EQ(Bodies(peer1_->completions[0].deliveries), BodyList{"1"});
  EXPECT_EQ(peer2_->DeliveredBodies(), BodyList{"2"});
}

TEST_F(BrokerTest, ExpiredMessagesAreNotDelivered) {
  DeclareQueue("q");
  Message message;
  message.body = "short-lived";
  message.properties.expiration_ms = 100;
  ASSERT_TRUE(broker().Publish(kS1, "", "q", message).ok());
  PublishTo("q", {"forever"});
  clock_.Advance(milliseconds(100));
  EXPECT_EQ(Bodies(Pull("q", 10)), BodyList{"forever"});
}

TEST_F(BrokerTest, ListQueuesFiltersByPrefix) {
  DeclareQueue("orders.eu");
  DeclareQueue("orders.us");
  DeclareQueue("payments");
  std::vector<std::string> names;
  for (const QueueInfo& info : broker().ListQueues("orders.")) names.push_back(info.name);
  EXPECT_EQ(names, (std::vector<std::string>{"orders.eu", "orders.us"}));
  EXPECT_EQ(broker().ListQueues("").size(), 3u);
}

TEST(ValidateName, AcceptsAllowedCharactersAndRejectsOthers) {
  EXPECT_TRUE(ValidateName("queue", "a-Z_0.9:x").ok());
  EXPECT_EQ(ValidateName("queue", "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateName("queue", "a b").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateName("queue", "a/b").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateName("queue", std::string(256, 'x')).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateName("queue", std::string(255, 'x')).ok());
}

// Exchange-to-exchange bindings, on the BrokerTest fixture.
class ExchangeToExchangeTest : public BrokerTest {
 protected:
  Status BindExchange(const std::string& source, const std::string& destination,
                      const std::string& key) {
    BindingSpec binding;
    binding.exchange = source;
    binding.destination_exchange = destination;
    binding.routing_key = key;
    return broker().Bind(kS1, binding);
  }
  uint32_t Routed(const std::string& exchange, const std::string& key) {
    return Publish(exchange, key, "").routed_queues;
  }
};

TEST_F(ExchangeToExchangeTest, MessagesFlowOnThroughABoundExchange) {
  DeclareExchange("in", ExchangeType::kTopic);
  DeclareExchange("fan", ExchangeType::kFanout);
  DeclareQueue("a");
  DeclareQueue("b");
  Bind("a", "fan", "");
  Bind("b", "fan", "");
  ASSERT_TRUE(BindExchange("in", "fan", "orders.#").ok());
  EXPECT_EQ(Routed("in", "orders.eu"), 2u);
  EXPECT_EQ(Routed("in", "payments.eu"), 0u);
  EXPECT_EQ(Info("a").ready, 1u);
  EXPECT_EQ(Info("b").ready, 1u);
}

TEST_F(ExchangeToExchangeTest, TwoPathsToOneQueueDeliverOneCopy) {
  DeclareExchange("in", ExchangeType::kFanout);
  DeclareExchange("mid", ExchangeType::kFanout);
  DeclareQueue("q");
  Bind("q", "in", "");
  Bind("q", "mid", "");
  ASSERT_TRUE(BindExchange("in", "mid", "").ok());
  EXPECT_EQ(Routed("in", "k"), 1u);
  EXPECT_EQ(Info("q").ready, 1u);
}

TEST_F(ExchangeToExchangeTest, CyclesEndAndDoNotRepeat) {
  DeclareExchange("x", ExchangeType::kFanout);
  DeclareExchange("y", ExchangeType::kFanout);
  ASSERT_TRUE(BindExchange("x", "y", "").ok());
  ASSERT_TRUE(BindExchange("y", "x", "").ok());
  EXPECT_EQ(Routed("x", "k"), 0u);
  DeclareQueue("q");
  Bind("q", "y", "");
  EXPECT_EQ(Routed("x", "k"), 1u);
  EXPECT_EQ(Info("q").ready, 1u);
}

TEST_F(ExchangeToExchangeTest, AlternateExchangeTakesWhatReachedNoQueueDownstream) {
  DeclareExchange("ae", ExchangeType::kFanout);
  DeclareQueue("unrouted");
  Bind("unrouted", "ae", "");
  DeclareExchange("in", ExchangeType::kFanout, "ae");
  DeclareExchange("empty", ExchangeType::kFanout);
  ASSERT_TRUE(BindExchange("in", "empty", "").ok());
  EXPECT_EQ(Routed("in", "k"), 1u);
  EXPECT_EQ(Info("unrouted").ready, 1u);
}

TEST_F(ExchangeToExchangeTest, DeletingTheDestinationRemovesTheBinding) {
  DeclareExchange("in", ExchangeType::kFanout);
  DeclareExchange("gone", ExchangeType::kFanout);
  DeclareQueue("q");
  Bind("q", "gone", "");
  ASSERT_TRUE(BindExchange("in", "gone", "").ok());
  ASSERT_TRUE(broker().DeleteExchange(0, "gone", false).ok());
  EXPECT_EQ(Routed("in", "k"), 0u);  // no dangling route (ASan would catch a stale pointer)
  for (const auto& e : broker().ListExchanges()) {
    if (e.name == "in") {
      EXPECT_EQ(e.bindings, 0u);
    }
  }
}

TEST_F(ExchangeToExchangeTest, AutoDeleteSourceGoesWithItsLastBinding) {
  DeclareExchange("src", ExchangeType::kFanout, "", /*auto_delete=*/true);
  DeclareExchange("dst", ExchangeType::kFanout);
  ASSERT_TRUE(BindExchange("src", "dst", "").ok());
  ASSERT_TRUE(broker().DeleteExchange(0, "dst", false).ok());
  ExchangeSpec passive;
  passive.name = "src";
  passive.passive = true;
  EXPECT_EQ(broker().DeclareExchange(passive).code(), StatusCode::kExchangeNotFound);
}

// Regression: dropping a queue bound twice to an auto-delete exchange edited the binding list
// it was walking.
TEST_F(ExchangeToExchangeTest, DeletingAQueueBoundTwiceToAnAutoDeleteExchange) {
  DeclareExchange("auto", ExchangeType::kDirect, "", /*auto_delete=*/true);
  DeclareExchange("other", ExchangeType::kDirect);
  DeclareQueue("q");
  Bind("q", "auto", "a");
  Bind("q", "auto", "b");
  Bind("q", "other", "c");
  ASSERT_TRUE(broker().DeleteQueue(kS1, "q", false, false).ok());
  ExchangeSpec passive;
  passive.name = "auto";
  passive.passive = true;
  EXPECT_EQ(broker().DeclareExchange(passive).code(), StatusCode::kExchangeNotFound);
  passive.name = "other";
  EXPECT_TRUE(broker().DeclareExchange(passive).ok());
  // Its binding to "other" went too: no route to the freed queue (ASan would see one).
  EXPECT_EQ(Routed("other", "c"), 0u);
  for (const auto& e : broker().ListExchanges()) {
    if (e.name == "other") {
      EXPECT_EQ(e.bindings, 0u);
    }
  }
}

TEST_F(ExchangeToExchangeTest, UnbindAndBadBindingsAreReported) {
  DeclareExchange("in", ExchangeType::kDirect);
  DeclareExchange("out", ExchangeType::kFanout);
  DeclareQueue("q");
  Bind("q", "out", "");
  ASSERT_TRUE(BindExchange("in", "out", "k").ok());
  EXPECT_EQ(Routed("in", "k"), 1u);
  BindingSpec unbind;
  unbind.exchange = "in";
  unbind.destination_exchange = "out";
  unbind.routing_key = "k";
  ASSERT_TRUE(broker().Unbind(kS1, unbind).ok());
  EXPECT_EQ(Routed("in", "k"), 0u);
  EXPECT_EQ(BindExchange("in", "missing", "k").code(), StatusCode::kExchangeNotFound);
  EXPECT_EQ(BindExchange("missing", "out", "k").code(), StatusCode::kExchangeNotFound);
  BindingSpec both;
  both.queue = "q";
  both.exchange = "in";
  both.destination_exchange = "out";
  EXPECT_EQ(broker().Bind(kS1, both).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace wharf::broker
