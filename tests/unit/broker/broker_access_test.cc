// Unit tests for broker/broker_access.cc: every session operation checked against its user's
// Access (RabbitMQ's permission table), the changes of a user seen at the next operation.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "broker/broker.h"
#include "common/clock.h"
#include "support/spec_builders.h"
#include "unit/broker/recording_peer.h"

namespace wharf::broker {
namespace {

using testing::Bd;
using testing::Ex;

// An AccessSource with users set by the test.
class FakeAccessSource : public AccessSource {
 public:
  void Set(const std::string& user, std::vector<std::string> tags,
           std::vector<UserPermission> permissions) {
    auto access = Access::Make(user, tags, permissions);
    ASSERT_TRUE(access.ok());
    users_[user] = *access;
    ++generation_;
  }
  void Remove(const std::string& user) {
    users_.erase(user);
    ++generation_;
  }
  uint64_t access_generation() const override { return generation_; }
  std::shared_ptr<const Access> AccessOf(std::string_view user) const override {
    auto it = users_.find(std::string(user));
    return it == users_.end() ? Access::None(std::string(user)) : it->second;
  }

 private:
  std::map<std::string, std::shared_ptr<const Access>> users_;
  uint64_t generation_ = 1;
};

class BrokerAccessTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kAdmin = 1;
  static constexpr uint64_t kBob = 2;

  BrokerAccessTest() : broker_(BrokerOptions{}, &clock_) {
    users_.Set("admin", {"administrator"}, {UserPermission{"/", ".*", ".*", ".*"}});
    users_.Set("bob", {}, {UserPermission{"/", "^bob-", "^bob-", "^bob-"}});
    broker_.SetAccessSource(&users_);
    EXPECT_TRUE(broker_.OpenSession(kAdmin, "admin", std::make_shared<RecordingPeer>()).ok());
    EXPECT_TRUE(broker_.OpenSession(kBob, "bob", bob_).ok());
  }

  Status Declare(uint64_t session, const std::string& name, Headers arguments = {}) {
    QueueSpec spec;
    spec.name = name;
    spec.arguments = std::move(arguments);
    return broker_.DeclareQueue(session, spec).status();
  }

  static void ExpectRefused(const Status& s, const std::string& text) {
    EXPECT_EQ(s.code(), StatusCode::kAccessRefused) << s.ToString();
    EXPECT_EQ(s.message(), text);
  }

