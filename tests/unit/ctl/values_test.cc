// ctl/ctl.h: wharfctl's command-line values are checked, not wrapped, and typed.
#include <gtest/gtest.h>

#include "ctl/ctl.h"

namespace wharf::ctl {
namespace {

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
  // Only numbers written as they print are numbers.
  for (const char* kv : {"zip=01234", "ver=1.10", "plus=+5", "hex=0x10", "exp=1e3", "nan=nan"}) {
    ASSERT_TRUE(ParseTypedValue(kv, &h, &error)) << kv;
    const std::string key(kv, std::string_view(kv).find('='));
    EXPECT_TRUE(std::holds_alternative<std::string>(h[key])) << kv;
  }
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
  EXPECT_FALSE(ParseTime("2027-02-30T00:00:00Z").has_value()) << "no February 30th";
  EXPECT_FALSE(ParseTime("2027-01-31T08:00:60Z").has_value());
  EXPECT_FALSE(ParseTime("2027-1-31T08:00:00Z").has_value());
  EXPECT_FALSE(ParseTime("2027-01-31T08:00:00").has_value()) << "UTC only: the Z is required";
  EXPECT_EQ(ParseTime("2028-02-29T00:00:00Z"), 1835395200000) << "a leap day is a day";
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
  EXPECT_EQ(Printable("abc\u202edef"), "abc\\u202edef") << "a bidi override cannot reorder a table";
}

}  // namespace
}  // namespace wharf::ctl
