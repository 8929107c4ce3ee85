// Unit tests for broker/headers_match.h: AMQP headers-exchange matching.
#include "broker/headers_match.h"

#include <gtest/gtest.h>

#include <string>

namespace wharf::broker {
namespace {

using std::string_literals::operator""s;

HeadersMatchMode ParseOk(const Headers& arguments) {
  HeadersMatchMode mode = HeadersMatchMode::kAny;  // not the default, so a missing write shows
  Status s = ParseHeadersMatchMode(arguments, &mode);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return mode;
}

// Parses x-match from `arguments` and matches, as an exchange does.
bool Match(const Headers& arguments, const Headers& message) {
  return HeadersMatch(arguments, ParseOk(arguments), message);
}

TEST(ParseHeadersMatchMode, DefaultsToAll) {
  EXPECT_EQ(ParseOk({}), HeadersMatchMode::kAll);
  EXPECT_EQ(ParseOk({{"k", "v"s}}), HeadersMatchMode::kAll);
}

TEST(ParseHeadersMatchMode, ReadsAllAndAny) {
  EXPECT_EQ(ParseOk({{"x-match", "all"s}}), HeadersMatchMode::kAll);
  EXPECT_EQ(ParseOk({{"x-match", "any"s}}), HeadersMatchMode::kAny);
  EXPECT_EQ(ParseOk({{"x-match", "all-with-x"s}}), HeadersMatchMode::kAllWithX);
  EXPECT_EQ(ParseOk({{"x-match", "any-with-x"s}}), HeadersMatchMode::kAnyWithX);
}

TEST(HeadersMatch, WithXModesMatchXKeysButNotXMatch) {
  Headers all = {{"x-match", "all-with-x"s}, {"x-k", "v"s}, {"k", "w"s}};
  EXPECT_TRUE(Match(all, {{"x-k", "v"s}, {"k", "w"s}}));
  EXPECT_FALSE(Match(all, {{"k", "w"s}}));
  Headers any = {{"x-match", "any-with-x"s}, {"x-k", "v"s}, {"zz", int64_t{1}}};
  EXPECT_TRUE(Match(any, {{"x-k", "v"s}}));
  EXPECT_FALSE(Match(any, {{"x-match", "any-with-x"s}}));
}

TEST(HeadersMatch, TextIsOneKindAsStringOrBytes) {
  // RabbitMQ compares the binaries: a header sent as bytes (x) matches a string (S) value.
  Headers binding = {{"b", "x"s}};
  EXPECT_TRUE(Match(binding, {{"b", Bytes{"x"}}}));
  EXPECT_FALSE(Match(binding, {{"b", Bytes{"y"}}}));
  EXPECT_FALSE(Match({{"n", int64_t{1}}}, {{"n", "1"s}}));
}

TEST(ParseHeadersMatchMode, BadValueIsInvalidArgument) {
  for (const HeaderValue& bad :
       {HeaderValue("ALL"s), HeaderValue("some"s), HeaderValue(""s), HeaderValue(int64_t{1}),
        HeaderValue(true), HeaderValue(Bytes{"any"})}) {
    HeadersMatchMode mode;
    Status s = ParseHeadersMatchMode({{"x-match", bad}}, &mode);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << HeaderValueToString(bad);
    EXPECT_NE(s.message().find("x-match"), std::string_view::npos) << s.ToString();
  }
}

TEST(HeadersMatch, AllNeedsEveryEntryPresentAndEqual) {
  Headers binding = {{"x-match", "all"s}, {"format", "pdf"s}, {"type", "report"s}};
  EXPECT_TRUE(Match(binding, {{"format", "pdf"s}, {"type", "report"s}}));
  EXPECT_TRUE(Match(binding, {{"format", "pdf"s}, {"type", "report"s}, {"extra", "1"s}}));
  EXPECT_FALSE(Match(binding, {{"format", "pdf"s}}));
  EXPECT_FALSE(Match(binding, {{"format", "pdf"s}, {"type", "log"s}}));
  EXPECT_FALSE(Match(binding, {}));
}

TEST(HeadersMatch, AnyNeedsOneEqualEntry) {
  Headers binding = {{"x-match", "any"s}, {"format", "pdf"s}, {"type", "report"s}};
  EXPECT_TRUE(Match(binding, {{"format", "pdf"s}}));
  EXPECT_TRUE(Match(binding, {{"type", "report"s}, {"format", "zip"s}}));
  EXPECT_FALSE(Match(binding, {{"format", "zip"s}, {"type", "log"s}}));
  EXPECT_FALSE(Match(binding, {{"other", "pdf"s}}));
  EXPECT_FALSE(Match(binding, {}));
}

TEST(HeadersMatch, DefaultModeIsAll) {
  Headers binding = {{"a", int64_t{1}}, {"b", int64_t{2}}};
  EXPECT_TRUE(Match(binding, {{"a", int64_t{1}}, {"b", int64_t{2}}}));
  EXPECT_FALSE(Match(binding, {{"a", int64_t{1}}}));
}

TEST(HeadersMatch, XPrefixedBindingKeysAreIgnored) {
  // x-foo in the binding is not a condition, in either mode.
  Headers all = {{"x-match", "all"s}, {"x-foo", "bar"s}, {"k", "v"s}};
  EXPECT_TRUE(Match(all, {{"k", "v"s}}));
  Headers any = {{"x-match", "any"s}, {"x-foo", "bar"s}, {"k", "v"s}};
  EXPECT_FALSE(Match(any, {{"x-foo", "bar"s}}));
  EXPECT_TRUE(Match(any, {{"k", "v"s}}));
}

TEST(HeadersMatch, OnlyXKeysBehavesLikeEmptyTable) {
  EXPECT_TRUE(Match({{"x-match", "all"s}, {"x-foo", "bar"s}}, {}));
  EXPECT_FALSE(Match({{"x-match", "any"s}, {"x-foo", "bar"s}}, {{"x-foo", "bar"s}}));
}

TEST(HeadersMatch, ValuesCompareByType) {
  EXPECT_FALSE(Match({{"n", int64_t{1}}}, {{"n", "1"s}}));
  EXPECT_FALSE(Match({{"n", "1"s}}, {{"n", int64_t{1}}}));
  EXPECT_FALSE(Match({{"n", int64_t{1}}}, {{"n", 1.0}}));
  EXPECT_FALSE(Match({{"n", int64_t{1}}}, {{"n", true}}));
  EXPECT_FALSE(Match({{"x-match", "any"s}, {"n", int64_t{1}}}, {{"n", "1"s}}));
  // Text is one kind, string or bytes (RabbitMQ compares the binaries).
  EXPECT_TRUE(Match({{"n", "abc"s}}, {{"n", Bytes{"abc"}}}));
}

TEST(HeadersMatch, EqualValuesOfEveryTypeMatch) {
  Headers table = {{"b", true},
                   {"i", int64_t{-7}},
                   {"d", 2.5},
                   {"s", "text"s},
                   {"y", Bytes{std::string("\0\1", 2)}}};
  EXPECT_TRUE(Match(table, table));
  Headers other = table;
  other["d"] = 2.25;
  EXPECT_FALSE(Match(table, other));
  other = table;
  other["y"] = Bytes{std::string("\0\2", 2)};
  EXPECT_FALSE(Match(table, other));
  other = table;
  other["b"] = false;
  EXPECT_FALSE(Match(table, other));
}

TEST(HeadersMatch, EmptyTableWithAllMatchesEveryMessage) {
  EXPECT_TRUE(HeadersMatch({}, HeadersMatchMode::kAll, {}));
  EXPECT_TRUE(HeadersMatch({}, HeadersMatchMode::kAll, {{"k", "v"s}}));
}

TEST(HeadersMatch, EmptyTableWithAnyMatchesNoMessage) {
  EXPECT_FALSE(HeadersMatch({}, HeadersMatchMode::kAny, {}));
  EXPECT_FALSE(HeadersMatch({}, HeadersMatchMode::kAny, {{"k", "v"s}}));
}

TEST(HeadersMatch, KeysAreCaseSensitive) { EXPECT_FALSE(Match({{"Key", "v"s}}, {{"key", "v"s}})); }

}  // namespace
}  // namespace wharf::broker
