// Unit tests for amqp/properties.h: the basic content properties against rabbitmq-c's encoder
// and decoder (all 14 flags, each alone), hostile input, and the content header's fixed part.
#include "amqp/properties.h"

#include <gtest/gtest.h>

#include <string>

#include "unit/amqp/amqp_test_util.h"

namespace wharf::amqp {
namespace {

using testing::Hex;
using testing::RmqArena;
using testing::RmqBytes;
using testing::RmqPool;
using testing::Wire;

std::string EncodedProperties(const BasicProperties& p) {
  std::string raw;
  EncodeProperties(p, &raw);
  return raw;
}

BasicProperties AllSet() {
  BasicProperties p;
  p.content_type = "application/json";
  p.content_encoding = "utf-8";
  FieldTable headers;
  headers.Set("x-delay", FieldValue::Int('I', 5000));
  headers.Set("timelimit", FieldValue::Array({FieldValue::Void(), FieldValue::Void()}));
  p.headers = headers;
  p.delivery_mode = 2;
  p.priority = 9;
  p.correlation_id = "corr";
  p.reply_to = "amq.rabbitmq.reply-to";
  p.expiration = "60000";
  p.message_id = "msg-1";
  p.timestamp = 1700000000;
  p.type = "task";
  p.user_id = "guest";
  p.app_id = "celery";
  p.cluster_id = "c1";
  return p;
}

// The 14 properties, each as a function that sets it alone (from AllSet's values).
using Setter = void (*)(BasicProperties&);
const Setter kEachProperty[] = {
    [](BasicProperties& p) { p.content_type = AllSet().content_type; },
    [](BasicProperties& p) { p.content_encoding = AllSet().content_encoding; },
    [](BasicProperties& p) { p.headers = AllSet().headers; },
    [](BasicProperties& p) { p.delivery_mode = AllSet().delivery_mode; },
    [](BasicProperties& p) { p.priority = AllSet().priority; },
    [](BasicProperties& p) { p.correlation_id = AllSet().correlation_id; },
    [](BasicProperties& p) { p.reply_to = AllSet().reply_to; },
    [](BasicProperties& p) { p.expiration = AllSet().expiration; },
    [](BasicProperties& p) { p.message_id = AllSet().message_id; },
    [](BasicProperties& p) { p.timestamp = AllSet().timestamp; },
    [](BasicProperties& p) { p.type = AllSet().type; },
    [](BasicProperties& p) { p.user_id = AllSet().user_id; },
    [](BasicProperties& p) { p.app_id = AllSet().app_id; },
    [](BasicProperties& p) { p.cluster_id = AllSet().cluster_id; },
};

// rabbitmq-c's view of the same properties; `p` must outlive the result.
amqp_basic_properties_t ToRmq(const BasicProperties& p, RmqArena& arena) {
  amqp_basic_properties_t r{};
  auto text = [&](const std::optional<std::string>& v, amqp_flags_t flag, amqp_bytes_t& field) {
    if (!v) return;
    r._flags |= flag;
    field = RmqBytes(*v);
  };
  text(p.content_type, AMQP_BASIC_CONTENT_TYPE_FLAG, r.content_type);
  text(p.content_encoding, AMQP_BASIC_CONTENT_ENCODING_FLAG, r.content_encoding);
  if (p.headers) {
    r._flags |= AMQP_BASIC_HEADERS_FLAG;
    r.headers = arena.Table(*p.headers);
  }
  if (p.delivery_mode) {
    r._flags |= AMQP_BASIC_DELIVERY_MODE_FLAG;
    r.delivery_mode = *p.delivery_mode;
  }
  if (p.priority) {
    r._flags |= AMQP_BASIC_PRIORITY_FLAG;
    r.priority = *p.priority;
  }
  text(p.correlation_id, AMQP_BASIC_CORRELATION_ID_FLAG, r.correlation_id);
  text(p.reply_to, AMQP_BASIC_REPLY_TO_FLAG, r.reply_to);
  text(p.expiration, AMQP_BASIC_EXPIRATION_FLAG, r.expiration);
  text(p.message_id, AMQP_BASIC_MESSAGE_ID_FLAG, r.message_id);
  if (p.timestamp) {
    r._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
    r.timestamp = *p.timestamp;
  }
  text(p.type, AMQP_BASIC_TYPE_FLAG, r.type);
  text(p.user_id, AMQP_BASIC_USER_ID_FLAG, r.user_id);
  text(p.app_id, AMQP_BASIC_APP_ID_FLAG, r.app_id);
  text(p.cluster_id, AMQP_BASIC_CLUSTER_ID_FLAG, r.cluster_id);
  return r;
}

std::string RmqEncode(amqp_basic_properties_t r) {
  std::string buf(1 << 16, '\0');
  const int n = amqp_encode_properties(AMQP_BASIC_CLASS, &r, RmqBytes(buf));
  EXPECT_GE(n, 0) << amqp_error_string2(n);
  buf.resize(n >= 0 ? static_cast<size_t>(n) : 0);
  return buf;
}

void ExpectMatchesRabbitMqC(const BasicProperties& p) {
  RmqArena arena;
  const std::string ours = EncodedProperties(p);
  const std::string theirs = RmqEncode(ToRmq(p, arena));
  EXPECT_EQ(Hex(ours), Hex(theirs));
  BasicProperties decoded;
  Status st = DecodeProperties(theirs, &decoded);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(decoded, p);
  // rabbitmq-c decodes ours to what encodes to the same bytes.
  RmqPool pool;
  void* back = nullptr;
  ASSERT_EQ(amqp_decode_properties(AMQP_BASIC_CLASS, pool.get(), RmqBytes(ours), &back),
            AMQP_STATUS_OK);
  EXPECT_EQ(Hex(RmqEncode(*static_cast<amqp_basic_properties_t*>(back))), Hex(ours));
}

TEST(AmqpProperties, AllFourteenSetMatchRabbitMqC) {
  const BasicProperties p = AllSet();
  ExpectMatchesRabbitMqC(p);
  const std::string raw = EncodedProperties(p);
  EXPECT_EQ(Hex(raw.substr(0, 2)), "ff fc");
}

TEST(AmqpProperties, EachAloneMatchesRabbitMqC) {
  uint16_t expected_flag = 0x8000;
  for (Setter set : kEachProperty) {
    BasicProperties p;
    set(p);
    SCOPED_TRACE(Hex(EncodedProperties(p)));
    ExpectMatchesRabbitMqC(p);
    const std::string raw = EncodedProperties(p);
    EXPECT_EQ(testing::Hex(raw.substr(0, 2)), Hex(Wire().U16(expected_flag).str()));
    expected_flag >>= 1;
  }
}

TEST(AmqpProperties, NoneSet) {
  ExpectMatchesRabbitMqC({});
  EXPECT_EQ(Hex(EncodedProperties({})), "00 00");
}

TEST(AmqpProperties, HandWrittenBytes) {
  BasicProperties p;
  p.delivery_mode = 2;
  p.timestamp = 0x0102030405060708ull;
  p.type = "t";
  EXPECT_EQ(Hex(EncodedProperties(p)),
            Hex(Wire().U16(0x1000 | 0x0040 | 0x0020).U8(2).U64(0x0102030405060708ull).Short("t")));
}

TEST(AmqpProperties, TruncatedAtEveryOffsetFails) {
  const std::string raw = EncodedProperties(AllSet());
  for (size_t k = 0; k < raw.size(); ++k) {
    BasicProperties p;
    p.app_id = "untouched";
    Status st = DecodeProperties(std::string_view(raw).substr(0, k), &p);
    EXPECT_EQ(st.code(), StatusCode::kMalformedFrame) << k;
    EXPECT_EQ(p.app_id, "untouched") << k;
    EXPECT_FALSE(p.content_type.has_value()) << k;
  }
}

TEST(AmqpProperties, TrailingBytesFail) {
  BasicProperties p;
  EXPECT_EQ(DecodeProperties(EncodedProperties(AllSet()) + "x", &p).code(),
            StatusCode::kMalformedFrame);
  EXPECT_EQ(DecodeProperties(Wire().U16(0).U8(0), &p).code(), StatusCode::kMalformedFrame);
}

TEST(AmqpProperties, ContinuationWords) {
  BasicProperties p;
  // Bit 0 set, then an empty continuation word: accepted.
  ASSERT_TRUE(DecodeProperties(Wire().U16(0x1001).U16(0).U8(2), &p).ok());
  EXPECT_EQ(p.delivery_mode, 2);
  // A chain of them.
  ASSERT_TRUE(DecodeProperties(Wire().U16(0x0001).U16(0x0001).U16(0), &p).ok());
  // A continuation word with a property bit: the basic class has no such property.
  EXPECT_EQ(DecodeProperties(Wire().U16(0x0001).U16(0x8000).Short("x"), &p).code(),
            StatusCode::kMalformedFrame);
  // Bit 0 set and no further word.
  EXPECT_EQ(DecodeProperties(Wire().U16(0x0001), &p).code(), StatusCode::kMalformedFrame);
}

TEST(AmqpProperties, UnusedBitOneIsIgnored) {
  BasicProperties p;
  ASSERT_TRUE(DecodeProperties(Wire().U16(0x0800 | 0x0002).U8(5), &p).ok());
  EXPECT_EQ(p.priority, 5);
}

TEST(AmqpProperties, BadHeadersTableFails) {
  BasicProperties p;
  Status st = DecodeProperties(Wire().U16(0x2000).Long(Wire().Entry("k", '?')), &p);
  EXPECT_EQ(st.code(), StatusCode::kMalformedFrame);
  EXPECT_NE(st.message().find("headers"), std::string_view::npos) << st.ToString();
  EXPECT_EQ(DecodeProperties(Wire().U16(0x2000).U32(100), &p).code(), StatusCode::kMalformedFrame);
}

TEST(AmqpProperties, BinaryShortStringsAreKept) {
  BasicProperties p;
  p.correlation_id = std::string("\xff\x00\xfe", 3);  // RabbitMQ does not check properties
  BasicProperties back;
  ASSERT_TRUE(DecodeProperties(EncodedProperties(p), &back).ok());
  EXPECT_EQ(back, p);
}

TEST(AmqpContentHeader, Decode) {
  const std::string raw = EncodedProperties(AllSet());
  const std::string payload = Wire().U16(60).U16(0).U64(0x100000001ull).Raw(raw);
  ContentHeader h;
  ASSERT_TRUE(DecodeContentHeader(payload, &h).ok());
  EXPECT_EQ(h.class_id, 60);
  EXPECT_EQ(h.body_size, 0x100000001ull);
  EXPECT_EQ(Hex(h.raw_properties), Hex(raw));
  std::string again;
  AppendContentHeaderPayload(0x100000001ull, raw, &again);
  EXPECT_EQ(Hex(again), Hex(payload));
}

TEST(AmqpContentHeader, Errors) {
  ContentHeader h;
  for (size_t k = 0; k < 12; ++k) {
    EXPECT_EQ(DecodeContentHeader(std::string(k, '\0'), &h).code(), StatusCode::kMalformedFrame);
  }
  Status weight = DecodeContentHeader(Wire().U16(60).U16(1).U64(0).U16(0), &h);
  EXPECT_EQ(weight.code(), StatusCode::kMalformedFrame);
  EXPECT_NE(weight.message().find("weight"), std::string_view::npos);
  // Another class parses: the caller compares it with its method's.
  ASSERT_TRUE(DecodeContentHeader(Wire().U16(50).U16(0).U64(0).U16(0), &h).ok());
  EXPECT_EQ(h.class_id, 50);
}

}  // namespace
}  // namespace wharf::amqp
