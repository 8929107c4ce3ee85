// Consume and ack through the real wharfd: push subscriptions with prefetch, competing
// consumers, pull with long polling, settling, and redelivery when a connection drops.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "support/test_server.h"

namespace wharf {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Collects deliveries from a subscription and lets the test wait for a count.
class Inbox {
 public:
  Client::DeliveryHandler Handler() {
    return [this](Delivery d) {
      std::lock_guard lock(mu_);
      deliveries_.push_back(std::move(d));
      cv_.notify_all();
    };
  }
  bool WaitFor(size_t n, milliseconds timeout = milliseconds(5000)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return deliveries_.size() >= n; });
  }
  std::vector<Delivery> Take() {
    std::lock_guard lock(mu_);
    return std::move(deliveries_);
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return deliveries_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Delivery> deliveries_;
};

class ConsumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = server_.Connect();
    ASSERT_NE(client_, nullptr);
    QueueSpec spec;
    spec.name = "work";
    ASSERT_TRUE(client_->DeclareQueue(spec).ok());
  }

  void PublishN(int n, const std::string& prefix = "m") {
    for (int i = 0; i < n; ++i) {
      Message m;
      m.body = prefix + std::to_string(i);
      auto r = client_->Publish("", "work", m);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }

  QueueInfo Info() {
    QueueSpec spec;
    spec.name = "work";
    spec.passive = true;
    auto info = client_->DeclareQueue(spec);
    EXPECT_TRUE(info.ok());
    return info.ok() ? *info : QueueInfo{};
  }

  testing::TestServer server_;
  std::unique_ptr<Client> client_;
};

TEST_F(ConsumeTest, PrefetchLimitsUnackedDeliveries) {
  PublishN(10);
  Inbox inbox;
  auto consumer = server_.Connect();
  ASSERT_NE(consumer, nullptr);
  auto tag = consumer->Subscribe("work", 3, inbox.Handler());
  ASSERT_TRUE(tag.ok()) << tag.status().ToString();
  ASSERT_TRUE(inbox.WaitFor(3));
  // Give the broker the chance to over-deliver, then check it did not.
  ASSERT_TRUE(consumer->Ping().ok());
  ASSERT_TRUE(client_->Ping().ok());
  EXPECT_EQ(inbox.size(), 3u);
  EXPECT_EQ(Info().in_flight, 3u);
  auto first = inbox.Take();
  ASSERT_TRUE(consumer->AckSync(first[0].delivery_tag).ok());
  ASSERT_TRUE(inbox.WaitFor(1));
  ASSERT_TRUE(consumer->Ping().ok());
  EXPECT_EQ(inbox.size(), 1u);  // exactly one freed slot, exactly one more delivery
  EXPECT_EQ(inbox.Take()[0].message.body, "m3");
}

