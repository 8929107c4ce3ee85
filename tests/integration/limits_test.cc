// Per-user connection limits and consumers per connection over the native protocol (issue 18,
// "Exposure and resource limits"; docs/security.md), against the real wharfd. The AMQP side,
// channels and wharfctl's set-user-limits: limits_test.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "support/test_server.h"

namespace wharf {
namespace {

// alice / change-me, the example user of config/wharfd.toml, with one connection at a time;
// two consumers per connection for everyone.
std::string WriteConfig(const std::string& dir) {
  std::string path = dir + "/wharfd.toml";
  std::ofstream out(path);
  out << "[limits]\nmax_consumers_per_channel = 2\n"
         "[[auth.users]]\nname = \"alice\"\npassword_hash = \"pbkdf2-sha256$20000$"
         "e3fa77b999ab7bd3855a8760414e6e90$"
         "7746c2f4b069aeaf971bbae63e7a3c76b5c4694c1bbe1df14c7d616e6980c4d9\"\n"
         "max_connections = 1\n";
  return path;
}

class Limits : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("wharf-limits"); }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(Limits, AUsersConnectionLimitRefusesTheNextLoginAndFreesAtClose) {
  testing::TestServer server({"--config", WriteConfig(dir_)});
  ClientOptions alice = server.Options();
  alice.user = "alice";
  alice.password = "change-me";
  auto first = Client::Connect(alice);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = Client::Connect(alice);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(second.status().message(),
            "connection refused for user 'alice': user connection limit (1) is reached");
  EXPECT_NE(server.Log().find("user=\"alice\" connection refused: \"connection refused for user"),
            std::string::npos)
      << server.Log();
  // Another user is not affected.
  EXPECT_TRUE(Client::Connect(server.Options()).ok());
  // Closed, the connection gives its place back (the broker sees the close a moment later).
  first->reset();
  bool reconnected = false;
  for (int i = 0; i < 100 && !reconnected; ++i) {
    reconnected = Client::Connect(alice).ok();
    if (!reconnected) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(reconnected);
}

TEST_F(Limits, AConnectionHoldsAtMostMaxConsumersPerChannel) {
  testing::TestServer server({"--config", WriteConfig(dir_)});
  auto client = Client::Connect(server.Options());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  QueueSpec spec;
  spec.name = "work";
  ASSERT_TRUE((*client)->DeclareQueue(spec).ok());
  auto nothing = [](const Delivery&) {};
  auto a = (*client)->Subscribe("work", 0, nothing);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE((*client)->Subscribe("work", 0, nothing).ok());
  auto third = (*client)->Subscribe("work", 0, nothing);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().ToString().find("max_consumers_per_channel"), std::string::npos)
      << third.status().ToString();
  // The connection goes on; a cancel makes room.
  ASSERT_TRUE((*client)->Cancel(*a).ok());
  EXPECT_TRUE((*client)->Subscribe("work", 0, nothing).ok());
}

}  // namespace
}  // namespace wharf
