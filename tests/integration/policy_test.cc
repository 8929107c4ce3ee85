// Policies over the native protocol and wharfctl (issue 19; docs/policies.md), against the real
// wharfd: set-policy applies at once to existing and new queues, queue show tells the effective
// arguments, who may, bad input, and a policy that survives kill -9. The HTTP side:
// http_api_test.py.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/password.h"
#include "integration/helpers.h"
#include "support/test_server.h"

namespace wharf {
namespace {

using testing::Ctl;
using testing::CtlStdout;

class Policies : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<testing::TestServer>();
    admin_ = server_->Connect();
    ASSERT_NE(admin_, nullptr);
  }

  std::unique_ptr<Client> As(const std::string& user, const std::vector<std::string>& tags) {
    EXPECT_TRUE(admin_->PutUser(user, HashPassword("pw"), false).ok());
    EXPECT_TRUE(admin_->SetPermissions(user, {"/", ".*", ".*", ".*"}).ok());
    EXPECT_TRUE(admin_->SetUserTags(user, tags).ok());
    ClientOptions options = server_->Options();
    options.user = user;
    options.password = "pw";
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }

  QueueInfo Show(const std::string& name) {
    auto queues = admin_->ListQueues(name);
    EXPECT_TRUE(queues.ok());
    for (const QueueInfo& q : *queues) {
      if (q.name == name) return q;
    }
    ADD_FAILURE() << "no queue " << name;
    return {};
  }

  void Fill(const std::string& queue, int n) {
    for (int i = 0; i < n; ++i) {
      Message m;
      m.body = "m" + std::to_string(i);
      m.persistent = true;
      ASSERT_TRUE(admin_->Publish("", queue, m).ok());
    }
  }

  static QueueSpec Queue(const std::string& name, Headers arguments = {}) {
    QueueSpec spec;
    spec.name = name;
    spec.arguments = std::move(arguments);
    return spec;
  }

  std::unique_ptr<testing::TestServer> server_;
  std::unique_ptr<Client> admin_;
};

TEST_F(Policies, WharfctlSetsListsShowsAndClears) {
  ASSERT_TRUE(admin_->DeclareQueue(Queue("orders.eu")).ok());
  ASSERT_TRUE(admin_->DeclareQueue(Queue("orders.us", {{"x-max-length", int64_t{1}}})).ok());
  Fill("orders.eu", 5);
  int code = -1;
  std::string out = Ctl(*server_,
                        "set-policy cap '^orders\\.' '{\"max-length\": 2, \"message-ttl\": "
                        "60000}' --priority 3 --apply-to queues",
                        &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out, "policy 'cap' set\n");
  // At once: the existing queue is trimmed to the new limit; the lower limit wins.
  QueueInfo eu = Show("orders.eu");
  EXPECT_EQ(eu.ready, 2u);
  EXPECT_EQ(eu.policy, "cap");
  EXPECT_EQ(eu.effective_arguments,
            (Headers{{"x-max-length", int64_t{2}}, {"x-message-ttl", int64_t{60000}}}));
  EXPECT_EQ(Show("orders.us").effective_arguments,
            (Headers{{"x-max-length", int64_t{1}}, {"x-message-ttl", int64_t{60000}}}));
  // And to a queue made after.
  ASSERT_TRUE(admin_->DeclareQueue(Queue("orders.asia")).ok());
  EXPECT_EQ(Show("orders.asia").policy, "cap");

  out = Ctl(*server_, "queue show orders.eu", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("policy:              cap\neffective arguments:\n  x-max-length = 2\n"
                     "  x-message-ttl = 60000\n"),
            std::string::npos)
      << out;
  auto listed = testing::ParseJson(CtlStdout(*server_, "list-policies --json", &code));
  ASSERT_EQ(code, 0);
  ASSERT_TRUE(listed.is_array());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0], nlohmann::json::parse(R"({"vhost": "/", "name": "cap",
      "pattern": "^orders\\.", "apply-to": "queues", "definition": {"max-length": 2,
      "message-ttl": 60000}, "priority": 3})"));
  out = Ctl(*server_, "list-policies", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("{\"max-length\":2,\"message-ttl\":60000}"), std::string::npos) << out;

  // Bad input: a usage error before connecting, or the broker's refusal naming what is wrong.
  out = Ctl(*server_, "set-policy p '.*' 'not json'", &code);
  EXPECT_EQ(code, 2) << out;
  out = Ctl(*server_, "set-policy p '.*' '{\"max-lenght\": 1}'", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("'max-lenght' are not known"), std::string::npos) << out;
  out = Ctl(*server_, "set-policy p '(' '{\"max-length\": 1}'", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("is not a regular expression"), std::string::npos) << out;
  out = Ctl(*server_, "set-policy p '.*' '{\"max-length\": 1}' --apply-to bogus", &code);
  EXPECT_EQ(code, 2) << out;

  out = Ctl(*server_, "clear-policy cap", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(Show("orders.eu").policy, "");
  Fill("orders.eu", 3);
  EXPECT_EQ(Show("orders.eu").ready, 5u) << "the limit is lifted";
  out = Ctl(*server_, "clear-policy cap", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("POLICY_NOT_FOUND"), std::string::npos) << out;
}

TEST_F(Policies, PolicymakerMayOthersMayNot) {
  PolicyInfo policy;
  policy.name = "ttl";
  policy.pattern = ".*";
  policy.definition = {{"message-ttl", int64_t{1000}}};
  auto app = As("app", {"management"});
  ASSERT_NE(app, nullptr);
  Status refused = app->SetPolicy(policy);
  EXPECT_EQ(refused.code(), StatusCode::kAccessRefused) << refused.ToString();
  EXPECT_EQ(app->ListPolicies().status().code(), StatusCode::kAccessRefused);
  auto maker = As("maker", {"policymaker"});
  ASSERT_NE(maker, nullptr);
  ASSERT_TRUE(maker->SetPolicy(policy).ok());
  auto mine = maker->ListPolicies();
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].vhost, "/");
  EXPECT_EQ(maker->ListPolicies(/*all_vhosts=*/true).status().code(), StatusCode::kAccessRefused);
  EXPECT_EQ(admin_->ListPolicies(/*all_vhosts=*/true)->size(), 1u);
  EXPECT_EQ(maker->ClearPolicy("nope").code(), StatusCode::kPolicyNotFound);
  ASSERT_TRUE(maker->ClearPolicy("ttl").ok());
}

TEST_F(Policies, APolicySetSurvivesKill9AndAppliesAfterTheRestart) {
  ASSERT_TRUE(admin_->DeclareQueue(Queue("work")).ok());
  ASSERT_TRUE(admin_->DeclareQueue(Queue("work.dlq")).ok());
  PolicyInfo policy;
  policy.name = "dl";
  policy.pattern = "^work$";
  policy.definition = {{"dead-letter-queue", std::string("work.dlq")}, {"max-length", int64_t{1}}};
  ASSERT_TRUE(admin_->SetPolicy(policy).ok());
  admin_.reset();
  server_->Kill();
  ASSERT_TRUE(server_->Restart());
  admin_ = server_->Connect();
  ASSERT_NE(admin_, nullptr);
  auto listed = admin_->ListPolicies();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0], (PolicyInfo{"/", "dl", "^work$", "all", 0, policy.definition}));
  // The recovered queue runs with it: the second publish pushes the first to the DLQ.
  Fill("work", 2);
  EXPECT_EQ(Show("work").ready, 1u);
  EXPECT_EQ(Show("work").policy, "dl");
  EXPECT_EQ(Show("work.dlq").ready, 1u);
}

}  // namespace
}  // namespace wharf
