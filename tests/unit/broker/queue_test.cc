// Unit tests for broker/queue.h: ordering, requeue positions, expiry, purge and counters.
#include "broker/queue.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace wharf::broker {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

EnvelopePtr MakeEnvelope(const std::string& body, uint64_t expiration_ms = 0,
                         int64_t published_at_ms = kNow) {
  auto envelope = std::make_shared<Envelope>();
  envelope->message.body = body;
  envelope->message.properties.expiration_ms = expiration_ms;
  envelope->message.published_at_ms = published_at_ms;
  return envelope;
}

Queue MakeQueue(const std::string& name = "q") {
  QueueSpec spec;
  spec.name = name;
  return Queue(spec, 0);
}

// Pops everything, returning the bodies in order.
std::vector<std::string> Drain(Queue& queue, int64_t now = kNow) {
  std::vector<std::string> out;
  while (auto m = queue.Pop(now)) out.push_back(m->envelope->message.body);
  return out;
}

using BodyList = std::vector<std::string>;

TEST(Queue, NewQueueIsEmpty) {
  Queue q = MakeQueue();
  EXPECT_EQ(q.ready(), 0u);
  EXPECT_FALSE(q.HasReady());
  EXPECT_FALSE(q.Pop(kNow).has_value());
}

TEST(Queue, PopsInPublishOrder) {
  Queue q = MakeQueue();
  for (const char* body : {"1", "2", "3"}) q.Enqueue(MakeEnvelope(body));
  EXPECT_EQ(q.ready(), 3u);
  EXPECT_TRUE(q.HasReady());
  EXPECT_EQ(Drain(q), (BodyList{"1", "2", "3"}));
  EXPECT_EQ(q.ready(), 0u);
  EXPECT_FALSE(q.HasReady());
}

TEST(Queue, EnqueueAssignsIncreasingSequenceNumbers) {
  Queue q = MakeQueue();
  q.Enqueue(MakeEnvelope("a"));
  q.Enqueue(MakeEnvelope("b"));
  auto a = q.Pop(kNow);
  auto b = q.Pop(kNow);
  ASSERT_TRUE(a && b);
  EXPECT_LT(a->seq, b->seq);
  EXPECT_EQ(a->receive_count, 0u);
}

TEST(Queue, InterleavedEnqueueAndPopStayFifo) {
  Queue q = MakeQueue();
  q.Enqueue(MakeEnvelope("1"));
  q.Enqueue(MakeEnvelope("2"));
  EXPECT_EQ(q.Pop(kNow)->envelope->message.body, "1");
  q.Enqueue(MakeEnvelope("3"));
  EXPECT_EQ(Drain(q), (BodyList{"2", "3"}));
}

TEST(Queue, RequeueReturnsMessageToItsOriginalPositionAheadOfNewerOnes) {
  Queue q = MakeQueue();
  for (const char* body : {"1", "2", "3", "4"}) q.Enqueue(MakeEnvelope(body));
  auto one = q.Pop(kNow);
  auto two = q.Pop(kNow);
  ASSERT_TRUE(one && two);
  q.Enqueue(MakeEnvelope("5"));  // published after the first two went out
  q.Requeue(std::move(*two));
  EXPECT_EQ(q.ready(), 4u);
  EXPECT_EQ(Drain(q), (BodyList{"2", "3", "4", "5"}));
}

TEST(Queue, RequeuedMessagesKeepSequenceOrderWhateverTheReturnOrder) {
  Queue q = MakeQueue();
  for (const char* body : {"1", "2", "3", "4", "5"}) q.Enqueue(MakeEnvelope(body));
  std::vector<QueuedMessage> out;
  for (int i = 0; i < 3; ++i) out.push_back(*q.Pop(kNow));
  // Return them newest first.
  q.Requeue(std::move(out[2]));
  q.Requeue(std::move(out[0]));
  q.Requeue(std::move(out[1]));
  EXPECT_EQ(Drain(q), (BodyList{"1", "2", "3", "4", "5"}));
}

TEST(Queue, RequeueKeepsReceiveCountAndSequence) {
  Queue q = MakeQueue();
  q.Enqueue(MakeEnvelope("m"));
  auto m = q.Pop(kNow);
  ASSERT_TRUE(m);
  uint64_t seq = m->seq;
  m->receive_count = 3;
  q.Requeue(std::move(*m));
  auto again = q.Pop(kNow);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->seq, seq);
  EXPECT_EQ(again->receive_count, 3u);
  EXPECT_EQ(again->envelope->message.body, "m");
}