TEST_F(ConsumeTest, CompetingConsumersShareTheWork) {
  Inbox a, b;
  auto ca = server_.Connect();
  auto cb = server_.Connect();
  ASSERT_TRUE(ca && cb);
  ASSERT_TRUE(ca->Subscribe("work", 0, a.Handler()).ok());
  ASSERT_TRUE(cb->Subscribe("work", 0, b.Handler()).ok());
  PublishN(20);
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (a.size() + b.size() < 20 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(a.size() + b.size(), 20u);
  EXPECT_EQ(a.size(), 10u);  // round-robin among consumers with credit
  EXPECT_EQ(b.size(), 10u);
}

TEST_F(ConsumeTest, BusyConsumerIsSkippedForOneWithCredit) {
  Inbox slow, fast;
  auto cs = server_.Connect();
  auto cf = server_.Connect();
  ASSERT_TRUE(cs && cf);
  ASSERT_TRUE(cs->Subscribe("work", 1, slow.Handler()).ok());
  ASSERT_TRUE(cf->Subscribe("work", 100, fast.Handler()).ok());
  PublishN(10);
  ASSERT_TRUE(fast.WaitFor(9));
  EXPECT_EQ(slow.size(), 1u);  // it never acked, so it got just its one
}

TEST_F(ConsumeTest, AHigherPriorityConsumerIsServedWhileItHasCredit) {
  Inbox low, high;
  auto cl = server_.Connect();
  auto ch = server_.Connect();
  ASSERT_TRUE(cl && ch);
  Client::SubscribeOptions options;
  options.prefetch = 100;
  options.consumer_tag = "low";
  ASSERT_TRUE(cl->Subscribe("work", low.Handler(), options).ok());
  options.prefetch = 2;
  options.consumer_tag = "high";
  options.priority = 5;
  ASSERT_TRUE(ch->Subscribe("work", high.Handler(), options).ok());
  PublishN(6);
  ASSERT_TRUE(low.WaitFor(4));
  ASSERT_TRUE(high.WaitFor(2));
  std::vector<std::string> got;
  for (const auto& d : high.Take()) got.push_back(d.message.body);
  EXPECT_EQ(got, (std::vector<std::string>{"m0", "m1"})) << "the first two, up to its prefetch";
  EXPECT_EQ(low.size(), 4u);
  auto listed = client_->ListConsumers("work");
  ASSERT_TRUE(listed.ok());
  std::map<std::string, int32_t> priorities;
  for (const auto& c : *listed) priorities[c.consumer_tag] = c.priority;
  EXPECT_EQ(priorities, (std::map<std::string, int32_t>{{"high", 5}, {"low", 0}}));
}

TEST_F(ConsumeTest, ASingleActiveConsumersSuccessorGetsItsUnackedFirst) {
  QueueSpec spec;
  spec.name = "one-at-a-time";
  spec.arguments["x-single-active-consumer"] = true;
  ASSERT_TRUE(client_->DeclareQueue(spec).ok());
  Inbox first, second;
  auto c1 = server_.Connect();
  auto c2 = server_.Connect();
  ASSERT_TRUE(c1 && c2);
  ASSERT_TRUE(c1->Subscribe("one-at-a-time", 0, first.Handler(), "first").ok());
  ASSERT_TRUE(c2->Subscribe("one-at-a-time", 0, second.Handler(), "second").ok());
  for (int i = 0; i < 3; ++i) {
    Message m;
    m.body = "m" + std::to_string(i);
    ASSERT_TRUE(client_->Publish("", "one-at-a-time", m).ok());
  }
  ASSERT_TRUE(first.WaitFor(3));
  EXPECT_EQ(second.size(), 0u);
  auto listed = client_->ListConsumers("one-at-a-time");
  ASSERT_TRUE(listed.ok());
  std::map<std::string, std::string> activity;
  for (const auto& c : *listed) activity[c.consumer_tag] = c.activity;
  EXPECT_EQ(activity, (std::map<std::string, std::string>{{"first", "single_active"},
                                                          {"second", "waiting"}}));
  c1->Close();  // nothing acked: all three come back, to the successor, in order
  ASSERT_TRUE(second.WaitFor(3));
  std::vector<std::string> bodies;
  for (const auto& d : second.Take()) {
    bodies.push_back(d.message.body);
    EXPECT_TRUE(d.redelivered);
    EXPECT_EQ(d.receive_count, 2u);
  }
  EXPECT_EQ(bodies, (std::vector<std::string>{"m0", "m1", "m2"}));
  // An exclusive consumer is refused on such a queue.
  Inbox third;
  auto refused = client_->Subscribe("one-at-a-time", 0, third.Handler(), "", /*exclusive=*/true);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceLocked);
}

TEST_F(ConsumeTest, DroppedConnectionReturnsUnackedMessagesInOrder) {
  PublishN(5);
  {
    Inbox inbox;
    auto consumer = server_.Connect();
    ASSERT_NE(consumer, nullptr);
    ASSERT_TRUE(consumer->Subscribe("work", 10, inbox.Handler()).ok());
    ASSERT_TRUE(inbox.WaitFor(5));
    auto got = inbox.Take();
    ASSERT_TRUE(consumer->AckSync(got[1].delivery_tag).ok());  // m1 is done
    EXPECT_EQ(Info().in_flight, 4u);
    consumer->Close();  // m0, m2, m3, m4 were never acked
  }
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Info().ready != 4 && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
  auto again = client_->Receive("work", 10, milliseconds(1000));
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 4u);
  std::vector<std::string> bodies;
  for (const auto& d : *again) {
    bodies.push_back(d.message.body);
    EXPECT_TRUE(d.redelivered);
    EXPECT_EQ(d.receive_count, 2u);
  }
  EXPECT_EQ(bodies, (std::vector<std::string>{"m0", "m2", "m3", "m4"}));
}

