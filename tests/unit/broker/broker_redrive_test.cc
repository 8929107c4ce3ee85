// Redrive (docs/lifecycle.md, "Redrive"): moving a dead-letter queue's messages back, within a
// rate, as a task whose progress survives a crash; in RAM and with the real store.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "unit/broker/broker_store_fixture.h"

namespace wharf::broker {
namespace {

using std::chrono::milliseconds;

class BrokerRedriveTest : public BrokerStoreTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool durable() const { return GetParam(); }

  void DeclareWith(const std::string& name, Headers arguments = {}) {
    DeclareQueue(name, durable(), std::move(arguments));
  }

  // A queue that dead-letters into `dlq`.
  void DeclareSource(const std::string& name, const std::string& dlq) {
    DeclareWith(name, {{"x-dead-letter-queue", dlq}});
  }

  // Publishes `bodies` to `queue`, takes them and rejects them (into its dead-letter queue).
  void Reject(const std::string& queue, const std::vector<std::string>& bodies) {
    for (const auto& body : bodies) ASSERT_TRUE(Publish("", queue, body).ok());
    Drain();
    size_t rejected = 0;
    while (rejected < bodies.size()) {
      auto taken = Take(queue, 1'000);
      ASSERT_FALSE(taken.empty());
      for (const auto& d : taken) {
        Broker::NackOptions nack;
        nack.requeue = false;
        const std::string error = "bad " + d.envelope->message.body;
        nack.error = error;
        ASSERT_TRUE(broker_->Nack(kS1, d.delivery_tag, false, nack).ok());
      }
      rejected += taken.size();
      Drain();
    }
    ASSERT_EQ(rejected, bodies.size());
  }

  std::vector<std::string> Numbered(const std::string& prefix, int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
    return out;
  }

  Status Start(RedriveSpec spec) {
    peer_->redrives.clear();
    Status s = broker_->StartRedrive(kS1, 5, std::move(spec));
    Drain();
    if (!s.ok()) return s;
    EXPECT_EQ(peer_->redrives.size(), 1u) << "answered once the task is on disk";
    return Status::Ok();
  }

  RedriveInfo Status_(const std::string& queue) {
    auto tasks = broker_->RedriveStatus(kS1, queue);
    EXPECT_TRUE(tasks.ok());
    if (!tasks.ok() || tasks->size() != 1) {
      ADD_FAILURE() << "no redrive of " << queue;
      return {};
    }
    return tasks->front();
  }

  // Durable queues keep 16 messages in RAM and load 8 at a time: the rest is on disk.
  static BrokerOptions Paged() {
    BrokerOptions options;
    options.page_limits.max_messages = 16;
    options.load_batch = 8;  // the queue's own loads bring little to RAM
    return options;
  }

  // Runs the broker's timer until the queue's redrive is over.
  RedriveInfo RunToEnd(const std::string& queue, milliseconds step = milliseconds(100)) {
    for (int i = 0; i < 10'000; ++i) {
      RedriveInfo info = Status_(queue);
      if (info.state != RedriveInfo::State::kRunning) return info;
      Tick(step);
    }
    ADD_FAILURE() << "the redrive of " << queue << " does not end";
    return Status_(queue);
  }
};

INSTANTIATE_TEST_SUITE_P(RamAndStore, BrokerRedriveTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Durable" : "Transient"; });

class BrokerRedriveStoreTest : public BrokerRedriveTest {};
INSTANTIATE_TEST_SUITE_P(Store, BrokerRedriveStoreTest, ::testing::Values(true),
                         [](const auto&) { return "Durable"; });

TEST_P(BrokerRedriveTest, EachMessageGoesBackToTheQueueItDiedIn) {
  DeclareWith("dlq");
  DeclareSource("orders", "dlq");
  DeclareSource("payments", "dlq");
  Reject("orders", {"o1", "o2", "o3"});
  Reject("payments", {"p1", "p2"});
  ASSERT_EQ(Info("dlq").ready, 5u);
  std::vector<uint64_t> ids;
  for (const auto& d : Take("dlq")) {
    ids.push_back(d.envelope->message.id);
    ASSERT_TRUE(broker_->Nack(kS1, d.delivery_tag, false, true).ok());  // peeked: back at once
  }
  Drain();

  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 0, 0, false}).ok());
  const RedriveInfo& started = *peer_->redrives[0].second;
  EXPECT_EQ(started.state, RedriveInfo::State::kRunning);
  EXPECT_EQ(started.total, 5u);
  EXPECT_EQ(started.spec.rate, 1'000u) << "the default rate";
  RedriveInfo done = RunToEnd("dlq");
  EXPECT_EQ(done.state, RedriveInfo::State::kFinished);
  EXPECT_EQ(done.moved, 5u);
  EXPECT_EQ(done.remaining, 0u);
  ASSERT_EQ(done.targets.size(), 2u);
  EXPECT_EQ(done.targets[0].queue, "orders");
  EXPECT_EQ(done.targets[0].messages, 3u);
  EXPECT_EQ(done.targets[1].queue, "payments");
  EXPECT_EQ(done.targets[1].messages, 2u);
  EXPECT_EQ(Info("dlq").ready, 0u);
  if (durable()) Restart();  // the moves are on disk

  auto orders = Take("orders");
  EXPECT_EQ(Bodies(orders), (std::vector<std::string>{"o1", "o2", "o3"}));
  EXPECT_EQ(Bodies(Take("payments")), (std::vector<std::string>{"p1", "p2"}));
  ASSERT_FALSE(orders.empty());
  const Delivery& d = orders[0];
  EXPECT_EQ(d.envelope->message.id, ids[0]) << "the same message";
  EXPECT_EQ(d.receive_count, 1u) << "counters start over";
  EXPECT_EQ(d.failures, nullptr) << "no failures in its new life";
  ASSERT_EQ(d.envelope->message.deaths.size(), 1u) << "the death history stays";
  EXPECT_EQ(d.envelope->message.deaths[0].reason, "rejected");
  EXPECT_EQ(d.envelope->message.deaths[0].last_error, "bad o1");
  if (durable()) {
    EXPECT_EQ(Status_("dlq").state, RedriveInfo::State::kFinished) << "kept after a restart";
  }
}

TEST_P(BrokerRedriveTest, ReasonToAndLimitChooseWhatMoves) {
  DeclareWith("dlq");
  DeclareSource("jobs", "dlq");
  DeclareWith("short",
              {{"x-dead-letter-queue", std::string("dlq")}, {"x-message-ttl", int64_t{1'000}}});
  DeclareWith("retry");
  Reject("jobs", {"r1", "r2"});
  ASSERT_TRUE(Publish("", "short", "e1").ok());
  ASSERT_TRUE(Publish("", "short", "e2").ok());
  Drain();
  Tick(milliseconds(1'500));  // e1 and e2 expire into the dead-letter queue
  Reject("jobs", {"r3"});
  ASSERT_EQ(Info("dlq").ready, 5u);

  ASSERT_TRUE(Start(RedriveSpec{"dlq", "retry", "expired", 0, 0, false}).ok());
  RedriveInfo done = RunToEnd("dlq");
  EXPECT_EQ(done.moved, 2u);
  EXPECT_EQ(done.skipped_not_matching, 3u);
  EXPECT_EQ(Bodies(Take("retry")), (std::vector<std::string>{"e1", "e2"}));
  // The rest stay where they were, in order.
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "rejected", 2, 0, false}).ok());
  done = RunToEnd("dlq");
  EXPECT_EQ(done.state, RedriveInfo::State::kFinished);
  EXPECT_EQ(done.detail, "limit reached");
  EXPECT_EQ(done.moved, 2u);
  EXPECT_EQ(Bodies(Take("jobs")), (std::vector<std::string>{"r1", "r2"}));
  EXPECT_EQ(Bodies(Take("dlq")), (std::vector<std::string>{"r3"}));
}

// wharfctl requeue: one message by id, wherever it is in the queue; the others stay in order.
TEST_P(BrokerRedriveTest, OneMessageById) {
  DeclareWith("dlq");
  DeclareSource("jobs", "dlq");
  Reject("jobs", Numbered("m", 5));
  auto all = Take("dlq", 5);
  ASSERT_EQ(all.size(), 5u);
  const uint64_t id = all[3].envelope->message.id;
  for (const auto& d : all) ASSERT_TRUE(broker_->Nack(kS1, d.delivery_tag, false, true).ok());
  Drain();
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 1, 0, false, id}).ok());
  RedriveInfo done = RunToEnd("dlq");
  EXPECT_EQ(done.moved, 1u);
  EXPECT_EQ(done.detail, "limit reached");
  EXPECT_EQ(Bodies(Take("jobs")), (std::vector<std::string>{"m3"}));
  EXPECT_EQ(Bodies(Take("dlq")), (std::vector<std::string>{"m0", "m1", "m2", "m4"}));
}

TEST_P(BrokerRedriveTest, TheRateLimitsTheMoves) {
  DeclareWith("dlq");
  DeclareSource("jobs", "dlq");
  Reject("jobs", Numbered("m", 300));
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 0, 100, false}).ok());
  Tick();
  const uint64_t first = Status_("dlq").moved;
  EXPECT_GE(first, 1u);
  EXPECT_LE(first, 10u) << "a tenth of a second's worth at most at once";
  for (int i = 0; i < 20; ++i) Tick(milliseconds(50));  // one second
  RedriveInfo after = Status_("dlq");
  EXPECT_GE(after.moved, first + 90);
  EXPECT_LE(after.moved, first + 110);
  EXPECT_NEAR(after.rate_per_second, 100, 15);
  EXPECT_EQ(after.remaining, 300 - after.moved);
  EXPECT_EQ(Info("jobs").ready, after.moved);
  EXPECT_EQ(RunToEnd("dlq", milliseconds(500)).moved, 300u);
}

