// Unit tests of the broker's support for AMQP 0-9-1 (docs/lifecycle.md, "AMQP sessions"):
// channels as sessions of one owner, deliveries without a lease, auto-ack consumers, Get,
// RequeueAll, the channel-wide prefetch, exact settles and RabbitMQ's naming and declaration
// rules. Driven with a ManualClock and recording peers, as broker_test.cc; the store-backed
// ones use the real store (broker_store_fixture.h).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "broker/broker.h"
#include "common/clock.h"
#include "unit/broker/broker_store_fixture.h"
#include "unit/broker/recording_peer.h"

namespace wharf::broker {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;

class BrokerAmqpTest : public ::testing::Test {
 protected:
  // One AMQP connection (owner kConn) with two channels, another connection with one, and a
  // native session.
  static constexpr uint64_t kConn = 100;
  static constexpr uint64_t kCh1 = 1;
  static constexpr uint64_t kCh2 = 2;
  static constexpr uint64_t kOtherConn = 200;
  static constexpr uint64_t kOther = 3;
  static constexpr uint64_t kNative = 4;

  BrokerAmqpTest() : broker_(BrokerOptions{}, &clock_) {
    Open(kCh1, kConn);
    Open(kCh2, kConn);
    Open(kOther, kOtherConn);
    auto peer = std::make_shared<RecordingPeer>();
    peers_[kNative] = peer.get();
    EXPECT_TRUE(broker_.OpenSession(kNative, "native", peer).ok());
  }

  void Open(uint64_t session, uint64_t owner) {
    auto peer = std::make_shared<RecordingPeer>();
    peers_[session] = peer.get();
    EXPECT_TRUE(broker_
                    .OpenSession(session, "guest", peer, "127.0.0.1:5000",
                                 SessionOptions{.owner_id = owner,
                                                .amqp = true,
                                                .channel = static_cast<uint16_t>(session)})
                    .ok());
  }

  RecordingPeer& Peer(uint64_t session) { return *peers_.at(session); }

  // The listing's entry for connection `id` (an id of 0 when it is not listed).
  ConnectionInfo Connection(uint64_t id) {
    for (const ConnectionInfo& c : broker_.ListConnections()) {
      if (c.id == id) return c;
    }
    return ConnectionInfo{};
  }

  Result<QueueInfo> Declare(uint64_t session, const std::string& name, bool exclusive = false,
                            Headers arguments = {}, bool passive = false) {
    QueueSpec spec;
    spec.name = name;
    spec.durable = false;
    spec.exclusive = exclusive;
    spec.arguments = std::move(arguments);
    spec.passive = passive;
    return broker_.DeclareQueue(session, spec);
  }

  void Publish(const std::string& queue, const std::vector<std::string>& bodies) {
    for (const auto& body : bodies) {
      Message m;
      m.body = body;
      auto published = broker_.Publish(kCh1, "", queue, std::move(m));
      ASSERT_TRUE(published.ok()) << published.status().ToString();
      ASSERT_EQ(published->result.routed_queues, 1u);
    }
  }

  QueueInfo Info(const std::string& name) {
    for (const QueueInfo& info : broker_.ListQueues(name)) {
      if (info.name == name) return info;
    }
    ADD_FAILURE() << "no queue " << name;
    return {};
  }

  bool Exists(const std::string& name) { return !broker_.ListQueues(name).empty(); }

  Status BindTo(uint64_t session, const std::string& queue) {
    BindingSpec binding;
    binding.exchange = "amq.direct";
    binding.queue = queue;
    binding.routing_key = queue;
    return broker_.Bind(session, binding);
  }

  ManualClock clock_;
  Broker broker_;
  std::map<uint64_t, RecordingPeer*> peers_;
};

std::vector<uint64_t> TagsOf(const std::vector<Delivery>& deliveries) {
  std::vector<uint64_t> out;
  for (const auto& d : deliveries) out.push_back(d.delivery_tag);
  return out;
}

// --- 1. Channels and owners ------------------------------------------------------------------

TEST_F(BrokerAmqpTest, ChannelsOfOneConnectionShareItsExclusiveQueueAndOthersAreLockedOut) {
  ASSERT_TRUE(Declare(kCh1, "mine", /*exclusive=*/true).ok());
  Publish("mine", {"a", "b"});
  // The other channel of the same connection may use it every way.
  EXPECT_TRUE(Declare(kCh2, "mine", true, {}, /*passive=*/true).ok());
  EXPECT_TRUE(Declare(kCh2, "mine", /*exclusive=*/true).ok()) << "redeclared by its owner";
  EXPECT_TRUE(BindTo(kCh2, "mine").ok());
  auto got = broker_.Get(kCh2, "mine", /*no_ack=*/false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->delivery.has_value());
  EXPECT_TRUE(broker_.Subscribe(kCh2, "mine", "", 0, false, kNoLease).ok());
  // Another connection, AMQP or native, is locked out.
  for (uint64_t stranger : {kOther, kNative}) {
    EXPECT_EQ(Declare(stranger, "mine", true, {}, true).status().code(),
              StatusCode::kResourceLocked);
    EXPECT_EQ(BindTo(stranger, "mine").code(), StatusCode::kResourceLocked);
    EXPECT_EQ(broker_.Get(stranger, "mine", false).status().code(), StatusCode::kResourceLocked);
    EXPECT_EQ(broker_.Subscribe(stranger, "mine", "", 0, false).status().code(),
              StatusCode::kResourceLocked);
    EXPECT_EQ(broker_.PurgeQueue(stranger, "mine").status().code(), StatusCode::kResourceLocked);
    EXPECT_EQ(broker_.DeleteQueue(stranger, "mine", false, false).status().code(),
              StatusCode::kResourceLocked);
  }
  auto purged = broker_.PurgeQueue(kCh2, "mine");
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 1u);
  EXPECT_TRUE(broker_.DeleteQueue(kCh2, "mine", false, false).ok());
  EXPECT_FALSE(Exists("mine"));
}

