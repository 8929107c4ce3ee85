// Message groups (x-message-groups; docs/lifecycle.md, "Message groups") in the broker with the
// real RocksDB store: one message of a group out at a time, in publish order; groups in
// parallel; returns, retries with backoff, poison messages, expired leases, closed consumers,
// paged backlogs and crashes never invert a group. An order checker with two competing
// consumers doing random work ends the file.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "broker/message_keys.h"
#include "unit/broker/broker_store_fixture.h"

namespace wharf::broker {
namespace {

using std::chrono::milliseconds;

class BrokerGroupsTest : public BrokerStoreTest {
 protected:
  static constexpr uint64_t kS2 = 2;

  void DeclareGrouped(const std::string& name, Headers more = {}) {
    more["x-message-groups"] = true;
    DeclareQueue(name, true, std::move(more));
  }

  // `body` in group `group` ("" = none).
  Result<PublishOutcome> PublishIn(const std::string& queue, const std::string& group,
                                   const std::string& body) {
    Message m;
    m.body = body;
    m.persistent = true;
    if (!group.empty()) m.headers[std::string(kGroupHeader)] = group;
    return broker_->Publish(kS1, "", queue, std::move(m), 0);
  }

  // Receives up to `max` on session `session` (whose peer is `peer`).
  std::vector<Delivery> TakeOn(uint64_t session, RecordingPeer* peer, const std::string& queue,
                               uint32_t max) {
    EXPECT_TRUE(broker_->Receive(session, 77, queue, max, 0).ok());
    Drain();
    Tick();  // a Receive that found nothing ends now (its deadline), rather than pile up
    std::vector<Delivery> out;
    for (auto& c : peer->completions) {
      for (auto& d : c.deliveries) out.push_back(std::move(d));
    }
    peer->completions.clear();
    return out;
  }

  void Ack(const Delivery& d) { ASSERT_TRUE(broker_->Ack(kS1, d.delivery_tag, false).ok()); }
};

TEST_F(BrokerGroupsTest, ArgumentsAndGroupIdsAreChecked) {
  QueueSpec spec;
  spec.name = "bad";
  spec.durable = true;
  spec.arguments["x-message-groups"] = std::string("yes");
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  spec.arguments["x-message-groups"] = true;
  spec.arguments["x-max-priority"] = int64_t{5};
  EXPECT_EQ(broker_->DeclareQueue(kS1, spec).status().code(), StatusCode::kInvalidArgument);
  DeclareGrouped("q");
  for (const HeaderValue& bad :
       {HeaderValue(std::string()), HeaderValue(std::string(129, 'g')), HeaderValue(1.5)}) {
    Message m;
    m.body = "x";
    m.headers[std::string(kGroupHeader)] = bad;
    auto refused = broker_->Publish(kS1, "", "q", std::move(m), 0);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("x-group-id"), std::string::npos);
  }
  EXPECT_TRUE(PublishIn("q", "42", "ok").ok());
  Message numbered;
  numbered.body = "n";
  numbered.headers[std::string(kGroupHeader)] = int64_t{42};  // the same group as "42"
  EXPECT_TRUE(broker_->Publish(kS1, "", "q", std::move(numbered), 0).ok());
  Drain();
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"ok"}));
}

TEST_F(BrokerGroupsTest, OneMessageOfAGroupIsOutAtATimeAndGroupsGoInParallel) {
  DeclareGrouped("q");
  for (const auto& [group, body] : std::vector<std::pair<std::string, std::string>>{{"a", "a1"},
                                                                                    {"a", "a2"},
                                                                                    {"b", "b1"},
                                                                                    {"", "u1"},
                                                                                    {"b", "b2"},
                                                                                    {"c", "c1"},
                                                                                    {"", "u2"}}) {
    ASSERT_TRUE(PublishIn("q", group, body).ok());
  }
  Drain();
  auto first = Take("q");
  EXPECT_EQ(Bodies(first), (std::vector<std::string>{"a1", "b1", "u1", "c1", "u2"}));
  EXPECT_EQ(Info("q").groups, 3u);
  EXPECT_EQ(Info("q").groups_held, 3u);
  EXPECT_TRUE(Take("q").empty()) << "a2 and b2 wait for a1 and b1";
  Ack(first[0]);                                                                         // a1
  ASSERT_TRUE(broker_->Nack(kS1, first[1].delivery_tag, false, /*requeue=*/true).ok());  // b1
  Drain();
  auto second = Take("q");
  ASSERT_EQ(Bodies(second), (std::vector<std::string>{"a2", "b1"}));
  EXPECT_TRUE(second[1].redelivered) << "back at the head of its group";
  for (const auto& d : second) Ack(d);
  Drain();
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"b2"}));
}

