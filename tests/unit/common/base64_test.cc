// common/base64.h: every length round-trips; what is not padded base64 is refused.
#include "common/base64.h"

#include <gtest/gtest.h>

namespace wharf {
namespace {

TEST(Base64, RoundTripsEveryLengthAndRefusesGarbage) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  for (size_t n = 0; n <= 10; ++n) {
    auto back = Base64Decode(Base64Encode(bytes.substr(250 - n, n)));
    ASSERT_TRUE(back.has_value()) << n;
    EXPECT_EQ(*back, bytes.substr(250 - n, n)) << n;
  }
  EXPECT_EQ(Base64Encode(std::string_view("ab\0c", 4)), "YWIAYw==");
  EXPECT_EQ(*Base64Decode("YWxpY2U6czNjcmV0"), "alice:s3cret");
  EXPECT_FALSE(Base64Decode("YWI").has_value()) << "not a multiple of 4";
  EXPECT_FALSE(Base64Decode("YW*=").has_value());
}

}  // namespace
}  // namespace wharf
