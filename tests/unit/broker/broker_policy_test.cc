// Unit tests for policies in the broker (broker_policies.cc, docs/policies.md): a policy applies
// at once to the queues and exchanges it matches and to every new one, clearing it lifts it,
// and, with the real RocksDB store, policies and their effect survive a restart.
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

PolicyInfo Policy(std::string name, std::string pattern, Headers definition, int64_t priority = 0,
                  std::string apply_to = "all", std::string vhost = "/") {
  PolicyInfo p;
  p.vhost = std::move(vhost);
  p.name = std::move(name);
  p.pattern = std::move(pattern);
  p.definition = std::move(definition);
  p.priority = priority;
  p.apply_to = std::move(apply_to);
  return p;
}

class BrokerPolicyTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kS = 1;

  BrokerPolicyTest() {
    auto peer = std::make_shared<RecordingPeer>();
    peer_ = peer.get();
    EXPECT_TRUE(broker_.OpenSession(kS, "alice", peer).ok());
  }

  void Declare(const std::string& name, Headers arguments = {}) {
    QueueSpec spec;
    spec.name = name;
    spec.durable = false;
    spec.arguments = std::move(arguments);
    auto declared = broker_.DeclareQueue(kS, spec);
    ASSERT_TRUE(declared.ok()) << declared.status().ToString();
  }

  Result<PublishOutcome> Publish(const std::string& exchange, const std::string& key,
                                 const std::string& body) {
    Message m;
    m.body = body;
    return broker_.Publish(kS, exchange, key, std::move(m));
  }

  QueueInfo Info(const std::string& name) {
    for (const QueueInfo& info : broker_.ListQueues("")) {
      if (info.name == name) return info;
    }
    ADD_FAILURE() << "no queue " << name;
    return {};
  }

  std::vector<std::string> TakeAll(const std::string& queue) {
    auto received = broker_.Receive(kS, 9, queue, 100, 0);
    EXPECT_TRUE(received.ok()) << received.ToString();
    broker_.Flush();
    std::vector<std::string> out;
    for (auto& c : peer_->completions) {
      for (auto& d : c.deliveries) {
        out.push_back(d.envelope->message.body);
        EXPECT_TRUE(broker_.Ack(kS, d.delivery_tag, false).ok());
      }
    }
    peer_->completions.clear();
    return out;
  }

  ManualClock clock_;
  Broker broker_{BrokerOptions{}, &clock_};
  RecordingPeer* peer_ = nullptr;
};

TEST_F(BrokerPolicyTest, ALowerMaxLengthDropsTheOldestAtOnceAndClearingLiftsIt) {
  Declare("orders");
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Publish("", "orders", "m" + std::to_string(i)).ok());
  ASSERT_TRUE(broker_.SetPolicy(Policy("cap", "^orders$", {{"max-length", int64_t{3}}})).ok());
  QueueInfo info = Info("orders");
  EXPECT_EQ(info.ready, 3u);
  EXPECT_EQ(info.policy, "cap");
  EXPECT_EQ(info.effective_arguments, (Headers{{"x-max-length", int64_t{3}}}));
  EXPECT_TRUE(info.arguments.empty()) << "the declared arguments are as declared";
  ASSERT_TRUE(Publish("", "orders", "m10").ok());
  EXPECT_EQ(Info("orders").ready, 3u);

  ASSERT_TRUE(broker_.ClearPolicy("/", "cap").ok());
  EXPECT_EQ(Info("orders").policy, "");
  ASSERT_TRUE(Publish("", "orders", "m11").ok());
  EXPECT_EQ(TakeAll("orders"), (std::vector<std::string>{"m8", "m9", "m10", "m11"}));
  EXPECT_EQ(broker_.ClearPolicy("/", "cap").code(), StatusCode::kPolicyNotFound);
}

TEST_F(BrokerPolicyTest, ANewQueueGetsThePolicyAndTheLowerLimitWins) {
  ASSERT_TRUE(broker_
                  .SetPolicy(Policy(
                      "cap", "^jobs\\.",
                      {{"max-length", int64_t{2}}, {"overflow", std::string("reject-publish")}}))
                  .ok());
  Declare("jobs.a");
  Declare("jobs.b", {{"x-max-length", int64_t{1}}});
  Declare("other");
  EXPECT_EQ(Info("other").policy, "");
  for (int i = 0; i < 4; ++i) {
    (void)Publish("", "jobs.a", "a" + std::to_string(i));
    (void)Publish("", "jobs.b", "b" + std::to_string(i));
  }
  // reject-publish keeps the first ones.
  EXPECT_EQ(TakeAll("jobs.a"), (std::vector<std::string>{"a0", "a1"}));
  EXPECT_EQ(TakeAll("jobs.b"), (std::vector<std::string>{"b0"}));
}

