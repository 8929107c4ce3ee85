// Unit tests for common/log_safe.h: client text in logs and errors is escaped and cut.
#include "common/log_safe.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <string>

#include "server/log_format.h"

namespace wharf {
namespace {

TEST(LogSafe, QuotesAndEscapesControlsQuotesAndBackslashes) {
  EXPECT_EQ(EscapeForLog("orders"), "\"orders\"");
  EXPECT_EQ(EscapeForLog("a\nb\rc\td"), "\"a\\nb\\rc\\td\"");
  EXPECT_EQ(EscapeForLog("say \"hi\" \\o/"), "\"say \\\"hi\\\" \\\\o/\"");
  EXPECT_EQ(EscapeForLog(std::string("\x1b[31mred\x00", 9)), "\"\\x1b[31mred\\x00\"");
}

TEST(LogSafe, KeepsPrintableUtf8AndEscapesTheRest) {
  EXPECT_EQ(EscapeForLog("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // é kept
  EXPECT_EQ(EscapeForLog("bad\xff"), "\"bad\\xff\"");         // not UTF-8
  // Right-to-left override and line separator: printable to a terminal, dangerous in a log.
  EXPECT_EQ(EscapeForLog("\xe2\x80\xae"
                         "x"),
            "\"\\u202ex\"");
  EXPECT_EQ(EscapeForLog("\xe2\x80\xa8"), "\"\\u2028\"");
}

TEST(LogSafe, CutsLongTextAndSaysHowLongItWas) {
  std::string huge(1 << 20, 'q');
  std::string logged = EscapeForLog(huge);
  EXPECT_EQ(logged, "\"" + std::string(kLogSafeMaxBytes, 'q') + "\"...(1048576 bytes)");
  EXPECT_EQ(CutForDisplay(huge), std::string(kLogSafeMaxBytes, 'q') + "...(1048576 bytes)");
  EXPECT_EQ(CutForDisplay("short"), "short");
  EXPECT_EQ(EscapeForLog("abcdef", 3), "\"abc\"...(6 bytes)");
}

TEST(LogSafe, NeverCutsInsideACharacter) {
  // "é" is two bytes: a cut at 2 would split the second one.
  EXPECT_EQ(CutAtCharBoundary("a\xc3\xa9z", 2), "a");
  EXPECT_EQ(CutAtCharBoundary("a\xc3\xa9z", 3), "a\xc3\xa9");
  // Continuation bytes that belong to nothing are cut where they are.
  EXPECT_EQ(CutAtCharBoundary("\x80\x80\x80\x80\x80", 2), "\x80\x80");
}

// The attack from issue 14: a user name that carries a newline and a fake record.
TEST(LogSafe, ForgedNewlineInAUserNameStaysOneLogLine) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_formatter(server::MakeLogFormatter(server::LogFormat::kText, false));
  spdlog::logger logger("test", sink);
  std::string user = "eve\n2026-01-01T00:00:00.000Z critical forged: disk on fire";
  logger.warn("conn=1 user={} login refused", LogSafe(user));
  std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("user=\"eve\\n2026-01-01T00:00:00.000Z critical forged"), std::string::npos)
      << text;
}

// The formatter's net, for a call site that forgot LogSafe.
TEST(LogSafe, TextFormatterEscapesControlBytesLeftInAMessage) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_formatter(server::MakeLogFormatter(server::LogFormat::kText, false));
  spdlog::logger logger("test", sink);
  logger.info("user={}", std::string("eve\nforged\x1b[2J"));
  std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("user=eve\\x0aforged\\x1b[2J"), std::string::npos) << text;
}

}  // namespace
}  // namespace wharf
