// The broker with the real RocksDB store: deferred confirms, recovery after a "crash" (the
// broker is dropped without any shutdown work), receive counts, paging of deep queues.
//
// The test thread is the broker thread: store completions queue up in a Mailbox and run when
// Drain() pumps it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "broker/broker.h"
#include "common/clock.h"
#include "unit/broker/broker_store_fixture.h"

namespace wharf::broker {
namespace {

TEST_F(BrokerStoreTest, PersistentPublishIsAnsweredOnlyOnceDurable) {
  DeclareQueue("q");
  auto outcome = Publish("", "q", "m", true, 5);
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome->deferred);
  EXPECT_TRUE(peer_->confirms.empty()) << "no answer before the store has written it";
  Drain();
  ASSERT_EQ(peer_->confirms.size(), 1u);
  EXPECT_EQ(peer_->confirms[0].request_id, 5u);
  EXPECT_TRUE(peer_->confirms[0].status.ok());
  EXPECT_EQ(peer_->confirms[0].result.message_id, outcome->result.message_id);
  EXPECT_EQ(peer_->confirms[0].result.routed_queues, 1u);
}

TEST_F(BrokerStoreTest, OnlyStoredPersistentMessagesWait) {
  DeclareQueue("durable");
  DeclareQueue("transient", /*durable=*/false);
  EXPECT_FALSE(Publish("", "durable", "t", /*persistent=*/false, 1)->deferred);
  EXPECT_FALSE(Publish("", "transient", "p", true, 2)->deferred);
  EXPECT_FALSE(Publish("", "nowhere", "p", true, 3)->deferred);
  EXPECT_FALSE(Publish("", "durable", "no confirm wanted", true, 0)->deferred);
  Drain();
  EXPECT_TRUE(peer_->confirms.empty());
}

TEST_F(BrokerStoreTest, FanOutIsConfirmedOnceAndStoredOnce) {
  DeclareQueue("a");
  DeclareQueue("b");
  BindingSpec binding;
  binding.exchange = "amq.fanout";
  binding.queue = "a";
  ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  binding.queue = "b";
  ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  ASSERT_TRUE(Publish("amq.fanout", "", "both", true, 9)->deferred);
  Drain();
  ASSERT_EQ(peer_->confirms.size(), 1u);
  EXPECT_EQ(peer_->confirms[0].result.routed_queues, 2u);
  // Acking it in one queue keeps it in the other, across a restart.
  auto from_a = Take("a");
  ASSERT_EQ(from_a.size(), 1u);
  ASSERT_TRUE(broker_->Ack(kS1, from_a[0].delivery_tag, false).ok());
  Drain();
  Restart();
  EXPECT_EQ(Info("a").ready, 0u);
  EXPECT_EQ(Bodies(Take("b")), (std::vector<std::string>{"both"}));
}

// A message in two queues: deleting one (its entries go in the background) while its copy is
// in flight there, then settling that delivery, must leave the other queue's body alone.
// The session answers a topology change once it is synced only when it touched durable
// topology; a binding of a transient queue (an RPC client's reply queue, say) or a transient
// exchange's deletion is answered at once, without waiting for an fsync.
TEST_F(BrokerStoreTest, OnlyDurableTopologyChangesAreNotedAsWaitingForTheDisk) {
  DeclareQueue("durable");
  DeclareQueue("transient", /*durable=*/false);
  ExchangeSpec tx;
  tx.name = "tx";
  tx.durable = false;
  ASSERT_TRUE(broker_->DeclareExchange(tx).ok());
  broker_->TakeDurableTopologyChange();
  BindingSpec binding;
  binding.exchange = "amq.direct";
  binding.queue = "transient";
  ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  EXPECT_FALSE(broker_->TakeDurableTopologyChange());
  binding.exchange = "tx";
  binding.queue = "durable";
  ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  EXPECT_FALSE(broker_->TakeDurableTopologyChange()) << "a transient exchange";
  binding.exchange = "amq.direct";
  ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  EXPECT_TRUE(broker_->TakeDurableTopologyChange());
  ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  EXPECT_TRUE(broker_->TakeDurableTopologyChange()) << "bound already, maybe not on disk yet";
  EXPECT_FALSE(broker_->TakeDurableTopologyChange()) << "taken";
  ASSERT_TRUE(broker_->Unbind(kS1, binding).ok());
  EXPECT_TRUE(broker_->TakeDurableTopologyChange());
  ASSERT_TRUE(broker_->DeleteExchange(0, "tx", false).ok());
  EXPECT_FALSE(broker_->TakeDurableTopologyChange());
}

TEST_F(BrokerStoreTest, DeletingAQueueKeepsTheBodyItSharesWithAnother) {
  DeclareQueue("a");
  DeclareQueue("b");
  for (const char* queue : {"a", "b"}) {
    BindingSpec binding;
    binding.exchange = "amq.fanout";
    binding.queue = queue;
    ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  }
  ASSERT_TRUE(Publish("amq.fanout", "", "shared").ok());
  ASSERT_TRUE(Publish("amq.fanout", "", "also shared").ok());
  Drain();
  auto from_a = Take("a", 1);
  ASSERT_EQ(from_a.size(), 1u);
  ASSERT_TRUE(broker_->DeleteQueue(kS1, "a", false, false).ok());
  Drain();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the background removal
  // Settling the deleted queue's delivery (whatever it answers) must write no removal.
  (void)broker_->Ack(kS1, from_a[0].delivery_tag, false);
  DeclareQueue("c");  // one more commit, after the removal
  Drain();
  Restart();
  EXPECT_EQ(Bodies(Take("b")), (std::vector<std::string>{"shared", "also shared"}));
}

TEST_F(BrokerStoreTest, RestartKeepsTopologyAndMessagesWithCounts) {
  DeclareQueue("orders");
  DeclareQueue("scratch", /*durable=*/false);
  ExchangeSpec ex;
  ex.name = "events";
  ex.type = ExchangeType::kTopic;
  ASSERT_TRUE(broker_->DeclareExchange(ex).ok());
  BindingSpec binding;
  binding.exchange = "events";
  binding.queue = "orders";
  binding.routing_key = "order.*";
  ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  for (const char* body : {"m1", "m2", "m3", "m4"}) {
    ASSERT_TRUE(Publish("events", "order.new", body).ok());
  }
  ASSERT_TRUE(Publish("events", "order.new", "transient", /*persistent=*/false).ok());
  Drain();
  auto taken = Take("orders", 2);  // m1 acked, m2 left in flight
  ASSERT_EQ(Bodies(taken), (std::vector<std::string>{"m1", "m2"}));
  ASSERT_TRUE(broker_->Ack(kS1, taken[0].delivery_tag, false).ok());
  Drain();

  Restart();
  QueueInfo info = Info("orders");
  EXPECT_EQ(info.ready, 3u) << "m2 (in flight at the crash), m3, m4; the transient one is gone";
  EXPECT_TRUE(broker_->ListQueues("scratch").empty()) << "transient queues do not survive";
  auto after = Take("orders");
  ASSERT_EQ(Bodies(after), (std::vector<std::string>{"m2", "m3", "m4"}));
  EXPECT_EQ(after[0].receive_count, 2u);
  EXPECT_TRUE(after[0].redelivered);
  EXPECT_EQ(after[1].receive_count, 1u);
  EXPECT_FALSE(after[1].redelivered);
  // The binding came back too.
  ASSERT_TRUE(Publish("events", "order.paid", "m5").ok());
  EXPECT_EQ(Info("orders").ready, 1u);
  // New ids never collide with stored ones.
  auto next = Publish("", "orders", "m6");
  ASSERT_TRUE(next.ok());
  EXPECT_GT(next->result.message_id, after.back().envelope->message.id);
}

TEST_F(BrokerStoreTest, ADrainedQueueDoesNotReuseSequenceNumbersBelowItsDeliveryMark) {
  DeclareQueue("q");
  for (const char* body : {"a", "b", "c"}) ASSERT_TRUE(Publish("", "q", body).ok());
  Drain();
  for (const auto& d : Take("q")) ASSERT_TRUE(broker_->Ack(kS1, d.delivery_tag, false).ok());
  Drain();
  Restart();  // empty on disk, delivery mark at 3
  ASSERT_TRUE(Publish("", "q", "fresh").ok());
  Drain();
  Restart();
  auto after = Take("q");
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].envelope->message.body, "fresh");
  EXPECT_EQ(after[0].receive_count, 1u) << "never delivered before";
  EXPECT_FALSE(after[0].redelivered);
}