TEST_F(BrokerGroupsTest, ARetryBackoffDelaysItsGroupNotTheQueue) {
  DeclareGrouped("q");
  ASSERT_TRUE(PublishIn("q", "a", "a1").ok());
  ASSERT_TRUE(PublishIn("q", "a", "a2").ok());
  ASSERT_TRUE(PublishIn("q", "b", "b1").ok());
  Drain();
  auto first = Take("q");
  ASSERT_EQ(Bodies(first), (std::vector<std::string>{"a1", "b1"}));
  // A failure with a 1 s backoff: a1 waits at the head of group a, a2 behind it.
  ASSERT_TRUE(broker_->Nack(kS1, first[0].delivery_tag, false, true, /*delay_ms=*/1'000).ok());
  ASSERT_TRUE(PublishIn("q", "b", "b2").ok());
  Ack(first[1]);
  Drain();
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"b2"})) << "group b goes on";
  EXPECT_EQ(Info("q").groups_held, 2u) << "a backing off, b2 out";
  Tick(milliseconds(999));
  EXPECT_TRUE(Take("q").empty());
  Tick(milliseconds(2));
  auto retried = Take("q");
  ASSERT_EQ(Bodies(retried), (std::vector<std::string>{"a1"}));
  EXPECT_EQ(retried[0].receive_count, 2u);
  Ack(retried[0]);
  Drain();
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"a2"}));
}

TEST_F(BrokerGroupsTest, APoisonMessageIsDeadLetteredAndItsGroupMovesOn) {
  DeclareQueue("dlq");
  DeclareGrouped("q",
                 {{"x-max-attempts", int64_t{2}}, {"x-dead-letter-queue", std::string("dlq")}});
  ASSERT_TRUE(PublishIn("q", "a", "poison").ok());
  ASSERT_TRUE(PublishIn("q", "a", "next").ok());
  Drain();
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto got = Take("q");
    ASSERT_EQ(Bodies(got), (std::vector<std::string>{"poison"}));
    ASSERT_TRUE(broker_->Nack(kS1, got[0].delivery_tag, false, true).ok());
    Drain();
  }
  EXPECT_EQ(Bodies(Take("dlq")), (std::vector<std::string>{"poison"}));
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"next"}));
}

