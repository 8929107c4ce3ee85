// Unit tests for server/log_format.h: UTC timestamps, JSON lines, journald priorities.
#include "server/log_format.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "common/log_safe.h"

namespace wharf::server {
namespace {

// Logs one record through `format` and returns the text.
std::string LogOne(LogFormat format, bool journal, spdlog::level::level_enum level,
                   const std::string& message) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_formatter(MakeLogFormatter(format, journal));
  spdlog::logger logger("test", sink);
  logger.set_level(spdlog::level::trace);
  logger.log(level, "{}", message);
  return out.str();
}

TEST(LogFormat, ParsesTheTwoFormats) {
  EXPECT_EQ(ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(ParseLogFormat("xml"), std::nullopt);
}

TEST(LogFormat, TextLinesCarryAUtcRfc3339Timestamp) {
  std::string line = LogOne(LogFormat::kText, false, spdlog::level::info, "hello");
  EXPECT_TRUE(
      std::regex_match(line, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info  hello\n)")))
      << line;
}

TEST(LogFormat, JsonLinesAreValidJsonEvenWithClientBytes) {
  std::string message =
      "user=" + EscapeForLog("eve\n\"}{\xff") + " raw=\xff\xfe";  // raw: a forgotten LogSafe
  std::string line = LogOne(LogFormat::kJson, false, spdlog::level::warn, message);
  ASSERT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
  auto json = nlohmann::json::parse(line);
  EXPECT_EQ(json["level"], "warning");
  EXPECT_NE(json["message"].get<std::string>().find("user=\"eve\\n\\\"}{\\xff\""),
            std::string::npos)
      << line;
  EXPECT_TRUE(std::regex_match(json["time"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  EXPECT_TRUE(json.contains("thread"));
}

TEST(LogFormat, JournalLinesStartWithTheirPriorityAndHaveNoTimestamp) {
  EXPECT_EQ(LogOne(LogFormat::kText, true, spdlog::level::err, "disk"), "<3>error disk\n");
  EXPECT_EQ(LogOne(LogFormat::kText, true, spdlog::level::info, "up"), "<6>info  up\n");
  std::string json = LogOne(LogFormat::kJson, true, spdlog::level::warn, "w");
  EXPECT_TRUE(json.starts_with("<4>{")) << json;
}

TEST(LogFormat, PriorityPrefixPerLevel) {
  EXPECT_EQ(JournalPriorityPrefix(spdlog::level::critical), "<2>");
  EXPECT_EQ(JournalPriorityPrefix(spdlog::level::err), "<3>");
  EXPECT_EQ(JournalPriorityPrefix(spdlog::level::warn), "<4>");
  EXPECT_EQ(JournalPriorityPrefix(spdlog::level::info), "<6>");
  EXPECT_EQ(JournalPriorityPrefix(spdlog::level::debug), "<7>");
  EXPECT_EQ(JournalPriorityPrefix(spdlog::level::trace), "<7>");
}

// systemd.exec(5): JOURNAL_STREAM is "DEVICE:INODE" of the stream stderr was given; a
// process whose stderr was redirected since must not take the journal format.
TEST(LogFormat, JournalStreamMustMatchStderrsDeviceAndInode) {
  EXPECT_TRUE(JournalStreamMatches("8:12345", 8, 12345));
  EXPECT_FALSE(JournalStreamMatches("8:12345", 8, 12346));
  EXPECT_FALSE(JournalStreamMatches("9:12345", 8, 12345));
  EXPECT_FALSE(JournalStreamMatches(nullptr, 8, 12345));
  EXPECT_FALSE(JournalStreamMatches("", 8, 12345));
  EXPECT_FALSE(JournalStreamMatches("8:", 8, 0));
  EXPECT_FALSE(JournalStreamMatches("8:12345x", 8, 12345));
}

}  // namespace
}  // namespace wharf::server