TEST_F(BrokerPolicyTest, AHigherPriorityPolicyReplacesTheOtherOnTheQueue) {
  Declare("orders");
  ASSERT_TRUE(broker_.SetPolicy(Policy("wide", ".*", {{"max-length", int64_t{5}}}, 1)).ok());
  EXPECT_EQ(Info("orders").policy, "wide");
  ASSERT_TRUE(
      broker_.SetPolicy(Policy("narrow", "^orders$", {{"message-ttl", int64_t{100}}}, 2)).ok());
  QueueInfo info = Info("orders");
  EXPECT_EQ(info.policy, "narrow");
  // Only one policy applies: the wide one's limit is gone.
  EXPECT_EQ(info.effective_arguments, (Headers{{"x-message-ttl", int64_t{100}}}));
  EXPECT_EQ(info.policy_definition, (Headers{{"message-ttl", int64_t{100}}}));
  ASSERT_TRUE(
      broker_.SetPolicy(Policy("narrow", "^orders$", {{"message-ttl", int64_t{100}}}, 0)).ok());
  EXPECT_EQ(Info("orders").policy, "wide");
  EXPECT_EQ(broker_.ListPolicies().size(), 2u);
}

TEST_F(BrokerPolicyTest, AMessageTtlPolicyExpiresTheMessagesAlreadyThere) {
  Declare("q");
  Declare("dead");
  ASSERT_TRUE(Publish("", "q", "old").ok());
  clock_.Advance(std::chrono::milliseconds(500));
  ASSERT_TRUE(broker_
                  .SetPolicy(Policy(
                      "ttl", "^q$",
                      {{"message-ttl", int64_t{1000}}, {"dead-letter-queue", std::string("dead")}}))
                  .ok());
  ASSERT_TRUE(Publish("", "q", "new").ok());
  broker_.Flush();
  clock_.Advance(std::chrono::milliseconds(600));  // "old" is 1100 ms old, "new" 600 ms
  broker_.OnTimer();                               // expires "old" without a consumer asking
  broker_.Flush();
  EXPECT_EQ(Info("q").ready, 1u);
  EXPECT_EQ(TakeAll("dead"), (std::vector<std::string>{"old"}));
  EXPECT_EQ(TakeAll("q"), (std::vector<std::string>{"new"}));
}

TEST_F(BrokerPolicyTest, APolicyDeadLetterTargetTakesRejectedMessages) {
  Declare("work");
  Declare("work.dlq");
  ASSERT_TRUE(broker_
                  .SetPolicy(Policy("dl", "^work$",
                                    {{"dead-letter-queue", std::string("work.dlq")}}, 0, "queues"))
                  .ok());
  ASSERT_TRUE(Publish("", "work", "poison").ok());
  auto received = broker_.Receive(kS, 9, "work", 1, 0);
  ASSERT_TRUE(received.ok());
  broker_.Flush();
  ASSERT_EQ(peer_->completions.size(), 1u);
  ASSERT_EQ(peer_->completions[0].deliveries.size(), 1u);
  const uint64_t tag = peer_->completions[0].deliveries[0].delivery_tag;
  peer_->completions.clear();
  ASSERT_TRUE(broker_.Nack(kS, tag, false, /*requeue=*/false).ok());
  broker_.Flush();
  EXPECT_EQ(TakeAll("work.dlq"), (std::vector<std::string>{"poison"}));
  EXPECT_EQ(Info("work").dead_letter_target, "work.dlq");
}

TEST_F(BrokerPolicyTest, AnExchangePolicyGivesAnAlternateExchange) {
  ExchangeSpec events;
  events.name = "events";
  events.type = ExchangeType::kDirect;
  ASSERT_TRUE(broker_.DeclareExchange(kS, events).ok());
  ExchangeSpec ae;
  ae.name = "unrouted";
  ae.type = ExchangeType::kFanout;
  ASSERT_TRUE(broker_.DeclareExchange(kS, ae).ok());
  Declare("lost");
  ASSERT_TRUE(broker_.Bind(kS, BindingSpec{"lost", "unrouted", "", {}}).ok());
  // A queue policy does not touch exchanges.
  ASSERT_TRUE(
      broker_.SetPolicy(Policy("q-only", "^events$", {{"max-length", int64_t{1}}}, 9, "queues"))
          .ok());
  ASSERT_TRUE(
      broker_
          .SetPolicy(Policy("ae", "^events$", {{"alternate-exchange", std::string("unrouted")}}, 0,
                            "exchanges"))
          .ok());
  ASSERT_TRUE(Publish("events", "nobody", "stray").ok());
  EXPECT_EQ(TakeAll("lost"), (std::vector<std::string>{"stray"}));
  bool found = false;
  for (const ExchangeInfo& info : broker_.ListExchanges("/")) {
    if (info.name != "events") continue;
    found = true;
    EXPECT_EQ(info.policy, "ae");
    EXPECT_EQ(info.alternate_exchange, "unrouted");
  }
  EXPECT_TRUE(found);
  // An exchange's own alternate exchange wins, and stays in its declared arguments (an export
  // keeps it) even when the policy names the same one.
  ExchangeSpec own;
  own.name = "own";
  own.alternate_exchange = "unrouted";
  ASSERT_TRUE(broker_.DeclareExchange(kS, own).ok());
  ASSERT_TRUE(broker_
                  .SetPolicy(Policy("all-ae", ".*", {{"alternate-exchange", std::string("x")}}, 0,
                                    "exchanges"))
                  .ok());
  for (const ExchangeInfo& info : broker_.ListExchanges("/")) {
    if (info.name != "own") continue;
    EXPECT_EQ(info.policy, "all-ae");
    EXPECT_EQ(info.alternate_exchange, "unrouted");
    EXPECT_EQ(info.arguments, (Headers{{"alternate-exchange", std::string("unrouted")}}));
  }
  ASSERT_TRUE(broker_.ClearPolicy("/", "all-ae").ok());
  ASSERT_TRUE(broker_.ClearPolicy("/", "ae").ok());
  ASSERT_TRUE(Publish("events", "nobody", "dropped").ok());
  EXPECT_TRUE(TakeAll("lost").empty());
}

