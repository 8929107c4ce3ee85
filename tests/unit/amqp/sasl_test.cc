// Unit tests for amqp/sasl.h: PLAIN and AMQPLAIN responses.
#include "amqp/sasl.h"

#include <gtest/gtest.h>

#include <string>

#include "amqp/field_table.h"
#include "unit/amqp/amqp_test_util.h"

namespace wharf::amqp {
namespace {

using testing::Wire;
using namespace std::string_literals;

TEST(AmqpSaslPlain, WithoutAuthzid) {
  Credentials c;
  ASSERT_TRUE(ParsePlain("\0guest\0secret"s, &c).ok());
  EXPECT_EQ(c.user, "guest");
  EXPECT_EQ(c.password, "secret");
}

TEST(AmqpSaslPlain, AuthzidNamingTheUserItself) {
  Credentials c;
  ASSERT_TRUE(ParsePlain("bob\0bob\0pw"s, &c).ok());
  EXPECT_EQ(c.user, "bob");
  EXPECT_EQ(c.password, "pw");
}

TEST(AmqpSaslPlain, AuthzidOfAnotherUserIsRefused) {
  Credentials c;
  Status st = ParsePlain("admin\0bob\0pw"s, &c);
  EXPECT_EQ(st.code(), StatusCode::kAuthenticationFailed);
  EXPECT_TRUE(c.user.empty());
}

TEST(AmqpSaslPlain, EmptyUserOrPasswordParse) {
  Credentials c;
  ASSERT_TRUE(ParsePlain("\0\0"s, &c).ok());
  EXPECT_EQ(c.user, "");
  EXPECT_EQ(c.password, "");
  ASSERT_TRUE(ParsePlain("\0u\0"s, &c).ok());
  EXPECT_EQ(c.user, "u");
}

TEST(AmqpSaslPlain, PasswordKeepsItsBytes) {
  Credentials c;
  ASSERT_TRUE(ParsePlain("\0u\0p\xff \x01"s, &c).ok());
  EXPECT_EQ(c.password, "p\xff \x01");
}

TEST(AmqpSaslPlain, MissingOrExtraNulsAreRefused) {
  for (const std::string& bad : {""s, "guest"s, "guestguest"s, "\0guest"s, "guest\0guest"s,
                                 "\0a\0b\0c"s, "\0guest\0pass\0"s}) {
    Credentials c;
    Status st = ParsePlain(bad, &c);
    EXPECT_EQ(st.code(), StatusCode::kAuthenticationFailed) << testing::Hex(bad);
    EXPECT_EQ(st.message().find("pass"), std::string_view::npos)
        << "no password in " << st.ToString();
  }
}

// py-amqp's encoding: the table of LOGIN and PASSWORD without its length prefix.
TEST(AmqpSaslAmqplain, PyAmqpEncoding) {
  const std::string response =
      Wire().Entry("LOGIN", 'S').Long("guest").Entry("PASSWORD", 'S').Long("s3cret");
  Credentials c;
  ASSERT_TRUE(ParseAmqplain(response, &c).ok());
  EXPECT_EQ(c.user, "guest");
  EXPECT_EQ(c.password, "s3cret");
}

TEST(AmqpSaslAmqplain, OrderAndOtherEntriesDoNotMatter) {
  FieldTable t;
  t.Set("PASSWORD", FieldValue::LongStr("pw"));
  t.Set("EXTRA", FieldValue::Int('I', 1));
  t.Set("LOGIN", FieldValue::LongStr("user"));
  std::string prefixed;
  AppendTable(t, &prefixed);
  Credentials c;
  ASSERT_TRUE(ParseAmqplain(std::string_view(prefixed).substr(4), &c).ok());
  EXPECT_EQ(c.user, "user");
  EXPECT_EQ(c.password, "pw");
}

TEST(AmqpSaslAmqplain, RefusedWhenMissingMistypedOrMalformed) {
  const std::string cases[] = {
      Wire().Entry("LOGIN", 'S').Long("guest"),
      Wire().Entry("PASSWORD", 'S').Long("pw"),
      Wire().Entry("LOGIN", 'x').Long("guest").Entry("PASSWORD", 'S').Long("pw"),
      Wire().Entry("LOGIN", 'S').Long("guest").Entry("PASSWORD", 'I').U32(1),
      Wire().Entry("LOGIN", 'S').U32(99).Raw("guest"),  // truncated
      // With the length prefix (not what the mechanism sends): not a table.
      Wire().U32(31).Entry("LOGIN", 'S').Long("guest").Entry("PASSWORD", 'S').Long("pw"),
      std::string(),
  };
  for (const std::string& response : cases) {
    Credentials c;
    EXPECT_EQ(ParseAmqplain(response, &c).code(), StatusCode::kAuthenticationFailed)
        << testing::Hex(response);
  }
}

}  // namespace
}  // namespace wharf::amqp
