// Unit tests of the broker's consumer choice (docs/lifecycle.md, "Consumers"): consumer
// priorities and single-active-consumer queues, through native sessions, with a ManualClock
// and recording peers as broker_test.cc; the restart test uses the real store.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "common/clock.h"
#include "unit/broker/broker_store_fixture.h"
#include "unit/broker/recording_peer.h"

namespace wharf::broker {
namespace {

class BrokerConsumersTest : public ::testing::Test {
 protected:
  BrokerConsumersTest() : broker_(BrokerOptions{}, &clock_) {
    for (uint64_t s : {1, 2, 3, 4}) {
      auto peer = std::make_shared<RecordingPeer>();
      peers_[s] = peer.get();
      EXPECT_TRUE(broker_.OpenSession(s, "guest", peer).ok());
    }
  }

  Status Declare(const std::string& name, Headers arguments = {}) {
    QueueSpec spec;
    spec.name = name;
    spec.arguments = std::move(arguments);
    return broker_.DeclareQueue(1, spec).status();
  }

  void Publish(const std::string& queue, const BodyList& bodies) {
    for (const auto& body : bodies) {
      Message m;
      m.body = body;
      auto published = broker_.Publish(1, "", queue, std::move(m));
      ASSERT_TRUE(published.ok()) << published.status().ToString();
    }
    broker_.Flush();
  }

  std::string Subscribe(uint64_t session, const std::string& queue, const std::string& tag,
                        uint32_t prefetch, int32_t priority = 0) {
    auto got = broker_.Subscribe(session, queue, tag, prefetch, false, 0, false, priority);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    broker_.Flush();
    return got.ok() ? *got : "";
  }

  // What session `s` got since the last call.
  BodyList Got(uint64_t s) {
    BodyList out = peers_[s]->DeliveredBodies();
    peers_[s]->deliveries.clear();
    return out;
  }

  std::map<std::string, ConsumerInfo> Consumers(const std::string& queue) {
    std::map<std::string, ConsumerInfo> out;
    for (const ConsumerInfo& c : broker_.ListConsumers(queue)) out[c.consumer_tag] = c;
    return out;
  }

