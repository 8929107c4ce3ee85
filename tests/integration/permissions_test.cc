// Users, permissions and tags over the native protocol (issue 18; docs/security.md,
// "Permissions"), against the real wharfd: every operation allowed and refused, changes seen by
// open connections, runtime users' rights kept across a restart, config users' rights fixed.
// The AMQP side: permissions_test.py.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "support/spec_builders.h"
#include "support/test_server.h"

namespace wharf {
namespace {

using testing::Bd;
using testing::Ex;

RedriveSpec Redrive(const std::string& queue, const std::string& to) {
  RedriveSpec spec;
  spec.queue = queue;
  spec.to = to;
  return spec;
}

// The hash of "change-me" (config/wharfd.toml's example).
constexpr const char* kHash =
    "pbkdf2-sha256$20000$e3fa77b999ab7bd3855a8760414e6e90$"
    "7746c2f4b069aeaf971bbae63e7a3c76b5c4694c1bbe1df14c7d616e6980c4d9";

// ops: a config user without tags or permissions (an administrator, as before tags);
// app: may configure, write and read what starts with "app."; mon: monitoring, no permissions.
std::string WriteConfig(const std::string& dir) {
  std::string path = dir + "/wharfd.toml";
  std::ofstream out(path);
  out << "[[auth.users]]\nname = \"ops\"\npassword_hash = \"" << kHash << "\"\n"
      << "[[auth.users]]\nname = \"app\"\npassword_hash = \"" << kHash << "\"\ntags = []\n"
      << "permissions = [{vhost = \"/\", configure = \"^app\\\\.\", write = \"^app\\\\.\", "
         "read = \"^app\\\\.\"}]\n"
      << "[[auth.users]]\nname = \"mon\"\npassword_hash = \"" << kHash
      << "\"\ntags = [\"monitoring\"]\npermissions = []\n";
  return path;
}

class Permissions : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("wharf-permissions");
    server_ = std::make_unique<testing::TestServer>(
        std::vector<std::string>{"--config", WriteConfig(dir_)});
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::unique_ptr<Client> As(const std::string& user, const std::string& password = "change-me") {
    ClientOptions options = server_->Options();
    options.user = user;
    options.password = password;
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << user << ": " << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }
  static void ExpectRefused(const Status& s, const std::string& text) {
    EXPECT_EQ(s.code(), StatusCode::kAccessRefused) << s.ToString();
    EXPECT_EQ(s.message(), text);
  }
  static QueueSpec Queue(const std::string& name) {
    QueueSpec spec;
    spec.name = name;
    return spec;
  }

  std::string dir_;
  std::unique_ptr<testing::TestServer> server_;
};

TEST_F(Permissions, EveryOperationIsCheckedAgainstTheUsersPatterns) {
  auto ops = As("ops");
  auto app = As("app");
  ASSERT_TRUE(ops && app);
  ASSERT_TRUE(ops->DeclareQueue(Queue("other")).ok());
  ASSERT_TRUE(ops->DeclareExchange(Ex("other.x", ExchangeType::kDirect)).ok());
  const std::string user = "' in vhost '/' refused for user 'app'";

  // configure: declare and delete.
  EXPECT_TRUE(app->DeclareQueue(Queue("app.q")).ok());
  ExpectRefused(app->DeclareQueue(Queue("mine")).status(), "access to queue 'mine" + user);
  EXPECT_TRUE(app->DeclareExchange(Ex("app.x", ExchangeType::kDirect)).ok());
  ExpectRefused(app->DeclareExchange(Ex("x", ExchangeType::kDirect)),
                "access to exchange 'x" + user);
  ExpectRefused(app->DeleteQueue("other").status(), "access to queue 'other" + user);
  ExpectRefused(app->DeleteExchange("other.x"), "access to exchange 'other.x" + user);
  // A server-named queue is wharf.gen-...: outside app's pattern.
  EXPECT_EQ(app->DeclareQueue(Queue("")).status().code(), StatusCode::kAccessRefused);

  // write: publish, bind into; read: bind from, consume, pull, purge.
  Message m;
  m.body = "hello";
  EXPECT_TRUE(app->Publish("app.x", "k", m).ok());
  ExpectRefused(app->Publish("", "app.q", m).status(), "access to exchange 'amq.default" + user);
  ExpectRefused(app->Publish("other.x", "k", m).status(), "access to exchange 'other.x" + user);
  EXPECT_TRUE(app->Bind(Bd("app.q", "app.x", "k")).ok());
  ExpectRefused(app->Bind(Bd("other", "app.x", "k")), "access to queue 'other" + user);
  ExpectRefused(app->Bind(Bd("app.q", "other.x", "k")), "access to exchange 'other.x" + user);
  EXPECT_TRUE(app->Publish("app.x", "k", m).ok());
  auto got = app->Receive("app.q", 10, std::chrono::milliseconds(2000));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), 1u);
  ExpectRefused(app->Receive("other", 1, std::chrono::milliseconds(0)).status(),
                "access to queue 'other" + user);
  ExpectRefused(app->Subscribe("other", 1, [](const Delivery&) {}).status(),
                "access to queue 'other" + user);
  ExpectRefused(app->PurgeQueue("other").status(), "access to queue 'other" + user);
  EXPECT_TRUE(app->PurgeQueue("app.q").ok());

  // Operator requests need a tag: app has none.
  const std::string tags =
      ": it needs the tag management, policymaker, monitoring or administrator";
  ExpectRefused(app->ListQueues().status(), "user 'app' may not list queues" + tags);
  ExpectRefused(app->ListExchanges().status(), "user 'app' may not list exchanges" + tags);
  ExpectRefused(app->ListBindings().status(), "user 'app' may not list bindings" + tags);
  ExpectRefused(app->ListConsumers().status(), "user 'app' may not list consumers" + tags);
  ExpectRefused(app->ListConnections().status(), "user 'app' may not list connections" + tags);
  ExpectRefused(app->Peek("app.q").status(), "user 'app' may not peek at messages" + tags);
  ExpectRefused(app->ListDelayed("app.q").status(),
                "user 'app' may not list delayed messages" + tags);
  ExpectRefused(app->CancelDelayed("app.q", 1).status(),
                "user 'app' may not cancel delayed messages" + tags);
  ExpectRefused(app->StartRedrive(Redrive("app.q", "app.q2")).status(),
                "user 'app' may not redrive messages" + tags);
  ExpectRefused(app->ListUsers().status(),
                "user 'app' may not manage users: it needs the tag administrator");
  ExpectRefused(app->Backup(dir_ + "/backup").status(),
                "user 'app' may not take a backup: it needs the tag administrator");
  // The connection stays usable after every refusal.
  EXPECT_TRUE(app->Publish("app.x", "k", m).ok());
}

