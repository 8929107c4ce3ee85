// wharfd's command line (CLI11): --opt=value, exit code 2 for every bad usage with a message
// that names the problem, --help and --version without starting a broker.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "integration/helpers.h"
#include "wharf/version.h"

namespace wharf {
namespace {

using testing::RunCommand;

// Runs wharfd with `args` (stdout and stderr together) against a data dir that must never be
// created: none of these may start a broker.
std::string Wharfd(const std::string& args, int* code) {
  return RunCommand(std::string(WHARFD_PATH_FOR_TESTS) + " " + args +
                        " --data-dir /nonexistent/wharf-flags-test 2>&1",
                    code);
}

TEST(WharfdFlags, HelpAndVersionExitZero) {
  int code = -1;
  std::string help = Wharfd("--help", &code);
  EXPECT_EQ(code, 0) << help;
  for (const char* flag : {"--config", "--listen", "--data-dir", "--log-level", "--log-file",
                           "--log-format", "--metrics-listen", "--ready-file", "--version"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag << "\n" << help;
  }
  std::string version = Wharfd("--version", &code);
  EXPECT_EQ(code, 0) << version;
  EXPECT_NE(version.find(WHARF_VERSION), std::string::npos) << version;
}

TEST(WharfdFlags, BadUsageExitsTwoAndSaysWhy) {
  struct Case {
    std::string args;
    std::string says;
  };
  const Case cases[] = {
      {"--bogus", "--bogus"},
      {"--listen", "--listen"},                      // no value
      {"--listen 127.0.0.1:70000", "port 0-65535"},  // out of range
      {"--listen=127.0.0.1:99999", "port 0-65535"},
      {"--metrics-listen nonsense", "must look like HOST:PORT"},
      {"--log-level loud", "loud"},
      {"--log-format=xml", "xml"},
      {"stray", "stray"},  // no positional arguments
  };
  for (const Case& c : cases) {
    int code = -1;
    std::string out = Wharfd(c.args, &code);
    EXPECT_EQ(code, 2) << c.args << "\n" << out;
    EXPECT_NE(out.find(c.says), std::string::npos) << c.args << "\n" << out;
    EXPECT_FALSE(std::filesystem::exists("/nonexistent/wharf-flags-test"));
  }
}

TEST(WharfdFlags, EqualsFormWorksAndJsonLogLinesParse) {
  testing::TestServer server({"--log-level=debug", "--log-format=json"});
  ASSERT_TRUE(server.running());
  ASSERT_NE(server.Connect(), nullptr);
  EXPECT_EQ(server.Stop(), 0);
  std::istringstream lines(server.Log());
  int parsed = 0;
  bool debug_seen = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;  // ASan or test-harness output
    auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(json.is_discarded()) << line;
    EXPECT_TRUE(json.contains("time") && json.contains("level") && json.contains("message"))
        << line;
    if (json["level"] == "debug") debug_seen = true;
    ++parsed;
  }
  EXPECT_GT(parsed, 2) << server.Log();
  EXPECT_TRUE(debug_seen) << "--log-level=debug took effect\n" << server.Log();
}

TEST(WharfdFlags, Issue15ListeningBeyondLoopbackWithTheGuestWarnsOnce) {
  const std::string warning = "with the built-in admin guest/guest enabled";
  {
    testing::TestServer everywhere({"--listen", "0.0.0.0:0"});
    ASSERT_NE(everywhere.Connect(), nullptr);  // still reachable on loopback, as guest
    std::string log = everywhere.Log();
    EXPECT_EQ(testing::CountOf(log, warning), 1u) << log;
    EXPECT_NE(log.find("warning"), std::string::npos) << log;
  }
  {
    testing::TestServer loopback;
    EXPECT_EQ(testing::CountOf(loopback.Log(), warning), 0u) << loopback.Log();
  }
  {
    std::string dir = testing::MakeTempDir("wharf-flags");
    std::ofstream(dir + "/no-guest.toml") << "[auth]\nloopback_guest = false\n";
    testing::TestServer no_guest({"--listen", "0.0.0.0:0", "--config", dir + "/no-guest.toml"});
    EXPECT_EQ(testing::CountOf(no_guest.Log(), warning), 0u) << no_guest.Log();
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace wharf