TEST(Queue, RequeueDoesNotCountAsPublish) {
  Queue q = MakeQueue();
  q.Enqueue(MakeEnvelope("m"));
  q.Requeue(*q.Pop(kNow));
  EXPECT_EQ(q.published_total, 1u);
}

TEST(Queue, MessageWithoutExpirationNeverExpires) {
  Queue q = MakeQueue();
  q.Enqueue(MakeEnvelope("m", /*expiration_ms=*/0, /*published_at_ms=*/0));
  EXPECT_EQ(Drain(q, kNow), (BodyList{"m"}));
  EXPECT_EQ(q.expired_total, 0u);
}

TEST(Queue, MessageIsLiveUntilItsExpirationHasPassed) {
  Queue q = MakeQueue();
  q.Enqueue(MakeEnvelope("m", /*expiration_ms=*/100, /*published_at_ms=*/kNow));
  EXPECT_EQ(Drain(q, kNow + 99), (BodyList{"m"}));
  EXPECT_EQ(q.expired_total, 0u);
}

TEST(Queue, PopSkipsAndCountsExpiredMessages) {
  Queue q = MakeQueue();
  q.Enqueue(MakeEnvelope("old", /*expiration_ms=*/100, /*published_at_ms=*/kNow - 100));
  q.Enqueue(MakeEnvelope("fresh", /*expiration_ms=*/100, /*published_at_ms=*/kNow - 99));
  q.Enqueue(MakeEnvelope("older", /*expiration_ms=*/10, /*published_at_ms=*/kNow - 1000));
  q.Enqueue(MakeEnvelope("forever"));
  EXPECT_EQ(Drain(q, kNow), (BodyList{"fresh", "forever"}));
  EXPECT_EQ(q.expired_total, 2u);
  EXPECT_EQ(q.ready(), 0u);
}

TEST(Queue, PopReturnsNulloptWhenOnlyExpiredMessagesRemain) {
  Queue q = MakeQueue();
  q.Enqueue(MakeEnvelope("a", 1, kNow - 5));
  q.Enqueue(MakeEnvelope("b", 1, kNow - 5));
  EXPECT_FALSE(q.Pop(kNow).has_value());
  EXPECT_EQ(q.expired_total, 2u);
  EXPECT_FALSE(q.HasReady());
}

TEST(Queue, RequeuedMessageCanExpire) {
  Queue q = MakeQueue();
  q.Enqueue(MakeEnvelope("m", /*expiration_ms=*/50, /*published_at_ms=*/kNow));
  q.Enqueue(MakeEnvelope("n"));
  auto m = q.Pop(kNow);
  ASSERT_TRUE(m);
  q.Requeue(std::move(*m));
  EXPECT_EQ(Drain(q, kNow + 50), (BodyList{"n"}));
  EXPECT_EQ(q.expired_total, 1u);
}

TEST(Queue, PurgeDropsReadyAndReturnedMessagesAndCountsThem) {
  Queue q = MakeQueue();
  for (const char* body : {"1", "2", "3"}) q.Enqueue(MakeEnvelope(body));
  q.Requeue(*q.Pop(kNow));
  EXPECT_EQ(q.Purge().count, 3u);
  EXPECT_EQ(q.ready(), 0u);
  EXPECT_FALSE(q.HasReady());
  EXPECT_FALSE(q.Pop(kNow).has_value());
  EXPECT_EQ(q.Purge().count, 0u);
}

TEST(Queue, PurgeLeavesOrderingIntactForLaterMessages) {
  Queue q = MakeQueue();
  q.Enqueue(MakeEnvelope("1"));
  auto out = q.Pop(kNow);  // out for delivery during the purge
  ASSERT_TRUE(out);
  q.Enqueue(MakeEnvelope("2"));
  EXPECT_EQ(q.Purge().count, 1u);
  q.Enqueue(MakeEnvelope("3"));
  q.Requeue(std::move(*out));
  EXPECT_EQ(Drain(q), (BodyList{"1", "3"}));
}

