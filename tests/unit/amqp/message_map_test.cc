// Unit tests for amqp/message_map.h: AMQP properties <-> Wharf's message model, x-death, and
// RabbitMQ's reading of the expiration property.
#include "amqp/message_map.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "unit/amqp/amqp_test_util.h"

namespace wharf::amqp {
namespace {

using testing::Hex;
using testing::Wire;

BasicProperties AllProperties() {
  BasicProperties p;
  p.content_type = "application/json";
  p.content_encoding = "gzip";
  p.correlation_id = "corr";
  p.reply_to = "replies";
  p.message_id = "m-1";
  p.type = "task";
  p.app_id = "app";
  p.user_id = "guest";
  p.cluster_id = "c";
  p.timestamp = 1700000000;
  p.priority = 7;
  p.expiration = "60000";
  p.delivery_mode = 2;
  return p;
}

TEST(AmqpMessageMap, PropertiesToWharf) {
  Message m;
  ToWharfMessage(AllProperties(), &m);
  EXPECT_EQ(m.properties.content_type, "application/json");
  EXPECT_EQ(m.properties.content_encoding, "gzip");
  EXPECT_EQ(m.properties.correlation_id, "corr");
  EXPECT_EQ(m.properties.reply_to, "replies");
  EXPECT_EQ(m.properties.message_id, "m-1");
  EXPECT_EQ(m.properties.type, "task");
  EXPECT_EQ(m.properties.app_id, "app");
  EXPECT_EQ(m.properties.timestamp_ms, 1700000000000);
  EXPECT_EQ(m.properties.priority, 7u);
  EXPECT_EQ(m.properties.expiration_ms, 60000u);
  EXPECT_TRUE(m.persistent);
  EXPECT_TRUE(m.headers.empty());
}

// Wharf's header names are text: a key that is not UTF-8 stays out of the view (an AMQP
// consumer still gets it in the raw property bytes); its value does not matter.
TEST(AmqpMessageMap, AHeaderNameThatIsNotUtf8IsLeftOutOfTheView) {
  FieldTable table;
  table.Set("\xff\xfe", FieldValue::LongStr("v"));
  table.Set("ok", FieldValue::LongStr("\xff"));
  Headers headers = ToWharfHeaders(table);
  ASSERT_EQ(headers.size(), 1u);
  EXPECT_EQ(headers.at("ok"), HeaderValue(Bytes{"\xff"}));
}

TEST(AmqpMessageMap, AbsentPropertiesClearTheView) {
  Message m;
  ToWharfMessage(AllProperties(), &m);
  m.headers["old"] = true;
  ToWharfMessage({}, &m);
  EXPECT_EQ(m.properties, Properties());
  EXPECT_FALSE(m.persistent);
  EXPECT_TRUE(m.headers.empty());
}

TEST(AmqpMessageMap, PersistentOnlyForDeliveryModeTwo) {
  for (auto [mode, persistent] :
       {std::pair<int, bool>{1, false}, {2, true}, {3, false}, {0, false}}) {
    BasicProperties p;
    p.delivery_mode = static_cast<uint8_t>(mode);
    Message m;
    ToWharfMessage(p, &m);
    EXPECT_EQ(m.persistent, persistent) << mode;
  }
}

TEST(AmqpMessageMap, TimestampSaturates) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (auto [seconds, ms] : {std::pair<uint64_t, int64_t>{0, 0},
                             {uint64_t{kMax / 1000}, kMax / 1000 * 1000},
                             {uint64_t{kMax / 1000} + 1, kMax},
                             {UINT64_MAX, kMax}}) {
    BasicProperties p;
    p.timestamp = seconds;
    Message m;
    ToWharfMessage(p, &m);
    EXPECT_EQ(m.properties.timestamp_ms, ms) << seconds;
  }
}

TEST(AmqpMessageMap, OnlyAValidExpirationIsUsed) {
  for (auto [text, ms] : {std::pair<const char*, uint64_t>{"0", 0},
                          {"1", 1},
                          {"abc", 0},
                          {"-5", 0},
                          {"10s", 0},
                          {"+25", 25}}) {
    BasicProperties p;
    p.expiration = text;
    Message m;
    ToWharfMessage(p, &m);
    EXPECT_EQ(m.properties.expiration_ms, ms) << text;
  }
}

TEST(AmqpMessageMap, HeaderTypes) {
  FieldTable t;
  t.Set("t", FieldValue::Bool(true));
  t.Set("b", FieldValue::Int('b', -5));
  t.Set("B", FieldValue::UInt('B', 250));
  t.Set("s", FieldValue::Int('s', -300));
  t.Set("u", FieldValue::UInt('u', 65535));
  t.Set("I", FieldValue::Int('I', -70000));
  t.Set("i", FieldValue::UInt('i', 4294967295u));
  t.Set("l", FieldValue::Int('l', std::numeric_limits<int64_t>::min()));
  t.Set("L", FieldValue::Int('L', 42));
  t.Set("big", FieldValue{'B', uint64_t{1} << 63});  // an unsigned above INT64_MAX
  t.Set("f", FieldValue::Float(1.5f));
  t.Set("d", FieldValue::Double(-2.5));
  t.Set("D", FieldValue::Dec({2, 12345}));
  t.Set("S", FieldValue::LongStr("text é"));
  t.Set("S-binary", FieldValue::LongStr("\xff\xfe"));
  t.Set("x", FieldValue::ByteArray("raw"));
  t.Set("T", FieldValue::Timestamp(1700000000));
  t.Set("T-huge", FieldValue::Timestamp(UINT64_MAX));
  t.Set("F", FieldValue::Table({}));
  t.Set("A", FieldValue::Array({FieldValue::LongStr("a")}));
  t.Set("V", FieldValue::Void());
  BasicProperties p;
  p.headers = t;
  Message m;
  ToWharfMessage(p, &m);
  const Headers expected = {
      {"t", true},
      {"b", int64_t{-5}},
      {"B", int64_t{250}},
      {"s", int64_t{-300}},
      {"u", int64_t{65535}},
      {"I", int64_t{-70000}},
      {"i", int64_t{4294967295}},
      {"l", std::numeric_limits<int64_t>::min()},
      {"L", int64_t{42}},
      {"big", 9223372036854775808.0},
      {"f", 1.5},
      {"d", -2.5},
      {"D", 123.45},
      {"S", std::string("text é")},
      {"S-binary", Bytes{"\xff\xfe"}},
      {"x", Bytes{"raw"}},
      {"T", int64_t{1700000000}},
      {"T-huge", 18446744073709551615.0},
  };
  EXPECT_EQ(m.headers, expected);  // F, A and V left out
}

TEST(AmqpMessageMap, FirstOfDuplicateHeadersWins) {
  FieldTable t;
  t.entries.emplace_back("k", FieldValue::Int('I', 1));
  t.entries.emplace_back("k", FieldValue::Int('I', 2));
  EXPECT_EQ(ToWharfHeaders(t), (Headers{{"k", int64_t{1}}}));
  // A first value that has no Wharf form is left out, and the next one is not taken instead
  // only if it has none either.
  FieldTable u;
  u.entries.emplace_back("k", FieldValue::Void());
  u.entries.emplace_back("k", FieldValue::Int('I', 2));
  EXPECT_EQ(ToWharfHeaders(u), (Headers{{"k", int64_t{2}}}));
}

Message NativeMessage() {
  Message m;
  m.properties.message_id = "m-1";
  m.properties.correlation_id = "corr";
  m.properties.reply_to = "replies";
  m.properties.content_type = "text/plain";
  m.properties.content_encoding = "identity";
  m.properties.timestamp_ms = 1700000000999;
  m.properties.priority = 3;
  m.properties.expiration_ms = 5000;
  m.properties.type = "event";
  m.properties.app_id = "native";
  m.persistent = true;
  m.headers = {{"s", std::string("v")},
               {"i", int64_t{-1}},
               {"d", 0.25},
               {"b", false},
               {"x", Bytes{std::string("\0\1", 2)}}};
  return m;
}

TEST(AmqpMessageMap, FromWharf) {
  const BasicProperties p = FromWharfMessage(NativeMessage());
  EXPECT_EQ(p.message_id, "m-1");
  EXPECT_EQ(p.correlation_id, "corr");
  EXPECT_EQ(p.reply_to, "replies");
  EXPECT_EQ(p.content_type, "text/plain");
  EXPECT_EQ(p.content_encoding, "identity");
  EXPECT_EQ(p.timestamp, 1700000000u);
  EXPECT_EQ(p.priority, 3);
  EXPECT_EQ(p.expiration, "5000");
  EXPECT_EQ(p.type, "event");
  EXPECT_EQ(p.app_id, "native");
  EXPECT_EQ(p.delivery_mode, 2);
  EXPECT_FALSE(p.user_id.has_value());
  EXPECT_FALSE(p.cluster_id.has_value());
  ASSERT_TRUE(p.headers.has_value());
  FieldTable expected;  // in key order
  expected.entries.emplace_back("b", FieldValue::Bool(false));
  expected.entries.emplace_back("d", FieldValue::Double(0.25));
  expected.entries.emplace_back("i", FieldValue::Int('l', -1));
  expected.entries.emplace_back("s", FieldValue::LongStr("v"));
  expected.entries.emplace_back("x", FieldValue::ByteArray(std::string("\0\1", 2)));
  EXPECT_EQ(*p.headers, expected);
}

TEST(AmqpMessageMap, FromWharfLeavesDefaultsOut) {
  const BasicProperties p = FromWharfMessage(Message());
  EXPECT_EQ(p, BasicProperties());
  Message m;
  m.properties.timestamp_ms = -5000;  // before 1970: no AMQP form
  m.properties.priority = 300;
  EXPECT_FALSE(FromWharfMessage(m).timestamp.has_value());
  EXPECT_EQ(FromWharfMessage(m).priority, 255);
}

TEST(AmqpMessageMap, RoundTripThroughAmqp) {
  Message native = NativeMessage();
  native.properties.timestamp_ms = 1700000000000;  // whole seconds survive
  Message back;
  ToWharfMessage(FromWharfMessage(native), &back);
  EXPECT_EQ(back.properties, native.properties);
  EXPECT_EQ(back.persistent, native.persistent);
  EXPECT_EQ(back.headers, native.headers);
}

Death MakeDeath(std::string reason, std::string queue, std::string exchange,
                std::string routing_key, uint32_t count, int64_t last_at_ms) {
  Death d;
  d.reason = std::move(reason);
  d.queue = std::move(queue);
  d.exchange = std::move(exchange);
  d.routing_key = std::move(routing_key);
  d.count = count;
  d.first_at_ms = 1000;
  d.last_at_ms = last_at_ms;
  d.receive_count = 4;
  d.last_error = "not rendered";
  return d;
}

std::vector<Death> TwoDeaths() {  // newest first, as Message::deaths
  return {MakeDeath("max_length", "work", "jobs", "rk-2", 3, 1700000005999),
          MakeDeath("max_attempts", "first", "origin", "rk-1", 1, 1700000000000)};
}

TEST(AmqpMessageMap, DeathHeadersHaveRabbitMqsTypes) {
  FieldTable h;
  h.Set("app", FieldValue::LongStr("kept"));
  h.Set("x-death", FieldValue::LongStr("forged by the publisher"));
  h.Set("x-first-death-reason", FieldValue::Int('I', 1));
  SetDeathHeaders(TwoDeaths(), &h);

  EXPECT_EQ(*h.Find("app"), FieldValue::LongStr("kept"));
  const FieldValue* x_death = h.Find("x-death");
  ASSERT_NE(x_death, nullptr);
  ASSERT_EQ(x_death->type, 'A');
  const FieldArray& deaths = *x_death->AsArray();
  ASSERT_EQ(deaths.size(), 2u);
  FieldTable newest;
  newest.entries.emplace_back("queue", FieldValue::LongStr("work"));
  newest.entries.emplace_back("reason", FieldValue::LongStr("maxlen"));
  newest.entries.emplace_back("count", FieldValue::Int('l', 3));
  newest.entries.emplace_back("time", FieldValue::Timestamp(1700000005));
  newest.entries.emplace_back("exchange", FieldValue::LongStr("jobs"));
  newest.entries.emplace_back("routing-keys", FieldValue::Array({FieldValue::LongStr("rk-2")}));
  EXPECT_EQ(deaths[0], FieldValue::Table(newest));
  ASSERT_EQ(deaths[1].type, 'F');
  EXPECT_EQ(*deaths[1].AsTable()->Find("reason"), FieldValue::LongStr("delivery_limit"));
  EXPECT_EQ(*deaths[1].AsTable()->Find("queue"), FieldValue::LongStr("first"));

  EXPECT_EQ(*h.Find("x-first-death-reason"), FieldValue::LongStr("delivery_limit"));
  EXPECT_EQ(*h.Find("x-first-death-queue"), FieldValue::LongStr("first"));
  EXPECT_EQ(*h.Find("x-first-death-exchange"), FieldValue::LongStr("origin"));
  EXPECT_EQ(h.entries.size(), 5u);  // replaced in place, not duplicated
}

TEST(AmqpMessageMap, DeathEntryWireBytes) {
  FieldTable h;
  SetDeathHeaders({MakeDeath("rejected", "q", "x", "k", 1, 2000)}, &h);
  std::string bytes;
  AppendTable(h, &bytes);
  Wire entry;
  entry.Entry("queue", 'S').Long("q");
  entry.Entry("reason", 'S').Long("rejected");
  entry.Entry("count", 'l').U64(1);
  entry.Entry("time", 'T').U64(2);
  entry.Entry("exchange", 'S').Long("x");
  entry.Entry("routing-keys", 'A').Long(Wire().Char('S').Long("k"));
  Wire content;
  content.Entry("x-death", 'A').Long(Wire().Char('F').Long(entry));
  content.Entry("x-first-death-reason", 'S').Long("rejected");
  content.Entry("x-first-death-queue", 'S').Long("q");
  content.Entry("x-first-death-exchange", 'S').Long("x");
  EXPECT_EQ(Hex(bytes), Hex(Wire().U32(static_cast<uint32_t>(content.str().size())).Raw(content)));
}

TEST(AmqpMessageMap, TheOriginalExpirationGoesInTheOldestDeath) {
  FieldTable h;
  SetDeathHeaders(TwoDeaths(), &h, std::string("100"));
  const FieldArray& deaths = *h.Find("x-death")->AsArray();
  ASSERT_EQ(deaths.size(), 2u);
  const auto& newest = std::get<FieldTable>(deaths[0].value);
  const auto& oldest = std::get<FieldTable>(deaths[1].value);
  EXPECT_EQ(newest.Find("original-expiration"), nullptr);
  ASSERT_NE(oldest.Find("original-expiration"), nullptr);
  EXPECT_EQ(*oldest.Find("original-expiration"), FieldValue::LongStr("100"));
}

TEST(AmqpMessageMap, NoDeathsLeaveTheHeaders) {
  FieldTable h;
  h.Set("x-death", FieldValue::LongStr("from the publisher"));
  const FieldTable before = h;
  SetDeathHeaders({}, &h);
  EXPECT_EQ(h, before);
}

TEST(AmqpMessageMap, FromWharfRendersDeaths) {
  Message m;
  m.deaths = TwoDeaths();
  const BasicProperties p = FromWharfMessage(m);
  ASSERT_TRUE(p.headers.has_value());
  ASSERT_NE(p.headers->Find("x-death"), nullptr);
  EXPECT_EQ(p.headers->Find("x-death")->AsArray()->size(), 2u);
  EXPECT_EQ(*p.headers->Find("x-first-death-queue"), FieldValue::LongStr("first"));
}

TEST(AmqpParseExpiration, Valid) {
  for (auto [text, value] : {std::pair<const char*, uint64_t>{"0", 0},
                             {"60000", 60000},
                             {"007", 7},
                             {"+5", 5},
                             {"-0", 0},
                             {"4294967295", 4294967295}}) {
    Result<uint64_t> r = ParseExpiration(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    EXPECT_EQ(*r, value) << text;
  }
}

TEST(AmqpParseExpiration, InvalidAsRabbitMqSaysIt) {
  for (auto [text, message] :
       {std::pair<const char*, const char*>{"", "invalid expiration '': no_integer"},
        {"abc", "invalid expiration 'abc': no_integer"},
        {"-", "invalid expiration '-': no_integer"},
        {"+-1", "invalid expiration '+-1': no_integer"},
        {" 5", "invalid expiration ' 5': no_integer"},
        {"5 ", "invalid expiration '5 ': {leftover_string,\" \"}"},
        {"1.5", "invalid expiration '1.5': {leftover_string,\".5\"}"},
        {"10s", "invalid expiration '10s': {leftover_string,\"s\"}"},
        {"-5", "invalid expiration '-5': {value_negative,-5}"},
        {"-007", "invalid expiration '-007': {value_negative,-7}"},
        {"4294967296", "invalid expiration '4294967296': {value_too_large,4294967296}"},
        // Past column 80, Erlang's ~p breaks the tuple (RabbitMQ 3.10.8's exact text).
        {"99999999999999999999",
         "invalid expiration '99999999999999999999': {value_too_large,\n"
         "                                            99999999999999999999}"},
        {"-99999999999999999999999",
         "invalid expiration '-99999999999999999999999': {value_negative,\n"
         "                                                -99999999999999999999999}"}}) {
    Result<uint64_t> r = ParseExpiration(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kPreconditionFailed);
    EXPECT_EQ(r.status().message(), message);
  }
}

}  // namespace
}  // namespace wharf::amqp