TEST_P(BrokerRedriveTest, CancelStopsItAndWhatMovedStaysMoved) {
  DeclareWith("dlq");
  DeclareSource("jobs", "dlq");
  Reject("jobs", Numbered("m", 50));
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 0, 10, false}).ok());
  Tick();
  Tick(milliseconds(500));
  const uint64_t moved = Status_("dlq").moved;
  ASSERT_GT(moved, 0u);
  ASSERT_LT(moved, 50u);
  peer_->redrives.clear();
  ASSERT_TRUE(broker_->CancelRedrive(kS1, 9, "dlq").ok());
  Drain();
  ASSERT_EQ(peer_->redrives.size(), 1u);
  const RedriveInfo& cancelled = *peer_->redrives[0].second;
  EXPECT_EQ(cancelled.state, RedriveInfo::State::kCancelled);
  EXPECT_EQ(cancelled.detail, "cancelled by user alice");
  EXPECT_EQ(cancelled.moved, moved);
  Tick(milliseconds(5'000));
  if (durable()) Restart();
  EXPECT_EQ(Status_("dlq").state, RedriveInfo::State::kCancelled);
  EXPECT_EQ(Info("jobs").ready, moved);
  EXPECT_EQ(Info("dlq").ready, 50 - moved);
  EXPECT_EQ(broker_->CancelRedrive(kS1, 9, "dlq").code(), StatusCode::kPreconditionFailed);
}

TEST_P(BrokerRedriveTest, RequestsAreChecked) {
  DeclareWith("dlq");
  DeclareSource("jobs", "dlq");
  EXPECT_EQ(broker_->StartRedrive(kS1, 1, RedriveSpec{"nope", "", "", 0, 0, false}).code(),
            StatusCode::kQueueNotFound);
  EXPECT_EQ(broker_->StartRedrive(kS1, 1, RedriveSpec{"dlq", "nope", "", 0, 0, false}).code(),
            StatusCode::kQueueNotFound);
  EXPECT_EQ(broker_->StartRedrive(kS1, 1, RedriveSpec{"dlq", "dlq", "", 0, 0, false}).code(),
            StatusCode::kInvalidArgument);
  Status bad_reason = broker_->StartRedrive(kS1, 1, RedriveSpec{"dlq", "", "lost", 0, 0, false});
  EXPECT_EQ(bad_reason.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_reason.message().find("max_attempts"), std::string::npos);
  EXPECT_EQ(broker_->StartRedrive(kS1, 1, RedriveSpec{"dlq", "", "", 0, 2'000'000, false}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_->CancelRedrive(kS1, 1, "dlq").code(), StatusCode::kPreconditionFailed);
  auto none = broker_->RedriveStatus(kS1, "dlq");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(broker_->RedriveStatus(kS1, "nope").status().code(), StatusCode::kQueueNotFound);

  if (durable()) {
    DeclareQueue("mem", /*durable=*/false);
    Status to_ram = broker_->StartRedrive(kS1, 1, RedriveSpec{"dlq", "mem", "", 0, 0, false});
    EXPECT_EQ(to_ram.code(), StatusCode::kInvalidArgument) << "persistent messages would be lost";
  }
  Reject("jobs", Numbered("m", 20));
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 0, 1, false}).ok());
  Status twice = broker_->StartRedrive(kS1, 1, RedriveSpec{"dlq", "", "", 0, 0, false});
  EXPECT_EQ(twice.code(), StatusCode::kPreconditionFailed) << twice.ToString();
}

