// Erlang's ways of printing a binary, as RabbitMQ's error texts show them (the expected
// strings are RabbitMQ 3.10.8's, tests/integration/amqp_bad_input_test.py).
#include "amqp/erlang_text.h"

#include <gtest/gtest.h>

#include <string>

namespace wharf::amqp {
namespace {

TEST(ErlangText, BinaryAsP) {
  EXPECT_EQ(ErlangBinaryP(""), "<<>>");
  EXPECT_EQ(ErlangBinaryP("x"), "<<\"x\">>");
  EXPECT_EQ(ErlangBinaryP("abc"), "<<\"abc\">>");
  EXPECT_EQ(ErlangBinaryP(std::string("\0\x14\0\n\0", 5)), "<<0,20,0,10,0>>");
  EXPECT_EQ(ErlangBinaryP("a\"b\\c\n"), "<<\"a\\\"b\\\\c\\n\">>");
  EXPECT_EQ(ErlangBinaryP("\xff"), "<<255>>");
}

TEST(ErlangText, BinaryAsWIsAlwaysOctets) {
  EXPECT_EQ(ErlangBinaryW("abc"), "<<97,98,99>>");
  EXPECT_EQ(ErlangBinaryW(std::string("\0\0\1q\4\0", 6)), "<<0,0,1,113,4,0>>");
}

TEST(ErlangText, FrameSnippetShowsAtMost16Octets) {
  EXPECT_EQ(FrameSnippet(8, ""), "type 8, all octets = <<>>");
  EXPECT_EQ(FrameSnippet(3, "abc"), "type 3, all octets = <<\"abc\">>");
  EXPECT_EQ(FrameSnippet(1, std::string(20, 'z')),
            "type 1, first 16 octets = <<\"zzzzzzzzzzzzzzzz\">>");
}

}  // namespace
}  // namespace wharf::amqp