TEST_F(BrokerGroupsTest, AnExpiredLeaseOrAClosedConsumerGivesTheGroupItsHeadBack) {
  DeclareGrouped("q", {{"x-lease-ms", int64_t{1'000}}});
  ASSERT_TRUE(PublishIn("q", "a", "a1").ok());
  ASSERT_TRUE(PublishIn("q", "a", "a2").ok());
  Drain();
  ASSERT_EQ(Bodies(Take("q")), (std::vector<std::string>{"a1"}));
  Tick(milliseconds(1'001));
  auto again = Take("q");
  ASSERT_EQ(Bodies(again), (std::vector<std::string>{"a1"}));
  // A second consumer's connection closes with the head out: it comes back first.
  auto peer = std::make_shared<RecordingPeer>();
  EXPECT_TRUE(broker_->OpenSession(kS2, "bob", peer).ok());
  Ack(again[0]);
  Drain();
  ASSERT_EQ(Bodies(TakeOn(kS2, peer.get(), "q", 5)), (std::vector<std::string>{"a2"}));
  ASSERT_TRUE(PublishIn("q", "a", "a3").ok());
  broker_->CloseSession(kS2);
  Drain();
  auto after = Take("q", 5);
  ASSERT_EQ(Bodies(after), (std::vector<std::string>{"a2"}));
  EXPECT_TRUE(after[0].redelivered);
}

TEST_F(BrokerGroupsTest, DropHeadDropsTheOldestReadyMessageHeldGroupOrNot) {
  DeclareGrouped("q", {{"x-max-length", int64_t{2}}});
  ASSERT_TRUE(PublishIn("q", "a", "a1").ok());
  Drain();
  auto out = Take("q");
  ASSERT_EQ(Bodies(out), (std::vector<std::string>{"a1"}));
  for (const char* body : {"a2", "b1", "a3"}) ASSERT_TRUE(PublishIn("q", {body[0]}, body).ok());
  Drain();
  EXPECT_EQ(Info("q").ready, 2u) << "a2, the oldest, was dropped though its group is held";
  Ack(out[0]);
  Drain();
  EXPECT_EQ(Bodies(Take("q")), (std::vector<std::string>{"b1", "a3"}));
}

TEST_F(BrokerGroupsTest, FreeGroupsOnDiskAreReachedBehindAHeldGroupInRam) {
  BrokerOptions options;
  options.page_limits.max_messages = 16;
  options.load_batch = 8;
  Restart(options);
  DeclareGrouped("q");
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(PublishIn("q", "a", "a" + std::to_string(i)).ok());
  ASSERT_TRUE(PublishIn("q", "b", "b0").ok());
  Drain();
  ASSERT_EQ(Bodies(Take("q", 1)), (std::vector<std::string>{"a0"}));
  std::vector<std::string> got;
  for (int i = 0; i < 50 && got.empty(); ++i) got = Bodies(Take("q", 10));
  EXPECT_EQ(got, (std::vector<std::string>{"b0"}));
}

TEST_F(BrokerGroupsTest, ACrashBringsEveryGroupBackInOrderWithItsHeadFirst) {
  DeclareGrouped("q");
  for (int i = 0; i < 5; ++i) {
    for (const char* g : {"a", "b", "c"}) {
      ASSERT_TRUE(PublishIn("q", g, std::string(g) + std::to_string(i)).ok());
    }
  }
  Drain();
  auto out = Take("q");
  ASSERT_EQ(Bodies(out), (std::vector<std::string>{"a0", "b0", "c0"}));
  Ack(out[1]);  // b0 done; a0 and c0 out at the crash
  Drain();
  Restart();
  std::map<char, std::vector<std::string>> per_group;
  for (int round = 0; round < 20; ++round) {
    auto got = Take("q");
    if (got.empty()) break;
    for (const auto& d : got) {
      per_group[d.envelope->message.body[0]].push_back(d.envelope->message.body);
      Ack(d);
    }
    Drain();
  }
  EXPECT_EQ(per_group['a'], (std::vector<std::string>{"a0", "a1", "a2", "a3", "a4"}));
  EXPECT_EQ(per_group['b'], (std::vector<std::string>{"b1", "b2", "b3", "b4"}));
  EXPECT_EQ(per_group['c'], (std::vector<std::string>{"c0", "c1", "c2", "c3", "c4"}));
}

// Two consumers take, ack, return, fail with a backoff, let leases run out, drop their
// connections, and the broker crashes now and then. The checker: never two deliveries of one
// group out at once, and each group's messages settled exactly once each, in publish order.
TEST_F(BrokerGroupsTest, RandomWorkOfCompetingConsumersNeverInvertsAGroup) {
  DeclareGrouped("q", {{"x-lease-ms", int64_t{5'000}}});
  constexpr int kGroups = 7, kPerGroup = 150;
  for (int i = 0; i < kPerGroup; ++i) {
    for (int g = 0; g < kGroups; ++g) {
      ASSERT_TRUE(
          PublishIn("q", "g" + std::to_string(g), std::to_string(g) + ":" + std::to_string(i))
              .ok());
    }
  }
  Drain();
  std::mt19937 rng(7);
  struct Out {
    uint64_t session;
    uint64_t tag;
    int group;
    int index;
  };
  std::vector<Out> out;
  std::vector<int> next_index(kGroups, 0);  // the next one each group must settle
  auto peer2 = std::make_shared<RecordingPeer>();
  EXPECT_TRUE(broker_->OpenSession(kS2, "bob", peer2).ok());
  auto parse = [](const Delivery& d, int* group, int* index) {
    const std::string& body = d.envelope->message.body;
    *group = std::stoi(body.substr(0, body.find(':')));
    *index = std::stoi(body.substr(body.find(':') + 1));
  };
  int settled = 0;
  std::map<std::string, int> done;  // what happened, so the run is known to have done it
  for (int step = 0; step < 8'000 && settled < kGroups * kPerGroup; ++step) {
    const int op = std::uniform_int_distribution<int>(0, 99)(rng);
    if (op < 35) {
      const bool second = rng() % 2;
      auto got = second ? TakeOn(kS2, peer2.get(), "q", 3) : TakeOn(kS1, peer_, "q", 3);
      for (const auto& d : got) {
        int group, index;
        parse(d, &group, &index);
        for (const Out& o : out) {
          ASSERT_NE(o.group, group)
              << "two of group " << group << " out at once (step " << step << ")";
        }
        ASSERT_EQ(index, next_index[group])
            << "group " << group << " delivered " << index << " before " << next_index[group];
        out.push_back(Out{second ? kS2 : kS1, d.delivery_tag, group, index});
        ++done[d.redelivered ? "redelivered" : "delivered"];
      }
    } else if (op >= 88 && op < 93) {  // time passes: leases run out, backoffs end
      Tick(milliseconds(std::uniform_int_distribution<int>(100, 6'000)(rng)));
      // Leases that ran out put their messages back: those deliveries are no longer out.
      std::erase_if(out, [&](const Out& o) {
        if (!broker_->Ack(o.session, o.tag, false).ok()) {
          ++done["lease expired"];
          return true;
        }
        ++next_index[o.group];
        ++settled;
        return true;
      });
      Drain();
    } else if (out.empty()) {
      continue;
    } else if (op < 70) {
      size_t i = rng() % out.size();
      ASSERT_TRUE(broker_->Ack(out[i].session, out[i].tag, false).ok());
      ++next_index[out[i].group];
      ++settled;
      out.erase(out.begin() + static_cast<ptrdiff_t>(i));
      Drain();
    } else if (op < 80) {
      size_t i = rng() % out.size();
      ASSERT_TRUE(broker_->Nack(out[i].session, out[i].tag, false, true).ok());
      out.erase(out.begin() + static_cast<ptrdiff_t>(i));
      ++done["returned"];
      Drain();
    } else if (op < 88) {
      size_t i = rng() % out.size();
      ASSERT_TRUE(broker_->Nack(out[i].session, out[i].tag, false, true, /*delay_ms=*/300).ok());
      out.erase(out.begin() + static_cast<ptrdiff_t>(i));
      ++done["backoff"];
      Drain();
    } else if (op < 97) {
      broker_->CloseSession(kS2);
      done["closed with some out"] +=
          static_cast<int>(std::erase_if(out, [](const Out& o) { return o.session == kS2; }) > 0);
      peer2 = std::make_shared<RecordingPeer>();
      EXPECT_TRUE(broker_->OpenSession(kS2, "bob", peer2).ok());
      Drain();
    } else {
      Restart();
      done["crashed with some out"] += !out.empty();
      out.clear();
      peer2 = std::make_shared<RecordingPeer>();
      EXPECT_TRUE(broker_->OpenSession(kS2, "bob", peer2).ok());
    }
  }
  // Whatever is left, drained in order.
  for (const Out& o : out) ASSERT_TRUE(broker_->Nack(o.session, o.tag, false, true).ok());
  Drain();
  Tick(milliseconds(10'000));
  for (int round = 0; round < 1'000 && settled < kGroups * kPerGroup; ++round) {
    auto got = TakeOn(kS1, peer_, "q", 10);
    if (got.empty()) {
      Tick(milliseconds(500));
      continue;
    }
    for (const auto& d : got) {
      int group, index;
      parse(d, &group, &index);
      ASSERT_EQ(index, next_index[group]) << "group " << group;
      ++next_index[group];
      ++settled;
      Ack(d);
    }
    Drain();
  }
  EXPECT_EQ(settled, kGroups * kPerGroup);
  for (int g = 0; g < kGroups; ++g) EXPECT_EQ(next_index[g], kPerGroup) << "group " << g;
  for (const char* what : {"delivered", "redelivered", "returned", "backoff", "lease expired",
                           "closed with some out", "crashed with some out"}) {
    EXPECT_GT(done[what], 0) << "the run never had: " << what << " ("
                             << ::testing::PrintToString(done) << ")";
  }
}

}  // namespace
}  // namespace wharf::broker