  ManualClock clock_;
  Broker broker_;
  std::map<uint64_t, RecordingPeer*> peers_;
};

TEST_F(BrokerConsumersTest, HigherPrioritiesAreServedWhileTheyHaveCredit) {
  ASSERT_TRUE(Declare("q").ok());
  Subscribe(1, "q", "none", 10);
  Subscribe(2, "q", "mid-a", 2, 3);
  Subscribe(3, "q", "mid-b", 2, 3);
  Subscribe(4, "q", "high", 2, 7);
  Publish("q", {"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"});
  EXPECT_EQ(Got(4), (BodyList{"m0", "m1"}));
  EXPECT_EQ(Got(2), (BodyList{"m2", "m4"}));
  EXPECT_EQ(Got(3), (BodyList{"m3", "m5"}));
  EXPECT_EQ(Got(1), (BodyList{"m6", "m7"}));
  // Credit back on the highest: it is first again.
  ASSERT_TRUE(broker_.Ack(4, 0, /*multiple=*/true).ok());
  Publish("q", {"m8", "m9", "m10"});
  EXPECT_EQ(Got(4), (BodyList{"m8", "m9"}));
  EXPECT_EQ(Got(1), (BodyList{"m10"}));
  auto listed = Consumers("q");
  EXPECT_EQ(listed["high"].priority, 7);
  EXPECT_EQ(listed["none"].priority, 0);
  EXPECT_EQ(listed["high"].activity, "up");
}

TEST_F(BrokerConsumersTest, AConnectionThatIsBehindPassesItsTurnToALowerPriority) {
  ASSERT_TRUE(Declare("q").ok());
  Subscribe(1, "q", "low", 0, -1);
  Subscribe(2, "q", "high", 0, 5);
  peers_[2]->writable = false;
  Publish("q", {"a", "b"});
  EXPECT_EQ(Got(1), (BodyList{"a", "b"}));
  peers_[2]->writable = true;
  broker_.ResumeSession(2);
  Publish("q", {"c"});
  EXPECT_EQ(Got(2), (BodyList{"c"}));
}

TEST_F(BrokerConsumersTest, CancellingAHigherPriorityHandsItsBacklogDown) {
  ASSERT_TRUE(Declare("q").ok());
  Subscribe(1, "q", "low", 0);
  Subscribe(2, "q", "high", 1, 9);
  Publish("q", {"a", "b", "c"});
  EXPECT_EQ(Got(2), (BodyList{"a"}));
  EXPECT_EQ(Got(1), (BodyList{"b", "c"}));
  // Its unacked delivery comes back when its session closes, and goes to the one left.
  broker_.CloseSession(2);
  broker_.Flush();
  EXPECT_EQ(Got(1), (BodyList{"a"}));
}

TEST_F(BrokerConsumersTest, ASingleActiveConsumerGetsEverythingAndItsSuccessorTheRest) {
  ASSERT_TRUE(Declare("sac", {{"x-single-active-consumer", true}}).ok());
  Subscribe(1, "sac", "first", 0);
  Subscribe(2, "sac", "second", 0);
  Subscribe(3, "sac", "third", 0, /*priority=*/10);
  Publish("sac", {"a0", "a1"});
  EXPECT_EQ(Got(1), (BodyList{"a0", "a1"}));
  EXPECT_TRUE(Got(2).empty());
  EXPECT_TRUE(Got(3).empty());
  auto listed = Consumers("sac");
  EXPECT_EQ(listed["first"].activity, "single_active");
  EXPECT_EQ(listed["second"].activity, "waiting");
  EXPECT_EQ(listed["third"].activity, "waiting");
  EXPECT_EQ(broker_.ListQueues("sac")[0].consumers, 3u) << "waiting consumers count";
  // Cancelled with its deliveries unacked: the successor (the highest priority waiting)
  // gets what comes next; the unacked stay with the first session until it settles them.
  ASSERT_TRUE(broker_.Cancel(1, "first").ok());
  Publish("sac", {"b0"});
  EXPECT_EQ(Got(3), (BodyList{"b0"}));
  EXPECT_TRUE(Got(2).empty());
  ASSERT_TRUE(broker_.Nack(1, 0, /*multiple=*/true, /*requeue=*/true).ok());
  broker_.Flush();
  EXPECT_EQ(Got(3), (BodyList{"a0", "a1"})) << "returned messages keep their place, first";
  EXPECT_EQ(Consumers("sac")["third"].activity, "single_active");
  // Its session closing: its unacked are redelivered to the next one, before anything new.
  broker_.CloseSession(3);
  Publish("sac", {"c0"});
  const auto& got = peers_[2]->deliveries;
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(Got(2), (BodyList{"a0", "a1", "b0", "c0"}));
}

TEST_F(BrokerConsumersTest, SingleActiveConsumerArgumentsAndExclusiveConsumers) {
  EXPECT_EQ(Declare("s", {{"x-single-active-consumer", std::string("true")}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Declare("i", {{"x-single-active-consumer", int64_t{1}}}).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(Declare("sac", {{"x-single-active-consumer", true}}).ok());
  // RabbitMQ's rule: no exclusive consumer on such a queue, not even the first.
  auto exclusive = broker_.Subscribe(1, "sac", "ex", 0, /*exclusive=*/true);
  EXPECT_EQ(exclusive.status().code(), StatusCode::kResourceLocked);
  EXPECT_NE(exclusive.status().message().find("single active consumer"), std::string::npos);
  // false is a plain queue: round-robin.
  ASSERT_TRUE(Declare("plain", {{"x-single-active-consumer", false}}).ok());
  Subscribe(1, "plain", "one", 0);
  Subscribe(2, "plain", "two", 0);
  Publish("plain", {"m0", "m1", "m2", "m3"});
  EXPECT_EQ(Got(1), (BodyList{"m0", "m2"}));
  EXPECT_EQ(Got(2), (BodyList{"m1", "m3"}));
  EXPECT_EQ(Consumers("plain")["one"].activity, "up");
}

class BrokerConsumersStoreTest : public BrokerStoreTest {};

TEST_F(BrokerConsumersStoreTest, ASingleActiveConsumerQueueStaysOneAfterARestart) {
  DeclareQueue("sac", /*durable=*/true, {{"x-single-active-consumer", true}});
  for (const char* body : {"a", "b", "c"}) ASSERT_TRUE(Publish("", "sac", body).ok());
  Drain();
  Restart();
  auto second = std::make_shared<RecordingPeer>();
  EXPECT_TRUE(broker_->OpenSession(2, "bob", second).ok());
  ASSERT_TRUE(broker_->Subscribe(kS1, "sac", "first", 0, false).ok());
  ASSERT_TRUE(broker_->Subscribe(2, "sac", "second", 0, false).ok());
  Drain();
  Tick();
  EXPECT_EQ(peer_->DeliveredBodies(), (BodyList{"a", "b", "c"}));
  EXPECT_TRUE(second->deliveries.empty());
}

}  // namespace
}  // namespace wharf::broker