TEST(Queue, InfoReportsSpecAndCounters) {
  QueueSpec spec;
  spec.name = "orders";
  spec.durable = false;
  spec.exclusive = true;
  spec.auto_delete = true;
  Queue q(spec, 42);
  EXPECT_EQ(q.name(), "orders");
  EXPECT_EQ(q.owner_id(), 42u);
  for (int i = 0; i < 4; ++i) q.Enqueue(MakeEnvelope("m"));
  ASSERT_TRUE(q.Pop(kNow).has_value());
  q.in_flight = 1;
  q.delivered_total = 1;
  q.acked_total = 0;
  auto active = std::make_shared<Consumer>();
  auto cancelled = std::make_shared<Consumer>();
  cancelled->active = false;
  q.consumers().Add(active);
  q.consumers().Add(cancelled);

  QueueInfo info = q.Info();
  EXPECT_EQ(info.name, "orders");
  EXPECT_FALSE(info.durable);
  EXPECT_TRUE(info.exclusive);
  EXPECT_TRUE(info.auto_delete);
  EXPECT_EQ(info.ready, 3u);
  EXPECT_EQ(info.in_flight, 1u);
  EXPECT_EQ(info.consumers, 1u);  // only active ones
  EXPECT_EQ(info.published_total, 4u);
  EXPECT_EQ(info.delivered_total, 1u);
  EXPECT_EQ(info.acked_total, 0u);
}

TEST(Queue, PublishedTotalCountsEveryEnqueue) {
  Queue q = MakeQueue();
  for (int i = 0; i < 5; ++i) q.Enqueue(MakeEnvelope("m"));
  Drain(q);
  EXPECT_EQ(q.published_total, 5u);
  EXPECT_EQ(q.Info().published_total, 5u);
}

// A message's headers count towards the page limit as its body does (Envelope::whole_bytes):
// 16 KiB of headers page a queue as soon as 16 KiB of body would.
TEST(Queue, HeadersCountTowardsThePageLimitLikeTheBody) {
  QueueSpec spec;
  spec.name = "durable";
  spec.durable = true;
  PageLimits limits;
  limits.max_bytes = 64u << 10;
  auto fill = [&](auto make) {
    Queue q(spec, 0, /*store_id=*/1);
    int kept = 0;
    while (!q.ShouldPage(limits) && kept < 100) {
      q.Enqueue(make(), true, 0, false);
      ++kept;
    }
    return kept;
  };
  const int with_bodies = fill([] { return MakeEnvelope(std::string(16u << 10, 'b')); });
  const int with_headers = fill([] {
    auto e = std::make_shared<Envelope>();
    e->message.body = "b";
    e->message.headers["big"] = std::string(16u << 10, 'h');
    return e;
  });
  EXPECT_EQ(with_bodies, 4);
  EXPECT_EQ(with_headers, with_bodies) << "headers must weigh on RAM like bodies";
  // Many small headers weigh more than their bytes: each is a map node.
  const int with_many = fill([] {
    auto e = std::make_shared<Envelope>();
    for (int i = 0; i < 1000; ++i) e->message.headers["k" + std::to_string(i)] = true;
    return e;
  });
  EXPECT_LE(with_many, 1);
}

// x-max-length-bytes counts bodies only, as RabbitMQ's does; paging counts whole messages.
TEST(Queue, ReadyBytesCountBodiesAndRamMemoryWholeMessages) {
  Queue q = MakeQueue();
  auto e = std::make_shared<Envelope>();
  e->message.body = "12345";
  e->message.headers["h"] = std::string(1000, 'x');
  q.Enqueue(e);
  EXPECT_EQ(q.ready_bytes(), 5u);
  EXPECT_EQ(q.ram_memory_bytes(), e->whole_bytes());
  EXPECT_GT(q.ram_memory_bytes(), 1005u);
  ASSERT_TRUE(q.Pop(kNow).has_value());
  EXPECT_EQ(q.ready_bytes(), 0u);
  EXPECT_EQ(q.ram_memory_bytes(), 0u);
}

// --- Priority lanes (x-max-priority) ---

EnvelopePtr WithPriority(const std::string& body, uint32_t priority) {
  auto envelope = std::make_shared<Envelope>();
  envelope->message.body = body;
  envelope->message.published_at_ms = kNow;
  envelope->message.properties.priority = priority;
  return envelope;
}

