// ctl/ctl.h: wharfctl's command-line values are checked, not wrapped, and typed.
#include <gtest/gtest.h>

#include "ctl/ctl.h"

namespace wharf::ctl {
namespace {

// Runs `validator` on `text`: the error ("" when accepted) and the rewritten text.
std::pair<std::string, std::string> Check(const CLI::Validator& validator, std::string text) {
  std::string error = validator(text);
  return {error, text};
}

TEST(CtlValues, UnsignedRefusesSignsWrapAndOctal) {
  EXPECT_EQ(Check(Unsigned(0, 100), "42"), std::make_pair(std::string(), std::string("42")));
  EXPECT_EQ(Check(Unsigned(0, 100), "010").second, "10") << "decimal, not octal 8";
  EXPECT_NE(Check(Unsigned(0, 100), "-5").first, "");
  EXPECT_NE(Check(Unsigned(0, 100), "101").first, "");
  EXPECT_NE(Check(Unsigned(1, 100), "0").first, "");
  EXPECT_NE(Check(Unsigned(0, 100), "0x10").first, "");
  EXPECT_NE(Check(Unsigned(0, 100), "").first, "");
  EXPECT_NE(Check(Unsigned(0, UINT64_MAX), "18446744073709551616").first, "");
  EXPECT_EQ(Check(Integer(-5, 5), "-5").first, "");
  EXPECT_NE(Check(Integer(-5, 5), "-6").first, "");
}

TEST(CtlValues, HostPortNeedsAPortInRange) {
  std::string host;
  uint16_t port = 0;
  EXPECT_TRUE(ParseHostPort("127.0.0.1:5680", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 5680);
  EXPECT_TRUE(ParseHostPort("[::1]:5680", &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_FALSE(ParseHostPort("host:70000", &host, &port)) << "not 70000 % 65536";
  EXPECT_FALSE(ParseHostPort("host:0", &host, &port));
  EXPECT_FALSE(ParseHostPort("host", &host, &port));
  EXPECT_FALSE(ParseHostPort("::1:5680", &host, &port));
  EXPECT_FALSE(ParseHostPort("host:-1", &host, &port));
}

TEST(CtlValues, TypedValuesAndExplicitTypes) {
  Headers h;
  std::string error;
  for (const char* kv : {"n=1000", "b=true", "d=1.5", "s=orders.dlq", "forced:string=1000",
                         "big:int=-7", "x:double=2", "t:bool=false", "empty="}) {
    ASSERT_TRUE(ParseTypedValue(kv, &h, &error)) << kv << ": " << error;
  }
  EXPECT_EQ(h["n"], HeaderValue(int64_t{1000}));
  EXPECT_EQ(h["b"], HeaderValue(true));
  EXPECT_EQ(h["d"], HeaderValue(1.5));
  EXPECT_EQ(h["s"], HeaderValue(std::string("orders.dlq")));
  EXPECT_EQ(h["forced"], HeaderValue(std::string("1000")));
  EXPECT_EQ(h["big"], HeaderValue(int64_t{-7}));
  EXPECT_EQ(h["x"], HeaderValue(2.0));
  EXPECT_EQ(h["t"], HeaderValue(false));
  EXPECT_EQ(h["empty"], HeaderValue(std::string()));
  EXPECT_FALSE(ParseTypedValue("novalue", &h, &error));
  EXPECT_FALSE(ParseTypedValue("=v", &h, &error));
  EXPECT_FALSE(ParseTypedValue("k:int=abc", &h, &error));
  EXPECT_FALSE(ParseTypedValue("k:bool=yes", &h, &error));
  EXPECT_FALSE(ParseTypedValue("k:date=x", &h, &error));
}

TEST(CtlValues, SeparatorsTimesAndIds) {
  EXPECT_EQ(ParseSeparator("\\0"), std::string(1, '\0'));
  EXPECT_EQ(ParseSeparator("--\\n"), "--\n");
  EXPECT_EQ(ParseSeparator("\\x1e"), "\x1e");
  EXPECT_FALSE(ParseSeparator("\\x1").has_value());
  EXPECT_FALSE(ParseSeparator("\\q").has_value());
  EXPECT_FALSE(ParseSeparator("\\").has_value());
  EXPECT_EQ(ParseTime("2027-01-31T08:00:00.250Z"), 1801382400250);
  EXPECT_EQ(ParseTime("1801382400250"), 1801382400250);
  EXPECT_FALSE(ParseTime("2027-01-31 08:00").has_value());
  EXPECT_EQ(FormatTime(1801382400250), "2027-01-31T08:00:00.250Z");
  EXPECT_EQ(ParseMessageId("0x0190a3c5e2f40001"), 0x0190a3c5e2f40001u);
  EXPECT_FALSE(ParseMessageId("12345678901234567").has_value());
  EXPECT_FALSE(ParseMessageId("xyz").has_value());
}

TEST(CtlValues, PrintableEscapesWhatCouldDriveATerminal) {
  EXPECT_EQ(Printable("orders"), "orders");
  EXPECT_EQ(Printable("a\nb\x1b[2Jc\\"), "a\\nb\\x1b[2Jc\\\\");
  EXPECT_EQ(Printable("café"), "café");
  EXPECT_EQ(Printable("caf\xe9"), "caf\\xe9");
}

}  // namespace
}  // namespace wharf::ctl
