// Unit tests for amqp/field_table.h: every field letter, limits, nesting, rabbitmq-c's
// encoding, and hostile input.
#include "amqp/field_table.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "unit/amqp/amqp_test_util.h"

namespace wharf::amqp {
namespace {

using testing::Hex;
using testing::RmqArena;
using testing::RmqEncodeTable;
using testing::RmqPool;
using testing::Wire;

std::string Prefixed(std::string_view content) {
  return Wire().U32(static_cast<uint32_t>(content.size())).Raw(content);
}

std::string Encoded(const FieldTable& t) {
  std::string out;
  AppendTable(t, &out);
  return out;
}

// Decodes `content`, expects success, and expects the encoding to give the same bytes back.
FieldTable RoundTrip(const std::string& content) {
  FieldTable t;
  Status st = DecodeTable(content, &t);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Hex(Encoded(t)), Hex(Prefixed(content)));
  return t;
}

// One entry of every letter, hand-written from the spec (and RabbitMQ's reading).
std::string EveryLetter() {
  Wire nested;
  nested.Entry("n", 'I').U32(7);
  Wire array;
  array.Char('S').Long("a").Char('l').U64(9).Char('V');
  Wire w;
  w.Entry("t", 't').U8(1);
  w.Entry("b", 'b').U8(0x80);
  w.Entry("B", 'B').U8(0xFF);
  w.Entry("s", 's').U16(0x8000);
  w.Entry("u", 'u').U16(0xFFFF);
  w.Entry("I", 'I').U32(0x80000000u);
  w.Entry("i", 'i').U32(0xFFFFFFFFu);
  w.Entry("l", 'l').U64(0x8000000000000000ull);
  w.Entry("L", 'L').U64(0xFFFFFFFFFFFFFFFFull);
  w.Entry("f", 'f').U32(std::bit_cast<uint32_t>(1.5f));
  w.Entry("d", 'd').U64(std::bit_cast<uint64_t>(-2.25));
  w.Entry("D", 'D').U8(2).U32(12345);
  w.Entry("S", 'S').Long(std::string("bin\0\xff", 5));
  w.Entry("x", 'x').Long(std::string("\x00\x01\x02", 3));
  w.Entry("T", 'T').U64(1700000000);
  w.Entry("F", 'F').Long(nested);
  w.Entry("A", 'A').Long(array);
  w.Entry("V", 'V');
  return w;
}

TEST(AmqpFieldTable, EveryLetterDecodesAndRoundTripsByteIdentically) {
  const FieldTable t = RoundTrip(EveryLetter());
  ASSERT_EQ(t.entries.size(), 18u);
  EXPECT_EQ(*t.Find("t"), FieldValue::Bool(true));
  EXPECT_EQ(*t.Find("b"), FieldValue::Int('b', -128));
  EXPECT_EQ(*t.Find("B"), FieldValue::UInt('B', 255));
  EXPECT_EQ(*t.Find("s"), FieldValue::Int('s', -32768));
  EXPECT_EQ(*t.Find("u"), FieldValue::UInt('u', 65535));
  EXPECT_EQ(*t.Find("I"), FieldValue::Int('I', std::numeric_limits<int32_t>::min()));
  EXPECT_EQ(*t.Find("i"), FieldValue::UInt('i', 0xFFFFFFFFu));
  EXPECT_EQ(*t.Find("l"), FieldValue::Int('l', std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(*t.Find("L"), FieldValue::Int('L', -1));  // RabbitMQ reads L signed
  EXPECT_EQ(*t.Find("f"), FieldValue::Float(1.5f));
  EXPECT_EQ(*t.Find("d"), FieldValue::Double(-2.25));
  EXPECT_EQ(*t.Find("D"), FieldValue::Dec({2, 12345}));
  EXPECT_EQ(*t.Find("S"), FieldValue::LongStr(std::string("bin\0\xff", 5)));
  EXPECT_EQ(*t.Find("x"), FieldValue::ByteArray(std::string("\x00\x01\x02", 3)));
  EXPECT_EQ(*t.Find("T"), FieldValue::Timestamp(1700000000));
  FieldTable nested;
  nested.Set("n", FieldValue::Int('I', 7));
  EXPECT_EQ(*t.Find("F"), FieldValue::Table(nested));
  EXPECT_EQ(*t.Find("A"), FieldValue::Array({FieldValue::LongStr("a"), FieldValue::Int('l', 9),
                                             FieldValue::Void()}));
  EXPECT_EQ(*t.Find("V"), FieldValue::Void());
  // The variant alternative of each letter, as the header promises.
  EXPECT_TRUE(std::holds_alternative<int64_t>(t.Find("L")->value));
  EXPECT_TRUE(std::holds_alternative<uint64_t>(t.Find("T")->value));
  EXPECT_TRUE(std::holds_alternative<std::string>(t.Find("x")->value));
}

TEST(AmqpFieldTable, IntegersAtEveryWidthsLimits) {
  Wire w;
  w.Entry("b-", 'b').U8(0x80);
  w.Entry("b+", 'b').U8(0x7F);
  w.Entry("B0", 'B').U8(0);
  w.Entry("B+", 'B').U8(0xFF);
  w.Entry("s-", 's').U16(0x8000);
  w.Entry("s+", 's').U16(0x7FFF);
  w.Entry("u+", 'u').U16(0xFFFF);
  w.Entry("I-", 'I').U32(0x80000000u);
  w.Entry("I+", 'I').U32(0x7FFFFFFF);
  w.Entry("i+", 'i').U32(0xFFFFFFFFu);
  w.Entry("l-", 'l').U64(0x8000000000000000ull);
  w.Entry("l+", 'l').U64(0x7FFFFFFFFFFFFFFFull);
  w.Entry("L-", 'L').U64(0x8000000000000000ull);
  w.Entry("L+", 'L').U64(0x7FFFFFFFFFFFFFFFull);
  w.Entry("T+", 'T').U64(0xFFFFFFFFFFFFFFFFull);
  w.Entry("minus1", 's').U16(0xFFFF);
  const std::string content = w;
  const FieldTable t = RoundTrip(content);
  EXPECT_EQ(t.Find("b-")->AsInt(), -128);
  EXPECT_EQ(t.Find("b+")->AsInt(), 127);
  EXPECT_EQ(t.Find("B0")->AsInt(), 0);
  EXPECT_EQ(t.Find("B+")->AsInt(), 255);
  EXPECT_EQ(t.Find("s-")->AsInt(), -32768);
  EXPECT_EQ(t.Find("s+")->AsInt(), 32767);
  EXPECT_EQ(t.Find("u+")->AsInt(), 65535);
  EXPECT_EQ(t.Find("I-")->AsInt(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(t.Find("I+")->AsInt(), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(t.Find("i+")->AsInt(), int64_t{0xFFFFFFFF});
  EXPECT_EQ(t.Find("l-")->AsInt(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(t.Find("l+")->AsInt(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(t.Find("L-")->AsInt(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(t.Find("L+")->AsInt(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(t.Find("T+")->AsInt(), std::nullopt);  // a timestamp is not an integer letter
  EXPECT_EQ(std::get<uint64_t>(t.Find("T+")->value), UINT64_MAX);
  EXPECT_EQ(t.Find("minus1")->AsInt(), -1);
}

TEST(AmqpFieldTable, NestedTablesInArraysInTables) {
  // F { A [ F { A [ F {} , A [] ] , x }, D ], V }
  Wire inner_array;
  inner_array.Char('F').Long("").Char('A').Long("");
  Wire inner_table;
  inner_table.Entry("deep", 'A').Long(inner_array.str()).Entry("raw", 'x').Long("\x7f");
  Wire array;
  array.Char('F').Long(inner_table.str()).Char('D').U8(0).U32(1);
  Wire outer;
  outer.Entry("list", 'A').Long(array.str()).Entry("void", 'V');
  const std::string content = Wire().Entry("outer", 'F').Long(outer.str());
  const FieldTable t = RoundTrip(content);

  FieldTable deepest;
  deepest.Set("deep", FieldValue::Array({FieldValue::Table({}), FieldValue::Array({})}));
  deepest.Set("raw", FieldValue::ByteArray("\x7f"));
  FieldTable middle;
  middle.Set("list", FieldValue::Array({FieldValue::Table(deepest), FieldValue::Dec({0, 1})}));
  middle.Set("void", FieldValue::Void());
  FieldTable expected;
  expected.Set("outer", FieldValue::Table(middle));
  EXPECT_EQ(t, expected);
  EXPECT_EQ(Hex(Encoded(expected)), Hex(Prefixed(content)));
}

TEST(AmqpFieldTable, UIsReadAsInt16AndWrittenAsS) {
  FieldTable t;
  ASSERT_TRUE(DecodeTable(Wire().Entry("u", 'U').U16(0xFFFE), &t).ok());
  EXPECT_EQ(*t.Find("u"), FieldValue::Int('s', -2));
  EXPECT_EQ(Hex(Encoded(t)), Hex(Prefixed(Wire().Entry("u", 's').U16(0xFFFE))));
  // In an array too.
  ASSERT_TRUE(DecodeTable(Wire().Entry("a", 'A').Long(Wire().Char('U').U16(3)), &t).ok());
  EXPECT_EQ(*t.Find("a"), FieldValue::Array({FieldValue::Int('s', 3)}));
}

TEST(AmqpFieldTable, AnyNonZeroBoolOctetIsTrue) {
  FieldTable t;
  ASSERT_TRUE(DecodeTable(Wire().Entry("a", 't').U8(2).Entry("b", 't').U8(0), &t).ok());
  EXPECT_EQ(t.Find("a")->AsBool(), true);
  EXPECT_EQ(t.Find("b")->AsBool(), false);
  EXPECT_EQ(Hex(Encoded(t)), Hex(Prefixed(Wire().Entry("a", 't').U8(1).Entry("b", 't').U8(0))));
}

TEST(AmqpFieldTable, FloatBitPatternsAreKept) {
  Wire w;
  w.Entry("nan", 'd').U64(0x7FF8000000000123ull);
  w.Entry("-0", 'f').U32(0x80000000u);
  w.Entry("inf", 'f').U32(0x7F800000u);
  const std::string content = w;
  const FieldTable t = RoundTrip(content);
  EXPECT_TRUE(std::isnan(std::get<double>(t.Find("nan")->value)));
  EXPECT_TRUE(std::signbit(std::get<float>(t.Find("-0")->value)));
}

TEST(AmqpFieldTable, EmptyTableAndEmptyKey) {
  const FieldTable empty = RoundTrip("");
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(Hex(Encoded({})), "00 00 00 00");
  const FieldTable t = RoundTrip(Wire().Entry("", 'V'));
  ASSERT_NE(t.Find(""), nullptr);
}

TEST(AmqpFieldTable, DuplicateKeysKeptInWireOrder) {
  const FieldTable t = RoundTrip(Wire().Entry("k", 'I').U32(1).Entry("k", 'I').U32(2));
  ASSERT_EQ(t.entries.size(), 2u);
  EXPECT_EQ(t.Find("k")->AsInt(), 1);  // the first, as RabbitMQ's table_lookup
}

// A table of every letter built through the factories.
FieldTable EveryLetterTable() {
  FieldTable nested;
  nested.Set("inner", FieldValue::LongStr("v"));
  nested.Set("list", FieldValue::Array({FieldValue::Int('b', -1), FieldValue::Table({})}));
  FieldTable t;
  t.Set("t", FieldValue::Bool(true));
  t.Set("f-bool", FieldValue::Bool(false));
  t.Set("b", FieldValue::Int('b', -128));
  t.Set("B", FieldValue::UInt('B', 200));
  t.Set("s", FieldValue::Int('s', -300));
  t.Set("u", FieldValue::UInt('u', 60000));
  t.Set("I", FieldValue::Int('I', -70000));
  t.Set("i", FieldValue::UInt('i', 4000000000u));
  t.Set("l", FieldValue::Int('l', std::numeric_limits<int64_t>::min()));
  t.Set("L", FieldValue::Int('L', std::numeric_limits<int64_t>::max()));
  t.Set("f", FieldValue::Float(-0.5f));
  t.Set("d", FieldValue::Double(1e300));
  t.Set("D", FieldValue::Dec({3, 314159}));
  t.Set("S", FieldValue::LongStr(std::string("text\0with nul", 13)));
  t.Set("x", FieldValue::ByteArray("\xde\xad\xbe\xef"));
  t.Set("T", FieldValue::Timestamp(UINT64_MAX));
  t.Set("F", FieldValue::Table(nested));
  t.Set("A", FieldValue::Array({FieldValue::Table(nested), FieldValue::Array({}),
                                FieldValue::Void(), FieldValue::LongStr("s")}));
  t.Set("V", FieldValue::Void());
  return t;
}

TEST(AmqpFieldTable, MatchesRabbitMqC) {
  const FieldTable t = EveryLetterTable();
  const std::string ours = Encoded(t);
  RmqArena arena;
  const std::string theirs = RmqEncodeTable(arena.Table(t));
  EXPECT_EQ(Hex(ours), Hex(theirs));

  // Their bytes decode to the same table.
  FieldTable decoded;
  ASSERT_TRUE(DecodeTable(std::string_view(theirs).substr(4), &decoded).ok());
  EXPECT_EQ(decoded, t);

  // They decode ours, and encode what they decoded to the same bytes.
  RmqPool pool;
  amqp_table_t rmq{};
  size_t offset = 0;
  ASSERT_EQ(amqp_decode_table(testing::RmqBytes(ours), pool.get(), &rmq, &offset), AMQP_STATUS_OK);
  EXPECT_EQ(offset, ours.size());
  EXPECT_EQ(Hex(RmqEncodeTable(rmq)), Hex(ours));
}

// Entry boundaries of `content` (offsets where a decode of the prefix is a valid table).
std::set<size_t> EntryBoundaries(const std::string& content) {
  std::set<size_t> boundaries{0};
  FieldTable t;
  EXPECT_TRUE(DecodeTable(content, &t).ok());
  size_t at = 0;
  for (const auto& entry : t.entries) {
    FieldTable one;
    one.entries.push_back(entry);
    at += Encoded(one).size() - 4;
    boundaries.insert(at);
  }
  EXPECT_EQ(at, content.size());
  return boundaries;
}

TEST(AmqpFieldTable, TruncatedAtEveryOffsetFailsInsideAnEntry) {
  const std::string content = EveryLetter();
  const std::set<size_t> boundaries = EntryBoundaries(content);
  for (size_t k = 0; k < content.size(); ++k) {
    FieldTable t;
    t.Set("untouched", FieldValue::Void());
    const FieldTable before = t;
    Status st = DecodeTable(std::string_view(content).substr(0, k), &t);
    if (boundaries.contains(k)) {
      EXPECT_TRUE(st.ok()) << k << ": " << st.ToString();
    } else {
      EXPECT_EQ(st.code(), StatusCode::kMalformedFrame) << k;
      EXPECT_EQ(t, before) << "an error leaves the output as it was, at " << k;
    }
  }
}

TEST(AmqpFieldTable, ContainerTruncatedAtEveryOffsetFails) {
  // One F entry whose own length promises the whole nested content: any cut inside fails.
  const std::string content = Wire().Entry("f", 'F').Long(EveryLetter());
  for (size_t k = 1; k < content.size(); ++k) {
    FieldTable t;
    EXPECT_FALSE(DecodeTable(std::string_view(content).substr(0, k), &t).ok()) << k;
  }
  const std::string array = Wire().Entry("a", 'A').Long(
      Wire().Char('S').Long("abc").Char('F').Long(EveryLetter()).Char('T').U64(1));
  for (size_t k = 1; k < array.size(); ++k) {
    FieldTable t;
    EXPECT_FALSE(DecodeTable(std::string_view(array).substr(0, k), &t).ok()) << k;
  }
}

TEST(AmqpFieldTable, LengthsBeyondTheBytesAreErrors) {
  const std::string cases[] = {
      Wire().Entry("s", 'S').U32(0xFFFFFFFFu).Raw("abc"),
      Wire().Entry("x", 'x').U32(0x80000000u),
      Wire().Entry("f", 'F').U32(0xFFFFFFF0u).Raw("\x01k"),
      Wire().Entry("a", 'A').U32(5).Raw("V"),
      Wire().U8(200).Raw("abc"),                             // key longer than what follows
      Wire().Short("k"),                                     // no type
      Wire().Entry("d", 'D').U8(2).U16(0),                   // decimal cut
      Wire().Entry("f", 'F').Long(Wire().U8(9).Raw("k")),    // nested key cut
      Wire().Entry("a", 'A').Long(Wire().Char('l').U32(0)),  // array value cut
  };
  for (const std::string& c : cases) {
    FieldTable t;
    Status st = DecodeTable(c, &t);
    EXPECT_EQ(st.code(), StatusCode::kMalformedFrame) << Hex(c);
    EXPECT_TRUE(t.empty());
  }
}

TEST(AmqpFieldTable, UnknownLettersAreErrors) {
  for (char letter : {'Z', 'X', 'c', 'N', '\0', '\xff'}) {
    FieldTable t;
    Status st = DecodeTable(Wire().Short("key").Char(letter).U64(0), &t);
    EXPECT_EQ(st.code(), StatusCode::kMalformedFrame) << static_cast<int>(letter);
    EXPECT_NE(st.message().find("unknown field type"), std::string_view::npos) << st.ToString();
    EXPECT_NE(st.message().find("'key'"), std::string_view::npos) << st.ToString();
    Status in_array = DecodeTable(Wire().Entry("a", 'A').Long(Wire().Char(letter)), &t);
    EXPECT_EQ(in_array.code(), StatusCode::kMalformedFrame);
  }
}

// `levels` tables each holding the next under key "a"; the innermost is empty.
std::string NestedTables(size_t levels) {
  Wire w;
  for (size_t i = 0; i < levels; ++i) {
    w.Entry("a", 'F').U32(static_cast<uint32_t>(7 * (levels - 1 - i)));
  }
  return w;
}

// A table holding `levels` arrays each holding the next; the innermost is empty.
std::string NestedArrays(size_t levels) {
  Wire w;
  w.Entry("a", 'A').U32(static_cast<uint32_t>(5 * (levels - 1)));
  for (size_t i = 1; i < levels; ++i) w.Char('A').U32(static_cast<uint32_t>(5 * (levels - 1 - i)));
  return w;
}

TEST(AmqpFieldTable, NestingIsBounded) {
  FieldTable t;
  EXPECT_TRUE(DecodeTable(NestedTables(kMaxFieldDepth), &t).ok());
  EXPECT_TRUE(DecodeTable(NestedArrays(kMaxFieldDepth), &t).ok());
  for (size_t levels : {size_t{kMaxFieldDepth + 1}, size_t{10'000}}) {
    Status tables = DecodeTable(NestedTables(levels), &t);
    EXPECT_EQ(tables.code(), StatusCode::kMalformedFrame) << levels;
    EXPECT_NE(tables.message().find("nested deeper than 64"), std::string_view::npos);
    EXPECT_EQ(DecodeTable(NestedArrays(levels), &t).code(), StatusCode::kMalformedFrame);
  }
}

TEST(AmqpFieldTable, FindSetErase) {
  FieldTable t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.Find("a"), nullptr);
  t.Set("a", FieldValue::Int('I', 1));
  t.Set("b", FieldValue::Int('I', 2));
  t.entries.emplace_back("a", FieldValue::Int('I', 3));  // a duplicate from the wire
  t.Set("a", FieldValue::LongStr("one"));                // replaces the first, drops the rest
  ASSERT_EQ(t.entries.size(), 2u);
  EXPECT_EQ(t.entries[0].first, "a");
  EXPECT_EQ(*t.Find("a"), FieldValue::LongStr("one"));
  t.Find("b")->value = int64_t{20};
  EXPECT_EQ(t.Find("b")->AsInt(), 20);
  t.entries.emplace_back("b", FieldValue::Void());
  t.Erase("b");
  ASSERT_EQ(t.entries.size(), 1u);
  t.Erase("missing");
  t.Erase("a");
  EXPECT_TRUE(t.empty());
}

TEST(AmqpFieldTable, Accessors) {
  EXPECT_EQ(FieldValue::UInt('L', UINT64_MAX).AsInt(), -1);  // L is signed: stored as int64
  EXPECT_EQ(FieldValue::UInt('i', 7).AsInt(), 7);
  EXPECT_EQ((FieldValue{'B', uint64_t{UINT64_MAX}}).AsInt(), std::nullopt);  // out of range
  EXPECT_EQ(FieldValue::Timestamp(5).AsInt(), std::nullopt);
  EXPECT_EQ(FieldValue::LongStr("5").AsInt(), std::nullopt);
  EXPECT_EQ(FieldValue::Bool(true).AsInt(), std::nullopt);
  EXPECT_EQ(FieldValue::Double(5).AsInt(), std::nullopt);
  EXPECT_EQ(*FieldValue::LongStr("s").AsString(), "s");
  EXPECT_EQ(*FieldValue::ByteArray("x").AsString(), "x");
  EXPECT_EQ(FieldValue::Int('l', 1).AsString(), nullptr);
  EXPECT_EQ(FieldValue::Bool(false).AsBool(), false);
  EXPECT_EQ(FieldValue::Int('b', 1).AsBool(), std::nullopt);
  EXPECT_NE(FieldValue::Table({}).AsTable(), nullptr);
  EXPECT_EQ(FieldValue::Table({}).AsArray(), nullptr);
  EXPECT_NE(FieldValue::Array({}).AsArray(), nullptr);
  // Factories put each letter's value in its alternative.
  EXPECT_TRUE(std::holds_alternative<uint64_t>(FieldValue::Int('B', 3).value));
  EXPECT_TRUE(std::holds_alternative<int64_t>(FieldValue::UInt('s', 3).value));
  EXPECT_EQ(FieldValue::Void(), FieldValue());
  EXPECT_NE(FieldValue::Int('l', 1), FieldValue::Int('I', 1));  // the letter counts
}

TEST(AmqpFieldTable, EncodingNeverWritesCorruptBytes) {
  FieldTable t;
  t.Set("wrong", FieldValue{'S', int64_t{5}});  // alternative does not fit the letter
  t.Set("int-as-bool", FieldValue{'t', int64_t{2}});
  t.Set("unknown", FieldValue{'Q', int64_t{1}});     // written as V
  t.Set(std::string(300, 'k'), FieldValue::Void());  // key cut to 255
  const std::string bytes = Encoded(t);
  FieldTable back;
  ASSERT_TRUE(DecodeTable(std::string_view(bytes).substr(4), &back).ok());
  EXPECT_EQ(*back.Find("wrong"), FieldValue::LongStr(""));
  EXPECT_EQ(*back.Find("int-as-bool"), FieldValue::Bool(true));
  EXPECT_EQ(*back.Find("unknown"), FieldValue::Void());
  EXPECT_NE(back.Find(std::string(255, 'k')), nullptr);
}

}  // namespace
}  // namespace wharf::amqp