TEST_F(ConsumeTest, KilledClientSocketAlsoReturnsMessages) {
  PublishN(1);
  auto consumer = server_.Connect();
  ASSERT_NE(consumer, nullptr);
  auto got = consumer->Receive("work", 1, milliseconds(1000));
  ASSERT_TRUE(got.ok() && got->size() == 1);
  consumer.reset();  // destructor closes the socket without acking
  auto again = client_->Receive("work", 1, milliseconds(5000));
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_TRUE((*again)[0].redelivered);
}

TEST_F(ConsumeTest, NackWithRequeueRedeliversAtTheFront) {
  PublishN(3);
  auto got = client_->Receive("work", 1, milliseconds(1000));
  ASSERT_TRUE(got.ok() && got->size() == 1);
  EXPECT_EQ((*got)[0].message.body, "m0");
  EXPECT_EQ((*got)[0].receive_count, 1u);
  EXPECT_FALSE((*got)[0].redelivered);
  ASSERT_TRUE(client_->NackSync((*got)[0].delivery_tag, false, true).ok());
  auto again = client_->Receive("work", 3, milliseconds(1000));
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 3u);
  EXPECT_EQ((*again)[0].message.body, "m0");
  EXPECT_EQ((*again)[0].receive_count, 2u);
  EXPECT_TRUE((*again)[0].redelivered);
  EXPECT_EQ((*again)[1].message.body, "m1");
}

TEST_F(ConsumeTest, RejectWithoutRequeueDropsTheMessage) {
  PublishN(1);
  auto got = client_->Receive("work", 1, milliseconds(1000));
  ASSERT_TRUE(got.ok() && got->size() == 1);
  ASSERT_TRUE(client_->RejectSync((*got)[0].delivery_tag, false).ok());
  QueueInfo info = Info();
  EXPECT_EQ(info.ready, 0u);
  EXPECT_EQ(info.in_flight, 0u);
}

TEST_F(ConsumeTest, AckMultipleSettlesEverythingUpToTheTag) {
  PublishN(5);
  auto got = client_->Receive("work", 5, milliseconds(1000));
  ASSERT_TRUE(got.ok() && got->size() == 5);
  ASSERT_TRUE(client_->AckSync((*got)[3].delivery_tag, true).ok());
  EXPECT_EQ(Info().in_flight, 1u);
  ASSERT_TRUE(client_->AckSync((*got)[4].delivery_tag).ok());
  EXPECT_EQ(Info().in_flight, 0u);
}

TEST_F(ConsumeTest, AckOfUnknownOrSettledTagIsAnErrorThatKeepsTheConnection) {
  PublishN(1);
  auto got = client_->Receive("work", 1, milliseconds(1000));
  ASSERT_TRUE(got.ok() && got->size() == 1);
  uint64_t tag = (*got)[0].delivery_tag;
  ASSERT_TRUE(client_->AckSync(tag).ok());
  EXPECT_EQ(client_->AckSync(tag).code(), StatusCode::kUnknownDeliveryTag);
  EXPECT_EQ(client_->AckSync(999).code(), StatusCode::kUnknownDeliveryTag);
  // Fire-and-forget acks report the same through the error handler.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Status> errors;
  client_->SetErrorHandler([&](Status s) {
    std::lock_guard lock(mu);
    errors.push_back(s);
    cv.notify_all();
  });
  client_->Ack(12345);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return !errors.empty(); }));
    EXPECT_EQ(errors[0].code(), StatusCode::kUnknownDeliveryTag);
  }
  EXPECT_TRUE(client_->Ping().ok());
  EXPECT_TRUE(client_->connected());
}

TEST_F(ConsumeTest, ReceiveLongPollReturnsWhenAMessageArrives) {
  auto start = Clock::now();
  std::thread publisher([this] {
    std::this_thread::sleep_for(milliseconds(200));
    auto other = server_.Connect();
    Message m;
    m.body = "late";
    ASSERT_TRUE(other->Publish("", "work", m).ok());
  });
  auto got = client_->Receive("work", 10, milliseconds(5000));
  auto waited = Clock::now() - start;
  publisher.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].message.body, "late");
  EXPECT_LT(waited, std::chrono::seconds(4));  // returned on arrival, not at the deadline
}

