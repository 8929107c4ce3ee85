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
    QueueSpec spec;
    spec.name = name;
    spec.durable = durable();
    spec.arguments = std::move(arguments);
    auto declared = broker_->DeclareQueue(kS1, spec);
    ASSERT_TRUE(declared.ok()) << declared.status().ToString();
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

// --- With the store ------------------------------------------------------------------------------

class BrokerLifecycleStoreTest : public BrokerStoreTest {};

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

TEST(LeaseTimerTest, BucketCountDependsOnTheLeaseSpanNotOnTheLeases) {
  LeaseTimer timer;
  SteadyTime t0{};
  for (int i = 0; i < 1'000'000; ++i) timer.Add({1, uint64_t(i), t0 + milliseconds(i % 30'000)});
  EXPECT_LE(timer.buckets(), 3'001u);
  EXPECT_TRUE(timer.TakeDue(t0, 10).size() <= 1'000'000u);
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