TEST_F(Permissions, MonitoringSeesEverythingAndChangesNothing) {
  auto ops = As("ops");
  auto mon = As("mon");
  auto app = As("app");
  ASSERT_TRUE(ops && mon && app);
  ASSERT_TRUE(ops->DeclareQueue(Queue("work")).ok());
  auto queues = mon->ListQueues();
  ASSERT_TRUE(queues.ok()) << queues.status().ToString();
  EXPECT_EQ(queues->size(), 1u);
  auto connections = mon->ListConnections();
  ASSERT_TRUE(connections.ok());
  EXPECT_EQ(connections->size(), 3u) << "monitoring sees every user's connections";
  // No permissions: no queue of its own, no peeking into one.
  ExpectRefused(mon->DeclareQueue(Queue("m")).status(),
                "access to queue 'm' in vhost '/' refused for user 'mon'");
  ExpectRefused(mon->Peek("work").status(),
                "access to queue 'work' in vhost '/' refused for user 'mon'");
  ExpectRefused(mon->ListUsers().status(),
                "user 'mon' may not manage users: it needs the tag administrator");
}

TEST_F(Permissions, RuntimeUsersGetRightsFromAnAdministratorSeenAtOnceAndKept) {
  auto ops = As("ops");
  ASSERT_TRUE(ops);
  ASSERT_TRUE(ops->PutUser("bob", kHash, false).ok());
  // A new user has no permissions (rabbitmqctl add_user): it may not open the vhost.
  ClientOptions options = server_->Options();
  options.user = "bob";
  options.password = "change-me";
  ExpectRefused(Client::Connect(options).status(), "access to vhost '/' refused for user 'bob'");
  // Permissions that allow nothing open the vhost, and nothing else.
  ASSERT_TRUE(ops->SetPermissions("bob", {"/", "", "", ""}).ok());
  auto bob = As("bob");
  ASSERT_TRUE(bob);
  ExpectRefused(bob->DeclareQueue(Queue("bob.q")).status(),
                "access to queue 'bob.q' in vhost '/' refused for user 'bob'");
  ASSERT_TRUE(ops->SetPermissions("bob", {"/", "^bob\\.", "^bob\\.", "^bob\\."}).ok());
  EXPECT_TRUE(bob->DeclareQueue(Queue("bob.q")).ok()) << "seen by the open connection";
  ASSERT_TRUE(ops->SetUserTags("bob", {"management", "custom"}).ok());
  EXPECT_TRUE(bob->ListQueues().ok());
  auto connections = bob->ListConnections();
  ASSERT_TRUE(connections.ok());
  ASSERT_EQ(connections->size(), 1u) << "management sees its own connections only";
  EXPECT_EQ(connections->front().user, "bob");

  // Bad input is refused with its reason.
  Status bad = ops->SetPermissions("bob", {"/", "(", "", ""});
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("invalid regular expression '('"), std::string_view::npos)
      << bad.message();
  EXPECT_EQ(ops->SetPermissions("bob", {"other", ".*", ".*", ".*"}).code(),
            StatusCode::kVhostNotFound);
  EXPECT_EQ(ops->SetPermissions("nobody", {"/", ".*", ".*", ".*"}).code(),
            StatusCode::kPreconditionFailed);
  Status config = ops->SetPermissions("app", {"/", ".*", ".*", ".*"});
  EXPECT_EQ(config.code(), StatusCode::kPreconditionFailed);
  EXPECT_NE(config.message().find("defined in the config file"), std::string_view::npos);
  EXPECT_EQ(ops->SetUserTags("guest", {}).code(), StatusCode::kPreconditionFailed);

  // Replacing the password keeps permissions and tags other than administrator.
  ASSERT_TRUE(ops->PutUser("bob", kHash, true).ok());
  auto users = ops->ListUsers();
  ASSERT_TRUE(users.ok());
  bool listed = false;
  for (const UserInfo& u : *users) {
    if (u.name != "bob") continue;
    listed = true;
    EXPECT_TRUE(u.admin);
    EXPECT_EQ(u.tags, (std::vector<std::string>{"administrator", "management", "custom"}));
    EXPECT_EQ(u.permissions, (std::vector<UserPermission>{{"/", "^bob\\.", "^bob\\.", "^bob\\."}}));
  }
  EXPECT_TRUE(listed);

  ASSERT_EQ(server_->Stop(), 0);
  ASSERT_TRUE(server_->Restart());
  bob = As("bob");
  ASSERT_TRUE(bob);
  EXPECT_TRUE(bob->DeclareQueue(Queue("bob.q2")).ok()) << "permissions survive a restart";
  EXPECT_TRUE(bob->ListUsers().ok()) << "so do tags";
  ExpectRefused(bob->DeclareQueue(Queue("q")).status(),
                "access to queue 'q' in vhost '/' refused for user 'bob'");
  ops = As("ops");
  ASSERT_TRUE(ops->ClearPermissions("bob").ok());
  ExpectRefused(bob->DeclareQueue(Queue("bob.q3")).status(),
                "access to queue 'bob.q3' in vhost '/' refused for user 'bob'");
  // Deleted while logged in: its connections are closed, as RabbitMQ's delete_user does.
  ASSERT_TRUE(ops->SetPermissions("bob", {"/", ".*", ".*", ".*"}).ok());
  ASSERT_TRUE(ops->DeleteUser("bob").ok());
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    closed = !bob->DeclareQueue(Queue("bob.q4")).ok();
    if (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(closed);
  // Logged once the socket is closed, which may come a moment after the client saw the close.
  bool logged = false;
  for (int i = 0; i < 100 && !logged; ++i) {
    logged = server_->Log().find("connection closed: user 'bob' is deleted") != std::string::npos;
    if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(logged) << server_->Log();
  EXPECT_TRUE(ops->ListUsers().ok()) << "the administrator's connection stays";
}

TEST_F(Permissions, ConcurrentChangesOfOneUserAreNotLost) {
  auto ops = As("ops");
  ASSERT_TRUE(ops);
  ASSERT_TRUE(ops->PutUser("carol", kHash, false).ok());
  // Two administrators change one user at once, one its tags, the other its permissions: each
  // change reads the user as the last one left it (server/user_changes.h), so neither undoes
  // the other. Each checks, after every change of its own, that the user has it.
  auto carol = [](Client& client) -> std::optional<UserInfo> {
    auto users = client.ListUsers();
    if (!users.ok()) return std::nullopt;
    for (const UserInfo& u : *users) {
      if (u.name == "carol") return u;
    }
    return std::nullopt;
  };
  std::atomic<int> lost{0};
  auto tagger = As("ops");
  auto granter = As("ops");
  ASSERT_TRUE(tagger && granter);
  std::thread tags([&] {
    for (int i = 0; i < 40; ++i) {
      const std::string tag = "t" + std::to_string(i);
      EXPECT_TRUE(tagger->SetUserTags("carol", {tag}).ok());
      auto now = carol(*tagger);
      if (!now || now->tags != std::vector<std::string>{tag}) ++lost;
    }
  });
  for (int i = 0; i < 40; ++i) {
    const std::string pattern = "^c" + std::to_string(i);
    EXPECT_TRUE(granter->SetPermissions("carol", {"/", pattern, "", ""}).ok());
    auto now = carol(*granter);
    if (!now || now->permissions != std::vector<UserPermission>{{"/", pattern, "", ""}}) ++lost;
  }
  tags.join();
  EXPECT_EQ(lost.load(), 0) << "changes undone by a concurrent change of the same user";
}

}  // namespace
}  // namespace wharf