TEST_F(BrokerAmqpTest, ClosingAChannelKeepsItsConnectionsExclusiveQueuesCloseOwnerDeletesThem) {
  ASSERT_TRUE(Declare(kCh1, "ex1", true).ok());
  ASSERT_TRUE(Declare(kCh2, "ex2", true).ok());
  ASSERT_TRUE(Declare(kOther, "theirs", true).ok());
  Publish("ex1", {"m"});
  ASSERT_TRUE(broker_.Subscribe(kCh1, "ex1", "c", 0, false, kNoLease).ok());
  broker_.Flush();
  ASSERT_EQ(Peer(kCh1).deliveries.size(), 1u);
  broker_.CloseSession(kCh1);  // the channel closes, the connection stays
  broker_.Flush();
  ASSERT_TRUE(Exists("ex1")) << "a channel's close keeps its connection's exclusive queue";
  EXPECT_EQ(Info("ex1").ready, 1u) << "its delivery is requeued";
  EXPECT_TRUE(Declare(kCh2, "ex1", true, {}, true).ok()) << "still the connection's";
  EXPECT_EQ(Declare(kOther, "ex1", true, {}, true).status().code(), StatusCode::kResourceLocked);
  broker_.CloseSession(kCh2);
  EXPECT_TRUE(Exists("ex1"));
  EXPECT_TRUE(Exists("ex2"));
  // Tracked by owner: the channels that declared them are gone, the connection deletes both.
  broker_.CloseOwner(kConn);
  EXPECT_FALSE(Exists("ex1"));
  EXPECT_FALSE(Exists("ex2"));
  EXPECT_TRUE(Exists("theirs")) << "another connection's stays";
  broker_.CloseOwner(kConn);  // again: nothing left, nothing happens
  // A native session is its own owner: its close deletes its exclusive queues, as ever.
  ASSERT_TRUE(Declare(kNative, "native-ex", true).ok());
  broker_.CloseSession(kNative);
  EXPECT_FALSE(Exists("native-ex"));
}

TEST_F(BrokerAmqpTest, ConnectionsListTheirChannelsTogetherUntilTheOwnerCloses) {
  EXPECT_TRUE(
      broker_
          .OpenConnection(kConn, "guest", "127.0.0.1:5000", ConnectionMeta{"amqp", "pika", "1.2.0"})
          .ok());
  EXPECT_TRUE(
      broker_.OpenConnection(300, "guest", "127.0.0.1:5001", ConnectionMeta{"amqp", "kombu", "5"})
          .ok());
  ASSERT_TRUE(Declare(kCh1, "q").ok());
  ASSERT_TRUE(broker_.Subscribe(kCh2, "q", "c2", 0, false, kNoLease).ok());
  Publish("q", {"a"});
  broker_.Flush();

  std::vector<ConnectionInfo> all = broker_.ListConnections();
  ASSERT_EQ(all.size(), 4u);  // native, kConn, kOtherConn, 300 (no channel yet)
  EXPECT_EQ(all[0].id, kNative);
  EXPECT_EQ(all[0].protocol, "wharf");
  EXPECT_EQ(all[0].channels, 1u);
  ConnectionInfo conn = Connection(kConn);
  EXPECT_EQ(conn.protocol, "amqp");
  EXPECT_EQ(conn.client, "pika");
  EXPECT_EQ(conn.client_version, "1.2.0");
  EXPECT_EQ(conn.user, "guest");
  EXPECT_EQ(conn.channels, 2u);
  EXPECT_EQ(conn.consumers, 1u);
  EXPECT_EQ(conn.unacked, 1u);
  EXPECT_EQ(Connection(300).channels, 0u);
  EXPECT_EQ(Connection(kOtherConn).protocol, "amqp");  // opened by its channel alone

  std::vector<ConsumerInfo> consumers = broker_.ListConsumers("q");
  ASSERT_EQ(consumers.size(), 1u);
  EXPECT_EQ(consumers[0].connection_id, kConn);
  EXPECT_EQ(consumers[0].channel, kCh2);

  BrokerMetrics metrics = broker_.Metrics();
  EXPECT_EQ(metrics.connections, 4u);
  EXPECT_EQ(metrics.amqp_connections, 3u);
  EXPECT_EQ(metrics.amqp_channels, 3u);

  broker_.CloseSession(kCh1);
  broker_.CloseSession(kCh2);
  EXPECT_EQ(Connection(kConn).channels, 0u);  // still open, without channels
  EXPECT_EQ(Connection(kConn).unacked, 0u);
  broker_.CloseOwner(kConn);
  broker_.CloseOwner(300);
  EXPECT_EQ(Connection(kConn).id, 0u);
  EXPECT_EQ(broker_.ListConnections().size(), 2u);
  broker_.CloseSession(kNative);
  EXPECT_EQ(Connection(kNative).id, 0u);
  EXPECT_EQ(broker_.Metrics().connections, 1u);
}

// --- 2. No lease ------------------------------------------------------------------------------

TEST_F(BrokerAmqpTest, DeliveriesWithoutALeaseNeverExpire) {
  ASSERT_TRUE(Declare(kCh1, "q").ok());
  Publish("q", {"pushed", "pulled", "got"});
  ASSERT_TRUE(broker_.Subscribe(kCh1, "q", "c", 1, false, kNoLease).ok());
  broker_.Flush();
  ASSERT_TRUE(broker_.Cancel(kCh1, "c").ok());
  ASSERT_TRUE(broker_.Receive(kCh1, 7, "q", 1, 0, kNoLease).ok());
  broker_.Flush();
  auto got = broker_.Get(kCh1, "q", false);  // kNoLease by default
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->delivery.has_value());
  ASSERT_EQ(Peer(kCh1).deliveries.size(), 1u);
  ASSERT_EQ(Peer(kCh1).completions.size(), 1u);
  ASSERT_EQ(Peer(kCh1).completions[0].deliveries.size(), 1u);
  EXPECT_EQ(Peer(kCh1).deliveries[0].lease_ms, 0u);
  EXPECT_EQ(Peer(kCh1).completions[0].deliveries[0].lease_ms, 0u);
  EXPECT_EQ(got->delivery->lease_ms, 0u);
  EXPECT_EQ(broker_.lease_entries(), 0u) << "in no lease timer";
  // Far past any lease (the longest is 24 h).
  clock_.Advance(hours(48));
  broker_.OnTimer();
  broker_.Flush();
  EXPECT_EQ(Info("q").in_flight, 3u) << "nothing was taken back";
  EXPECT_EQ(Info("q").ready, 0u);
  EXPECT_EQ(Peer(kCh1).deliveries.size(), 1u);
  EXPECT_EQ(broker_.ExtendLease(kCh1, 1, 1000).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(broker_.Ack(kCh1, 0, /*multiple=*/true).ok());
  EXPECT_EQ(Info("q").in_flight, 0u);
  EXPECT_EQ(Info("q").acked_total, 3u);
}

