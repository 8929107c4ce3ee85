// Virtual hosts over the native protocol and wharfctl (issue 18; docs/security.md, "Virtual
// hosts"), against the real wharfd: isolated namespaces, who may open which vhost, limits,
// deletion, and what survives a restart. The AMQP side: vhost_test.py.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/password.h"
#include "integration/helpers.h"
#include "support/test_server.h"

namespace wharf {
namespace {

using testing::Ctl;
using testing::CtlStdout;

class Vhosts : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<testing::TestServer>();
    admin_ = server_->Connect();
    ASSERT_NE(admin_, nullptr);
    ASSERT_TRUE(admin_->AddVhost("shop", "the shop").ok());
    // shopper: everything in the shop, nothing in "/"; boss: an administrator in the shop.
    ASSERT_TRUE(admin_->PutUser("shopper", HashPassword("pw"), false).ok());
    ASSERT_TRUE(admin_->SetPermissions("shopper", {"shop", ".*", ".*", ".*"}).ok());
    ASSERT_TRUE(admin_->PutUser("boss", HashPassword("pw"), true).ok());
    ASSERT_TRUE(admin_->SetPermissions("boss", {"shop", ".*", ".*", ".*"}).ok());
  }

  Result<std::unique_ptr<Client>> As(const std::string& user, const std::string& vhost) {
    ClientOptions options = server_->Options();
    options.user = user;
    options.password = "pw";
    options.vhost = vhost;
    return Client::Connect(options);
  }
  std::unique_ptr<Client> Open(const std::string& user, const std::string& vhost) {
    auto client = As(user, vhost);
    EXPECT_TRUE(client.ok()) << user << "@" << vhost << ": " << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }
  static QueueSpec Queue(const std::string& name) {
    QueueSpec spec;
    spec.name = name;
    return spec;
  }
  static Message Persistent(const std::string& body) {
    Message m;
    m.body = body;
    m.persistent = true;
    return m;
  }

  std::unique_ptr<testing::TestServer> server_;
  std::unique_ptr<Client> admin_;
};

TEST_F(Vhosts, EachVhostIsANamespaceOfItsOwn) {
  // The user's permissions decide which vhost it may open.
  auto refused = As("shopper", "/");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kAccessRefused);
  EXPECT_EQ(refused.status().message(), "access to vhost '/' refused for user 'shopper'");
  auto missing = As("boss", "nowhere");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kVhostNotFound);
  EXPECT_EQ(missing.status().message(), "vhost 'nowhere' not found");

  auto shopper = Open("shopper", "shop");
  ASSERT_NE(shopper, nullptr);
  ASSERT_TRUE(shopper->DeclareQueue(Queue("orders")).ok());
  ASSERT_TRUE(admin_->DeclareQueue(Queue("orders")).ok());
  ASSERT_TRUE(shopper->Publish("", "orders", Persistent("shop 1")).ok());
  ASSERT_TRUE(shopper->Publish("", "orders", Persistent("shop 2")).ok());
  ASSERT_TRUE(admin_->Publish("", "orders", Persistent("root")).ok());
  // Each vhost has its own amq.* exchanges.
  ASSERT_TRUE(shopper->Bind(BindingSpec{"orders", "amq.direct", "k", {}}).ok());
  ASSERT_TRUE(admin_->Publish("amq.direct", "k", Persistent("unrouted in /")).ok());
  ASSERT_TRUE(shopper->Publish("amq.direct", "k", Persistent("shop 3")).ok());

  auto got = shopper->Receive("orders", 10, std::chrono::milliseconds(2000));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[0].message.body, "shop 1");
  EXPECT_EQ((*got)[2].message.body, "shop 3");
  auto root = admin_->Receive("orders", 10, std::chrono::milliseconds(2000));
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  ASSERT_EQ(root->size(), 1u);
  EXPECT_EQ((*root)[0].message.body, "root");

  // Listings are of the connection's vhost; connections of every vhost, with it.
  ASSERT_TRUE(shopper->DeclareQueue(Queue("only-in-shop")).ok());
  auto boss = Open("boss", "shop");
  ASSERT_NE(boss, nullptr);
  auto shop_queues = boss->ListQueues("");
  ASSERT_TRUE(shop_queues.ok()) << shop_queues.status().ToString();
  ASSERT_EQ(shop_queues->size(), 2u);
  EXPECT_EQ((*shop_queues)[0].vhost, "shop");
  auto root_queues = admin_->ListQueues("");
  ASSERT_TRUE(root_queues.ok());
  ASSERT_EQ(root_queues->size(), 1u);
  EXPECT_EQ((*root_queues)[0].name, "orders");
  EXPECT_EQ(admin_->DeleteQueue("only-in-shop").status().code(), StatusCode::kQueueNotFound);
  auto connections = admin_->ListConnections();
  ASSERT_TRUE(connections.ok());
  int in_shop = 0;
  for (const auto& c : *connections) in_shop += c.vhost == "shop" ? 1 : 0;
  EXPECT_EQ(in_shop, 2);

  auto vhosts = admin_->ListVhosts();
  ASSERT_TRUE(vhosts.ok()) << vhosts.status().ToString();
  ASSERT_EQ(vhosts->size(), 2u);
  EXPECT_EQ((*vhosts)[1].name, "shop");
  EXPECT_EQ((*vhosts)[1].description, "the shop");
  EXPECT_EQ((*vhosts)[1].queues, 2u);
  EXPECT_EQ((*vhosts)[1].connections, 2u);
  // Only administrators manage vhosts.
  EXPECT_EQ(shopper->AddVhost("mine").code(), StatusCode::kAccessRefused);
  EXPECT_EQ(shopper->ListVhosts().status().code(), StatusCode::kAccessRefused);
  EXPECT_TRUE(admin_->AddVhost("shop").ok()) << "as rabbitmqctl add_vhost: a no-op";
  EXPECT_EQ(admin_->AddVhost("bad\nname").code(), StatusCode::kInvalidArgument);
  // Permissions can only be given in a vhost that exists.
  EXPECT_EQ(admin_->SetPermissions("shopper", {"nowhere", ".*", ".*", ".*"}).code(),
            StatusCode::kVhostNotFound);
}