TEST_F(BrokerStoreTest, DeletedQueueAndItsBindingsStayDeleted) {
  DeclareQueue("q");
  BindingSpec binding;
  binding.exchange = "amq.direct";
  binding.queue = "q";
  binding.routing_key = "k";
  ASSERT_TRUE(broker_->Bind(kS1, binding).ok());
  ASSERT_TRUE(Publish("", "q", "m").ok());
  ASSERT_TRUE(broker_->DeleteQueue(kS1, "q", false, false).ok());
  DeclareQueue("q");  // same name, new queue: must not inherit the old binding or message
  Drain();
  Restart();
  EXPECT_EQ(Info("q").ready, 0u);
  EXPECT_EQ(Publish("amq.direct", "k", "m")->result.routed_queues, 0u);
}

TEST_F(BrokerStoreTest, DeepQueuePagesToDiskAndDrainsInOrder) {
  BrokerOptions options;
  options.page_limits.max_messages = 10;
  options.load_batch = 8;
  Restart(options);
  DeclareQueue("deep");
  std::vector<std::string> expected;
  for (int i = 0; i < 100; ++i) {
    std::string body = "m" + std::to_string(i);
    // Transient messages page to disk too once the queue pages, and keep their place.
    ASSERT_TRUE(Publish("", "deep", body, /*persistent=*/i % 7 != 0).ok());
    expected.push_back(body);
  }
  Drain();
  EXPECT_EQ(Info("deep").ready, 100u);
  EXPECT_EQ(TakeAndAck("deep", 7, expected.size()), expected);
  Drain();
  Restart(options);
  EXPECT_EQ(Info("deep").ready, 0u);
}