TEST_P(BrokerRedriveTest, DryRunCountsAndMovesNothing) {
  DeclareWith("dlq");
  DeclareSource("orders", "dlq");
  DeclareSource("gone", "dlq");
  Reject("orders", {"o1", "o2"});
  Reject("gone", {"g1"});
  ASSERT_TRUE(broker_->DeleteQueue(kS1, "gone", false, false).ok());
  Drain();
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 0, 0, true}).ok());
  RedriveInfo done = RunToEnd("dlq");
  EXPECT_EQ(done.state, RedriveInfo::State::kFinished);
  EXPECT_TRUE(done.spec.dry_run);
  EXPECT_EQ(done.moved, 2u) << "would move";
  EXPECT_EQ(done.skipped_no_target, 1u) << "its queue was deleted";
  EXPECT_EQ(Info("dlq").ready, 3u);
  EXPECT_EQ(Info("orders").ready, 0u);
  // The real one leaves the message without a target where it is.
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 0, 0, false}).ok());
  done = RunToEnd("dlq");
  EXPECT_EQ(done.moved, 2u);
  EXPECT_EQ(done.skipped_no_target, 1u);
  EXPECT_EQ(Bodies(Take("dlq")), (std::vector<std::string>{"g1"}));
}

// A message that dies again while the redrive runs is not redriven a second time by it.
TEST_P(BrokerRedriveTest, MessagesThatDieAgainAreNotTakenTwice) {
  DeclareWith("dlq");
  DeclareSource("jobs", "dlq");
  Reject("jobs", Numbered("m", 30));
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 0, 10, false}).ok());
  for (int i = 0; i < 40; ++i) {
    Tick(milliseconds(100));
    // The consumer rejects each again as soon as it is back.
    for (const auto& d : Take("jobs")) {
      ASSERT_TRUE(broker_->Nack(kS1, d.delivery_tag, false, false).ok());
      EXPECT_EQ(d.envelope->message.deaths.size(), 1u);
      EXPECT_EQ(d.envelope->message.deaths[0].count, 1u);
    }
    Drain();
  }
  RedriveInfo done = RunToEnd("dlq");
  EXPECT_EQ(done.moved, 30u);
  EXPECT_EQ(Info("dlq").ready, 30u) << "each died once more, and stays";
  for (const auto& d : Take("dlq")) EXPECT_EQ(d.envelope->message.deaths[0].count, 2u);
}