TEST_F(Vhosts, LimitsAreTheVhosts) {
  ASSERT_TRUE(admin_->SetVhostLimits("shop", 1, 1).ok());
  auto first = Open("shopper", "shop");
  ASSERT_NE(first, nullptr);
  auto second = As("shopper", "shop");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(second.status().message(),
            "access to vhost 'shop' refused for user 'shopper': connection limit (1) is reached");
  ASSERT_TRUE(first->DeclareQueue(Queue("a")).ok());
  auto over = first->DeclareQueue(Queue("b"));
  EXPECT_EQ(over.status().code(), StatusCode::kPreconditionFailed);
  EXPECT_EQ(over.status().message(),
            "cannot declare queue 'b': queue limit in vhost 'shop' (1) is reached");
  // "/" is not limited by the shop's limits.
  ASSERT_TRUE(admin_->DeclareQueue(Queue("b")).ok());
  // Cleared, the next connection and queue are taken.
  ASSERT_TRUE(admin_->SetVhostLimits("shop", -1, std::nullopt).ok());
  EXPECT_TRUE(As("shopper", "shop").ok());
  EXPECT_EQ(first->DeclareQueue(Queue("b")).status().code(), StatusCode::kPreconditionFailed);
  auto vhosts = admin_->ListVhosts();
  ASSERT_TRUE(vhosts.ok());
  EXPECT_EQ((*vhosts)[1].limits.max_connections, -1);
  EXPECT_EQ((*vhosts)[1].limits.max_queues, 1);
}

TEST_F(Vhosts, DeletingAVhostTakesItsQueuesConnectionsAndPermissions) {
  auto shopper = Open("shopper", "shop");
  ASSERT_NE(shopper, nullptr);
  ASSERT_TRUE(shopper->DeclareQueue(Queue("orders")).ok());
  ASSERT_TRUE(shopper->Publish("", "orders", Persistent("gone")).ok());
  ASSERT_TRUE(admin_->DeclareQueue(Queue("orders")).ok());
  EXPECT_EQ(admin_->DeleteVhost("/").code(), StatusCode::kReservedName);
  EXPECT_EQ(admin_->DeleteVhost("nowhere").code(), StatusCode::kVhostNotFound);
  ASSERT_TRUE(admin_->DeleteVhost("shop").ok());
  // Its connection is closed (as RabbitMQ's delete_vhost).
  Status after = Status::Ok();
  for (int i = 0; i < 50 && after.ok(); ++i) {
    after = shopper->DeclareQueue(Queue("orders")).status();
    if (after.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(after.ok());
  // Its users' permissions in it are gone: made again, the vhost is empty and closed to them.
  auto users = admin_->ListUsers();
  ASSERT_TRUE(users.ok());
  for (const UserInfo& u : *users) {
    for (const auto& p : u.permissions) EXPECT_NE(p.vhost, "shop") << u.name;
  }
  ASSERT_TRUE(admin_->AddVhost("shop").ok());
  auto again = As("shopper", "shop");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAccessRefused);
  ASSERT_TRUE(admin_->SetPermissions("boss", {"shop", ".*", ".*", ".*"}).ok());
  auto boss = Open("boss", "shop");
  ASSERT_NE(boss, nullptr);
  auto queues = boss->ListQueues("");
  ASSERT_TRUE(queues.ok());
  EXPECT_TRUE(queues->empty());
  // "/" kept its own.
  auto root = admin_->ListQueues("");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->size(), 1u);
}