TEST_F(ConsumeTest, ReceiveReturnsEmptyAfterItsWait) {
  auto start = Clock::now();
  auto got = client_->Receive("work", 1, milliseconds(300));
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  EXPECT_GE(Clock::now() - start, milliseconds(250));
  auto now = client_->Receive("work", 1, milliseconds(0));
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->empty());
}

TEST_F(ConsumeTest, ReceiveFromMissingQueueIsAnError) {
  auto got = client_->Receive("missing", 1, milliseconds(100));
  EXPECT_EQ(got.status().code(), StatusCode::kQueueNotFound);
}

TEST_F(ConsumeTest, DeletingAQueueCancelsItsConsumers) {
  Inbox inbox;
  auto consumer = server_.Connect();
  std::mutex mu;
  std::condition_variable cv;
  std::string cancelled;
  consumer->SetCancelHandler([&](const std::string& tag, std::string) {
    std::lock_guard lock(mu);
    cancelled = tag;
    cv.notify_all();
  });
  auto tag = consumer->Subscribe("work", 1, inbox.Handler(), "my-consumer");
  ASSERT_TRUE(tag.ok());
  EXPECT_EQ(*tag, "my-consumer");
  ASSERT_TRUE(client_->DeleteQueue("work").ok());
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return !cancelled.empty(); }));
  EXPECT_EQ(cancelled, "my-consumer");
}

TEST_F(ConsumeTest, ExclusiveQueueBelongsToItsConnection) {
  auto owner = server_.Connect();
  QueueSpec spec;
  spec.name = "mine";
  spec.exclusive = true;
  ASSERT_TRUE(owner->DeclareQueue(spec).ok());
  auto r = client_->Receive("mine", 1, milliseconds(0));
  EXPECT_EQ(r.status().code(), StatusCode::kResourceLocked);
  owner->Close();
  auto deadline = Clock::now() + std::chrono::seconds(5);
  Status s;
  do {
    QueueSpec passive;
    passive.name = "mine";
    passive.passive = true;
    s = client_->DeclareQueue(passive).status();
    // Until the broker has processed the owner's disconnect the queue is still there, locked.
  } while (s.code() != StatusCode::kQueueNotFound && Clock::now() < deadline);
  EXPECT_EQ(s.code(), StatusCode::kQueueNotFound);
}

TEST_F(ConsumeTest, ClientMayBeClosedAndDestroyedFromItsOwnCallback) {
  PublishN(50);
  std::unique_ptr<Client> consumer = server_.Connect();
  ASSERT_NE(consumer, nullptr);
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  bool destroyed = false;
  auto tag = consumer->Subscribe("work", 0, [&](Delivery) {
    std::lock_guard lock(mu);
    ++calls;
    if (!destroyed) {
      consumer.reset();  // Close + destroy from the client's own I/O thread
      destroyed = true;
      cv.notify_all();
    }
  });
  ASSERT_TRUE(tag.ok());
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return destroyed; }));
  }
  std::this_thread::sleep_for(milliseconds(100));
  std::lock_guard lock(mu);
  EXPECT_EQ(calls, 1);  // nothing after the close
  // Its unacked deliveries went back to the queue.
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Info().ready != 50 && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(Info().ready, 50u);
}

TEST_F(ConsumeTest, CancelStopsDeliveries) {
  Inbox inbox;
  auto consumer = server_.Connect();
  auto tag = consumer->Subscribe("work", 0, inbox.Handler());
  ASSERT_TRUE(tag.ok());
  PublishN(1);
  ASSERT_TRUE(inbox.WaitFor(1));
  ASSERT_TRUE(consumer->Cancel(*tag).ok());
  EXPECT_EQ(consumer->Cancel(*tag).code(), StatusCode::kConsumerNotFound);
  PublishN(1, "after");
  ASSERT_TRUE(consumer->Ping().ok());
  EXPECT_EQ(inbox.size(), 1u);
  EXPECT_EQ(Info().ready, 1u);
}

}  // namespace
}  // namespace wharf
