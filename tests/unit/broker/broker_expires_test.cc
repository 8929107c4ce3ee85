// Queue expiry, x-expires (docs/lifecycle.md, "Queue expiry"): a queue unused for its
// x-expires is deleted, as DeleteQueue deletes it; consumers, Receive, Get and redeclaration
// are uses. With the real store (broker_store_fixture.h) and a ManualClock.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "broker/broker.h"
#include "broker/queue_policy.h"
#include "unit/broker/broker_store_fixture.h"
#include "unit/broker/recording_peer.h"

namespace wharf::broker {
namespace {

using std::chrono::milliseconds;

class BrokerExpiresTest : public BrokerStoreTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool durable() const { return GetParam(); }
  void DeclareExpiring(const std::string& name, int64_t expires_ms) {
    DeclareQueue(name, durable(), {{"x-expires", expires_ms}});
  }
  bool Exists(const std::string& name) {
    for (const auto& q : broker_->ListQueues(name)) {
      if (q.name == name) return true;
    }
    return false;
  }
  Result<QueueInfo> Redeclare(const std::string& name, int64_t expires_ms, bool passive) {
    QueueSpec spec;
    spec.name = name;
    spec.durable = durable();
    spec.passive = passive;
    if (!passive) spec.arguments = {{"x-expires", expires_ms}};
    return broker_->DeclareQueue(kS1, spec);
  }
};

INSTANTIATE_TEST_SUITE_P(RamAndStore, BrokerExpiresTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Durable" : "Transient"; });

TEST_P(BrokerExpiresTest, AnUnusedQueueIsDeletedWithItsMessagesAndBindings) {
  ExchangeSpec fanout;
  fanout.name = "fan";
  fanout.type = ExchangeType::kFanout;
  fanout.durable = durable();
  ASSERT_TRUE(broker_->DeclareExchange(fanout).ok());
  DeclareExpiring("q", 1'000);
  DeclareQueue("keep", durable());
  BindingSpec binding;
  binding.queue = "q";
  binding.exchange = "fan";
  ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  ASSERT_TRUE(Publish("fan", "", "dropped with the queue").ok());
  Drain();
  // The server's timer is armed for the queue's deadline: no scan of the queues per tick.
  ASSERT_TRUE(broker_->NextDeadline().has_value());
  EXPECT_EQ(*broker_->NextDeadline(), clock_.Now() + milliseconds(1'000));
  Tick(milliseconds(999));
  ASSERT_TRUE(Exists("q"));
  EXPECT_EQ(Info("q").ready, 1u) << "a publish is no use of the queue";
  Tick(milliseconds(1));
  EXPECT_FALSE(Exists("q"));
  EXPECT_TRUE(Exists("keep")) << "a queue without x-expires stays";
  EXPECT_TRUE(broker_->ListBindings("fan", "").empty());
  EXPECT_FALSE(broker_->NextDeadline().has_value()) << "nothing left to time";
  // The name is free again, and the new queue starts empty.
  DeclareExpiring("q", 1'000);
  EXPECT_EQ(Info("q").ready, 0u);
}

TEST_P(BrokerExpiresTest, AConsumerKeepsTheQueueAndItsCancelStartsTheClock) {
  DeclareExpiring("q", 1'000);
  auto tag = broker_->Subscribe(kS1, "q", "", 10, false);
  ASSERT_TRUE(tag.ok()) << tag.status().ToString();
  Tick(milliseconds(10'000));
  ASSERT_TRUE(Exists("q")) << "a consumed queue never expires";
  ASSERT_TRUE(broker_->Cancel(kS1, *tag).ok());
  Tick(milliseconds(999));
  ASSERT_TRUE(Exists("q")) << "the clock starts when the last consumer goes";
  Tick(milliseconds(1));
  EXPECT_FALSE(Exists("q"));
}

TEST_P(BrokerExpiresTest, AClosedConsumerSessionStartsTheClock) {
  DeclareExpiring("q", 1'000);
  auto peer = std::make_shared<RecordingPeer>();
  EXPECT_TRUE(broker_->OpenSession(2, "bob", peer).ok());
  ASSERT_TRUE(broker_->Subscribe(2, "q", "", 10, false).ok());
  Tick(milliseconds(5'000));
  broker_->CloseSession(2);
  Tick(milliseconds(999));
  ASSERT_TRUE(Exists("q"));
  Tick(milliseconds(1));
  EXPECT_FALSE(Exists("q"));
}

TEST_P(BrokerExpiresTest, ReceiveAndGetResetTheClock) {
  DeclareExpiring("q", 1'000);
  ASSERT_TRUE(Publish("", "q", "m").ok());
  Drain();
  Tick(milliseconds(600));
  ASSERT_TRUE(broker_->Receive(kS1, 1, "q", 1, 0).ok());
  Drain();
  ASSERT_EQ(peer_->completions.size(), 1u);
  ASSERT_EQ(peer_->completions[0].deliveries.size(), 1u);
  Tick(milliseconds(600));
  ASSERT_TRUE(Exists("q")) << "1200 ms after the declare, 600 after the Receive";
  auto got = broker_->Get(kS1, "q", /*no_ack=*/true);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  Tick(milliseconds(999));
  ASSERT_TRUE(Exists("q"));
  Tick(milliseconds(1));
  EXPECT_FALSE(Exists("q"));
}

TEST_P(BrokerExpiresTest, AWaitingReceiveIsAUseUntilItsWaitEnds) {
  DeclareExpiring("q", 1'000);
  ASSERT_TRUE(broker_->Receive(kS1, 1, "q", 1, 5'000).ok());
  Drain();
  Tick(milliseconds(4'999));
  ASSERT_TRUE(Exists("q")) << "a long poll waits on it";
  Tick(milliseconds(1));  // the wait ends, empty
  ASSERT_EQ(peer_->completions.size(), 1u);
  Tick(milliseconds(999));
  ASSERT_TRUE(Exists("q")) << "the clock starts when the wait ends";
  Tick(milliseconds(1));
  EXPECT_FALSE(Exists("q"));
}

TEST_P(BrokerExpiresTest, ARedeclarationResetsTheClock) {
  DeclareExpiring("q", 1'000);
  Tick(milliseconds(900));
  auto again = Redeclare("q", 1'000, /*passive=*/false);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  Tick(milliseconds(900));
  ASSERT_TRUE(Exists("q"));
  auto passive = Redeclare("q", 0, /*passive=*/true);
  ASSERT_TRUE(passive.ok()) << passive.status().ToString();
  Tick(milliseconds(900));
  ASSERT_TRUE(Exists("q")) << "a passive declaration is a use too";
  // Another x-expires is another queue's arguments.
  EXPECT_EQ(Redeclare("q", 2'000, false).status().code(), StatusCode::kPreconditionFailed);
  Tick(milliseconds(100));
  EXPECT_FALSE(Exists("q")) << "a refused redeclaration is no use";
}

TEST_P(BrokerExpiresTest, InvalidValuesAreRefused) {
  for (const HeaderValue& bad :
       {HeaderValue{int64_t{0}}, HeaderValue{int64_t{-1}}, HeaderValue{std::string("1000")},
        HeaderValue{1.5}, HeaderValue{true}}) {
    QueueSpec spec;
    spec.name = "bad";
    spec.durable = durable();
    spec.arguments = {{"x-expires", bad}};
    auto declared = broker_->DeclareQueue(kS1, spec);
    EXPECT_EQ(declared.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(declared.status().message().find("x-expires"), std::string_view::npos)
        << declared.status().ToString();
  }
  EXPECT_FALSE(Exists("bad"));
  EXPECT_TRUE(IsKnownQueueArgument("x-expires"));
  auto policy = ParseQueuePolicy({{"x-expires", int64_t{10'000}}}, QueueRules::kWharf);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_EQ(policy->expires_ms, 10'000u);
}

TEST_P(BrokerExpiresTest, AmqpSessionsEnforceItUnderRabbitMqRules) {
  auto peer = std::make_shared<RecordingPeer>();
  constexpr uint64_t kChannel = 5;
  EXPECT_TRUE(broker_
                  ->OpenSession(kChannel, "guest", peer, "127.0.0.1:5000",
                                SessionOptions{.owner_id = 500, .amqp = true})
                  .ok());
  QueueSpec spec;
  spec.name = "celery@host.reply.celery.pidbox";
  spec.durable = durable();
  spec.auto_delete = true;
  for (int64_t bad : {int64_t{0}, int64_t{-10}}) {
    spec.arguments = {{"x-expires", bad}};
    EXPECT_EQ(broker_->DeclareQueue(kChannel, spec).status().code(),
              StatusCode::kPreconditionFailed)
        << "RabbitMQ refuses it too (406)";
  }
  spec.arguments = {{"x-expires", int64_t{10'000}}, {"x-message-ttl", int64_t{300'000}}};
  ASSERT_TRUE(broker_->DeclareQueue(kChannel, spec).ok());
  // Equivalence compares x-expires now that Wharf knows it.
  QueueSpec other = spec;
  other.arguments["x-expires"] = int64_t{20'000};
  EXPECT_EQ(broker_->DeclareQueue(kChannel, other).status().code(),
            StatusCode::kPreconditionFailed);
  Tick(milliseconds(9'000));
  ASSERT_TRUE(broker_->DeclareQueue(kChannel, spec).ok()) << "the same declaration resets it";
  Tick(milliseconds(9'999));
  ASSERT_TRUE(Exists(spec.name));
  Tick(milliseconds(1));
  EXPECT_FALSE(Exists(spec.name));
  broker_->CloseSession(kChannel);
}

TEST_F(BrokerStoreTest, AnExpiredDurableQueueStaysGoneAfterARestart) {
  DeclareQueue("gone", true, {{"x-expires", int64_t{1'000}}});
  ASSERT_TRUE(Publish("", "gone", "m").ok());
  Drain();
  Tick(milliseconds(1'000));
  ASSERT_TRUE(broker_->ListQueues("gone").empty());
  Restart();
  EXPECT_TRUE(broker_->ListQueues("gone").empty()) << "its removal is in the store";
}

TEST_F(BrokerStoreTest, ARecoveredQueueCountsFromTheRecovery) {
  DeclareQueue("r", true, {{"x-expires", int64_t{1'000}}});
  ASSERT_TRUE(Publish("", "r", "m").ok());
  Drain();
  Tick(milliseconds(800));
  Restart();
  ASSERT_EQ(broker_->ListQueues("r").size(), 1u);
  Tick(milliseconds(999));
  ASSERT_EQ(broker_->ListQueues("r").size(), 1u) << "1800 ms after the declare, 999 after start";
  Tick(milliseconds(1));
  EXPECT_TRUE(broker_->ListQueues("r").empty());
  Restart();
  EXPECT_TRUE(broker_->ListQueues("r").empty());
}

// Regression: recovery parsed every stored queue under RabbitMQ's argument checks, which bound
// x-expires to 2^32-1 ms; a native queue declared with 60 days lost its expiry at a restart.
TEST_F(BrokerStoreTest, ALongExpiryDeclaredNativelySurvivesARestart) {
  constexpr int64_t k60Days = 60LL * 86'400'000;  // above 2^32-1 ms
  DeclareQueue("long", true, {{"x-expires", k60Days}});
  Drain();
  Restart();
  ASSERT_EQ(broker_->ListQueues("long").size(), 1u);
  Tick(std::chrono::duration_cast<milliseconds>(std::chrono::hours(24 * 60)));
  EXPECT_TRUE(broker_->ListQueues("long").empty()) << "it still expires after its 60 days";
}

}  // namespace
}  // namespace wharf::broker