TEST_P(BrokerRedriveTest, DeletingTheQueueEndsItsRedrive) {
  DeclareWith("dlq");
  DeclareSource("jobs", "dlq");
  Reject("jobs", Numbered("m", 20));
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 0, 1, false}).ok());
  ASSERT_TRUE(broker_->DeleteQueue(kS1, "dlq", false, false).ok());
  Tick(milliseconds(1'000));
  DeclareWith("dlq");
  if (durable()) Restart();
  auto none = broker_->RedriveStatus(kS1, "");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Crash in the middle: the task resumes where its last committed move left it, and every
// message ends up live exactly once. The dead-letter queue is on disk (paged), more than one
// store read deep.
TEST_P(BrokerRedriveStoreTest, ACrashInTheMiddleResumesExactlyOnce) {
  const BrokerOptions options = Paged();
  Restart(options);
  DeclareWith("dlq");
  DeclareSource("jobs", "dlq");
  const int kMessages = 2'500;
  Reject("jobs", Numbered("m", kMessages));
  Restart(options);
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 0, 1'000, false}).ok());
  for (int i = 0; i < 12; ++i) Tick(milliseconds(100));
  const uint64_t before = Status_("dlq").moved;
  ASSERT_GT(before, 1'000u);
  ASSERT_LT(before, 2'000u);
  Restart(options);
  RedriveInfo resumed = Status_("dlq");
  EXPECT_EQ(resumed.state, RedriveInfo::State::kRunning);
  EXPECT_EQ(resumed.moved, before) << "progress is stored with the moves";
  EXPECT_EQ(Info("jobs").ready + Info("dlq").ready, static_cast<uint64_t>(kMessages));
  RedriveInfo done = RunToEnd("dlq");
  EXPECT_EQ(done.moved, static_cast<uint64_t>(kMessages));
  Restart(options);
  EXPECT_EQ(Info("dlq").ready, 0u);
  auto got = TakeAndAck("jobs", 1'000, kMessages + 1);
  EXPECT_EQ(got, Numbered("m", kMessages)) << "each once, in order";
}

// A deep dead-letter queue is mostly on disk: the walk reads it from the store, leaves what
// does not match where it is, and passes over what a consumer holds.
TEST_P(BrokerRedriveStoreTest, APagedQueueIsWalkedOnDisk) {
  const BrokerOptions options = Paged();
  Restart(options);
  DeclareWith("dlq");
  DeclareSource("a", "dlq");
  DeclareSource("b", "dlq");
  const int kEach = 300;
  for (int i = 0; i < kEach; ++i) {
    Reject("a", {"a" + std::to_string(i)});
    Reject("b", {"b" + std::to_string(i)});
  }
  ASSERT_EQ(Info("dlq").ready, 2u * kEach);
  Restart(options);            // everything starts paged
  auto held = Take("dlq", 3);  // a consumer of the dead-letter queue holds a0, b0, a1
  ASSERT_EQ(Bodies(held), (std::vector<std::string>{"a0", "b0", "a1"}));
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 0, 100'000, false}).ok());
  RedriveInfo done = RunToEnd("dlq", milliseconds(10));
  EXPECT_EQ(done.moved, 2u * kEach - 3);
  for (const auto& d : held) ASSERT_TRUE(broker_->Nack(kS1, d.delivery_tag, false, true).ok());
  Drain();
  EXPECT_EQ(Bodies(Take("dlq")), (std::vector<std::string>{"a0", "b0", "a1"}));
  std::vector<std::string> want_a, want_b;
  for (int i = 0; i < kEach; ++i) {
    if (i > 1) want_a.push_back("a" + std::to_string(i));
    if (i > 0) want_b.push_back("b" + std::to_string(i));
  }
  EXPECT_EQ(TakeAndAck("a", 1'000, 2 * kEach), want_a);
  EXPECT_EQ(TakeAndAck("b", 1'000, 2 * kEach), want_b);
}

TEST_P(BrokerRedriveStoreTest, APagedQueueKeepsWhatDoesNotMatchInOrder) {
  const BrokerOptions options = Paged();
  Restart(options);
  DeclareWith("dlq");
  DeclareWith("jobs",
              {{"x-dead-letter-queue", std::string("dlq")}, {"x-message-ttl", int64_t{1'000}}});
  std::vector<std::string> rejected;
  for (int i = 0; i < 100; ++i) {
    // Alternately rejected and expired.
    Reject("jobs", {"r" + std::to_string(i)});
    rejected.push_back("r" + std::to_string(i));
    ASSERT_TRUE(Publish("", "jobs", "e" + std::to_string(i)).ok());
    Drain();
    Tick(milliseconds(1'001));
  }
  ASSERT_EQ(Info("dlq").ready, 200u);
  DeclareWith("retry");  // without a TTL: in "jobs" they would expire again at once
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "retry", "expired", 0, 100'000, false}).ok());
  RedriveInfo done = RunToEnd("dlq", milliseconds(10));
  EXPECT_EQ(done.moved, 100u);
  EXPECT_EQ(done.skipped_not_matching, 100u);
  EXPECT_EQ(Info("dlq").ready, 100u);
  EXPECT_EQ(TakeAndAck("dlq", 7, 1'000), rejected) << "left in order";
  EXPECT_EQ(Info("retry").ready, 100u);
}

// The limit reached on a message read from disk ends the task there (and leaves the rest in
// order); so does a dry run's.
TEST_P(BrokerRedriveStoreTest, ALimitReachedOnDiskEndsCleanly) {
  const BrokerOptions options = Paged();
  Restart(options);
  DeclareWith("dlq");
  DeclareSource("jobs", "dlq");
  Reject("jobs", Numbered("m", 100));
  Restart(options);
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 50, 0, true}).ok());
  EXPECT_EQ(RunToEnd("dlq", milliseconds(10)).moved, 50u);
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 50, 100'000, false}).ok());
  RedriveInfo done = RunToEnd("dlq", milliseconds(10));
  EXPECT_EQ(done.detail, "limit reached");
  EXPECT_EQ(done.moved, 50u);
  std::vector<std::string> all = Numbered("m", 100);
  EXPECT_EQ(TakeAndAck("jobs", 1'000, 100),
            std::vector<std::string>(all.begin(), all.begin() + 50));
  EXPECT_EQ(TakeAndAck("dlq", 1'000, 100), std::vector<std::string>(all.begin() + 50, all.end()));
}

// Messages taken out of the middle of RAM leave tombstones; they must not keep the queue
// from loading what is still on disk once its live head is consumed.
TEST_P(BrokerRedriveStoreTest, AHeadLeftBehindDoesNotStallTheQueue) {
  const BrokerOptions options = Paged();
  Restart(options);
  DeclareWith("dlq");
  DeclareSource("gone", "dlq");
  DeclareSource("jobs", "dlq");
  Reject("gone", {"g0"});
  Reject("jobs", Numbered("m", 40));  // m0..m14 in RAM behind g0, the rest on disk
  ASSERT_TRUE(broker_->DeleteQueue(kS1, "gone", false, false).ok());
  Drain();
  ASSERT_TRUE(Start(RedriveSpec{"dlq", "", "", 20, 100'000, false}).ok());
  RedriveInfo done = RunToEnd("dlq", milliseconds(10));
  EXPECT_EQ(done.moved, 20u);
  EXPECT_EQ(done.skipped_no_target, 1u);
  std::vector<std::string> want = {"g0"};
  for (int i = 20; i < 40; ++i) want.push_back("m" + std::to_string(i));
  EXPECT_EQ(TakeAndAck("dlq", 1, 100), want);
}

}  // namespace
}  // namespace wharf::broker