TEST_F(BrokerAmqpTest, TheAckTimeoutTellsTheSessionWhenItsOldestDeliveryIsTooOld) {
  constexpr uint64_t kTimed = 10, kTimedConn = 300;
  auto peer = std::make_shared<RecordingPeer>();
  EXPECT_TRUE(
      broker_
          .OpenSession(kTimed, "guest", peer, "127.0.0.1:5002",
                       SessionOptions{.owner_id = kTimedConn, .amqp = true, .ack_timeout_ms = 1000})
          .ok());
  ASSERT_TRUE(Declare(kTimed, "q").ok());
  Publish("q", {"a", "b", "c"});
  ASSERT_TRUE(broker_.Subscribe(kTimed, "q", "c1", /*prefetch=*/1, false, kNoLease).ok());
  broker_.Flush();  // "a" at 0 ms
  ASSERT_EQ(peer->deliveries.size(), 1u);
  ASSERT_TRUE(broker_.NextDeadline().has_value());
  clock_.Advance(milliseconds(600));
  ASSERT_TRUE(broker_.Ack(kTimed, 1, false).ok());
  broker_.Flush();  // "b" at 600 ms
  ASSERT_EQ(peer->deliveries.size(), 2u);
  clock_.Advance(milliseconds(400));  // 1000 ms: a's deadline, but a is settled; b has 600 left
  broker_.OnTimer();
  EXPECT_TRUE(peer->ack_timeouts.empty());
  clock_.Advance(milliseconds(599));
  broker_.OnTimer();
  EXPECT_TRUE(peer->ack_timeouts.empty());
  clock_.Advance(milliseconds(1));  // 1600 ms: b has been out for 1000 ms
  ASSERT_TRUE(broker_.NextDeadline() == clock_.Now());
  broker_.OnTimer();
  ASSERT_EQ(peer->ack_timeouts.size(), 1u);
  EXPECT_EQ(peer->ack_timeouts[0].delivery_tag, 2u);
  EXPECT_EQ(peer->ack_timeouts[0].consumer_tag, "c1");
  EXPECT_EQ(peer->ack_timeouts[0].timeout_ms, 1000u);
  // Told once; the peer closes the session, which requeues "b".
  clock_.Advance(hours(1));
  broker_.OnTimer();
  EXPECT_EQ(peer->ack_timeouts.size(), 1u);
  broker_.CloseSession(kTimed);
  EXPECT_EQ(Info("q").ready, 2u);
  EXPECT_EQ(broker_.ack_deadline_entries(), 0u);
  // A session closed before its deadline leaves no entry behind.
  auto other = std::make_shared<RecordingPeer>();
  EXPECT_TRUE(
      broker_
          .OpenSession(11, "guest", other, "127.0.0.1:5003",
                       SessionOptions{.owner_id = kTimedConn, .amqp = true, .ack_timeout_ms = 1000})
          .ok());
  auto got = broker_.Get(11, "q", false);
  ASSERT_TRUE(got.ok() && got->delivery);
  EXPECT_EQ(broker_.ack_deadline_entries(), 1u);
  broker_.CloseSession(11);
  EXPECT_EQ(broker_.ack_deadline_entries(), 0u);
  // Sessions without a timeout (every other one here) are never told.
  ASSERT_TRUE(broker_.Subscribe(kCh1, "q", "c2", 1, false, kNoLease).ok());
  broker_.Flush();
  clock_.Advance(hours(48));
  broker_.OnTimer();
  EXPECT_TRUE(Peer(kCh1).ack_timeouts.empty());
}

TEST_F(BrokerAmqpTest, AQueueDeclaredWithALeaseGivesItToAmqpDeliveries) {
  ASSERT_TRUE(Declare(kCh1, "leased", false, {{"x-lease-ms", int64_t{1000}}}).ok());
  Publish("leased", {"task"});
  auto got = broker_.Get(kCh1, "leased", false);  // kNoLease asked, the queue's lease given
  ASSERT_TRUE(got.ok() && got->delivery);
  EXPECT_EQ(got->delivery->lease_ms, 1000u);
  EXPECT_EQ(broker_.lease_entries(), 1u);
  clock_.Advance(milliseconds(1000));
  broker_.OnTimer();
  broker_.Flush();
  EXPECT_EQ(Info("leased").ready, 1u) << "taken back when the lease ran out";
  EXPECT_EQ(broker_.Ack(kCh1, got->delivery->delivery_tag, false, /*exact=*/true).code(),
            StatusCode::kLeaseExpired);
}

TEST_F(BrokerAmqpTest, ANativeSessionCannotAskForNoLease) {
  // From a native client the value is an out-of-range lease, as it always was.
  ASSERT_TRUE(Declare(kNative, "q").ok());
  EXPECT_EQ(broker_.Subscribe(kNative, "q", "", 0, false, kNoLease).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_.Receive(kNative, 1, "q", 1, 0, kNoLease).code(), StatusCode::kInvalidArgument);
}

// --- 3. Auto-ack consumers --------------------------------------------------------------------

TEST_F(BrokerAmqpTest, AutoAckConsumerGetsEverythingSettledAtOnce) {
  ASSERT_TRUE(Declare(kCh1, "q").ok());
  Publish("q", {"a", "b", "c", "d"});
  // A prefetch of 1 does not hold an auto-ack consumer back, nor does the channel's.
  ASSERT_TRUE(broker_.SetSessionPrefetch(kCh1, 1).ok());
  ASSERT_TRUE(broker_
                  .Subscribe(kCh1, "q", "c", /*prefetch=*/1, false, kNoLease,
                             /*auto_ack=*/true)
                  .ok());
  broker_.Flush();
  const auto& got = Peer(kCh1).deliveries;
  EXPECT_EQ(Bodies(got), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(TagsOf(got), (std::vector<uint64_t>{1, 2, 3, 4}));
  for (const auto& d : got) EXPECT_EQ(d.consumer_tag, "c");
  QueueInfo info = Info("q");
  EXPECT_EQ(info.ready, 0u);
  EXPECT_EQ(info.in_flight, 0u);
  EXPECT_EQ(info.delivered_total, 4u);
  EXPECT_EQ(info.acked_total, 4u);
  EXPECT_EQ(Connection(kConn).unacked, 0u);
  EXPECT_EQ(broker_.Ack(kCh1, 1, false).code(), StatusCode::kUnknownDeliveryTag);
  // A pull delivery after them takes the next tag.
  Publish("q", {"e"});
  ASSERT_TRUE(broker_.Cancel(kCh1, "c").ok());
  auto next = broker_.Get(kCh1, "q", false);
  ASSERT_TRUE(next.ok() && next->delivery);
  EXPECT_EQ(next->delivery->delivery_tag, 5u);
}

TEST_F(BrokerAmqpTest, AutoAckConsumerIsBoundOnlyByItsConnectionsOutput) {
  ASSERT_TRUE(Declare(kCh1, "q").ok());
  Publish("q", {"a", "b"});
  Peer(kCh1).writable = false;
  ASSERT_TRUE(broker_.Subscribe(kCh1, "q", "c", 0, false, kNoLease, true).ok());
  broker_.Flush();
  EXPECT_TRUE(Peer(kCh1).deliveries.empty());
  EXPECT_EQ(Info("q").ready, 2u);
  Peer(kCh1).writable = true;
  broker_.ResumeSession(kCh1);
  broker_.Flush();
  EXPECT_EQ(Peer(kCh1).deliveries.size(), 2u);
}

// --- 4. Get -----------------------------------------------------------------------------------

TEST_F(BrokerAmqpTest, GetTakesTheHeadAndCountsWhatIsLeft) {
  ASSERT_TRUE(Declare(kCh1, "q").ok());
  auto empty = broker_.Get(kCh1, "q", false);
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->delivery.has_value());
  EXPECT_EQ(empty->message_count, 0u);
  Publish("q", {"a", "b", "c"});
  auto first = broker_.Get(kCh1, "q", /*no_ack=*/false);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->delivery.has_value());
  EXPECT_EQ(first->delivery->envelope->message.body, "a");
  EXPECT_EQ(first->delivery->delivery_tag, 1u);
  EXPECT_EQ(first->delivery->consumer_tag, "");
  EXPECT_EQ(first->delivery->receive_count, 1u);
  EXPECT_EQ(first->message_count, 2u);
  auto second = broker_.Get(kCh1, "q", /*no_ack=*/true);
  ASSERT_TRUE(second.ok() && second->delivery);
  EXPECT_EQ(second->delivery->envelope->message.body, "b");
  EXPECT_EQ(second->delivery->delivery_tag, 2u);
  EXPECT_EQ(second->message_count, 1u);
  QueueInfo info = Info("q");
  EXPECT_EQ(info.in_flight, 1u) << "only the first is unacked";
  EXPECT_EQ(info.delivered_total, 2u);
  EXPECT_EQ(info.acked_total, 1u);
  EXPECT_EQ(broker_.Ack(kCh1, 2, false).code(), StatusCode::kUnknownDeliveryTag);
  // The unacked one is requeued when its channel closes, and comes back redelivered.
  broker_.CloseSession(kCh1);
  auto again = broker_.Get(kCh2, "q", true);
  ASSERT_TRUE(again.ok() && again->delivery);
  EXPECT_EQ(again->delivery->envelope->message.body, "a");
  EXPECT_TRUE(again->delivery->redelivered);
  EXPECT_EQ(again->message_count, 1u);
}

