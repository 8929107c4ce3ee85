// Unit tests for common/utf8.h.
#include "common/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace wharf {
namespace {

using namespace std::string_literals;

TEST(Utf8, Valid) {
  for (const std::string& s :
       {""s, "ascii"s, "\0nul"s, "é"s, "東京"s, "\xf0\x9f\x90\x87"s, "\xef\xbf\xbf"s,
        "\xf4\x8f\xbf\xbf"s /* U+10FFFF */, "\xed\x9f\xbf"s /* U+D7FF */}) {
    EXPECT_TRUE(IsValidUtf8(s)) << s;
  }
}

TEST(Utf8, Invalid) {
  for (const std::string& s :
       {"\xff"s, "\x80"s, "\xc3"s /* cut */, "\xc0\x80"s /* overlong */, "\xe0\x80\xaf"s,
        "\xf0\x80\x80\xaf"s, "\xed\xa0\x80"s /* D800 */, "\xf4\x90\x80\x80"s /* 110000 */,
        "a\xe6\x9d"s, "\xf8\x88\x80\x80\x80"s, "\xc3\x28"s}) {
    EXPECT_FALSE(IsValidUtf8(s)) << s;
  }
}

}  // namespace
}  // namespace wharf