Queue MakePriorityQueue(uint8_t max_priority, uint64_t store_id = 0) {
  QueueSpec spec;
  spec.name = "pq";
  spec.durable = store_id != 0;
  QueuePolicy policy;
  policy.max_priority = max_priority;
  return Queue(spec, 0, store_id, {}, policy);
}

TEST(QueuePriority, HighestPriorityFirstAndPublishOrderWithinOne) {
  Queue q = MakePriorityQueue(10);
  q.Enqueue(WithPriority("low-1", 0));
  q.Enqueue(WithPriority("mid-1", 5));
  q.Enqueue(WithPriority("high-1", 9));
  q.Enqueue(WithPriority("low-2", 0));
  q.Enqueue(WithPriority("mid-2", 5));
  q.Enqueue(WithPriority("high-2", 9));
  EXPECT_EQ(q.ready(), 6u);
  EXPECT_EQ(Drain(q), (BodyList{"high-1", "high-2", "mid-1", "mid-2", "low-1", "low-2"}));
}

TEST(QueuePriority, APriorityAboveTheMaximumCountsAsTheMaximum) {
  Queue q = MakePriorityQueue(3);
  q.Enqueue(WithPriority("three", 3));
  q.Enqueue(WithPriority("two-hundred", 200));
  q.Enqueue(WithPriority("two", 2));
  EXPECT_EQ(Drain(q), (BodyList{"three", "two-hundred", "two"}));
}

TEST(QueuePriority, WithoutMaxPriorityThePropertyIsIgnored) {
  Queue q = MakeQueue();
  q.Enqueue(WithPriority("first", 0));
  q.Enqueue(WithPriority("second", 9));
  EXPECT_EQ(Drain(q), (BodyList{"first", "second"}));
}

TEST(QueuePriority, SequenceNumbersNameTheLaneHighestFirst) {
  Queue q = MakePriorityQueue(9);
  uint64_t low = q.Enqueue(WithPriority("low", 0), false, 0, false);
  uint64_t high = q.Enqueue(WithPriority("high", 9), false, 0, false);
  EXPECT_EQ(store::SeqLane(high), 0);
  EXPECT_EQ(store::SeqLane(low), 9);
  EXPECT_LT(high, low) << "sequence order is delivery order across lanes";
  EXPECT_EQ(q.next_seq(), low + 1);
}

TEST(QueuePriority, ARequeuedMessageGoesBackToTheHeadOfItsOwnLane) {
  Queue q = MakePriorityQueue(5);
  q.Enqueue(WithPriority("low-1", 1));
  q.Enqueue(WithPriority("low-2", 1));
  auto taken = q.Pop(kNow);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->envelope->message.body, "low-1");
  q.Enqueue(WithPriority("high", 5));
  q.Requeue(std::move(*taken));
  EXPECT_EQ(Drain(q), (BodyList{"high", "low-1", "low-2"}));
}

TEST(QueuePriority, AHigherLaneOnDiskHoldsBackLowerLanesUntilLoaded) {
  Queue q = MakePriorityQueue(9, /*store_id=*/7);
  PageLimits limits{/*max_messages=*/2, /*max_bytes=*/1 << 20};
  for (const char* body : {"low-1", "low-2"}) {
    auto e = WithPriority(body, 0);
    q.Enqueue(e, true, 0, q.ShouldPage(limits, *e));
  }
  // RAM is full: the high-priority message goes to disk, in its own lane.
  auto high = WithPriority("high", 9);
  ASSERT_TRUE(q.ShouldPage(limits, *high));
  uint64_t seq = q.Enqueue(high, true, 0, /*page=*/true);
  EXPECT_EQ(q.ready(), 3u);
  EXPECT_EQ(q.paged(), 1u);
  EXPECT_FALSE(q.HasReady()) << "the next message to deliver is on disk";
  EXPECT_FALSE(q.Pop(kNow)) << "a lower lane is not served ahead of it";
  ASSERT_TRUE(q.NeedsLoad(/*batch=*/100, /*max_bytes=*/1 << 20));
  q.MarkLoading();
  auto [from, to] = q.BeginLoad();
  EXPECT_EQ(from, seq);
  EXPECT_EQ(to, seq + 1);
  EXPECT_FALSE(q.IsPaged(seq)) << "its load is in flight";
  std::vector<QueuedMessage> loaded;
  loaded.push_back(QueuedMessage{high, seq, 0, true, 0, 0, nullptr});
  EXPECT_TRUE(q.AddLoaded(std::move(loaded), 1, seq, /*reached_end=*/true));
  EXPECT_FALSE(q.loading());
  EXPECT_EQ(Drain(q), (BodyList{"high", "low-1", "low-2"}));
}