TEST_F(BrokerAmqpTest, GetDoesNotWaitBehindWaitingReceives) {
  ASSERT_TRUE(Declare(kCh1, "q").ok());
  ASSERT_TRUE(broker_.Receive(kNative, 9, "q", 1, 10'000).ok());
  broker_.Flush();
  Publish("q", {"a"});
  auto got = broker_.Get(kCh1, "q", true);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->delivery.has_value()) << "taken now, before the next dispatch";
  broker_.Flush();
  EXPECT_TRUE(Peer(kNative).completions.empty());
}

TEST_F(BrokerAmqpTest, GetRespectsExclusivity) {
  EXPECT_EQ(broker_.Get(kCh1, "missing", false).status().code(), StatusCode::kQueueNotFound);
  ASSERT_TRUE(Declare(kCh1, "mine", true).ok());
  Publish("mine", {"m"});
  EXPECT_EQ(broker_.Get(kOther, "mine", false).status().code(), StatusCode::kResourceLocked);
  // An exclusive consumer does not keep a Get away (RabbitMQ's basic.get fetches anyway).
  ASSERT_TRUE(Declare(kCh1, "solo").ok());
  Publish("solo", {"m"});
  ASSERT_TRUE(broker_.Subscribe(kOther, "solo", "only", 0, /*exclusive=*/true, kNoLease).ok());
  auto got = broker_.Get(kCh1, "solo", false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->delivery.has_value());
  EXPECT_EQ(got->delivery->envelope->message.body, "m");
}

// A Get on a queue whose ready head is on disk only (its RAM taken by Gets faster than loads
// come back) answers empty, with the count, and starts the load: the next Get finds them.
TEST_F(BrokerStoreTest, GetOnAPagedOutHeadLoadsItAndAnswersEmptyMeanwhile) {
  BrokerOptions options;
  options.page_limits.max_messages = 10;
  options.load_batch = 8;
  Restart(options);
  DeclareQueue("deep");
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(Publish("", "deep", "m" + std::to_string(i)).ok());
  Drain();
  Restart(options);
  // No flush between the Gets: the load they ask for is issued only at the next one.
  std::vector<std::string> taken;
  std::optional<GetResult> empty;
  while (taken.size() < 30) {
    auto got = broker_->Get(kS1, "deep", /*no_ack=*/true);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    if (!got->delivery) {
      empty = *got;
      break;
    }
    taken.push_back(got->delivery->envelope->message.body);
  }
  ASSERT_TRUE(empty.has_value()) << "RAM holds a load batch, not all 30";
  ASSERT_FALSE(taken.empty());
  EXPECT_EQ(empty->message_count, 30u - taken.size()) << "the paged ones counted";
  Drain();  // the load it started
  auto next = broker_->Get(kS1, "deep", /*no_ack=*/true);
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(next->delivery.has_value());
  EXPECT_EQ(next->delivery->envelope->message.body, "m" + std::to_string(taken.size()));
  EXPECT_EQ(next->message_count, 29u - taken.size());
}

// Auto-ack and no-ack deliveries remove the message's entry from the store, as an ack.
TEST_F(BrokerStoreTest, AutoAckAndNoAckGetRemoveTheStoredMessages) {
  DeclareQueue("q");
  for (const char* body : {"a", "b", "c"}) ASSERT_TRUE(Publish("", "q", body).ok());
  Drain();
  auto got = broker_->Get(kS1, "q", /*no_ack=*/true);
  ASSERT_TRUE(got.ok() && got->delivery);
  ASSERT_TRUE(broker_->Subscribe(kS1, "q", "c", 0, false, 0, /*auto_ack=*/true).ok());
  Drain();
  EXPECT_EQ(Bodies(peer_->deliveries), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(Info("q").in_flight, 0u);
  Restart();
  EXPECT_EQ(Info("q").ready, 0u) << "nothing comes back: their entries are gone";
  EXPECT_TRUE(Take("q").empty());
}

// --- 5. RequeueAll ----------------------------------------------------------------------------

TEST_F(BrokerAmqpTest, RequeueAllPutsEveryUnackedBackInOrderWithoutAFailure) {
  ASSERT_TRUE(Declare(kCh1, "q").ok());
  ASSERT_TRUE(Declare(kCh1, "p").ok());
  Publish("q", {"a", "b", "c", "d"});
  Publish("p", {"x"});
  ASSERT_TRUE(broker_.Subscribe(kCh1, "q", "c", /*prefetch=*/3, false, kNoLease).ok());
  broker_.Flush();
  auto pulled = broker_.Get(kCh1, "p", false);
  ASSERT_TRUE(pulled.ok() && pulled->delivery);
  ASSERT_EQ(Peer(kCh1).deliveries.size(), 3u);
  ASSERT_TRUE(broker_.Ack(kCh1, 2, false).ok());  // "b" is done
  Peer(kCh1).deliveries.clear();
  ASSERT_TRUE(broker_.RequeueAll(kCh1).ok());
  EXPECT_EQ(Info("p").ready, 1u);
  EXPECT_EQ(Info("p").in_flight, 0u);
  broker_.Flush();
  const auto& again = Peer(kCh1).deliveries;
  EXPECT_EQ(Bodies(again), (std::vector<std::string>{"a", "c", "d"})) << "original order";
  EXPECT_EQ(TagsOf(again), (std::vector<uint64_t>{5, 6, 7}));
  EXPECT_TRUE(again[0].redelivered);
  EXPECT_EQ(again[0].receive_count, 2u);
  EXPECT_EQ(again[0].failures, nullptr) << "not a failure";
  EXPECT_FALSE(again[2].redelivered);
  EXPECT_TRUE(broker_.RequeueAll(kCh2).ok()) << "nothing unacked: nothing to do";
}

// --- 6. Channel-wide prefetch -----------------------------------------------------------------

TEST_F(BrokerAmqpTest, ChannelPrefetchLimitsTheChannelsConsumersTogether) {
  ASSERT_TRUE(Declare(kCh1, "qa").ok());
  ASSERT_TRUE(Declare(kCh1, "qb").ok());
  ASSERT_TRUE(Declare(kCh1, "qc").ok());
  Publish("qb", {"b1", "b2", "b3", "b4", "b5"});  // qb is dispatched first
  Publish("qa", {"a1", "a2", "a3", "a4", "a5"});
  Publish("qc", {"c1", "c2"});
  ASSERT_TRUE(broker_.SetSessionPrefetch(kCh1, 3).ok());
  // Its own prefetch still applies too.
  ASSERT_TRUE(broker_.Subscribe(kCh1, "qb", "cb", /*prefetch=*/1, false, kNoLease).ok());
  ASSERT_TRUE(broker_.Subscribe(kCh1, "qa", "ca", 0, false, kNoLease).ok());
  broker_.Flush();
  auto& got = Peer(kCh1).deliveries;
  ASSERT_EQ(got.size(), 3u) << "three together";
  EXPECT_EQ(Info("qb").in_flight, 1u);
  EXPECT_EQ(Info("qa").in_flight, 2u);
  // Another channel is not limited by this one's.
  ASSERT_TRUE(broker_.Subscribe(kCh2, "qa", "other", 0, false, kNoLease).ok());
  broker_.Flush();
  EXPECT_EQ(Peer(kCh2).deliveries.size(), 3u);
  ASSERT_TRUE(broker_.Cancel(kCh2, "other").ok());
  ASSERT_TRUE(broker_.RequeueAll(kCh2).ok());  // back to qa
  broker_.Flush();
  EXPECT_EQ(got.size(), 3u) << "ch1 is still at its limit";
  // A Get is not held back by it, but counts: a settle that leaves the channel at its limit
  // gives the consumers nothing more.
  auto pulled = broker_.Get(kCh1, "qc", false);
  ASSERT_TRUE(pulled.ok() && pulled->delivery);
  uint64_t a_tag = 0;
  for (const auto& d : got) {
    if (d.queue == "qa") a_tag = d.delivery_tag;
  }
  ASSERT_TRUE(broker_.Ack(kCh1, a_tag, false).ok());
  broker_.Flush();
  EXPECT_EQ(got.size(), 3u) << "still 3 unacked with the Get's";
  // Settling the Get's delivery (on qc) frees room for the consumer of qa.
  ASSERT_TRUE(broker_.Ack(kCh1, pulled->delivery->delivery_tag, false).ok());
  broker_.Flush();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got.back().queue, "qa");
  // Raising the limit resumes the consumers at once; cb stays at its own prefetch.
  ASSERT_TRUE(broker_.SetSessionPrefetch(kCh1, 4).ok());
  broker_.Flush();
  EXPECT_EQ(got.size(), 5u);
  ASSERT_TRUE(broker_.SetSessionPrefetch(kCh1, 0).ok());
  broker_.Flush();
  EXPECT_EQ(Info("qa").ready, 0u) << "no limit: ca takes the rest";
  EXPECT_EQ(Info("qb").in_flight, 1u);
  EXPECT_EQ(Info("qb").ready, 4u);
}

TEST_F(BrokerAmqpTest, LoweringTheChannelPrefetchKeepsWhatIsOut) {
  ASSERT_TRUE(Declare(kCh1, "q").ok());
  Publish("q", {"1", "2", "3", "4"});
  ASSERT_TRUE(broker_.Subscribe(kCh1, "q", "c", 0, false, kNoLease).ok());
  ASSERT_TRUE(broker_.SetSessionPrefetch(kCh1, 3).ok());
  broker_.Flush();
  ASSERT_EQ(Peer(kCh1).deliveries.size(), 3u);
  ASSERT_TRUE(broker_.SetSessionPrefetch(kCh1, 1).ok());
  broker_.Flush();
  EXPECT_EQ(Info("q").in_flight, 3u);
  ASSERT_TRUE(broker_.Ack(kCh1, 1, false).ok());
  broker_.Flush();
  EXPECT_EQ(Peer(kCh1).deliveries.size(), 3u) << "2 unacked, over the new limit of 1";
  ASSERT_TRUE(broker_.Ack(kCh1, 3, true).ok());
  broker_.Flush();
  EXPECT_EQ(Peer(kCh1).deliveries.size(), 4u);
  EXPECT_EQ(broker_.SetSessionPrefetch(999, 1).code(), StatusCode::kInternal);
}

// --- 7. Exact settles -------------------------------------------------------------------------

TEST_F(BrokerAmqpTest, ExactSettlesNeedTheTagItselfAndSettleNothingOtherwise) {
  ASSERT_TRUE(Declare(kCh1, "q").ok());
  Publish("q", {"1", "2", "3", "4", "5"});
  ASSERT_TRUE(broker_.Subscribe(kCh1, "q", "c", 0, false, kNoLease).ok());
  broker_.Flush();
  ASSERT_EQ(Peer(kCh1).deliveries.size(), 5u);
  ASSERT_TRUE(broker_.Ack(kCh1, 2, false, /*exact=*/true).ok());
  // Tag 2 is settled: with `exact` a multiple up to it fails and settles nothing (without
  // `exact` it would settle 1).
  Status s = broker_.Ack(kCh1, 2, /*multiple=*/true, /*exact=*/true);
  EXPECT_EQ(s.code(), StatusCode::kUnknownDeliveryTag);
  EXPECT_EQ(s.message(), "delivery tag 2 is unknown or already settled on this connection");
  EXPECT_EQ(broker_.Ack(kCh1, 9, true, true).code(), StatusCode::kUnknownDeliveryTag);
  EXPECT_EQ(broker_.Ack(kCh1, 0, false, true).code(), StatusCode::kUnknownDeliveryTag);
  Broker::NackOptions nack;
  nack.exact = true;
  EXPECT_EQ(broker_.Nack(kCh1, 2, true, nack).code(), StatusCode::kUnknownDeliveryTag);
  EXPECT_EQ(Info("q").in_flight, 4u) << "nothing was settled";
  // The tag itself outstanding: everything up to it goes.
  ASSERT_TRUE(broker_.Ack(kCh1, 3, true, true).ok());
  EXPECT_EQ(Info("q").in_flight, 2u);
  ASSERT_TRUE(broker_.Nack(kCh1, 4, false, nack).ok());
  EXPECT_EQ(Info("q").ready, 1u);
  // 0 with multiple: everything outstanding, and nothing outstanding is no error.
  ASSERT_TRUE(broker_.Ack(kCh1, 0, true, true).ok());
  EXPECT_EQ(Info("q").in_flight, 0u);
  EXPECT_TRUE(broker_.Ack(kCh1, 0, true, true).ok());
  // Without `exact`, today's rule: some outstanding tag up to it is enough.
  broker_.Flush();  // "4" again, as tag 6
  ASSERT_EQ(Peer(kCh1).deliveries.size(), 6u);
  EXPECT_TRUE(broker_.Ack(kCh1, 9, true).ok());
  EXPECT_EQ(Info("q").in_flight, 0u);
}

// --- 8. RabbitMQ's names and declarations -----------------------------------------------------

TEST_F(BrokerAmqpTest, AmqpNamesAreAnyUtf8WithoutCrOrLf) {
  for (const std::string& name : std::vector<std::string>{
           "celery@host.celery.pidbox", "test.random-aB+/c=", "ünïcødé", std::string(255, 'x')}) {
    EXPECT_TRUE(Declare(kCh1, name).ok()) << name;
    EXPECT_EQ(Declare(kNative, name + "2").status().code(), StatusCode::kInvalidArgument) << name;
  }
  for (const std::string& name :
       std::vector<std::string>{"a\nb", "a\rb", "\xff\xfe", "\xc0\xaf", std::string(256, 'x')}) {
    EXPECT_EQ(Declare(kCh1, name).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(
      broker_.Subscribe(kCh1, "celery@host.celery.pidbox", "ctag-prog/bin-1", 0, false, kNoLease)
          .ok());
  EXPECT_EQ(broker_.Subscribe(kCh1, "celery@host.celery.pidbox", "a\nb", 0, false, kNoLease)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  ExchangeSpec exchange;
  exchange.name = "events/v1";
  EXPECT_TRUE(broker_.DeclareExchange(kCh1, exchange).ok());
  EXPECT_EQ(broker_.DeclareExchange(kNative, exchange).code(), StatusCode::kInvalidArgument);
}

TEST_F(BrokerAmqpTest, PassiveAmqpDeclaresLookNamesUpAsGiven) {
  EXPECT_EQ(Declare(kCh1, "no such/queue", false, {}, true).status().code(),
            StatusCode::kQueueNotFound);
  EXPECT_EQ(Declare(kCh1, "", false, {}, true).status().code(), StatusCode::kQueueNotFound);
  EXPECT_EQ(Declare(kCh1, "a\nb", false, {}, true).status().code(), StatusCode::kQueueNotFound);
  EXPECT_EQ(Declare(kNative, "no such/queue", false, {}, true).status().code(),
            StatusCode::kInvalidArgument)
      << "native: unchanged";
  ExchangeSpec exchange;
  exchange.name = "no such\nexchange";
  exchange.passive = true;
  EXPECT_EQ(broker_.DeclareExchange(kCh1, exchange).code(), StatusCode::kExchangeNotFound);
  EXPECT_EQ(broker_.DeclareExchange(kNative, exchange).code(), StatusCode::kInvalidArgument);
}

bool Base64Url(std::string_view text) {
  for (char c : text) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_')) {
      return false;
    }
  }
  return true;
}

TEST_F(BrokerAmqpTest, GeneratedNamesAreRabbitMqsAndTheAmqPrefixIsRefusedOnlyOnCreation) {
  auto declared = Declare(kCh1, "");
  ASSERT_TRUE(declared.ok()) << declared.status().ToString();
  const std::string name = declared->name;
  ASSERT_TRUE(name.starts_with("amq.gen-")) << name;
  EXPECT_EQ(name.size(), 8u + 22u);
  EXPECT_TRUE(Base64Url(name.substr(8))) << name;
  EXPECT_NE(Declare(kCh1, "")->name, name);
  // Its own server-named queue may be redeclared, passively or not; no amq. queue is created.
  EXPECT_TRUE(Declare(kCh1, name).ok());
  EXPECT_TRUE(Declare(kCh2, name, false, {}, true).ok());
  EXPECT_EQ(Declare(kCh1, "amq.mine").status().code(), StatusCode::kReservedName);
  auto tag = broker_.Subscribe(kCh1, name, "", 0, false, kNoLease);
  ASSERT_TRUE(tag.ok());
  EXPECT_TRUE(tag->starts_with("amq.ctag-")) << *tag;
  EXPECT_EQ(tag->size(), 9u + 22u);
  EXPECT_TRUE(Base64Url(tag->substr(9))) << *tag;
  // Native sessions keep Wharf's.
  auto native = Declare(kNative, "");
  ASSERT_TRUE(native.ok());
  EXPECT_TRUE(native->name.starts_with("wharf.gen-"));
  EXPECT_EQ(Declare(kNative, name).status().code(), StatusCode::kReservedName);
  // A built-in exchange redeclared with other flags: 406 over AMQP, RESERVED_NAME natively.
  ExchangeSpec direct;
  direct.name = "amq.direct";
  direct.type = ExchangeType::kFanout;
  EXPECT_EQ(broker_.DeclareExchange(kCh1, direct).code(), StatusCode::kPreconditionFailed);
  EXPECT_EQ(broker_.DeclareExchange(kNative, direct).code(), StatusCode::kReservedName);
  direct.type = ExchangeType::kDirect;
  EXPECT_TRUE(broker_.DeclareExchange(kCh1, direct).ok());
  ExchangeSpec fresh;
  fresh.name = "amq.new";
  EXPECT_EQ(broker_.DeclareExchange(kCh1, fresh).code(), StatusCode::kReservedName);
}

TEST_F(BrokerAmqpTest, AmqpQueueArgumentsAreLenientAndComparedAsRabbitMqDoes) {
  Headers arguments{{"x-queue-mode", std::string("lazy")},
                    {"x-ha-policy", std::string("all")},
                    {"x-max-length", int64_t{5}}};
  auto declared = Declare(kCh1, "q", false, arguments);
  ASSERT_TRUE(declared.ok()) << declared.status().ToString();
  EXPECT_EQ(Info("q").arguments, arguments) << "kept as declared";
  EXPECT_EQ(Declare(kNative, "q2", false, arguments).status().code(), StatusCode::kInvalidArgument);
  // Arguments RabbitMQ does not compare (x-ha-policy, unknown ones) are not compared; those it
  // compares (x-queue-mode, x-max-length, ...) are, by value.
  EXPECT_TRUE(Declare(kCh1, "q", false,
                      {{"x-queue-mode", std::string("lazy")}, {"x-max-length", int64_t{5}}})
                  .ok());
  EXPECT_TRUE(Declare(kCh2, "q", false,
                      {{"x-queue-mode", std::string("lazy")},
                       {"x-max-length", int64_t{5}},
                       {"x-ha-policy", std::string("nodes")},
                       {"x-foo", true}})
                  .ok());
  auto no_mode = Declare(kCh1, "q", false, {{"x-max-length", int64_t{5}}});
  EXPECT_EQ(no_mode.status().message(),
            "inequivalent arg 'x-queue-mode' for queue 'q' in vhost '/': received none but "
            "current is the value 'lazy' of type 'longstr'");
  auto different = Declare(kCh1, "q", false,
                           {{"x-queue-mode", std::string("lazy")}, {"x-max-length", int64_t{6}}});
  EXPECT_EQ(different.status().code(), StatusCode::kPreconditionFailed);
  EXPECT_EQ(different.status().message(),
            "inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received '6' but "
            "current is '5'");
  EXPECT_EQ(Declare(kCh1, "q", false, {}).status().code(), StatusCode::kPreconditionFailed)
      << "a known argument missing is a difference";
  EXPECT_EQ(Declare(kCh1, "q", false, {{"x-max-length", std::string("5")}}).status().code(),
            StatusCode::kPreconditionFailed);
  // Exclusivity that differs is RESOURCE_LOCKED, as RabbitMQ's; durable or auto_delete, 406.
  EXPECT_EQ(Declare(kCh1, "q", /*exclusive=*/true, arguments).status().code(),
            StatusCode::kResourceLocked);
  QueueSpec durable;
  durable.name = "q";
  durable.durable = true;
  durable.arguments = arguments;
  EXPECT_EQ(broker_.DeclareQueue(kCh1, durable).status().code(), StatusCode::kPreconditionFailed);
  ASSERT_TRUE(Declare(kCh1, "mine", true).ok());
  EXPECT_EQ(Declare(kCh1, "mine", false).status().code(), StatusCode::kResourceLocked);
  EXPECT_EQ(Declare(kOther, "mine", true).status().code(), StatusCode::kResourceLocked);
  // Known arguments are still checked when the queue is created, in RabbitMQ's words.
  auto bad = Declare(kCh1, "bad", false, {{"x-max-length", int64_t{-1}}});
  EXPECT_EQ(bad.status().code(), StatusCode::kPreconditionFailed);
  EXPECT_EQ(bad.status().message(),
            "invalid arg 'x-max-length' for queue 'bad' in vhost '/': {value_negative,-1}");
}

TEST_F(BrokerAmqpTest, ExpirationZeroLivesOnlyIfDeliveredAtOnce) {
  // AMQP's per-message expiration "0" (PublishTiming::expire_undelivered), into a queue that
  // dead-letters what expires.
  ASSERT_TRUE(Declare(kCh1, "dead").ok());
  ASSERT_TRUE(Declare(kCh1, "zero", false,
                      {{"x-dead-letter-exchange", std::string("")},
                       {"x-dead-letter-routing-key", std::string("dead")}})
                  .ok());
  auto publish = [&](const std::string& body) {
    Message m;
    m.body = body;
    PublishTiming timing;
    timing.expire_undelivered = true;
    auto outcome = broker_.Publish(kCh1, "", "zero", std::move(m), 0, timing);
    ASSERT_TRUE(outcome.ok());
    EXPECT_EQ(outcome->result.routed_queues, 1u) << "it reached the queue (no return)";
  };
  // No consumer: gone at the dispatch that follows, dead-lettered as expired.
  publish("nobody");
  broker_.Flush();
  EXPECT_EQ(Info("zero").ready, 0u);
  uint64_t expired = 0;
  for (const QueueMetrics& q : broker_.Metrics().queues) {
    if (q.info.name == "zero") expired = q.expired_total;
  }
  EXPECT_EQ(expired, 1u);
  ASSERT_EQ(Info("dead").ready, 1u);
  // A consumer with credit takes it; one more finds no credit and expires.
  ASSERT_TRUE(broker_.Subscribe(kCh2, "zero", "c", /*prefetch=*/1, false, kNoLease).ok());
  publish("taken");
  publish("no credit");
  broker_.Flush();
  EXPECT_EQ(Bodies(Peer(kCh2).deliveries), (std::vector<std::string>{"taken"}));
  EXPECT_EQ(Info("zero").ready, 0u);
  EXPECT_EQ(Info("dead").ready, 2u);
  // Behind a message already waiting it cannot be delivered at once: it expires at publish.
  Publish("zero", {"plain, waiting"});  // no expiration: waits for the credit
  publish("behind");
  EXPECT_EQ(Info("zero").ready, 1u);
  EXPECT_EQ(Info("dead").ready, 3u);
  // Taken and returned, it is an ordinary message again: it does not expire then.
  ASSERT_TRUE(broker_.Nack(kCh2, 1, false, /*requeue=*/true).ok());
  broker_.Flush();
  EXPECT_EQ(Info("dead").ready, 3u);
}

TEST_F(BrokerAmqpTest, AmqpQueuesTakeZeroLimitsAndTtl) {
  for (const char* key : {"x-message-ttl", "x-max-length", "x-max-length-bytes"}) {
    EXPECT_TRUE(Declare(kCh1, std::string("zero") + key, false, {{key, int64_t{0}}}).ok()) << key;
    EXPECT_EQ(
        Declare(kNative, std::string("native") + key, false, {{key, int64_t{0}}}).status().code(),
        StatusCode::kInvalidArgument)
        << key;
  }
  // x-max-length 0 with reject-publish: every publish is refused.
  ASSERT_TRUE(Declare(kCh1, "full", false,
                      {{"x-max-length", int64_t{0}}, {"x-overflow", std::string("reject-publish")}})
                  .ok());
  Message m;
  m.body = "x";
  EXPECT_EQ(broker_.Publish(kCh1, "", "full", m).status().code(), StatusCode::kQueueFull);
  // x-message-ttl 0: delivered when a consumer can take it at once, else expired.
  ASSERT_TRUE(Declare(kCh1, "now", false, {{"x-message-ttl", int64_t{0}}}).ok());
  Publish("now", {"nobody"});
  broker_.Flush();
  EXPECT_EQ(Info("now").ready, 0u);
  ASSERT_TRUE(broker_.Subscribe(kCh1, "now", "c", /*prefetch=*/1, false, kNoLease).ok());
  Publish("now", {"taken", "no credit"});
  broker_.Flush();
  EXPECT_EQ(Bodies(Peer(kCh1).deliveries), (std::vector<std::string>{"taken"}));
  EXPECT_EQ(Info("now").ready, 0u);
  clock_.Advance(hours(1));
  broker_.OnTimer();
  broker_.Flush();
  EXPECT_EQ(Info("now").in_flight, 1u) << "a delivery in flight does not expire";
  ASSERT_TRUE(broker_.Nack(kCh1, 1, false, /*requeue=*/true).ok());
  broker_.Flush();
  EXPECT_EQ(Peer(kCh1).deliveries.size(), 2u) << "requeued and taken again at once";
}

TEST_F(BrokerAmqpTest, DeadLetteringThroughTheDefaultExchangeKeepsTheMessagesRoutingKey) {
  ASSERT_TRUE(Declare(kCh1, "graveyard").ok());
  ASSERT_TRUE(Declare(kCh1, "work", false, {{"x-dead-letter-exchange", std::string("")}}).ok());
  EXPECT_EQ(Declare(kNative, "work2", false, {{"x-dead-letter-exchange", std::string("")}})
                .status()
                .code(),
            StatusCode::kInvalidArgument)
      << "native: the key is required";
  BindingSpec binding;
  binding.exchange = "amq.direct";
  binding.queue = "work";
  binding.routing_key = "graveyard";
  ASSERT_TRUE(broker_.Bind(kCh1, binding).ok());
  Message m;
  m.body = "doomed";
  auto published = broker_.Publish(kCh1, "amq.direct", "graveyard", m);
  ASSERT_TRUE(published.ok());
  ASSERT_EQ(published->result.routed_queues, 1u);
  auto got = broker_.Get(kCh1, "work", false);
  ASSERT_TRUE(got.ok() && got->delivery);
  ASSERT_TRUE(broker_.Nack(kCh1, got->delivery->delivery_tag, false, /*requeue=*/false).ok());
  auto dead = broker_.Get(kCh1, "graveyard", true);
  ASSERT_TRUE(dead.ok() && dead->delivery);
  EXPECT_EQ(dead->delivery->envelope->message.body, "doomed");
  ASSERT_EQ(dead->delivery->envelope->message.deaths.size(), 1u);
  EXPECT_EQ(dead->delivery->envelope->message.deaths[0].reason, "rejected");
  // Published anew by the dead-letter exchange (here the default one) with its key.
  EXPECT_EQ(dead->delivery->envelope->exchange, "");
  EXPECT_EQ(dead->delivery->envelope->routing_key, "graveyard");
  EXPECT_EQ(dead->delivery->envelope->message.deaths[0].exchange, "amq.direct");
}

TEST_F(BrokerAmqpTest, DirectReplyToDeliversToTheReplyConsumerOnly) {
  ASSERT_TRUE(Declare(kCh1, "q").ok());
  EXPECT_EQ(broker_.SubscribeReplyTo(kCh1, "", /*no_ack=*/false).status().message(),
            "reply consumer cannot acknowledge");
  EXPECT_EQ(broker_.ReplyToAddress(kCh1).status().message(), "fast reply consumer does not exist");
  auto tag = broker_.SubscribeReplyTo(kCh1, "", /*no_ack=*/true);
  ASSERT_TRUE(tag.ok()) << tag.status().ToString();
  EXPECT_TRUE(tag->starts_with("amq.ctag-"));
  EXPECT_EQ(broker_.SubscribeReplyTo(kCh1, "", true).status().message(),
            "reply consumer already set");
  auto address = broker_.ReplyToAddress(kCh1);
  ASSERT_TRUE(address.ok());
  ASSERT_EQ(address->size(), std::string("amq.rabbitmq.reply-to.").size() + 22);
  EXPECT_TRUE(broker_.ReplyToExists("amq.rabbitmq.reply-to"));
  EXPECT_TRUE(broker_.ReplyToExists(*address));
  EXPECT_FALSE(broker_.ReplyToExists(*address + "x"));
  // Another channel's reply consumer has another address.
  ASSERT_TRUE(broker_.SubscribeReplyTo(kCh2, "mine", true).ok());
  EXPECT_NE(*broker_.ReplyToAddress(kCh2), *address);
  EXPECT_EQ(broker_.Subscribe(kCh2, "q", "mine", 0, false, kNoLease).status().code(),
            StatusCode::kConsumerTagInUse);

  // The reply goes straight to the consumer, from any session, taking its channel's next tag.
  Message reply;
  reply.body = "pong";
  auto outcome = broker_.Publish(kNative, "", *address, std::move(reply));
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->result.routed_queues, 1u);
  EXPECT_FALSE(outcome->deferred);
  broker_.Flush();
  ASSERT_EQ(Peer(kCh1).deliveries.size(), 1u);
  const Delivery& d = Peer(kCh1).deliveries[0];
  EXPECT_EQ(d.consumer_tag, *tag);
  EXPECT_EQ(d.delivery_tag, 1u);
  EXPECT_EQ(d.envelope->message.body, "pong");
  EXPECT_EQ(d.envelope->exchange, "");
  EXPECT_EQ(d.envelope->routing_key, *address);
  EXPECT_FALSE(d.redelivered);
  EXPECT_TRUE(Peer(kCh2).deliveries.empty());
  EXPECT_EQ(broker_.Ack(kCh1, 1, false).code(), StatusCode::kUnknownDeliveryTag) << "no-ack";

  // Cancelled: the address is gone, and what is published to it reaches nobody.
  ASSERT_TRUE(broker_.Cancel(kCh1, *tag).ok());
  EXPECT_FALSE(broker_.ReplyToExists(*address));
  Message late;
  late.body = "late";
  outcome = broker_.Publish(kNative, "", *address, std::move(late));
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->result.routed_queues, 0u);
  broker_.Flush();
  EXPECT_EQ(Peer(kCh1).deliveries.size(), 1u);
  // The channel's close ends its reply consumer too.
  std::string second = *broker_.ReplyToAddress(kCh2);
  broker_.CloseSession(kCh2);
  EXPECT_FALSE(broker_.ReplyToExists(second));
}

}  // namespace
}  // namespace wharf::broker
