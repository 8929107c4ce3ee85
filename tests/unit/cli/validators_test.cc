// cli/validators.h: numbers are checked, never wrapped or read as octal; ports are in range.
#include "cli/validators.h"

#include <gtest/gtest.h>

namespace wharf::cli {
namespace {

// Runs `validator` on `text`: the error ("" when accepted) and the rewritten text.
std::pair<std::string, std::string> Check(const CLI::Validator& validator, std::string text) {
  std::string error = validator(text);
  return {error, text};
}

TEST(CliValidators, UnsignedRefusesSignsWrapAndOctal) {
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

TEST(CliValidators, FiniteRefusesNanAndInfinity) {
  EXPECT_EQ(Check(Finite(0, 3600), "1.5").first, "");
  for (const char* bad : {"nan", "inf", "-1", "3601", "", "1x"}) {
    EXPECT_NE(Check(Finite(0, 3600), bad).first, "") << bad;
  }
}

TEST(CliValidators, HostPortNeedsAPortInRange) {
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

}  // namespace
}  // namespace wharf::cli