TEST_F(BrokerStoreTest, RecoveredDeepQueueLoadsLazilyAndPurgeEmptiesTheDisk) {
  BrokerOptions options;
  options.page_limits.max_messages = 10;
  options.load_batch = 16;
  Restart(options);
  DeclareQueue("deep");
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(Publish("", "deep", "m" + std::to_string(i)).ok());
  Drain();
  Restart(options);
  EXPECT_EQ(Info("deep").ready, 60u);
  auto first = Take("deep", 3);
  EXPECT_EQ(Bodies(first), (std::vector<std::string>{"m0", "m1", "m2"}));
  auto purged = broker_->PurgeQueue(kS1, "deep");
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 57u);
  Drain();
  Restart(options);
  EXPECT_EQ(Info("deep").ready, 3u) << "only the three that were in flight come back";
  auto again = Take("deep");
  EXPECT_EQ(Bodies(again), (std::vector<std::string>{"m0", "m1", "m2"}));
  for (const auto& d : again) EXPECT_EQ(d.receive_count, 2u);
}

// A load issued while publishers keep paging reads up to the queue's end as it was then: the
// messages paged after it must stay counted (they were once forgotten until a restart when
// the load found fewer entries than its batch).
TEST_F(BrokerStoreTest, MessagesPagedWhileALoadIsInFlightAreNotForgotten) {
  BrokerOptions options;
  options.page_limits.max_messages = 10;
  options.load_batch = 64;  // more than RAM holds: a load follows every flush
  Restart(options);
  DeclareQueue("q");
  std::vector<std::string> bodies;
  for (int i = 0; i < 300; ++i) {
    bodies.push_back("m" + std::to_string(i));
    ASSERT_TRUE(Publish("", "q", bodies.back()).ok());
    broker_->Flush();  // loads start; their results are not run until Drain
  }
  Drain();
  EXPECT_EQ(Info("q").ready, 300u);
  EXPECT_EQ(TakeAndAck("q", 50, 300), bodies);
  Drain();
  Restart(options);
  EXPECT_EQ(Info("q").ready, 0u);
}

