// Delayed messages in the broker (docs/scheduler.md): invisible until due, released in due
// order at a bounded rate, durable across a crash, cancellable and listable; with the real
// RocksDB store (durable queues) and without it (non-durable queues).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "unit/broker/broker_store_fixture.h"

namespace wharf::broker {
namespace {

using std::chrono::milliseconds;

class BrokerDelayTest : public BrokerStoreTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool durable() const { return GetParam(); }
  void DeclareQ(const std::string& name) { DeclareQueue(name, durable()); }

  Result<bool> Cancel(const std::string& queue, uint64_t id) {
    peer_->cancels.clear();
    Status s = broker_->CancelDelayed(kS1, 9, queue, id);
    if (!s.ok()) return s;
    Drain();
    EXPECT_EQ(peer_->cancels.size(), 1u);
    if (peer_->cancels.empty()) return Status(StatusCode::kInternal, "no answer");
    return peer_->cancels.back().second;
  }

  DelayedPage List(const std::string& queue, DelayKey after = {}, uint32_t limit = 100) {
    peer_->listings.clear();
    EXPECT_TRUE(broker_->ListDelayed(kS1, 8, queue, after.due_ms, after.message_id, limit).ok());
    Drain();
    EXPECT_EQ(peer_->listings.size(), 1u);
    if (peer_->listings.empty() || !peer_->listings.back().second.ok()) return {};
    return *peer_->listings.back().second;
  }