TEST_F(Vhosts, VhostsTheirQueuesAndMessagesSurviveKill9) {
  ASSERT_TRUE(admin_->SetVhostLimits("shop", std::nullopt, 10).ok());
  {
    auto shopper = Open("shopper", "shop");
    ASSERT_NE(shopper, nullptr);
    ASSERT_TRUE(shopper->DeclareQueue(Queue("orders")).ok());
    ExchangeSpec events;
    events.name = "events";
    events.type = ExchangeType::kFanout;
    ASSERT_TRUE(shopper->DeclareExchange(events).ok());
    ASSERT_TRUE(shopper->Bind(BindingSpec{"orders", "events", "", {}}).ok());
    ASSERT_TRUE(shopper->Publish("events", "", Persistent("confirmed before the kill")).ok());
  }
  admin_.reset();
  server_->Kill();
  ASSERT_TRUE(server_->Restart());
  admin_ = server_->Connect();
  ASSERT_NE(admin_, nullptr);
  auto vhosts = admin_->ListVhosts();
  ASSERT_TRUE(vhosts.ok());
  ASSERT_EQ(vhosts->size(), 2u);
  EXPECT_EQ((*vhosts)[1].name, "shop");
  EXPECT_EQ((*vhosts)[1].limits.max_queues, 10);
  auto shopper = Open("shopper", "shop");
  ASSERT_NE(shopper, nullptr);
  ASSERT_TRUE(shopper->Publish("events", "", Persistent("routed after the restart")).ok());
  auto got = shopper->Receive("orders", 10, std::chrono::milliseconds(2000));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].message.body, "confirmed before the kill");
  EXPECT_EQ((*got)[1].message.body, "routed after the restart");
  EXPECT_EQ(admin_->ListQueues("")->size(), 0u) << "nothing of the shop's leaked into /";
}

TEST_F(Vhosts, Wharfctl) {
  int code = -1;
  std::string out = Ctl(*server_, "add-vhost books --description 'the books'", &code);
  EXPECT_EQ(code, 0) << out;
  out =
      Ctl(*server_, "set-vhost-limits books '{\"max-queues\": 3, \"max-connections\": 7}'", &code);
  EXPECT_EQ(code, 0) << out;
  out = Ctl(*server_, "set-vhost-limits books '{\"max-things\": 3}'", &code);
  EXPECT_EQ(code, 2) << out;
  auto list = testing::ParseJson(CtlStdout(*server_, "vhosts --json", &code));
  ASSERT_EQ(code, 0);
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]["name"], "/");
  EXPECT_EQ(list[1]["name"], "books");
  EXPECT_EQ(list[1]["description"], "the books");
  EXPECT_EQ(list[1]["limits"]["max-queues"], 3);
  EXPECT_EQ(list[1]["limits"]["max-connections"], 7);
  out = Ctl(*server_, "clear-vhost-limits books max-queues", &code);
  EXPECT_EQ(code, 0) << out;
  out = Ctl(*server_, "vhosts", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("the books"), std::string::npos) << out;
  // -p: the vhost to use; set-permissions -p: the permissions' vhost.
  out = Ctl(*server_, "set-permissions -p books boss '.*' '.*' '.*'", &code);
  EXPECT_EQ(code, 0) << out;
  out = Ctl(*server_, "--user boss --password pw -p books declare-queue novels", &code);
  EXPECT_EQ(code, 0) << out;
  auto queues = testing::ParseJson(
      CtlStdout(*server_, "--user boss --password pw -p books queues --json", &code));
  ASSERT_EQ(code, 0);
  ASSERT_EQ(queues.size(), 1u);
  EXPECT_EQ(queues[0]["name"], "novels");
  out = Ctl(*server_, "queues", &code);
  EXPECT_EQ(out.find("novels"), std::string::npos) << out;
  out = Ctl(*server_, "-p nowhere queues", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("vhost 'nowhere' not found"), std::string::npos) << out;
  out = Ctl(*server_, "delete-vhost books", &code);
  EXPECT_EQ(code, 0) << out;
  list = testing::ParseJson(CtlStdout(*server_, "vhosts --json", &code));
  EXPECT_EQ(list.size(), 2u);
}

}  // namespace
}  // namespace wharf
