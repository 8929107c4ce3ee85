// Issue 14, log injection: what a client sends is escaped in wharfd's log (one record, one
// line) and cut, in the log and in the errors that echo it (common/log_safe.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "support/test_server.h"

namespace wharf {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Waits up to 5 s for `needle` in the file at `path` (wharfd flushes warnings at once).
std::string WaitForLogLine(const std::string& path, const std::string& needle) {
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text = ReadFile(path);
    if (text.find(needle) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return text;
}

TEST(LogInjection, AForgedLineInAUserNameStaysInsideOneEscapedLine) {
  std::string dir = testing::MakeTempDir("wharf-log");
  std::string log = dir + "/wharfd.log";
  testing::TestServer server({"--log-file", log});
  ClientOptions options = server.Options();
  options.user = "eve\n2026-01-01T00:00:00.000Z critical forged: the disk is on fire";
  options.password = "x";
  EXPECT_EQ(Client::Connect(options).status().code(), StatusCode::kAuthenticationFailed);

  std::string text = WaitForLogLine(log, "login refused");
  ASSERT_NE(text.find("login refused"), std::string::npos) << text;
  std::istringstream lines(text);
  int refused = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_FALSE(line.starts_with("2026-01-01T00:00:00.000Z")) << "forged line: " << line;
    if (line.find("login refused") != std::string::npos) {
      ++refused;
      EXPECT_NE(line.find("user=\"eve\\n2026-01-01T00:00:00.000Z critical forged"),
                std::string::npos)
          << line;
    }
  }
  EXPECT_EQ(refused, 1) << text;
  std::filesystem::remove_all(dir);
}

TEST(LogInjection, ALongUserNameIsCutInTheLog) {
  std::string dir = testing::MakeTempDir("wharf-log");
  std::string log = dir + "/wharfd.log";
  testing::TestServer server({"--log-file", log});
  ClientOptions options = server.Options();
  options.user = std::string(60'000, 'u');  // handshake frames are at most 64 KiB
  options.password = "x";
  EXPECT_FALSE(Client::Connect(options).ok());
  std::string text = WaitForLogLine(log, "login refused");
  EXPECT_NE(text.find("\"...(60000 bytes) login refused"), std::string::npos) << text.size();
  EXPECT_LT(text.size(), 8'000u) << "the name is not in the log in full";
  std::filesystem::remove_all(dir);
}

TEST(LogInjection, AnErrorDoesNotEchoAMegabyteNameBack) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  QueueSpec spec;
  spec.name = "q";
  spec.arguments[std::string(1 << 20, 'x')] = int64_t{1};
  auto declared = client->DeclareQueue(spec);
  ASSERT_FALSE(declared.ok());
  EXPECT_EQ(declared.status().code(), StatusCode::kInvalidArgument);
  EXPECT_LT(declared.status().message().size(), 2'000u);
  EXPECT_NE(declared.status().message().find("...(1048576 bytes)"), std::string::npos)
      << declared.status().message().substr(0, 500);
}

}  // namespace
}  // namespace wharf