  uint64_t IdOf(const Result<PublishOutcome>& outcome) {
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    return outcome.ok() ? outcome->result.message_id : 0;
  }
};

INSTANTIATE_TEST_SUITE_P(RamAndStore, BrokerDelayTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Durable" : "Transient"; });

TEST_P(BrokerDelayTest, InvisibleUntilDueThenDelivered) {
  DeclareQ("q");
  const int64_t published_at = clock_.WallMillis();
  ASSERT_TRUE(PublishDelayed("q", "later", PublishTiming{.delay_ms = 1'000}).ok());
  Drain();
  QueueInfo info = Info("q");
  EXPECT_EQ(info.ready, 0u);
  EXPECT_EQ(info.delayed, 1u);
  EXPECT_EQ(info.next_delayed_at_ms, published_at + 1'000);
  // The broker asks to be woken at the due time.
  auto deadline = broker_->NextDeadline();
  ASSERT_TRUE(deadline.has_value());
  EXPECT_EQ(*deadline, clock_.Now() + milliseconds(1'000));
  EXPECT_TRUE(Take("q").empty());
  Tick(milliseconds(999));
  EXPECT_TRUE(Take("q").empty());
  Tick(milliseconds(1));
  auto got = Take("q");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].envelope->message.body, "later");
  EXPECT_EQ(got[0].receive_count, 1u);
  EXPECT_EQ(Info("q").delayed, 0u);
  EXPECT_EQ(Info("q").next_delayed_at_ms, 0);
}

TEST_P(BrokerDelayTest, ReleasedInDueOrderAtTheTailOfTheQueue) {
  DeclareQ("q");
  const int64_t now = clock_.WallMillis();
  ASSERT_TRUE(PublishDelayed("q", "c", PublishTiming{.delay_ms = 300}).ok());
  ASSERT_TRUE(PublishDelayed("q", "a", PublishTiming{.deliver_at_ms = now + 100}).ok());
  ASSERT_TRUE(PublishDelayed("q", "b", PublishTiming{.delay_ms = 200}).ok());
  ASSERT_TRUE(PublishDelayed("q", "b2", PublishTiming{.delay_ms = 200}).ok());
  ASSERT_TRUE(PublishDelayed("q", "now", PublishTiming{.deliver_at_ms = now - 5}).ok());
  Drain();
  EXPECT_EQ(Info("q").ready, 1u) << "a delivery time in the past delivers at once";
  Tick(milliseconds(500));
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"now", "a", "b", "b2", "c"}));
}

TEST_P(BrokerDelayTest, BadTimingsAreRefused) {
  DeclareQ("q");
  auto both = PublishDelayed("q", "x", PublishTiming{.delay_ms = 5, .deliver_at_ms = 1});
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), StatusCode::kInvalidArgument);
  auto huge = PublishDelayed("q", "x", PublishTiming{.delay_ms = UINT64_MAX});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  // "Never" as INT64_MAX is refused, not parked where the scheduler's arithmetic overflows.
  auto never = PublishDelayed("q", "x", PublishTiming{.deliver_at_ms = INT64_MAX});
  ASSERT_FALSE(never.ok());
  EXPECT_NE(never.status().message().find("9999"), std::string::npos);
  EXPECT_TRUE(PublishDelayed("q", "x", PublishTiming{.deliver_at_ms = 253'402'300'799'999}).ok());
  auto deadline = broker_->NextDeadline();
  ASSERT_TRUE(deadline.has_value());
  EXPECT_GE(*deadline, clock_.Now() + milliseconds(1'000)) << "no busy loop";
  BrokerOptions options;
  options.max_delay_ms = 60'000;
  Restart(options);
  DeclareQ("q");
  auto capped = PublishDelayed("q", "x", PublishTiming{.delay_ms = 60'001});
  ASSERT_FALSE(capped.ok());
  EXPECT_NE(capped.status().message().find("max_delay_ms"), std::string::npos);
  EXPECT_TRUE(PublishDelayed("q", "x", PublishTiming{.delay_ms = 60'000}).ok());
}

TEST_P(BrokerDelayTest, CancelNeverRacesWithRelease) {
  DeclareQ("q");
  uint64_t keep = IdOf(PublishDelayed("q", "keep", PublishTiming{.delay_ms = 100}));
  uint64_t drop = IdOf(PublishDelayed("q", "drop", PublishTiming{.delay_ms = 100}));
  Drain();
  auto cancelled = Cancel("q", drop);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_TRUE(*cancelled);
  EXPECT_FALSE(*Cancel("q", drop)) << "cancelled once only";
  EXPECT_EQ(Info("q").delayed, 1u);
  Tick(milliseconds(100));
  auto got = Take("q");
  EXPECT_EQ(Bodies(got), std::vector<std::string>{"keep"});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(broker_->Ack(kS1, got[0].delivery_tag, false).ok());
  EXPECT_FALSE(*Cancel("q", keep)) << "released: too late to cancel";
  EXPECT_FALSE(*Cancel("q", 12345)) << "never delayed here";
  EXPECT_FALSE(broker_->CancelDelayed(kS1, 1, "nope", keep).ok());
  if (durable()) {
    Restart();
    Tick();
    EXPECT_TRUE(Take("q").empty()) << "the cancel was written";
  }
}

TEST_P(BrokerDelayTest, ListsInDeliveryOrderInPages) {
  DeclareQ("q");
  std::vector<uint64_t> ids;
  for (int i = 0; i < 5; ++i) {
    Message m;
    m.body = std::string(10 + i, 'x');
    m.persistent = true;
    m.properties.correlation_id = "c" + std::to_string(i);
    auto outcome = broker_->Publish(kS1, "", "q", std::move(m), 0,
                                    PublishTiming{.delay_ms = static_cast<uint64_t>(1'000 - i)});
    ids.push_back(IdOf(outcome));
  }
  Drain();
  DelayedPage first = List("q", {}, 2);
  ASSERT_EQ(first.messages.size(), 2u);
  EXPECT_TRUE(first.more);
  EXPECT_EQ(first.messages[0].message.id, ids[4]);  // due soonest
  EXPECT_EQ(first.messages[0].body_bytes, 14u);
  EXPECT_TRUE(first.messages[0].message.body.empty());
  EXPECT_EQ(first.messages[0].message.properties.correlation_id, "c4");
  EXPECT_EQ(first.messages[0].routing_key, "q");
  const DelayedInfo& last = first.messages.back();
  DelayedPage second = List("q", {last.deliver_at_ms, last.message.id}, 10);
  ASSERT_EQ(second.messages.size(), 3u);
  EXPECT_FALSE(second.more);
  EXPECT_EQ(second.messages[2].message.id, ids[0]);
  EXPECT_EQ(Info("q").delayed, 5u) << "listing changes nothing";
}

// A million due at once must not starve live traffic: releases are capped per second.
TEST_P(BrokerDelayTest, BurstsAreReleasedAtTheConfiguredRate) {
  BrokerOptions options;
  options.delay_release_per_second = 1'000;
  Restart(options);
  DeclareQ("burst");
  DeclareQ("live");
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(PublishDelayed("burst", std::to_string(i), PublishTiming{.delay_ms = 10}).ok());
  }
  Drain();
  Tick(milliseconds(10));
  ASSERT_TRUE(PublishDelayed("live", "now", PublishTiming{}).ok());
  Drain();
  EXPECT_EQ(Info("live").ready, 1u);
  uint64_t ready = Info("burst").ready;
  EXPECT_GT(ready, 0u);
  EXPECT_LE(ready, 100u) << "at most a tenth of a second's worth at once";
  // The broker wakes itself up for the rest: 500 at 1,000/s is half a second.
  uint64_t released = ready;
  int ticks = 0;
  while (released < 500 && ticks < 100) {
    auto next = broker_->NextDeadline();
    ASSERT_TRUE(next.has_value());
    Tick(std::chrono::duration_cast<milliseconds>(*next - clock_.Now()) + milliseconds(1));
    released = Info("burst").ready;
    ++ticks;
  }
  EXPECT_EQ(released, 500u);
  EXPECT_GE(clock_.Now().time_since_epoch(), milliseconds(10 + 350));
  std::vector<std::string> bodies = Bodies(Take("burst", 1'000));
  ASSERT_EQ(bodies.size(), 500u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(bodies[i], std::to_string(i)) << "publish order kept";
}

// A release rate below one message per tick must sleep for whole tokens, not spin.
TEST_P(BrokerDelayTest, SlowReleaseRateSleepsBetweenReleases) {
  BrokerOptions options;
  options.delay_release_per_second = 1;
  Restart(options);
  DeclareQ("q");
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(PublishDelayed("q", std::to_string(i), PublishTiming{.delay_ms = 10}).ok());
  }
  Drain();
  Tick(milliseconds(10));
  EXPECT_EQ(Info("q").ready, 1u);
  auto next = broker_->NextDeadline();
  ASSERT_TRUE(next.has_value());
  EXPECT_GE(*next - clock_.Now(), milliseconds(999));
  Tick(std::chrono::duration_cast<milliseconds>(*next - clock_.Now()) + milliseconds(1));
  EXPECT_EQ(Info("q").ready, 2u);
}

// Due times are wall-clock times: a step of the clock moves them (docs/scheduler.md).
TEST_P(BrokerDelayTest, WallClockStepsMoveDueTimes) {
  DeclareQ("q");
  ASSERT_TRUE(PublishDelayed("q", "in-an-hour", PublishTiming{.delay_ms = 3'600'000}).ok());
  ASSERT_TRUE(PublishDelayed("q", "in-two-hours", PublishTiming{.delay_ms = 7'200'000}).ok());
  Drain();
  // The scheduler never sleeps longer than a second, so it sees a step within one.
  auto next = broker_->NextDeadline();
  ASSERT_TRUE(next.has_value());
  EXPECT_LE(*next - clock_.Now(), milliseconds(1'000));
  clock_.StepWall(milliseconds(-600'000));  // set back ten minutes: nothing is released
  Tick(milliseconds(1'000));
  EXPECT_TRUE(Take("q").empty());
  clock_.StepWall(milliseconds(600'000 + 3'600'000));  // forward past the first due time
  Tick(milliseconds(1'000));
  EXPECT_EQ(Bodies(Take("q")), std::vector<std::string>{"in-an-hour"});
  EXPECT_EQ(Info("q").delayed, 1u);
}

TEST_P(BrokerDelayTest, PurgeAndDeleteTakeDelayedMessages) {
  DeclareQ("q");
  ASSERT_TRUE(PublishDelayed("q", "a", PublishTiming{.delay_ms = 100}).ok());
  ASSERT_TRUE(PublishDelayed("q", "b", PublishTiming{}).ok());
  Drain();
  auto purged = broker_->PurgeQueue(kS1, "q");
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 2u);
  EXPECT_EQ(Info("q").delayed, 0u);
  ASSERT_TRUE(PublishDelayed("q", "c", PublishTiming{.delay_ms = 100}).ok());
  Drain();
  ASSERT_TRUE(broker_->DeleteQueue(kS1, "q", false, false).ok());
  Tick(milliseconds(200));
  if (durable()) {
    Restart();
    DeclareQ("q");
    Tick(milliseconds(200));
  } else {
    DeclareQ("q");
  }
  EXPECT_TRUE(Take("q").empty());
  EXPECT_EQ(Info("q").delayed, 0u);
}

// A nack with a delay is a retry with backoff: the same timeline, with the receive count kept.
TEST_P(BrokerDelayTest, NackWithDelayRetriesLaterWithItsReceiveCount) {
  DeclareQ("q");
  ASSERT_TRUE(PublishDelayed("q", "job", PublishTiming{}).ok());
  ASSERT_TRUE(PublishDelayed("q", "next", PublishTiming{}).ok());
  Drain();
  auto first = Take("q", 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].receive_count, 1u);
  EXPECT_FALSE(broker_->Nack(kS1, first[0].delivery_tag, false, /*requeue=*/false, 500).ok())
      << "a delay needs requeue";
  ASSERT_TRUE(broker_->Nack(kS1, first[0].delivery_tag, false, true, 500).ok());
  Drain();
  QueueInfo info = Info("q");
  EXPECT_EQ(info.delayed, 1u);
  EXPECT_EQ(info.in_flight, 0u);
  // Not back at its old position: "next" is delivered meanwhile.
  auto next = Take("q");
  ASSERT_EQ(Bodies(next), std::vector<std::string>{"next"});
  ASSERT_TRUE(broker_->Ack(kS1, next[0].delivery_tag, false).ok());
  Drain();
  if (durable()) Restart();  // the retry waits on disk with its count
  Tick(milliseconds(499));
  EXPECT_TRUE(Take("q").empty());
  Tick(milliseconds(1));
  auto retried = Take("q");
  ASSERT_EQ(retried.size(), 1u);
  EXPECT_EQ(retried[0].envelope->message.body, "job");
  EXPECT_EQ(retried[0].receive_count, 2u);
  EXPECT_TRUE(retried[0].redelivered);
  ASSERT_TRUE(broker_->Ack(kS1, retried[0].delivery_tag, false).ok());
  Drain();
  if (durable()) {
    Restart();
    Tick(milliseconds(1'000));
    EXPECT_TRUE(Take("q").empty()) << "acked after the retry: gone for good";
  }
}

// --- Durable only ------------------------------------------------------------------------------

class BrokerDelayStoreTest : public BrokerStoreTest {
 protected:
  uint64_t IdOf(const Result<PublishOutcome>& outcome) {
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    return outcome.ok() ? outcome->result.message_id : 0;
  }
};

TEST_F(BrokerDelayStoreTest, PersistentDelayedPublishIsConfirmedOnceOnDisk) {
  DeclareQueue("q");
  auto outcome = PublishDelayed("q", "p", PublishTiming{.delay_ms = 50}, true, /*request_id=*/5);
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome->deferred);
  Drain();
  ASSERT_EQ(peer_->confirms.size(), 1u);
  EXPECT_TRUE(peer_->confirms[0].status.ok());
  auto transient = PublishDelayed("q", "t", PublishTiming{.delay_ms = 50}, false, 6);
  ASSERT_TRUE(transient.ok());
  EXPECT_FALSE(transient->deferred) << "nothing to wait for";
}

// Restart with pending messages: persistent ones come back and fire on time (those that fell
// due while the broker was down at once, in due order); non-persistent ones do not.
TEST_F(BrokerDelayStoreTest, RestartKeepsPersistentDelayedMessagesAndFiresPastDueOnes) {
  DeclareQueue("q");
  ASSERT_TRUE(PublishDelayed("q", "2s", PublishTiming{.delay_ms = 2'000}).ok());
  ASSERT_TRUE(PublishDelayed("q", "1s", PublishTiming{.delay_ms = 1'000}).ok());
  ASSERT_TRUE(PublishDelayed("q", "1s-transient", PublishTiming{.delay_ms = 1'000}, false).ok());
  ASSERT_TRUE(PublishDelayed("q", "60s", PublishTiming{.delay_ms = 60'000}).ok());
  Drain();
  Crash();
  clock_.Advance(milliseconds(5'000));  // down for five seconds
  Start();
  Tick();
  auto past_due = Take("q");
  EXPECT_EQ(Bodies(past_due), (std::vector<std::string>{"1s", "2s"}));
  for (const auto& d : past_due) EXPECT_TRUE(broker_->Ack(kS1, d.delivery_tag, false).ok());
  QueueInfo info = Info("q");
  EXPECT_EQ(info.delayed, 1u);
  EXPECT_EQ(info.next_delayed_at_ms, clock_.WallMillis() - 5'000 + 60'000);
  Tick(milliseconds(55'000));
  EXPECT_EQ(Bodies(Take("q")), std::vector<std::string>{"60s"});
}

TEST_F(BrokerDelayStoreTest, FarFutureMessageWaitsYearsAndSurvivesRestarts) {
  DeclareQueue("q");
  const int64_t ten_years = int64_t{10} * 365 * 24 * 3600 * 1000;
  const int64_t due = clock_.WallMillis() + ten_years;
  ASSERT_TRUE(PublishDelayed("q", "future", PublishTiming{.deliver_at_ms = due}).ok());
  Drain();
  Restart();
  Tick(milliseconds(10'000));
  EXPECT_TRUE(Take("q").empty());
  DelayedPage page = [&] {
    peer_->listings.clear();
    EXPECT_TRUE(broker_->ListDelayed(kS1, 1, "q", 0, 0, 10).ok());
    Drain();
    return peer_->listings.empty() ? DelayedPage{} : *peer_->listings[0].second;
  }();
  ASSERT_EQ(page.messages.size(), 1u);
  EXPECT_EQ(page.messages[0].deliver_at_ms, due);
  clock_.StepWall(milliseconds(ten_years));
  Tick(milliseconds(1'000));
  EXPECT_EQ(Bodies(Take("q")), std::vector<std::string>{"future"});
}

// More delayed messages than the RAM keeps: the rest wait on disk and are loaded in due order;
// a cancel finds one that is on disk only.
TEST_F(BrokerDelayStoreTest, DeepTimelineLoadsFromDiskInDueOrder) {
  BrokerOptions options;
  options.delay_limits = {.max_messages = 50, .max_bytes = 1 << 20};
  options.delay_load_batch = 20;
  Restart(options);
  DeclareQueue("q");
  // The latest of all, published first: on disk only once the RAM holds the 50 nearest.
  uint64_t far_id = IdOf(PublishDelayed("q", "far", PublishTiming{.delay_ms = 20'000}));
  std::mt19937 rng(7);
  std::vector<std::pair<int64_t, std::string>> expected;
  for (int i = 0; i < 399; ++i) {
    uint64_t delay = 1 + rng() % 10'000;
    std::string body = std::to_string(i);
    ASSERT_TRUE(PublishDelayed("q", body, PublishTiming{.delay_ms = delay}).ok());
    expected.emplace_back(clock_.WallMillis() + static_cast<int64_t>(delay), body);
  }
  Drain();
  EXPECT_EQ(Info("q").delayed, 400u);
  peer_->cancels.clear();
  ASSERT_TRUE(broker_->CancelDelayed(kS1, 2, "q", far_id).ok());
  Drain();
  ASSERT_EQ(peer_->cancels.size(), 1u);
  EXPECT_TRUE(*peer_->cancels[0].second) << "found on disk";
  EXPECT_EQ(Info("q").delayed, 399u);
  std::stable_sort(expected.begin(), expected.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Restart(options);
  Drain();
  EXPECT_EQ(Info("q").delayed, 399u) << "counted at recovery";
  std::vector<std::string> got;
  for (int step = 0; step < 30 && got.size() < expected.size(); ++step) {
    Tick(milliseconds(1'000));
    for (auto& body : Bodies(Take("q"))) got.push_back(body);
  }
  std::vector<std::string> want;
  for (const auto& [due, body] : expected) want.push_back(body);
  // Within one tick messages come in due order; ties keep publish order.
  EXPECT_EQ(got, want);
  EXPECT_EQ(Info("q").delayed, 0u);
}

// A non-persistent message in a durable queue is nacked with a delay: it waits on the timeline
// (written without a sync) and is still delivered; a restart drops it, as it would any
// non-persistent message.
TEST_F(BrokerDelayStoreTest, NackWithDelayOfNonPersistentMessage) {
  DeclareQueue("q");
  ASSERT_TRUE(PublishDelayed("q", "t", PublishTiming{}, /*persistent=*/false).ok());
  Drain();
  auto got = Take("q");
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(broker_->Nack(kS1, got[0].delivery_tag, false, true, 100).ok());
  Drain();
  Tick(milliseconds(100));
  auto again = Take("q");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].receive_count, 2u);
  ASSERT_TRUE(broker_->Nack(kS1, again[0].delivery_tag, false, true, 100).ok());
  Drain();
  Restart();
  Tick(milliseconds(200));
  EXPECT_TRUE(Take("q").empty());
  EXPECT_EQ(Info("q").delayed, 0u);
}

TEST_F(BrokerDelayStoreTest, FanOutDelayedMessageIsStoredOnceAndReleasedInEachQueue) {
  DeclareQueue("a");
  DeclareQueue("b");
  ExchangeSpec fan;
  fan.name = "fan";
  fan.type = ExchangeType::kFanout;
  fan.durable = true;
  ASSERT_TRUE(broker_->DeclareExchange(fan).ok());
  for (const char* q : {"a", "b"}) {
    BindingSpec binding;
    binding.exchange = "fan";
    binding.queue = q;
    ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  }
  Message m;
  m.body = "both";
  m.persistent = true;
  ASSERT_TRUE(broker_->Publish(kS1, "fan", "", std::move(m), 0, {.delay_ms = 100}).ok());
  Drain();
  Restart();
  Tick(milliseconds(100));
  for (const char* q : {"a", "b"}) {
    auto got = Take(q);
    ASSERT_EQ(got.size(), 1u) << q;
    EXPECT_EQ(got[0].envelope->message.body, "both");
    EXPECT_TRUE(broker_->Ack(kS1, got[0].delivery_tag, false).ok());
  }
  Drain();
  Restart();
  Tick();
  EXPECT_TRUE(Take("a").empty());
  EXPECT_TRUE(Take("b").empty());
}

TEST_F(BrokerDelayStoreTest, ADelayedMessageExchangeDelaysByTheXDelayHeaderAcrossRestarts) {
  DeclareQueue("a");
  ExchangeSpec delayed;
  delayed.name = "later";
  delayed.type = ExchangeType::kDirect;
  delayed.delayed = true;
  delayed.durable = true;
  ASSERT_TRUE(broker_->DeclareExchange(delayed).ok());
  BindingSpec binding;
  binding.exchange = "later";
  binding.queue = "a";
  binding.routing_key = "a";
  ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  auto publish = [&](const std::string& body, std::optional<HeaderValue> delay) {
    Message m;
    m.body = body;
    m.persistent = true;
    if (delay) m.headers["x-delay"] = *delay;
    ASSERT_TRUE(broker_->Publish(kS1, "later", "a", std::move(m)).ok());
  };
  publish("in 200", int64_t{200});
  publish("no header", std::nullopt);
  publish("negative", int64_t{-5});     // the plugin's rule: now
  publish("text", std::string("100"));  // not an integer: now
  publish("in 100", int64_t{100});
  Drain();
  std::vector<std::string> now;
  for (const Delivery& d : Take("a")) {
    now.push_back(d.envelope->message.body);
    EXPECT_TRUE(broker_->Ack(kS1, d.delivery_tag, false).ok());
  }
  Drain();
  EXPECT_EQ(now, (std::vector<std::string>{"no header", "negative", "text"}));
  EXPECT_EQ(Info("a").delayed, 2u);
  // The exchange is stored as delayed: after a restart it still is, and the waiting ones fire.
  Restart();
  bool listed = false;
  for (const ExchangeInfo& e : broker_->ListExchanges()) {
    if (e.name == "later") {
      listed = true;
      EXPECT_TRUE(e.delayed);
      EXPECT_EQ(e.type, ExchangeType::kDirect);
    }
  }
  EXPECT_TRUE(listed);
  publish("in 50 after restart", int64_t{50});
  Tick(milliseconds(100));
  std::vector<std::string> later;
  for (const Delivery& d : Take("a")) later.push_back(d.envelope->message.body);
  EXPECT_EQ(later, (std::vector<std::string>{"in 50 after restart", "in 100"}));
  Tick(milliseconds(100));
  later.clear();
  for (const Delivery& d : Take("a")) later.push_back(d.envelope->message.body);
  EXPECT_EQ(later, (std::vector<std::string>{"in 200"}));
  // Redeclared as a plain direct exchange: not equivalent.
  delayed.delayed = false;
  EXPECT_EQ(broker_->DeclareExchange(delayed).code(), StatusCode::kPreconditionFailed);
}

}  // namespace
}  // namespace wharf::broker