TEST_F(BrokerStoreTest, ALargePurgeIsReclaimedInTheBackgroundAndStaysPurgedAcrossACrash) {
  BrokerOptions options;
  options.page_limits.max_messages = 100;
  options.load_batch = 64;
  Restart(options);
  DeclareQueue("deep");
  for (int i = 0; i < 10'000; ++i) {
    ASSERT_TRUE(Publish("", "deep", "m" + std::to_string(i)).ok());
  }
  Drain();
  EXPECT_EQ(Bodies(Take("deep", 2)), (std::vector<std::string>{"m0", "m1"}));  // in flight
  faults_->reclaim_steps = 0;  // the disk keeps the purged entries until allowed
  auto purged = broker_->PurgeQueue(kS1, "deep");
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 9'998u);
  const uint64_t reclaiming = Info("deep").purge_reclaiming;
  EXPECT_GT(reclaiming, 9'000u) << "the paged part is removed in the background";
  EXPECT_EQ(Info("deep").ready, 0u);
  for (const char* body : {"after-1", "after-2", "after-3"}) {
    ASSERT_TRUE(Publish("", "deep", body).ok());
  }
  Drain();

  faults_->reclaim_steps = 1;
  DeclareQueue("wake");  // a commit wakes the writer
  ASSERT_TRUE(mailbox_.RunUntil([&] {
    broker_->Flush();
    return Info("deep").purge_reclaiming < reclaiming;
  }));
  EXPECT_GT(Info("deep").purge_reclaiming, 0u);

  Restart(options);  // kill -9 part-way through
  EXPECT_GT(Info("deep").purge_reclaiming, 0u) << "the rest resumes after the restart";
  EXPECT_EQ(Info("deep").ready, 5u) << "the two in flight and the three published after";
  faults_->reclaim_steps = -1;
  DeclareQueue("wake-again");
  ASSERT_TRUE(mailbox_.RunUntil([&] {
    broker_->Flush();
    return Info("deep").purge_reclaiming == 0;
  }));
  auto left = Take("deep");
  EXPECT_EQ(Bodies(left), (std::vector<std::string>{"m0", "m1", "after-1", "after-2", "after-3"}));
  ASSERT_TRUE(Publish("", "deep", "after-restart").ok());
  Drain();
  Restart(options);
  EXPECT_EQ(Info("deep").purge_reclaiming, 0u);
  EXPECT_EQ(Bodies(Take("deep")), (std::vector<std::string>{"m0", "m1", "after-1", "after-2",
                                                            "after-3", "after-restart"}));
}

// Issue 15: a kill -9 right after a purge's answer brought back the RAM part, which was
// removed 1,024 entries per commit after the answer. Now one range in the purge's own commit
// covers the ready messages in RAM and paged, the answer waits until that commit is synced,
// and what was in flight (below the range, or interleaved with returned messages removed
// entry by entry) is untouched. The crash is taken right when the answer arrives: only what
// the broker had handed to the store by then is written.
TEST_F(BrokerStoreTest, APurgeIsDurableWhenAnsweredAndKeepsWhatIsInFlight) {
  BrokerOptions options;
  options.page_limits.max_messages = 3'000;
  options.load_batch = 500;
  Restart(options);
  DeclareQueue("q");
  for (int i = 0; i < 4'000; ++i) ASSERT_TRUE(Publish("", "q", "m" + std::to_string(i)).ok());
  Drain();
  auto taken = Take("q", 6);
  ASSERT_EQ(Bodies(taken), (std::vector<std::string>{"m0", "m1", "m2", "m3", "m4", "m5"}));
  // m1, m3 and m5 come back: m1 and m3 below m4, still in flight, so no range may cover them.
  for (int i : {1, 3, 5}) ASSERT_TRUE(broker_->Nack(kS1, taken[i].delivery_tag, false, true).ok());
  Drain();

  auto purged = broker_->PurgeQueue(kS1, "q", /*request_id=*/9);
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(*purged, 3'997u) << "all but the three in flight";
  EXPECT_EQ(Info("q").ready, 0u);
  ASSERT_TRUE(Publish("", "q", "after", true, /*request_id=*/10)->deferred);
  broker_->Flush();
  EXPECT_TRUE(peer_->purges.empty()) << "answered only once the purge is on disk";
  ASSERT_TRUE(mailbox_.RunUntil([&] { return !peer_->purges.empty(); }));
  ASSERT_EQ(peer_->purges.size(), 1u);
  EXPECT_EQ(peer_->purges[0].first, 9u);
  ASSERT_TRUE(peer_->purges[0].second.ok()) << peer_->purges[0].second.status().ToString();
  EXPECT_EQ(*peer_->purges[0].second, 3'997u);

  Restart(options);  // kill -9 at the answer
  EXPECT_EQ(Info("q").ready, 4u) << "the three in flight and the one published after";
  auto left = Take("q");
  EXPECT_EQ(Bodies(left), (std::vector<std::string>{"m0", "m2", "m4", "after"}));
  for (size_t i = 0; i < 3 && i < left.size(); ++i) EXPECT_EQ(left[i].receive_count, 2u);
  Drain();
  Restart(options);
  EXPECT_EQ(Info("q").ready, 4u) << "and the purged range stays purged at the next start";
}

// Returned messages below one still in flight are removed entry by entry, a slice at a time,
// each once the one before is written; the purge is answered with the last slice, and at
// shutdown the rest goes at once.
TEST_F(BrokerStoreTest, ReturnedMessagesBelowOneInFlightGoInSlicesAndThePurgeWaitsForTheLast) {
  BrokerOptions options;
  options.page_limits.max_messages = 10'000;
  Restart(options);
  DeclareQueue("a");
  DeclareQueue("b");
  for (int i = 0; i < 3'000; ++i) {
    ASSERT_TRUE(Publish("", "a", "a" + std::to_string(i)).ok());
    ASSERT_TRUE(Publish("", "b", "b" + std::to_string(i)).ok());
  }
  Drain();
  // Every message of each queue is taken; all but the last come back.
  for (const char* name : {"a", "b"}) {
    std::vector<Delivery> taken;
    while (taken.size() < 3'000) {
      auto more = Take(name, 1'000);
      ASSERT_FALSE(more.empty());
      for (auto& d : more) taken.push_back(std::move(d));
    }
    for (size_t i = 0; i + 1 < taken.size(); ++i) {
      ASSERT_TRUE(broker_->Nack(kS1, taken[i].delivery_tag, false, true).ok());
    }
  }
  Drain();
  ASSERT_EQ(*broker_->PurgeQueue(kS1, "a", 1), 2'999u);
  broker_->Flush();  // the first slice goes
  ASSERT_TRUE(mailbox_.RunUntil([&] { return broker_->store_requests_in_flight() == 1; }));
  EXPECT_TRUE(peer_->purges.empty()) << "two slices to go";
  Drain();  // slice after slice
  ASSERT_EQ(peer_->purges.size(), 1u);
  EXPECT_TRUE(peer_->purges[0].second.ok());

  ASSERT_EQ(*broker_->PurgeQueue(kS1, "b", 2), 2'999u);
  broker_->Flush();  // the first slice of b's goes to the store
  EXPECT_GT(broker_->store_requests_in_flight(), 0u);
  broker_->BeginShutdown();
  broker_->Flush();  // and all the rest
  Restart(options);
  EXPECT_EQ(Info("a").ready, 1u) << "the one in flight";
  EXPECT_EQ(Info("b").ready, 1u) << "the stop wrote every removal";
  EXPECT_EQ(Bodies(Take("a")), (std::vector<std::string>{"a2999"}));
  EXPECT_EQ(Bodies(Take("b")), (std::vector<std::string>{"b2999"}));
}

// A queue's deletion is answered once its removal is synced, so a crash after the answer
// cannot bring the queue back; a queue that is not stored is answered at once.
TEST_F(BrokerStoreTest, DeletingAQueueIsAnsweredOnceDurable) {
  DeclareQueue("stored");
  DeclareQueue("transient", /*durable=*/false);
  ASSERT_TRUE(Publish("", "stored", "m").ok());
  ASSERT_TRUE(Publish("", "transient", "m", false).ok());
  Drain();
  ASSERT_EQ(*broker_->DeleteQueue(kS1, "transient", false, false, 3), 1u);
  ASSERT_EQ(peer_->deletions.size(), 1u) << "nothing to write";
  ASSERT_EQ(*broker_->DeleteQueue(kS1, "stored", false, false, 4), 1u);
  broker_->Flush();
  EXPECT_EQ(peer_->deletions.size(), 1u);
  ASSERT_TRUE(mailbox_.RunUntil([&] { return peer_->deletions.size() == 2; }));
  EXPECT_EQ(peer_->deletions[1].first, 4u);
  ASSERT_TRUE(peer_->deletions[1].second.ok());
  EXPECT_EQ(*peer_->deletions[1].second, 1u);
  // An error is the call's result, never answered again through the peer.
  EXPECT_EQ(broker_->PurgeQueue(kS1, "stored", 5).status().code(), StatusCode::kQueueNotFound);
  EXPECT_TRUE(peer_->purges.empty());
  Restart();
  EXPECT_TRUE(broker_->ListQueues("").empty());
}

TEST_F(BrokerStoreTest, APurgeTheStoreCouldNotWriteLeavesNothingToWaitFor) {
  BrokerOptions options;
  options.page_limits.max_messages = 100;
  options.load_batch = 64;
  Restart(options);
  DeclareQueue("deep");
  for (int i = 0; i < 1'000; ++i) ASSERT_TRUE(Publish("", "deep", "m").ok());
  Drain();
  faults_->disk_full = true;
  auto purged = broker_->PurgeQueue(kS1, "deep", /*request_id=*/6);
  ASSERT_TRUE(purged.ok());  // the broker does not know yet
  EXPECT_EQ(*purged, 1'000u);
  EXPECT_GT(Info("deep").purge_reclaiming, 0u);
  Drain();
  EXPECT_EQ(Info("deep").purge_reclaiming, 0u) << "no removal will ever report";
  ASSERT_EQ(peer_->purges.size(), 1u);
  EXPECT_EQ(peer_->purges[0].second.status().code(), StatusCode::kStoreFull)
      << "not answered OK: the purge is not on disk";
  faults_->disk_full = false;
}

// Request id 0 is "reply only on failure" (docs/protocol.md): a purge or deletion whose write
// fails is still reported, with id 0.
TEST_F(BrokerStoreTest, APurgeOrDeletionWithRequestIdZeroStillReportsAFailedWrite) {
  DeclareQueue("q");
  DeclareQueue("gone");
  ASSERT_TRUE(Publish("", "q", "m").ok());
  Drain();
  faults_->disk_full = true;
  ASSERT_TRUE(broker_->PurgeQueue(kS1, "q", /*request_id=*/0).ok());
  Drain();
  ASSERT_EQ(peer_->purges.size(), 1u);
  EXPECT_EQ(peer_->purges[0].first, 0u);
  EXPECT_EQ(peer_->purges[0].second.status().code(), StatusCode::kStoreFull);
  faults_->disk_full = false;
  for (int i = 0; i < 50 && !Publish("", "q", "probe").ok(); ++i) {
    Tick(std::chrono::milliseconds(1000));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(broker_->DeleteQueue(kS1, "gone", false, false, /*request_id=*/0).ok());
  Drain();
  ASSERT_EQ(peer_->deletions.size(), 1u);
  EXPECT_TRUE(peer_->deletions[0].second.ok()) << "a success is passed on too; the session "
                                                  "sends nothing for id 0";
}

TEST_F(BrokerStoreTest, PagedNonPersistentMessagesDoNotSurviveARestart) {
  BrokerOptions options;
  options.page_limits.max_messages = 5;
  options.load_batch = 4;
  Restart(options);
  DeclareQueue("mixed");
  std::vector<std::string> persistent;
  for (int i = 0; i < 30; ++i) {
    std::string body = "m" + std::to_string(i);
    bool keep = i % 3 != 0;
    ASSERT_TRUE(Publish("", "mixed", body, keep).ok());
    // The first five stay in RAM (and only the persistent ones among them are stored).
    if (keep) persistent.push_back(body);
  }
  Drain();
  Restart(options);
  EXPECT_EQ(TakeAndAck("mixed", 3, persistent.size()), persistent);
  Drain();
  EXPECT_EQ(Info("mixed").ready, 0u);
}

// An AMQP publisher's property bytes (Message::amqp_properties) come back byte for byte from a
// message kept in RAM, one paged to disk and loaded back, and one recovered after a restart.
TEST_F(BrokerStoreTest, AmqpPropertiesOfPagedAndRecoveredMessagesComeBackByteForByte) {
  BrokerOptions options;
  options.page_limits.max_messages = 3;
  options.load_batch = 2;
  Restart(options);
  DeclareQueue("deep");
  auto properties = [](int i) {
    std::string bytes("\x98\x00\x00", 3);
    bytes.push_back(static_cast<char>(i));
    bytes.append("\xff\xfe\0\0", 4);
    return bytes;
  };
  constexpr int kMessages = 12;
  for (int i = 0; i < kMessages; ++i) {
    Message m;
    m.body = "m" + std::to_string(i);
    m.persistent = true;
    m.amqp_properties = properties(i);
    ASSERT_TRUE(broker_->Publish(kS1, "", "deep", std::move(m), 0).ok());
  }
  Drain();
  auto take_and_check = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      auto taken = Take("deep", 1);
      ASSERT_EQ(taken.size(), 1u) << "message " << i;
      EXPECT_EQ(taken[0].envelope->message.body, "m" + std::to_string(i));
      EXPECT_EQ(taken[0].envelope->message.amqp_properties, properties(i)) << "message " << i;
      ASSERT_TRUE(broker_->Ack(kS1, taken[0].delivery_tag, false).ok());
    }
  };
  take_and_check(0, 6);  // three from RAM, then paged ones loaded back
  Drain();
  Restart(options);
  EXPECT_EQ(Info("deep").ready, 6u);
  take_and_check(6, kMessages);
}

// Regression (issue 20 review): a durable queue declared just as the disk filled stayed in
// memory with its record unwritten (the declaration was answered with the write's error); once
// the store wrote again, publishes into it were confirmed, and at the next start the queue,
// with every confirmed message in it, was gone: entries without a queue record are removed.
TEST_F(BrokerStoreTest, AQueueWhoseRecordFailedToWriteIsWrittenBeforeMessagesConfirmedIntoIt) {
  faults_->disk_full = true;
  QueueSpec spec;
  spec.name = "r";
  ASSERT_TRUE(broker_->DeclareQueue(kS1, spec).ok()) << "the failure is not known yet";
  Drain();  // the write holding its record fails
  faults_->disk_full = false;
  bool written = false;
  for (int i = 0; i < 50 && !written; ++i) {
    clock_.Advance(std::chrono::milliseconds(1000));
    broker_->OnTimer();
    Drain();
    peer_->confirms.clear();
    auto published = Publish("", "r", "confirmed", true, 7);
    Drain();
    written = published.ok() && peer_->confirms.size() == 1 && peer_->confirms[0].status.ok();
    if (!written) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(written) << "publishing did not resume";
  Restart();
  EXPECT_EQ(Bodies(Take("r")), (std::vector<std::string>{"confirmed"}));
}

TEST_F(BrokerStoreTest, FullDiskStopsConfirmsKeepsDataAndResumesByItself) {
  DeclareQueue("q");
  ASSERT_TRUE(Publish("", "q", "before", true, 1)->deferred);
  Drain();
  ASSERT_EQ(peer_->confirms.size(), 1u);
  ASSERT_TRUE(peer_->confirms[0].status.ok());

  faults_->disk_full = true;
  ASSERT_TRUE(Publish("", "q", "during", true, 2)->deferred);
  Drain();
  ASSERT_EQ(peer_->confirms.size(), 2u);
  EXPECT_EQ(peer_->confirms[1].status.code(), StatusCode::kStoreFull)
      << peer_->confirms[1].status.ToString();
  // From now on the publisher is told at once, and durable topology cannot change.
  auto refused = Publish("", "q", "refused", true, 3);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kStoreFull);
  QueueSpec spec;
  spec.name = "q2";
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kStoreFull);
  // Transient traffic and consumers carry on.
  EXPECT_TRUE(Publish("", "q", "transient", /*persistent=*/false, 4).ok());
  ASSERT_TRUE(broker_->NextDeadline().has_value()) << "a probe is scheduled";

  faults_->disk_full = false;
  // The broker probes each second; RocksDB resumes on the store's next attempt.
  bool resumed = false;
  for (int i = 0; i < 50 && !resumed; ++i) {
    clock_.Advance(std::chrono::milliseconds(1000));
    broker_->OnTimer();
    Drain();
    resumed = Publish("", "q", "probe", /*persistent=*/false, 0).ok() &&
              broker_->DeclareQueue(kS1, spec).ok();
    if (!resumed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(resumed) << "publishing did not resume after space returned";
  ASSERT_TRUE(Publish("", "q", "after", true, 5)->deferred);
  Drain();
  ASSERT_EQ(peer_->confirms.size(), 3u);
  EXPECT_TRUE(peer_->confirms[2].status.ok()) << peer_->confirms[2].status.ToString();

  // The store is intact: every confirmed message is there after a restart.
  Restart();
  std::vector<std::string> bodies;
  for (const auto& d : Take("q")) bodies.push_back(d.envelope->message.body);
  EXPECT_NE(std::find(bodies.begin(), bodies.end(), "before"), bodies.end());
  EXPECT_NE(std::find(bodies.begin(), bodies.end(), "after"), bodies.end());
  EXPECT_EQ(std::find(bodies.begin(), bodies.end(), "transient"), bodies.end());
  EXPECT_EQ(Info("q2").ready, 0u) << "declared once the store was back";
}

// A disk below the store's reserve (store/disk_guard.h): new messages for durable queues are
// refused at once, before they reach the store, while acks, transient traffic and topology go
// on; they are taken again when space returns, with no failed write in between.
TEST_F(BrokerStoreTest, BelowTheDiskReserveNewMessagesAreRefusedAtOnceAndAcksGoOn) {
  DeclareQueue("q");
  ASSERT_TRUE(Publish("", "q", "before", true, 1)->deferred);
  Drain();
  auto wait_for = [&](bool accepting) {
    for (int i = 0; i < 300 && store_->AcceptingMessages().ok() != accepting; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return store_->AcceptingMessages().ok() == accepting;
  };
  free_disk_bytes_ = 1u << 20;
  ASSERT_TRUE(wait_for(false));
  auto refused = Publish("", "q", "refused", true, 2);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kStoreFull);
  EXPECT_NE(refused.status().message().find("disk_reserve_bytes"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(Publish("", "q", "transient", /*persistent=*/false, 3).ok());
  QueueSpec spec;
  spec.name = "q2";
  spec.durable = true;
  EXPECT_TRUE(broker_->DeclareQueue(kS1, spec).ok()) << "topology is small: it goes on";
  EXPECT_EQ(TakeAndAck("q", 10, 2), (std::vector<std::string>{"before", "transient"}));
  Drain();
  EXPECT_TRUE(store_->AcceptingMessages().code() == StatusCode::kStoreFull);

  free_disk_bytes_ = 0;  // the real disk: plenty
  ASSERT_TRUE(wait_for(true));
  ASSERT_TRUE(Publish("", "q", "after", true, 4)->deferred);
  Drain();
  ASSERT_EQ(peer_->confirms.size(), 2u);
  EXPECT_TRUE(peer_->confirms[1].status.ok()) << peer_->confirms[1].status.ToString();
  // The acked message stays acked across a restart: its removal was written.
  Restart();
  EXPECT_EQ(TakeAndAck("q", 10, 10), std::vector<std::string>{"after"});
}

}  // namespace
}  // namespace wharf::broker