TEST(QueuePriority, NewMessagesOfALaneWithPagedOnesArePagedToo) {
  Queue q = MakePriorityQueue(9, /*store_id=*/7);
  PageLimits limits{/*max_messages=*/1, /*max_bytes=*/1 << 20};
  q.Enqueue(WithPriority("low-ram", 0), true, 0, false);
  q.Enqueue(WithPriority("low-disk", 0), true, 0, true);
  EXPECT_TRUE(q.ShouldPage(limits, q.LaneOf(*WithPriority("", 0))));
  // Another lane with nothing on disk pages only for the queue's RAM limit.
  PageLimits roomy{/*max_messages=*/100, /*max_bytes=*/1 << 20};
  EXPECT_TRUE(q.ShouldPage(roomy, q.LaneOf(*WithPriority("", 0))));
  EXPECT_FALSE(q.ShouldPage(roomy, q.LaneOf(*WithPriority("", 9))));
}

TEST(QueuePriority, PurgeGivesOneRangePerLaneFromEachLanesFloor) {
  Queue q = MakePriorityQueue(2, /*store_id=*/7);
  uint64_t high_1 = q.Enqueue(WithPriority("high-1", 2), true, 0, false);
  q.Enqueue(WithPriority("high-2", 2), true, 0, false);
  uint64_t low_1 = q.Enqueue(WithPriority("low-1", 0), true, 0, false);
  q.Enqueue(WithPriority("low-2", 0), true, 0, /*page=*/true);
  auto taken = q.Pop(kNow);  // high-1, in flight
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->seq, high_1);
  PurgeFloors floors{{store::SeqLane(high_1), high_1 + 1}};
  PurgeResult purged = q.Purge(floors);
  EXPECT_EQ(purged.count, 3u);
  ASSERT_EQ(purged.ranges.size(), 2u);
  EXPECT_EQ(purged.ranges[0].from, high_1 + 1);
  EXPECT_EQ(store::SeqLane(purged.ranges[0].to - 1), store::SeqLane(high_1));
  EXPECT_EQ(purged.ranges[0].messages, 1u);
  EXPECT_EQ(purged.ranges[1].from, low_1);
  EXPECT_EQ(purged.ranges[1].messages, 2u);
  EXPECT_EQ(purged.ranges[1].paged, 1u);
  EXPECT_EQ(purged.paged(), 1u);
  EXPECT_EQ(q.ready(), 0u);
  // New numbers start past each lane's range.
  EXPECT_GE(q.Enqueue(WithPriority("low-3", 0), true, 0, false), purged.ranges[1].to);
}

TEST(QueuePriority, DeliveryMarksAreKeptPerLane) {
  Queue q = MakePriorityQueue(1, /*store_id=*/7);
  uint64_t high = q.Enqueue(WithPriority("high", 1), true, 0, false);
  uint64_t low = q.Enqueue(WithPriority("low", 0), true, 0, false);
  q.NoteDelivered(high);
  EXPECT_TRUE(q.DeliveredBefore(high));
  EXPECT_FALSE(q.DeliveredBefore(low)) << "a mark in one lane says nothing of another";
  EXPECT_EQ(q.TakeDeliveredMarks(), (std::vector<uint64_t>{high}));
  EXPECT_TRUE(q.TakeDeliveredMarks().empty()) << "only changes";
  q.NoteDelivered(low);
  EXPECT_EQ(q.TakeDeliveredMarks(), (std::vector<uint64_t>{low}));
}

TEST(QueuePriority, RecoveredLanesLoadHighestFirst) {
  Queue q = MakePriorityQueue(9, /*store_id=*/7);
  const uint64_t low_base = store::LaneBaseSeq(9), high_base = store::LaneBaseSeq(0);
  q.Restore(9, low_base + 1, low_base + 101, 100);
  q.Restore(0, high_base + 5, high_base + 8, 3);
  EXPECT_EQ(q.ready(), 103u);
  EXPECT_TRUE(q.count_estimated());
  ASSERT_TRUE(q.NeedsLoad(100, 1 << 20));
  q.MarkLoading();
  EXPECT_EQ(q.BeginLoad(), std::make_pair(high_base + 5, high_base + 8));
  q.SetRecoveredCount(0, 2);
  q.SetRecoveredCount(9, 100);
  EXPECT_FALSE(q.count_estimated());
  EXPECT_EQ(q.ready(), 102u);
  EXPECT_GE(q.Enqueue(WithPriority("new", 9), true, 0, true), high_base + 8);
}

