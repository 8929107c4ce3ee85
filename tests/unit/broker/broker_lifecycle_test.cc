// The delivery lifecycle (docs/lifecycle.md): leases, their expiry and extension, the retry
// policy, and attempt accounting; in RAM and with the real store.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "broker/lease_timer.h"
#include "broker/queue_policy.h"
#include "unit/broker/broker_store_fixture.h"

namespace wharf::broker {
namespace {

using std::chrono::milliseconds;

class BrokerLifecycleTest : public BrokerStoreTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool durable() const { return GetParam(); }
  void DeclareWith(const std::string& name, Headers arguments) {
    DeclareQueue(name, durable(), std::move(arguments));
  }
  Delivery TakeOne(const std::string& queue, uint32_t lease_ms = 0) {
    EXPECT_TRUE(broker_->Receive(kS1, 77, queue, 1, 0, lease_ms).ok());
    Drain();
    std::vector<Delivery> out;
    for (auto& c : peer_->completions) {
      for (auto& d : c.deliveries) out.push_back(std::move(d));
    }
    peer_->completions.clear();
    EXPECT_EQ(out.size(), 1u);
    return out.empty() ? Delivery{} : out[0];
  }
};

INSTANTIATE_TEST_SUITE_P(RamAndStore, BrokerLifecycleTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Durable" : "Transient"; });

// Tests that need the store's fixture but not both variants.
class BrokerLifecycleStoreTest : public BrokerStoreTest {};

TEST_P(BrokerLifecycleTest, ExpiredLeaseRedeliversWithCountsAndRefusesTheLateAck) {
  DeclareWith("q", {{"x-lease-ms", int64_t{1'000}}});
  ASSERT_TRUE(Publish("", "q", "job").ok());
  Drain();
  const int64_t first_at = clock_.WallMillis();
  Delivery first = TakeOne("q");
  EXPECT_EQ(first.lease_ms, 1'000u);
  EXPECT_EQ(first.first_received_at_ms, first_at);
  EXPECT_EQ(first.failures, nullptr);
  Tick(milliseconds(999));
  EXPECT_EQ(Info("q").in_flight, 1u);
  Tick(milliseconds(1));
  QueueInfo info = Info("q");
  EXPECT_EQ(info.in_flight, 0u);
  EXPECT_EQ(info.ready, 1u) << "ready again at once (no retry policy)";
  // The connection stays open; the late ack is refused and settles nothing.
  Status late = broker_->Ack(kS1, first.delivery_tag, false);
  EXPECT_EQ(late.code(), StatusCode::kLeaseExpired) << late.ToString();
  EXPECT_EQ(Info("q").ready, 1u);
  Delivery second = TakeOne("q");
  EXPECT_EQ(second.receive_count, 2u);
  EXPECT_TRUE(second.redelivered);
  EXPECT_EQ(second.first_received_at_ms, first_at);
  ASSERT_NE(second.failures, nullptr);
  EXPECT_EQ(second.failures->count, 1u);
  EXPECT_EQ(second.failures->last_failed_at_ms, first_at + 1'000);
  EXPECT_EQ(second.failures->last_error, "lease of 1000 ms expired");
  EXPECT_EQ(broker_->Ack(kS1, first.delivery_tag, false).code(), StatusCode::kLeaseExpired);
  EXPECT_TRUE(broker_->Ack(kS1, second.delivery_tag, false).ok()) << "the new delivery settles";
  EXPECT_EQ(Info("q").ready + Info("q").in_flight, 0u);
}

TEST_P(BrokerLifecycleTest, LeasesExtendUpToTheMaximum) {
  DeclareWith("q", {{"x-lease-ms", int64_t{1'000}}, {"x-max-lease-ms", int64_t{5'000}}});
  ASSERT_TRUE(Publish("", "q", "slow").ok());
  Drain();
  Delivery d = TakeOne("q");
  Tick(milliseconds(800));
  ASSERT_TRUE(broker_->ExtendLease(kS1, d.delivery_tag, 1'000).ok());
  Tick(milliseconds(700));  // 1,500 ms in: past the first lease, within the extension
  EXPECT_EQ(Info("q").in_flight, 1u);
  ASSERT_TRUE(broker_->ExtendLease(kS1, d.delivery_tag, 0).ok()) << "0: the same length again";
  Status too_long = broker_->ExtendLease(kS1, d.delivery_tag, 5'001);
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("x-max-lease-ms"), std::string::npos);
  Tick(milliseconds(999));
  EXPECT_EQ(Info("q").in_flight, 1u);
  Tick(milliseconds(1));
  EXPECT_EQ(Info("q").in_flight, 0u);
  EXPECT_EQ(broker_->ExtendLease(kS1, d.delivery_tag, 1'000).code(), StatusCode::kLeaseExpired);
  EXPECT_EQ(broker_->ExtendLease(kS1, 999, 1'000).code(), StatusCode::kUnknownDeliveryTag);
}

TEST_P(BrokerLifecycleTest, AConsumerMayAskForItsOwnLease) {
  DeclareWith("q", {{"x-max-lease-ms", int64_t{10'000}}});
  auto refused = broker_->Subscribe(kS1, "q", "greedy", 1, false, 10'001);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_->Receive(kS1, 5, "q", 1, 0, 10'001).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(broker_->Subscribe(kS1, "q", "quick", 1, false, 200).ok());
  ASSERT_TRUE(Publish("", "q", "m").ok());
  Drain();
  ASSERT_EQ(peer_->deliveries.size(), 1u);
  EXPECT_EQ(peer_->deliveries[0].lease_ms, 200u);
  Tick(milliseconds(200));
  // The expiry gave back the consumer's credit (prefetch 1): it gets the message again.
  ASSERT_EQ(peer_->deliveries.size(), 2u);
  EXPECT_EQ(peer_->deliveries[1].receive_count, 2u);
  EXPECT_NE(peer_->deliveries[1].delivery_tag, peer_->deliveries[0].delivery_tag);
  EXPECT_TRUE(peer_->cancellations.empty()) << "an expiry never cancels the consumer";
}

TEST_P(BrokerLifecycleTest, RetryPolicyBacksOffWithJitterAndNacksCarryTheirError) {
  DeclareWith("q", {{"x-retry-base-ms", int64_t{1'000}}, {"x-retry-max-ms", int64_t{4'000}}});
  ASSERT_TRUE(Publish("", "q", "flaky").ok());
  Drain();
  Delivery d = TakeOne("q");
  Broker::NackOptions nack;
  std::string long_error(3'000, 'e');
  nack.error = long_error;
  ASSERT_TRUE(broker_->Nack(kS1, d.delivery_tag, false, nack).ok());
  Drain();
  EXPECT_EQ(Info("q").ready + Info("q").delayed, 1u);
  Tick(milliseconds(1'000));  // the first retry waits at most the base
  Delivery again = TakeOne("q");
  EXPECT_EQ(again.receive_count, 2u);
  ASSERT_NE(again.failures, nullptr);
  EXPECT_EQ(again.failures->count, 1u);
  EXPECT_EQ(again.failures->last_error.size(), kMaxLastErrorBytes) << "cut to 1 KiB";
  // "immediate" skips the policy: back at once.
  nack.error = "try again now";
  nack.immediate = true;
  ASSERT_TRUE(broker_->Nack(kS1, again.delivery_tag, false, nack).ok());
  Drain();
  EXPECT_EQ(Info("q").ready, 1u);
  Delivery third = TakeOne("q");
  EXPECT_EQ(third.failures->count, 2u);
  EXPECT_EQ(third.failures->last_error, "try again now");
  // A reject without requeue counts too, and drops it (no dead-letter target).
  nack = {};
  nack.requeue = false;
  ASSERT_TRUE(broker_->Nack(kS1, third.delivery_tag, false, nack).ok());
  Drain();
  EXPECT_EQ(Info("q").ready + Info("q").delayed + Info("q").in_flight, 0u);
}

TEST_P(BrokerLifecycleTest, QueueArgumentsAreCheckedAndNamed) {
  QueueSpec spec;
  spec.name = "bad";
  spec.durable = durable();
  spec.arguments = {{"x-lease-millis", int64_t{5}}};
  auto unknown = broker_->DeclareQueue(kS1, spec);
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("x-lease-millis"), std::string::npos);
  spec.arguments = {{"x-lease-ms", std::string("soon")}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  spec.arguments = {{"x-lease-ms", int64_t{0}}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  spec.arguments = {{"x-lease-ms", int64_t{9'000}}, {"x-max-lease-ms", int64_t{8'000}}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  spec.arguments = {{"x-retry-base-ms", int64_t{9'000}}, {"x-retry-max-ms", int64_t{8'000}}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  spec.arguments = {{"x-lease-ms", int64_t{9'000}}};
  ASSERT_TRUE(broker_->DeclareQueue(kS1, spec).ok());
  spec.arguments = {{"x-lease-ms", int64_t{8'000}}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kPreconditionFailed);
}

// The poison message: after x-max-attempts receives it goes to the dead-letter queue with its
// body, headers and id, and a death record with the reason, the counts and the last error.
TEST_P(BrokerLifecycleTest, PoisonMessageReachesTheDeadLetterQueueAfterMaxAttempts) {
  DeclareWith("jobs.dlq", {});
  DeclareWith("jobs",
              {{"x-max-attempts", int64_t{3}}, {"x-dead-letter-queue", std::string("jobs.dlq")}});
  Message m;
  m.body = "poison";
  m.persistent = true;
  m.headers["tenant"] = std::string("acme");
  auto published = broker_->Publish(kS1, "", "jobs", m);
  ASSERT_TRUE(published.ok());
  const uint64_t id = published->result.message_id;
  Drain();
  const int64_t first_at = clock_.WallMillis();
  for (int attempt = 1; attempt <= 3; ++attempt) {
    Delivery d = TakeOne("jobs");
    EXPECT_EQ(d.receive_count, static_cast<uint32_t>(attempt));
    Broker::NackOptions nack;
    std::string error = "parse error #" + std::to_string(attempt);
    nack.error = error;
    clock_.Advance(milliseconds(10));
    ASSERT_TRUE(broker_->Nack(kS1, d.delivery_tag, false, nack).ok());
    Drain();
  }
  EXPECT_EQ(Info("jobs").ready + Info("jobs").in_flight + Info("jobs").delayed, 0u);
  ASSERT_EQ(Info("jobs.dlq").ready, 1u);
  if (durable()) Restart();  // the move is on disk
  Delivery dead = TakeOne("jobs.dlq");
  EXPECT_EQ(dead.envelope->message.id, id) << "same message id";
  EXPECT_EQ(dead.envelope->message.body, "poison");
  EXPECT_EQ(std::get<std::string>(dead.envelope->message.headers.at("tenant")), "acme");
  EXPECT_EQ(dead.receive_count, 1u) << "a new life in the dead-letter queue";
  ASSERT_EQ(dead.envelope->message.deaths.size(), 1u);
  const Death& death = dead.envelope->message.deaths[0];
  EXPECT_EQ(death.reason, "max_attempts");
  EXPECT_EQ(death.queue, "jobs");
  EXPECT_EQ(death.exchange, "");
  EXPECT_EQ(death.routing_key, "jobs");
  EXPECT_EQ(death.count, 1u);
  EXPECT_EQ(death.receive_count, 3u);
  EXPECT_EQ(death.failure_count, 3u);
  EXPECT_EQ(death.last_error, "parse error #3");
  EXPECT_EQ(death.first_at_ms, first_at + 30);
  if (durable()) {
    Restart();
    EXPECT_EQ(Info("jobs").ready, 0u) << "never live in both";
  }
}

// Rejected (nack or reject without requeue) goes to the target through an exchange; repeated
// deaths in the same queue update one record.
TEST_P(BrokerLifecycleTest, RejectedMessagesGoThroughTheDeadLetterExchange) {
  ExchangeSpec dlx;
  dlx.name = "dlx";
  dlx.type = ExchangeType::kDirect;
  dlx.durable = durable();
  ASSERT_TRUE(broker_->DeclareExchange(dlx).ok());
  DeclareWith("failed", {});
  BindingSpec binding;
  binding.exchange = "dlx";
  binding.queue = "failed";
  binding.routing_key = "orders.failed";
  ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  DeclareWith("orders", {{"x-dead-letter-exchange", std::string("dlx")},
                         {"x-dead-letter-routing-key", std::string("orders.failed")}});
  ASSERT_TRUE(Publish("", "orders", "order-1").ok());
  Drain();
  Broker::NackOptions reject;
  reject.requeue = false;
  reject.error = "invalid address";
  ASSERT_TRUE(broker_->Nack(kS1, TakeOne("orders").delivery_tag, false, reject).ok());
  Drain();
  Delivery dead = TakeOne("failed");
  ASSERT_EQ(dead.envelope->message.deaths.size(), 1u);
  EXPECT_EQ(dead.envelope->message.deaths[0].reason, "rejected");
  EXPECT_EQ(dead.envelope->message.deaths[0].last_error, "invalid address");
  EXPECT_EQ(dead.envelope->message.deaths[0].failure_count, 1u);
  // Published anew by the dead-letter exchange, as RabbitMQ does; the death keeps where it was.
  EXPECT_EQ(dead.envelope->exchange, "dlx");
  EXPECT_EQ(dead.envelope->message.deaths[0].exchange, "");
  ASSERT_TRUE(broker_->Ack(kS1, dead.delivery_tag, false).ok());
}

// A consumer that crashes on the message (its connection closes each time) is caught by
// x-max-attempts too: receives count, not only nacks.
TEST_P(BrokerLifecycleTest, CrashLoopIsCaughtByMaxAttempts) {
  DeclareWith("dlq", {});
  DeclareWith("q", {{"x-max-attempts", int64_t{2}}, {"x-dead-letter-queue", std::string("dlq")}});
  ASSERT_TRUE(Publish("", "q", "crashes-the-consumer").ok());
  Drain();
  for (uint64_t session = 10; session < 12; ++session) {
    EXPECT_TRUE(broker_->OpenSession(session, "worker", std::make_shared<RecordingPeer>()).ok());
    ASSERT_TRUE(broker_->Receive(session, 1, "q", 1, 0).ok());
    Drain();
    broker_->CloseSession(session);  // the consumer died holding it
    Drain();
  }
  EXPECT_EQ(Info("q").ready, 0u);
  Delivery dead = TakeOne("dlq");
  ASSERT_EQ(dead.envelope->message.deaths.size(), 1u);
  EXPECT_EQ(dead.envelope->message.deaths[0].reason, "max_attempts");
  EXPECT_EQ(dead.envelope->message.deaths[0].receive_count, 2u);
  EXPECT_EQ(dead.envelope->message.deaths[0].failure_count, 0u) << "disconnects are no failures";
}

TEST_P(BrokerLifecycleTest, DeadLetterArgumentsAreChecked) {
  QueueSpec spec;
  spec.name = "bad";
  spec.durable = durable();
  spec.arguments = {{"x-dead-letter-queue", std::string("a")},
                    {"x-dead-letter-exchange", std::string("b")}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  spec.arguments = {{"x-dead-letter-routing-key", std::string("k")}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  spec.arguments = {{"x-dead-letter-exchange", std::string("")}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  spec.arguments = {{"x-max-attempts", int64_t{0}}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  spec.arguments = {{"x-dead-letter-queue", int64_t{5}}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  // A target that does not exist (yet) is accepted; a message dead-lettered meanwhile is
  // dropped with a warning.
  spec.arguments = {{"x-dead-letter-queue", std::string("later")}, {"x-max-attempts", int64_t{1}}};
  ASSERT_TRUE(broker_->DeclareQueue(kS1, spec).ok());
  ASSERT_TRUE(Publish("", "bad", "x").ok());
  Drain();
  ASSERT_TRUE(broker_->Nack(kS1, TakeOne("bad").delivery_tag, false, true).ok());
  Drain();
  EXPECT_EQ(Info("bad").ready + Info("bad").delayed, 0u);
}

// x-max-length with drop-head (the default): the oldest ready messages make room, dead-lettered
// with reason max_length; the byte limit works the same way.
TEST_P(BrokerLifecycleTest, DropHeadDeadLettersTheOldest) {
  DeclareWith("overflow", {});
  DeclareWith("recent",
              {{"x-max-length", int64_t{3}}, {"x-dead-letter-queue", std::string("overflow")}});
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(Publish("", "recent", std::to_string(i)).ok());
  Drain();
  EXPECT_EQ(Info("recent").ready, 3u);
  EXPECT_EQ(Bodies(Take("recent")), (std::vector<std::string>{"3", "4", "5"}));
  auto dropped = Take("overflow");
  ASSERT_EQ(Bodies(dropped), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(dropped[0].envelope->message.deaths[0].reason, "max_length");
  EXPECT_EQ(dropped[0].envelope->message.deaths[0].receive_count, 0u);
  DeclareWith("small", {{"x-max-length-bytes", int64_t{10}}});
  for (const char* body : {"aaaa", "bbbb", "cccc"}) ASSERT_TRUE(Publish("", "small", body).ok());
  Drain();
  EXPECT_EQ(Info("small").ready, 2u) << "12 bytes > 10: the oldest goes (dropped: no target)";
  EXPECT_EQ(Bodies(Take("small")), (std::vector<std::string>{"bbbb", "cccc"}));
}

// reject-publish: the publisher gets QUEUE_FULL and the queue keeps what it has;
// reject-publish-dlx also dead-letters the refused message.
TEST_P(BrokerLifecycleTest, RejectPublishRefusesThePublisher) {
  DeclareWith("full.dlq", {});
  DeclareWith("bounded",
              {{"x-max-length", int64_t{2}}, {"x-overflow", std::string("reject-publish")}});
  DeclareWith("bounded.dlx", {{"x-max-length", int64_t{1}},
                              {"x-overflow", std::string("reject-publish-dlx")},
                              {"x-dead-letter-queue", std::string("full.dlq")}});
  ASSERT_TRUE(Publish("", "bounded", "1").ok());
  ASSERT_TRUE(Publish("", "bounded", "2").ok());
  auto refused = Publish("", "bounded", "3", true, /*request_id=*/9);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kQueueFull);
  EXPECT_NE(refused.status().message().find("'bounded'"), std::string::npos);
  Drain();
  EXPECT_TRUE(peer_->confirms.empty()) << "no positive confirm follows the refusal";
  EXPECT_EQ(Bodies(Take("bounded")), (std::vector<std::string>{"1", "2"}));
  ASSERT_TRUE(Publish("", "bounded.dlx", "kept").ok());
  auto to_dlx = Publish("", "bounded.dlx", "refused");
  EXPECT_EQ(to_dlx.status().code(), StatusCode::kQueueFull);
  Drain();
  auto dead = Take("full.dlq");
  ASSERT_EQ(Bodies(dead), std::vector<std::string>{"refused"});
  EXPECT_EQ(dead[0].envelope->message.deaths[0].reason, "max_length");
  EXPECT_EQ(dead[0].envelope->message.deaths[0].queue, "bounded.dlx");
  // Bad values are refused by name.
  QueueSpec bad;
  bad.name = "bad";
  bad.arguments = {{"x-overflow", std::string("drop-tail")}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, bad).status().code(), StatusCode::kInvalidArgument);
  bad.arguments = {{"x-max-length", int64_t{0}}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, bad).status().code(), StatusCode::kInvalidArgument);
}

// TTL: a message expires when its time comes even behind a head that does not, and goes to
// the dead-letter target with reason expired; the queue's TTL and the message's own both count.
TEST_P(BrokerLifecycleTest, ExpiredMessagesAreDeadLetteredWhereverTheyAre) {
  DeclareWith("expired", {});
  DeclareWith(
      "q", {{"x-message-ttl", int64_t{10'000}}, {"x-dead-letter-queue", std::string("expired")}});
  ASSERT_TRUE(Publish("", "q", "head").ok());
  Message short_lived;
  short_lived.body = "short";
  short_lived.persistent = true;
  short_lived.properties.expiration_ms = 500;
  ASSERT_TRUE(broker_->Publish(kS1, "", "q", short_lived).ok());
  ASSERT_TRUE(Publish("", "q", "tail").ok());
  Drain();
  Tick(milliseconds(499));
  EXPECT_EQ(Info("q").ready, 3u);
  Tick(milliseconds(1));
  EXPECT_EQ(Info("q").ready, 2u) << "the middle one expired, not at the head";
  auto dead = Take("expired");
  ASSERT_EQ(Bodies(dead), std::vector<std::string>{"short"});
  EXPECT_EQ(dead[0].envelope->message.deaths[0].reason, "expired");
  EXPECT_EQ(dead[0].envelope->message.deaths[0].queue, "q");
  // The queue's TTL: the other two go at 10 s, except one in flight (delivered messages do not
  // expire; an unsettled one expires after it comes back).
  auto head = Take("q", 1);
  ASSERT_EQ(Bodies(head), std::vector<std::string>{"head"});
  Tick(milliseconds(9'500));
  EXPECT_EQ(Info("q").ready, 0u);
  EXPECT_EQ(Info("q").in_flight, 1u);
  EXPECT_EQ(Bodies(Take("expired")), std::vector<std::string>{"tail"});
  ASSERT_TRUE(broker_->Nack(kS1, head[0].delivery_tag, false, true).ok());
  Drain();
  Tick(milliseconds(10));
  EXPECT_EQ(Info("q").ready, 0u) << "back in the queue, already past its TTL";
  EXPECT_EQ(Bodies(Take("expired")), std::vector<std::string>{"head"});
  QueueSpec bad;
  bad.name = "bad";
  bad.arguments = {{"x-message-ttl", int64_t{-1}}};
  EXPECT_EQ(broker_->DeclareQueue(kS1, bad).status().code(), StatusCode::kInvalidArgument);
}

// Regression (review): a reject that dead-letters gave the consumer its credit back but did not
// dispatch again, so a prefetch-1 consumer stalled.
TEST_P(BrokerLifecycleTest, RejectingConsumerKeepsReceiving) {
  DeclareWith("dlq", {});
  DeclareWith("q", {{"x-dead-letter-queue", std::string("dlq")}});
  ASSERT_TRUE(broker_->Subscribe(kS1, "q", "c", 1, false).ok());
  ASSERT_TRUE(Publish("", "q", "1").ok());
  ASSERT_TRUE(Publish("", "q", "2").ok());
  Drain();
  ASSERT_EQ(peer_->deliveries.size(), 1u);
  ASSERT_TRUE(broker_->Nack(kS1, peer_->deliveries[0].delivery_tag, false, false).ok());
  Drain();
  ASSERT_EQ(peer_->deliveries.size(), 2u) << "the next message follows the reject";
  EXPECT_EQ(peer_->deliveries[1].envelope->message.body, "2");
}

// Regression (review): stopping the broker closes every connection; that must not count as an
// attempt, or x-max-attempts 1 would dead-letter (or drop) everything in flight.
TEST_P(BrokerLifecycleTest, ShutdownIsNoAttempt) {
  DeclareWith("q", {{"x-max-attempts", int64_t{1}}});
  ASSERT_TRUE(Publish("", "q", "in flight").ok());
  Drain();
  EXPECT_TRUE(broker_->OpenSession(5, "worker", std::make_shared<RecordingPeer>()).ok());
  ASSERT_TRUE(broker_->Receive(5, 1, "q", 1, 0).ok());
  Drain();
  EXPECT_EQ(Info("q").in_flight, 1u);
  broker_->BeginShutdown();
  broker_->CloseSession(5);
  Drain();
  EXPECT_EQ(Info("q").ready, 1u);
}

// Regression (review): deliveries settled long before their lease ends left their timer entries
// behind until the deadline; at 100k msg/s and 30 s leases that was millions of entries.
TEST_F(BrokerLifecycleStoreTest, SettledLeasesDoNotPileUp) {
  DeclareQueue("q", /*durable=*/false);       // the timer is the same; RAM keeps the loop fast
  for (int round = 0; round < 80; ++round) {  // 80,000 deliveries, each settled at once
    for (int i = 0; i < 1'000; ++i) ASSERT_TRUE(Publish("", "q", "m").ok());
    ASSERT_TRUE(broker_->Receive(kS1, 1, "q", 1'000, 0).ok());
    broker_->Flush();
    ASSERT_EQ(peer_->completions.size(), 1u);
    ASSERT_EQ(peer_->completions[0].deliveries.size(), 1'000u);
    ASSERT_TRUE(broker_->Ack(kS1, peer_->completions[0].deliveries.back().delivery_tag, true).ok());
    peer_->completions.clear();
  }
  EXPECT_LE(broker_->lease_entries(), 65'536u + 2u);
}

// A dead-letter queue's own length limit applies to what is dead-lettered into it; two full
// drop-head queues that dead-letter into each other do not loop.
TEST_P(BrokerLifecycleTest, DeadLetterTargetsKeepTheirLengthLimits) {
  DeclareWith("parking", {{"x-max-length", int64_t{2}}});
  DeclareWith("work", {{"x-dead-letter-queue", std::string("parking")}});
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(Publish("", "work", std::to_string(i)).ok());
  Drain();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(broker_->Nack(kS1, TakeOne("work").delivery_tag, false, false).ok());
    Drain();
  }
  EXPECT_EQ(Bodies(Take("parking")), (std::vector<std::string>{"3", "4"}));
  DeclareWith("ping", {{"x-max-length", int64_t{1}}, {"x-dead-letter-queue", std::string("pong")}});
  DeclareWith("pong", {{"x-max-length", int64_t{1}}, {"x-dead-letter-queue", std::string("ping")}});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Publish("", "ping", "p" + std::to_string(i)).ok());
    ASSERT_TRUE(Publish("", "pong", "q" + std::to_string(i)).ok());
  }
  Drain();  // returns: no endless ping-pong
  // Nothing is lost; what the heads pushed out waits, over the limit, in the other queue.
  EXPECT_EQ(Info("ping").ready + Info("pong").ready, 6u);
}

TEST(Utf8PrefixTest, CutsOnCharacterBoundaries) {
  EXPECT_EQ(Utf8Prefix("abc", 5), "abc");
  EXPECT_EQ(Utf8Prefix("abcdef", 3), "abc");
  std::string euro = "a\xE2\x82\xAC";  // "a€": the euro sign is 3 bytes
  EXPECT_EQ(Utf8Prefix(euro, 2), "a");
  EXPECT_EQ(Utf8Prefix(euro, 3), "a");
  EXPECT_EQ(Utf8Prefix(euro, 4), euro);
}

// Dying twice in the same queue for the same reason updates one record; different ones stack,
// most recent first.
TEST(DeathRecordTest, RepeatedDeathsUpdateOneRecordAndStayBounded) {
  // Exercised through the broker: a message bounced between two queues that reject it.
  ManualClock clock;
  Broker broker({}, &clock);
  auto peer = std::make_shared<RecordingPeer>();
  EXPECT_TRUE(broker.OpenSession(1, "t", peer).ok());
  for (const char* name : {"a", "b"}) {
    QueueSpec spec;
    spec.name = name;
    spec.arguments = {{"x-dead-letter-queue", std::string(name[0] == 'a' ? "b" : "a")}};
    ASSERT_TRUE(broker.DeclareQueue(1, spec).ok());
  }
  Message m;
  m.body = "ping-pong";
  ASSERT_TRUE(broker.Publish(1, "", "a", m).ok());
  broker.Flush();
  Delivery last;
  for (int i = 0; i < 40; ++i) {
    const char* queue = i % 2 == 0 ? "a" : "b";
    peer->completions.clear();
    ASSERT_TRUE(broker.Receive(1, 1, queue, 1, 0).ok());
    broker.Flush();
    ASSERT_EQ(peer->completions.size(), 1u);
    ASSERT_EQ(peer->completions[0].deliveries.size(), 1u) << i;
    last = peer->completions[0].deliveries[0];
    ASSERT_TRUE(broker.Nack(1, last.delivery_tag, false, false).ok());
    broker.Flush();
  }
  const auto& deaths = last.envelope->message.deaths;
  ASSERT_EQ(deaths.size(), 2u) << "one per (queue, reason)";
  // The last delivery (from b) carries 20 deaths in a and 19 in b; the latest (in a) first.
  EXPECT_EQ(deaths[0].queue, "a");
  EXPECT_EQ(deaths[0].count, 20u);
  EXPECT_EQ(deaths[1].queue, "b");
  EXPECT_EQ(deaths[1].count, 19u);
  EXPECT_GE(deaths[0].last_at_ms, deaths[0].first_at_ms);
}

// --- With the store ------------------------------------------------------------------------------

// Attempt accounting is written with the entry from the second delivery on, so it survives a
// crash with the message.
TEST_F(BrokerLifecycleStoreTest, AttemptsSurviveACrash) {
  QueueSpec spec;
  spec.name = "q";
  spec.durable = true;
  spec.arguments = {{"x-lease-ms", int64_t{60'000}}};
  ASSERT_TRUE(broker_->DeclareQueue(kS1, spec).ok());
  ASSERT_TRUE(Publish("", "q", "poison").ok());
  Drain();
  auto first = Take("q");
  ASSERT_EQ(first.size(), 1u);
  const int64_t first_at = first[0].first_received_at_ms;
  Broker::NackOptions nack;
  nack.error = "bad input at byte 7";
  nack.immediate = true;
  ASSERT_TRUE(broker_->Nack(kS1, first[0].delivery_tag, false, nack).ok());
  Drain();
  clock_.Advance(milliseconds(5));
  auto second = Take("q");  // rewrites the entry with count 2 and the failure
  ASSERT_EQ(second.size(), 1u);
  Restart();
  clock_.Advance(milliseconds(5));
  auto third = Take("q");
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].receive_count, 3u);
  EXPECT_EQ(third[0].first_received_at_ms, first_at);
  ASSERT_NE(third[0].failures, nullptr);
  EXPECT_EQ(third[0].failures->count, 1u);
  EXPECT_EQ(third[0].failures->last_error, "bad input at byte 7");
}

// Many deliveries in flight: expiries come due together, and a tick that has none due costs
// nothing however many are in flight.
TEST_F(BrokerLifecycleStoreTest, ExpiryUnderLoad) {
  QueueSpec spec;
  spec.name = "q";
  spec.durable = true;
  spec.arguments = {{"x-lease-ms", int64_t{2'000}}};
  ASSERT_TRUE(broker_->DeclareQueue(kS1, spec).ok());
  constexpr int kMessages = 20'000;
  for (int i = 0; i < kMessages; ++i) ASSERT_TRUE(Publish("", "q", std::to_string(i)).ok());
  Drain();
  size_t taken = 0;
  while (taken < kMessages) {
    auto batch = Take("q", 1'000);
    ASSERT_FALSE(batch.empty());
    taken += batch.size();
    clock_.Advance(milliseconds(10));  // spread over 200 ms: about 20 lease buckets
  }
  EXPECT_EQ(Info("q").in_flight, static_cast<uint64_t>(kMessages));
  Tick(milliseconds(1'500));
  EXPECT_EQ(Info("q").in_flight, static_cast<uint64_t>(kMessages)) << "none due yet";
  Tick(milliseconds(400));  // 2.1 s after the first deliveries, 1.9 s after the last
  uint64_t expired = kMessages - Info("q").in_flight;
  EXPECT_GT(expired, 0u);
  EXPECT_LT(expired, static_cast<uint64_t>(kMessages));
  Tick(milliseconds(200));
  EXPECT_EQ(Info("q").in_flight, 0u);
  EXPECT_EQ(Info("q").ready, static_cast<uint64_t>(kMessages));
  // Redelivered in their original order.
  auto again = Take("q", 3);
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[0].envelope->message.body, "0");
  EXPECT_EQ(again[0].receive_count, 2u);
}

TEST(LeaseTimerTest, BucketsFireAtTheirEndNeverEarly) {
  LeaseTimer timer;
  SteadyTime t0{};
  timer.Add({1, 1, t0 + milliseconds(15)});  // bucket ending at 20 ms
  timer.Add({1, 2, t0 + milliseconds(20)});  // same bucket: ends exactly at its deadline
  timer.Add({1, 3, t0 + milliseconds(21)});
  EXPECT_EQ(timer.next(), t0 + milliseconds(20));
  EXPECT_TRUE(timer.TakeDue(t0 + milliseconds(19), 100).empty());
  EXPECT_EQ(timer.TakeDue(t0 + milliseconds(20), 100).size(), 2u);
  EXPECT_EQ(timer.next(), t0 + milliseconds(30));
  EXPECT_EQ(timer.TakeDue(t0 + milliseconds(40), 100).size(), 1u);
  EXPECT_FALSE(timer.next().has_value());
}

TEST(LeaseTimerTest, RemoveIfCompacts) {
  LeaseTimer timer;
  SteadyTime t0{};
  for (uint64_t i = 0; i < 100; ++i) timer.Add({1, i, t0 + milliseconds(i)});
  EXPECT_EQ(timer.size(), 100u);
  timer.RemoveIf([](const LeaseRef& lease) { return lease.delivery_tag % 2 == 0; });
  EXPECT_EQ(timer.size(), 50u);
  EXPECT_EQ(timer.TakeDue(t0 + milliseconds(1'000), 1'000).size(), 50u);
  EXPECT_EQ(timer.size(), 0u);
}

TEST(LeaseTimerTest, BucketCountDependsOnTheLeaseSpanNotOnTheLeases) {
  LeaseTimer timer;
  SteadyTime t0{};
  for (int i = 0; i < 1'000'000; ++i) timer.Add({1, uint64_t(i), t0 + milliseconds(i % 30'000)});
  EXPECT_LE(timer.buckets(), 3'001u);
  // Due at t0: only the first bucket, whole (i % 30,000 == 0: 34 leases), despite limit 10.
  EXPECT_EQ(timer.TakeDue(t0, 10).size(), 34u);
}

TEST(QueuePolicyTest, RetryDelayIsFullJitterUnderACappedExponential) {
  QueuePolicy policy;
  policy.retry_base_ms = 100;
  policy.retry_max_ms = 1'000;
  std::mt19937_64 rng(1);
  for (uint32_t failures : {1u, 2u, 3u, 4u, 5u, 30u}) {
    uint64_t ceiling = std::min<uint64_t>(1'000, 100ull << (failures - 1));
    uint64_t lowest = UINT64_MAX, highest = 0;
    for (int i = 0; i < 2'000; ++i) {
      uint64_t d = policy.RetryDelay(failures, rng);
      lowest = std::min(lowest, d);
      highest = std::max(highest, d);
    }
    EXPECT_LE(highest, ceiling) << failures;
    EXPECT_GE(highest, ceiling * 9 / 10) << failures;
    EXPECT_LE(lowest, ceiling / 10) << failures;
  }
  policy.retry_base_ms = 0;
  EXPECT_EQ(policy.RetryDelay(3, rng), 0u) << "no policy: at once";
}

}  // namespace
}  // namespace wharf::broker
