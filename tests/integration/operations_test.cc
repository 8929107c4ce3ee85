// Daemon operations (docs/operations.md): the log file rotates by size, SIGHUP reopens it
// (after logrotate moved it) and reloads the config file's users, and the systemd unit is
// valid.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/password.h"
#include "support/test_server.h"

namespace wharf {
namespace {

using std::chrono::milliseconds;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

// Polls until `path` contains `text` (at most 5 s).
bool WaitFor(const std::string& path, const std::string& text) {
  for (int i = 0; i < 500; ++i) {
    if (Read(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

TEST(Operations, LogFileRotatesBySizeAndSighupReopensIt) {
  std::string dir = testing::MakeTempDir("wharf-logs");
  std::string log = dir + "/wharfd.log";
  std::string config = dir + "/wharfd.toml";
  std::ofstream(config) << "[log]\nmax_bytes = 4096\nmax_files = 2\n";
  testing::TestServer server({"--config", config, "--log-file", log});
  ASSERT_TRUE(server.running());
  // Every connection logs a few debug lines: enough of them rotate the file.
  for (int i = 0; i < 40; ++i) ASSERT_NE(server.Connect(), nullptr);
  ASSERT_TRUE(WaitFor(log + ".2", "conn="));
  EXPECT_TRUE(std::filesystem::exists(log + ".1"));
  EXPECT_FALSE(std::filesystem::exists(log + ".3")) << "max_files = 2";
  EXPECT_LE(std::filesystem::file_size(log + ".1"), 4096u);

  // logrotate moves the file away and sends SIGHUP: wharfd writes to a new file.
  std::filesystem::rename(log, dir + "/moved.log");
  server.Signal(SIGHUP);
  ASSERT_TRUE(WaitFor(log, "SIGHUP: log reopened")) << server.Log();
  ASSERT_NE(server.Connect(), nullptr);
  EXPECT_TRUE(server.running());
  server.Stop();
  std::filesystem::remove_all(dir);
}

TEST(Operations, SighupReloadsTheConfigFilesUsers) {
  std::string dir = testing::MakeTempDir("wharf-users");
  std::string config = dir + "/wharfd.toml";
  auto write_users = [&](const std::string& name) {
    std::ofstream(config + ".tmp")
        << "[auth]\nloopback_guest = false\n[[auth.users]]\nname = \"" << name
        << "\"\npassword_hash = \"" << HashPassword("s3cret", 1000) << "\"\n";
    std::filesystem::rename(config + ".tmp", config);
  };
  write_users("alice");
  testing::TestServer server({"--config", config});
  ClientOptions alice = server.Options();
  alice.user = "alice";
  alice.password = "s3cret";
  auto logged_in = Client::Connect(alice);
  ASSERT_TRUE(logged_in.ok()) << logged_in.status().ToString();

  write_users("bob");
  server.Signal(SIGHUP);
  ClientOptions bob = alice;
  bob.user = "bob";
  bool reloaded = false;
  for (int i = 0; i < 500 && !reloaded; ++i) {
    reloaded = Client::Connect(bob).ok();
    if (!reloaded) std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(reloaded) << server.Log();
  EXPECT_EQ(Client::Connect(alice).status().code(), StatusCode::kAuthenticationFailed);
  EXPECT_TRUE((*logged_in)->Ping().ok()) << "a connection logged in stays";

  // A broken config is not applied: the users stay as they were.
  std::ofstream(config) << "[auth]\nnonsense = 1\n";
  server.Signal(SIGHUP);
  ASSERT_TRUE(WaitFor(server.dir() + "/wharfd.log", "config not reloaded"));
  EXPECT_TRUE(Client::Connect(bob).ok());
  std::filesystem::remove_all(dir);
}

TEST(Operations, TheSystemdUnitIsValid) {
  if (std::system("command -v systemd-analyze > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "systemd-analyze is not installed here";
  }
  std::string dir = testing::MakeTempDir("wharf-unit");
  std::string unit = Read(std::string(WHARF_CONFIG_DIR) + "/wharfd.service");
  ASSERT_NE(unit.find("ExecReload=/bin/kill -HUP $MAINPID"), std::string::npos);
  ASSERT_NE(unit.find("KillSignal=SIGTERM"), std::string::npos);
  // Checked as installed: with the binary this build made.
  const std::string installed = "ExecStart=/usr/sbin/wharfd";
  const size_t at = unit.find(installed);
  ASSERT_NE(at, std::string::npos);
  unit.replace(at, installed.size(), std::string("ExecStart=") + WHARFD_PATH_FOR_TESTS);
  std::ofstream(dir + "/wharfd.service") << unit;
  int code = -1;
  std::string out =
      testing::RunCommand("systemd-analyze verify " + dir + "/wharfd.service 2>&1", &code);
  EXPECT_EQ(code, 0) << out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wharf