TEST_F(BrokerPolicyTest, BadPoliciesAreRefusedAndChangeNothing) {
  EXPECT_EQ(broker_.SetPolicy(Policy("p", ".*", {{"max-length", std::string("x")}})).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_.SetPolicy(Policy("p", ".*", {{"max-length", int64_t{1}}}, 0, "all", "nowhere"))
                .code(),
            StatusCode::kVhostNotFound);
  EXPECT_TRUE(broker_.ListPolicies().empty());
}

TEST_F(BrokerPolicyTest, AVhostHoldsAtMostItsShareOfPolicies) {
  for (size_t i = 0; i < kMaxPoliciesPerVhost; ++i) {
    ASSERT_TRUE(broker_
                    .SetPolicy(Policy("p" + std::to_string(i), "^q" + std::to_string(i) + "$",
                                      {{"max-length", int64_t{1}}}))
                    .ok());
  }
  Status refused = broker_.SetPolicy(Policy("one-more", ".*", {{"max-length", int64_t{1}}}));
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  // Changing one that is there is not one more.
  EXPECT_TRUE(broker_.SetPolicy(Policy("p0", ".*", {{"max-length", int64_t{2}}})).ok());
}

TEST_F(BrokerPolicyTest, PoliciesAreScopedToTheirVhostAndGoWithIt) {
  ASSERT_TRUE(broker_.AddVhost("shop").ok());
  ASSERT_TRUE(
      broker_.SetPolicy(Policy("cap", ".*", {{"max-length", int64_t{1}}}, 0, "all", "shop")).ok());
  Declare("orders");  // in "/"
  EXPECT_EQ(Info("orders").policy, "");
  EXPECT_EQ(broker_.ListPolicies("shop").size(), 1u);
  EXPECT_TRUE(broker_.ListPolicies("/").empty());
  ASSERT_TRUE(broker_.DeleteVhost("shop").ok());
  EXPECT_TRUE(broker_.ListPolicies().empty());
}

// With the real store: a policy survives a crash, applies to the recovered queue, and a cleared
// one stays cleared.
class BrokerPolicyStoreTest : public BrokerStoreTest {};

TEST_F(BrokerPolicyStoreTest, PoliciesSurviveARestart) {
  DeclareQueue("orders");
  DeclareQueue("jobs");
  ASSERT_TRUE(broker_
                  ->SetPolicy(Policy("cap", "^orders$",
                                     {{"max-length", int64_t{2}}, {"ha-mode", std::string("all")}}))
                  .ok());
  ASSERT_TRUE(broker_->SetPolicy(Policy("gone", "^jobs$", {{"max-length", int64_t{1}}})).ok());
  ASSERT_TRUE(broker_->ClearPolicy("/", "gone").ok());
  Drain();
  Restart();
  auto policies = broker_->ListPolicies();
  ASSERT_EQ(policies.size(), 1u);
  EXPECT_EQ(policies[0].name, "cap");
  EXPECT_EQ(policies[0].definition.at("ha-mode"), HeaderValue(std::string("all")));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Publish("", "orders", "m" + std::to_string(i)).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Publish("", "jobs", "j" + std::to_string(i)).ok());
  Drain();
  EXPECT_EQ(TakeAndAck("orders", 10, 10), (std::vector<std::string>{"m3", "m4"}));
  EXPECT_EQ(TakeAndAck("jobs", 10, 10).size(), 3u);
}

}  // namespace
}  // namespace wharf::broker
