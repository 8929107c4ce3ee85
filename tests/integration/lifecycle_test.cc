// wharfd as a process: graceful stop, config users, start-up failures, and wharfctl.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/password.h"
#include "integration/helpers.h"
#include "support/test_server.h"

namespace wharf {
namespace {

using testing::RunCommand;

TEST(Lifecycle, SigtermClosesConnectionsWithAReasonAndExitsZero) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Status> lost;
  client->SetErrorHandler([&](Status s) {
    std::lock_guard lock(mu);
    lost = s;
    cv.notify_all();
  });
  EXPECT_EQ(server.Stop(), 0);
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return lost.has_value(); }));
  EXPECT_EQ(lost->code(), StatusCode::kUnavailable);
  EXPECT_NE(lost->message().find("SHUTTING_DOWN"), std::string::npos) << lost->ToString();
}

TEST(Lifecycle, ConfiguredUserLogsInWithItsPassword) {
  std::string dir = testing::MakeTempDir("wharf-config");
  std::string config = dir + "/users.toml";
  std::ofstream(config) << "[auth]\nloopback_guest = false\n[[auth.users]]\nname = \"app\"\n"
                        << "password_hash = \"" << HashPassword("s3cret", 1000) << "\"\n";
  testing::TestServer server({"--config", config});
  ClientOptions options = server.Options();
  options.user = "app";
  options.password = "s3cret";
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  options.password = "wrong";
  EXPECT_EQ(Client::Connect(options).status().code(), StatusCode::kAuthenticationFailed);
  // The guest user is switched off by this config.
  EXPECT_EQ(Client::Connect(server.Options()).status().code(), StatusCode::kAuthenticationFailed);
  std::filesystem::remove_all(dir);
}