TEST(QueuePriority, WalkGoesLaneByLaneInDeliveryOrder) {
  Queue q = MakePriorityQueue(5);
  uint64_t low = q.Enqueue(WithPriority("low", 0), false, 0, false);
  uint64_t high = q.Enqueue(WithPriority("high", 5), false, 0, false);
  const QueuedMessage* first = q.NextReadyInRam(0);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->seq, high);
  EXPECT_EQ(q.NextReadyInLane(high + 1), nullptr) << "nothing more in the high lane";
  auto next = q.NextLaneStart(high);
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, store::LaneBaseSeq(store::SeqLane(low)));
  ASSERT_NE(q.NextReadyInLane(*next), nullptr);
  EXPECT_EQ(q.NextReadyInLane(*next)->seq, low);
  EXPECT_FALSE(q.NextLaneStart(low));
}

// --- Paged publishes into a deduplication window (Queue::PageUndecided) ---

Queue MakeStoredQueue(QueuePolicy policy = {}) {
  QueueSpec spec;
  spec.name = "q";
  return Queue(spec, 0, /*store_id=*/7, {}, policy);
}

// `count` messages on disk, "p0", "p1", ..., as the store would load them.
std::vector<QueuedMessage> LoadedRun(uint64_t first_seq, int count) {
  std::vector<QueuedMessage> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(QueuedMessage{MakeEnvelope("p" + std::to_string(i)), first_seq + i, 0, true, 0, 0,
                                nullptr});
  }
  return out;
}

TEST(QueueUndecided, APagedPublishCountsAtOnceAndLeavesTheCountWhenNotKept) {
  Queue q = MakeStoredQueue();
  auto kept = q.PageUndecided(*MakeEnvelope("kept"));
  auto dup = q.PageUndecided(*MakeEnvelope("dup!!"));
  ASSERT_TRUE(kept && dup);
  EXPECT_EQ(*dup, *kept + 1);
  EXPECT_EQ(q.ready(), 2u);
  EXPECT_EQ(q.paged(), 2u);
  EXPECT_EQ(q.ready_bytes(), 9u);
  EXPECT_EQ(q.held(), 0u) << "counted, not held";
  EXPECT_EQ(q.published_total, 0u) << "published once its commit answers";
  EXPECT_FALSE(q.SettleUndecided(*kept, 4, /*keep=*/true));
  EXPECT_TRUE(q.SettleUndecided(*dup, 5, /*keep=*/false));
  EXPECT_EQ(q.published_total, 1u);
  EXPECT_EQ(q.paged(), 1u);
  EXPECT_EQ(q.ready_bytes(), 4u);
}

// The commit that drops it is answered before a load sent after it, which then does not find
// it on disk.
TEST(QueueUndecided, ADuplicateInsideALoadInFlightLeavesTheCountBeforeTheLoadAnswers) {
  Queue q = MakeStoredQueue();
  const uint64_t first = q.Enqueue(MakeEnvelope("p0"), true, 0, /*page=*/true);
  q.Enqueue(MakeEnvelope("p1"), true, 0, /*page=*/true);
  auto dup = q.PageUndecided(*MakeEnvelope("dup"));
  q.Enqueue(MakeEnvelope("p2"), true, 0, /*page=*/true);
  ASSERT_TRUE(dup);
  ASSERT_TRUE(q.NeedsLoad(/*batch=*/2, 1 << 20));
  q.MarkLoading();
  auto [from, to] = q.BeginLoad();
  EXPECT_EQ(from, first);
  EXPECT_GT(to, *dup) << "the load covers it";
  EXPECT_TRUE(q.SettleUndecided(*dup, 3, false));
  EXPECT_EQ(q.paged(), 3u);
  // A batch of two, not the end: the count goes down by what was read.
  EXPECT_TRUE(q.AddLoaded(LoadedRun(first, 2), 2, first + 1, /*reached_end=*/false));
  EXPECT_EQ(q.paged(), 1u);
  EXPECT_EQ(q.ready(), 3u);
  q.MarkLoading();
  q.BeginLoad();
  std::vector<QueuedMessage> last;
  last.push_back(QueuedMessage{MakeEnvelope("p2"), *dup + 1, 0, true, 0, 0, nullptr});
  EXPECT_TRUE(q.AddLoaded(std::move(last), 1, *dup + 1, /*reached_end=*/true))
      << "consistent: the count expected the one message found";
  EXPECT_EQ(q.paged(), 0u);
  EXPECT_EQ(Drain(q), (BodyList{"p0", "p1", "p2"}));
}