  ManualClock clock_;
  FakeAccessSource users_;
  Broker broker_;
  std::shared_ptr<RecordingPeer> bob_ = std::make_shared<RecordingPeer>();
};

TEST_F(BrokerAccessTest, DeclaringAndDeletingNeedConfigure) {
  EXPECT_TRUE(Declare(kBob, "bob-q").ok());
  ExpectRefused(Declare(kBob, "other"),
                "access to queue 'other' in vhost '/' refused for user 'bob'");
  ASSERT_TRUE(Declare(kAdmin, "other").ok());
  // A passive declare checks nothing.
  QueueSpec passive;
  passive.name = "other";
  passive.passive = true;
  EXPECT_TRUE(broker_.DeclareQueue(kBob, passive).ok());
  ExpectRefused(broker_.DeleteQueue(kBob, "other", false, false).status(),
                "access to queue 'other' in vhost '/' refused for user 'bob'");
  EXPECT_TRUE(broker_.DeleteQueue(kBob, "bob-q", false, false).ok());

  ExchangeSpec exchange = Ex("x", ExchangeType::kFanout);
  ExpectRefused(broker_.DeclareExchange(kBob, exchange),
                "access to exchange 'x' in vhost '/' refused for user 'bob'");
  exchange.name = "bob-x";
  EXPECT_TRUE(broker_.DeclareExchange(kBob, exchange).ok());
  exchange.name = "x";
  ASSERT_TRUE(broker_.DeclareExchange(kAdmin, exchange).ok());
  ExpectRefused(broker_.DeleteExchange(kBob, "x", false),
                "access to exchange 'x' in vhost '/' refused for user 'bob'");
  EXPECT_TRUE(broker_.DeleteExchange(kBob, "bob-x", false).ok());
}

TEST_F(BrokerAccessTest, ADeadLetterExchangeNeedsReadOnTheQueueAndWriteOnTheExchange) {
  users_.Set("bob", {}, {UserPermission{"/", ".*", "^bob-", "^bob-"}});
  ExpectRefused(Declare(kBob, "q", {{"x-dead-letter-exchange", std::string("bob-dlx")}}),
                "access to queue 'q' in vhost '/' refused for user 'bob'");
  ExpectRefused(Declare(kBob, "bob-q", {{"x-dead-letter-exchange", std::string("dlx")}}),
                "access to exchange 'dlx' in vhost '/' refused for user 'bob'");
  EXPECT_TRUE(Declare(kBob, "bob-q", {{"x-dead-letter-exchange", std::string("bob-dlx")}}).ok());
}

TEST_F(BrokerAccessTest, PublishingNeedsWriteOnTheExchangeTheDefaultOneAsAmqDefault) {
  ASSERT_TRUE(Declare(kAdmin, "bob-q").ok());
  Message m;
  m.body = "x";
  ExpectRefused(broker_.Publish(kBob, "", "bob-q", m).status(),
                "access to exchange 'amq.default' in vhost '/' refused for user 'bob'");
  ExpectRefused(broker_.Publish(kBob, "amq.fanout", "", m).status(),
                "access to exchange 'amq.fanout' in vhost '/' refused for user 'bob'");
  users_.Set("bob", {}, {UserPermission{"/", "", "^amq\\.default$", ".*"}});
  EXPECT_TRUE(broker_.Publish(kBob, "", "bob-q", m).ok()) << "a change is seen at once";
}

TEST_F(BrokerAccessTest, ConsumingGettingAndPurgingNeedRead) {
  ASSERT_TRUE(Declare(kAdmin, "q").ok());
  const std::string refused = "access to queue 'q' in vhost '/' refused for user 'bob'";
  ExpectRefused(broker_.Subscribe(kBob, "q", "", 10, false, 0, false, 0).status(), refused);
  ExpectRefused(broker_.Get(kBob, "q", true, kNoLease).status(), refused);
  ExpectRefused(broker_.Receive(kBob, 7, "q", 1, 0, 0), refused);
  ExpectRefused(broker_.PurgeQueue(kBob, "q").status(), refused);
  users_.Set("bob", {}, {UserPermission{"/", "", "", "^q$"}});
  EXPECT_TRUE(broker_.Subscribe(kBob, "q", "", 10, false, 0, false, 0).ok());
  EXPECT_TRUE(broker_.PurgeQueue(kBob, "q").ok());
}

TEST_F(BrokerAccessTest, BindingNeedsWriteOnTheDestinationAndReadOnTheSource) {
  ASSERT_TRUE(Declare(kAdmin, "q").ok());
  ASSERT_TRUE(Declare(kAdmin, "bob-q").ok());
  ASSERT_TRUE(broker_.DeclareExchange(kAdmin, Ex("x", ExchangeType::kDirect)).ok());
  ASSERT_TRUE(broker_.DeclareExchange(kAdmin, Ex("bob-x", ExchangeType::kDirect)).ok());
  ExpectRefused(broker_.Bind(kBob, Bd("q", "bob-x", "k")),
                "access to queue 'q' in vhost '/' refused for user 'bob'");
  ExpectRefused(broker_.Bind(kBob, Bd("bob-q", "x", "k")),
                "access to exchange 'x' in vhost '/' refused for user 'bob'");
  EXPECT_TRUE(broker_.Bind(kBob, Bd("bob-q", "bob-x", "k")).ok());
  ExpectRefused(broker_.Unbind(kBob, Bd("bob-q", "x", "k")),
                "access to exchange 'x' in vhost '/' refused for user 'bob'");
  EXPECT_TRUE(broker_.Unbind(kBob, Bd("bob-q", "bob-x", "k")).ok());
  // Exchange to exchange: write on the destination.
  BindingSpec e2e = Bd("", "bob-x", "k", "x");
  ExpectRefused(broker_.Bind(kBob, e2e),
                "access to exchange 'x' in vhost '/' refused for user 'bob'");
}

TEST_F(BrokerAccessTest, OperatorRequestsNeedATagAndRead) {
  ASSERT_TRUE(Declare(kAdmin, "bob-q").ok());
  Status s = broker_.Peek(kBob, 1, "bob-q", 0, 10, false);
  EXPECT_EQ(s.code(), StatusCode::kAccessRefused);
  EXPECT_EQ(s.message(),
            "user 'bob' may not peek at messages: it needs the tag management, policymaker, "
            "monitoring or administrator");
  EXPECT_EQ(broker_.ListDelayed(kBob, 2, "bob-q", 0, 0, 10).code(), StatusCode::kAccessRefused);
  EXPECT_EQ(broker_.CancelDelayed(kBob, 3, "bob-q", 1).code(), StatusCode::kAccessRefused);
  EXPECT_EQ(broker_.RedriveStatus(kBob, "").status().code(), StatusCode::kAccessRefused);
  users_.Set("bob", {"management"}, {UserPermission{"/", "^bob-", "^bob-", "^bob-"}});
  EXPECT_TRUE(broker_.Peek(kBob, 1, "bob-q", 0, 10, false).ok());
  ASSERT_TRUE(Declare(kAdmin, "q").ok());
  ExpectRefused(broker_.Peek(kBob, 4, "q", 0, 10, false),
                "access to queue 'q' in vhost '/' refused for user 'bob'");
  // A redrive back to where each message died needs administrator; to a named queue, write.
  RedriveSpec redrive;
  redrive.queue = "bob-q";
  EXPECT_EQ(broker_.StartRedrive(kBob, 5, redrive).code(), StatusCode::kAccessRefused);
  redrive.to = "q";
  ExpectRefused(broker_.StartRedrive(kBob, 6, redrive),
                "access to queue 'q' in vhost '/' refused for user 'bob'");
  EXPECT_TRUE(broker_.AuthorizeTag(kAdmin, kTagAdministrator, "manage users").ok());
  EXPECT_FALSE(broker_.AuthorizeTag(kBob, kTagAdministrator, "manage users").ok());
}

TEST_F(BrokerAccessTest, ADeletedUserCanDoNothingMore) {
  ASSERT_TRUE(Declare(kBob, "bob-q").ok());
  users_.Remove("bob");
  ExpectRefused(Declare(kBob, "bob-q2"),
                "access to queue 'bob-q2' in vhost '/' refused for user 'bob'");
}

TEST_F(BrokerAccessTest, WithoutASourceEverythingIsAllowed) {
  Broker open(BrokerOptions{}, &clock_);
  EXPECT_TRUE(open.OpenSession(9, "anyone", std::make_shared<RecordingPeer>()).ok());
  QueueSpec spec;
  spec.name = "q";
  EXPECT_TRUE(open.DeclareQueue(9, spec).ok());
  EXPECT_TRUE(open.AuthorizeTag(9, kTagAdministrator, "manage users").ok());
}

}  // namespace
}  // namespace wharf::broker