TEST(Lifecycle, BadConfigFailsStartupWithExitCodeOne) {
  std::string dir = testing::MakeTempDir("wharf-config");
  std::string config = dir + "/bad.toml";
  std::ofstream(config) << "[server]\nlisen = \"127.0.0.1:1\"\n";
  int code = 0;
  std::string out = RunCommand(std::string(WHARFD_PATH_FOR_TESTS) + " --config " + config +
                                   " --data-dir " + dir + "/data 2>&1",
                               &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("unknown key 'lisen'"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

TEST(Lifecycle, EveryExampleConfigStartsTheBroker) {
  for (const auto& entry : std::filesystem::directory_iterator(WHARF_CONFIG_DIR)) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    // Flags override the file's listen address and data dir.
    testing::TestServer server({"--config", entry.path().string()});
    ASSERT_TRUE(server.running());
    auto client = server.Connect();
    EXPECT_NE(client, nullptr);
  }
}

TEST(Wharfctl, TourFromTheReadmeWorks) {
  testing::TestServer server;
  std::string ctl = std::string(WHARFCTL_PATH) + " --server " + server.address() + " ";
  int code = -1;
  RunCommand(ctl + "declare-exchange events topic", &code);
  ASSERT_EQ(code, 0);
  RunCommand(ctl + "declare-queue orders", &code);
  ASSERT_EQ(code, 0);
  RunCommand(ctl + "bind orders events 'order.#'", &code);
  ASSERT_EQ(code, 0);
  std::string published = RunCommand(ctl + "publish events order.created 'hello wharf'", &code);
  ASSERT_EQ(code, 0);
  EXPECT_NE(published.find("to 1 queue(s)"), std::string::npos) << published;
  nlohmann::json queues = testing::ParseJson(RunCommand(ctl + "queues --json", &code));
  ASSERT_EQ(code, 0);
  ASSERT_EQ(queues.size(), 1u) << queues;
  EXPECT_EQ(queues[0]["name"], "orders");
  EXPECT_EQ(queues[0]["ready"], 1);
  EXPECT_EQ(queues[0]["in_flight"], 0);
  EXPECT_EQ(queues[0]["consumers"], 0);
  std::string consumed = RunCommand(ctl + "consume orders", &code);
  ASSERT_EQ(code, 0);
  EXPECT_EQ(consumed, "hello wharf\n");
  queues = testing::ParseJson(RunCommand(ctl + "queues --json", &code));
  EXPECT_EQ(queues[0]["ready"], 0) << queues;
  RunCommand(ctl + "delete-queue missing 2>/dev/null", &code);
  EXPECT_EQ(code, 1);
}

TEST(Wharfctl, UsersAreManagedAtRuntimeAndSurviveARestart) {
  testing::TestServer server;
  auto ctl = [&](const std::string& args) {
    return std::string(WHARFCTL_PATH) + " --server " + server.address() + " " + args;
  };
  int code = -1;
  RunCommand(ctl("add-user ops --admin --new-password pw-ops"), &code);
  ASSERT_EQ(code, 0);
  RunCommand("echo pw-worker | " + ctl("add-user worker"), &code);
  ASSERT_EQ(code, 0);
  RunCommand(ctl("set-permissions worker '.*' '.*' '.*'"), &code);
  ASSERT_EQ(code, 0);
  nlohmann::json users = testing::ParseJson(RunCommand(ctl("users --json"), &code));
  ASSERT_EQ(code, 0);
  auto has = [&](const std::string& name, bool admin, const std::string& source) {
    for (const auto& u : users) {
      if (u["name"] == name) return u["admin"] == admin && u["source"] == source;
    }
    return false;
  };
  EXPECT_TRUE(has("ops", true, "store")) << users;
  EXPECT_TRUE(has("worker", false, "store")) << users;
  EXPECT_TRUE(has("guest", true, "builtin")) << users;
  // A user that is not an admin may work but not manage users.
  std::string refused = RunCommand(
      ctl("--user worker --password pw-worker add-user sneaky --new-password x 2>&1"), &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(refused.find("ACCESS_REFUSED"), std::string::npos) << refused;
  // Built-in users cannot be deleted.
  std::string builtin = RunCommand(ctl("delete-user guest 2>&1"), &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(builtin.find("PRECONDITION_FAILED"), std::string::npos) << builtin;

  ASSERT_EQ(server.Stop(), 0);
  ASSERT_TRUE(server.Restart());
  ClientOptions options = server.Options();
  options.user = "worker";
  options.password = "pw-worker";
  EXPECT_TRUE(Client::Connect(options).ok()) << "runtime users are stored";
  RunCommand(ctl("--user ops --password pw-ops delete-user worker"), &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(Client::Connect(options).status().code(), StatusCode::kAuthenticationFailed);
  ASSERT_EQ(server.Stop(), 0);
  ASSERT_TRUE(server.Restart());
  options.port = server.port();  // a restart listens on a new port
  EXPECT_EQ(Client::Connect(options).status().code(), StatusCode::kAuthenticationFailed)
      << "and stays deleted";
}

TEST(Wharfctl, ConsumeJsonIsValidJson) {
  testing::TestServer server;
  std::string ctl = std::string(WHARFCTL_PATH) + " --server " + server.address() + " ";
  int code = -1;
  RunCommand(ctl + "declare-queue q", &code);
  ASSERT_EQ(code, 0);
  RunCommand(ctl + "publish '' q plain", &code);
  RunCommand(ctl + "publish '' q tagged --header k=v", &code);
  std::string out = RunCommand(ctl + "consume q --count 2 --json", &code);
  ASSERT_EQ(code, 0);
  size_t newline = out.find('\n');
  ASSERT_NE(newline, std::string::npos) << out;
  nlohmann::json plain = testing::ParseJson(out.substr(0, newline));
  nlohmann::json tagged = testing::ParseJson(out.substr(newline + 1));
  EXPECT_EQ(plain["payload"], "plain");
  EXPECT_EQ(plain["properties"]["headers"], nlohmann::json::object());
  EXPECT_EQ(tagged["payload"], "tagged");
  EXPECT_EQ(tagged["properties"]["headers"]["k"], "v");
}

TEST(Wharfctl, UnreachableServerExitsWithThree) {
  int code = -1;
  RunCommand(std::string(WHARFCTL_PATH) + " --server 127.0.0.1:1 queues 2>/dev/null", &code);
  EXPECT_EQ(code, 3);
}

}  // namespace
}  // namespace wharf