// Published after a load was sent: past its end. Its commit may be answered before the load
// or after it; either way the count ends with what is on disk.
TEST(QueueUndecided, ADuplicatePastALoadInFlightLeavesTheCountInEitherOrder) {
  for (bool commit_first : {true, false}) {
    SCOPED_TRACE(commit_first ? "commit answered first" : "load answered first");
    Queue q = MakeStoredQueue();
    const uint64_t first = q.Enqueue(MakeEnvelope("p0"), true, 0, /*page=*/true);
    q.Enqueue(MakeEnvelope("p1"), true, 0, /*page=*/true);
    ASSERT_TRUE(q.NeedsLoad(/*batch=*/10, 1 << 20));
    q.MarkLoading();
    auto [from, to] = q.BeginLoad();
    auto dup = q.PageUndecided(*MakeEnvelope("dup"));
    auto kept = q.PageUndecided(*MakeEnvelope("new"));
    ASSERT_TRUE(dup && kept);
    EXPECT_GE(*dup, to);
    EXPECT_EQ(q.paged(), 4u);
    auto settle = [&] {
      EXPECT_TRUE(q.SettleUndecided(*dup, 3, false));
      EXPECT_FALSE(q.SettleUndecided(*kept, 3, true));
    };
    if (commit_first) settle();
    // The load read both messages before it and found nothing more up to its end.
    EXPECT_TRUE(q.AddLoaded(LoadedRun(first, 2), 2, first + 1, /*reached_end=*/true));
    if (!commit_first) settle();
    EXPECT_EQ(q.paged(), 1u) << "only the new one is left on disk";
    EXPECT_EQ(q.ready(), 3u);
    EXPECT_EQ(q.ready_bytes(), 7u);
  }
}

TEST(QueueUndecided, ADuplicateAPurgeTookIsNotTakenOutOfTheCountAgain) {
  Queue q = MakeStoredQueue();
  auto dup = q.PageUndecided(*MakeEnvelope("dup"));
  ASSERT_TRUE(dup);
  EXPECT_EQ(q.Purge({}).count, 1u);
  // Paged since the purge: counted from past the purge's range.
  q.Enqueue(MakeEnvelope("after"), true, 0, /*page=*/true);
  EXPECT_FALSE(q.SettleUndecided(*dup, 3, false));
  EXPECT_EQ(q.paged(), 1u);
  EXPECT_EQ(q.ready_bytes(), 5u);
}

TEST(QueueUndecided, LengthLimitsAndHeldMessagesAheadHoldItInstead) {
  QueuePolicy limited;
  limited.max_length = 10;
  Queue with_limit = MakeStoredQueue(limited);
  EXPECT_FALSE(with_limit.PageUndecided(*MakeEnvelope("m")))
      << "counted for a moment, a duplicate could push another message out";
  Queue q = MakeStoredQueue();
  q.EnqueueHeld(MakeEnvelope("held"), true, 0, /*page=*/false);
  EXPECT_FALSE(q.PageUndecided(*MakeEnvelope("m"))) << "it waits behind the held one";
  EXPECT_EQ(q.paged(), 0u);
}

TEST(Consumer, HasCreditHonoursPrefetchAndActive) {
  Consumer c;
  c.prefetch = 2;
  EXPECT_TRUE(c.HasCredit());
  c.unacked = 1;
  EXPECT_TRUE(c.HasCredit());
  c.unacked = 2;
  EXPECT_FALSE(c.HasCredit());
  c.prefetch = 0;  // unlimited
  c.unacked = 1000;
  EXPECT_TRUE(c.HasCredit());
  c.active = false;
  EXPECT_FALSE(c.HasCredit());
}

}  // namespace
}  // namespace wharf::broker
