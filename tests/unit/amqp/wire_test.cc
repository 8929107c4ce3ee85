// Unit tests for amqp/wire.h: AMQP's primitive types, bounds, and bit packing.
#include "amqp/wire.h"

#include <gtest/gtest.h>

#include <string>

#include "unit/amqp/amqp_test_util.h"

namespace wharf::amqp {
namespace {

using testing::Hex;
using testing::Wire;

TEST(AmqpWire, WritesBigEndian) {
  std::string out;
  Writer w(&out);
  w.Octet(0xAB);
  w.Short(0x0102);
  w.Long(0x03040506);
  w.LongLong(0x0708090A0B0C0D0Eull);
  w.ShortStr("hi");
  w.LongStr(std::string("a\0b", 3));
  w.Raw("zz");
  EXPECT_EQ(Hex(out), Hex(Wire()
                              .U8(0xAB)
                              .U16(0x0102)
                              .U32(0x03040506)
                              .U64(0x0708090A0B0C0D0Eull)
                              .Short("hi")
                              .Long(std::string("a\0b", 3))
                              .Raw("zz")));
}

TEST(AmqpWire, ReadsWhatItWrites) {
  const std::string in =
      Wire().U8(0xAB).U16(0xFFFE).U32(0xFFFFFFFDu).U64(UINT64_MAX - 2).Short("short").Long("long");
  Reader r(in);
  uint8_t o;
  uint16_t s;
  uint32_t l;
  uint64_t ll;
  std::string_view ss, ls;
  ASSERT_TRUE(r.Octet(&o) && r.Short(&s) && r.Long(&l) && r.LongLong(&ll) && r.ShortStr(&ss) &&
              r.LongStr(&ls));
  EXPECT_EQ(o, 0xAB);
  EXPECT_EQ(s, 0xFFFE);
  EXPECT_EQ(l, 0xFFFFFFFDu);
  EXPECT_EQ(ll, UINT64_MAX - 2);
  EXPECT_EQ(ss, "short");
  EXPECT_EQ(ls, "long");
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_TRUE(r.ok());
}

TEST(AmqpWire, ReadPastTheEndFailsForGood) {
  const std::string in = Wire().U8(5).Raw("abc");  // a shortstr claiming 5 bytes, 3 there
  Reader r(in);
  std::string_view v = "untouched";
  EXPECT_FALSE(r.ShortStr(&v));
  EXPECT_EQ(v, "untouched");
  EXPECT_FALSE(r.ok());
  uint8_t o = 9;
  EXPECT_FALSE(r.Octet(&o));  // sticky, although bytes remain
  EXPECT_EQ(o, 9);

  const std::string huge = Wire().U32(0xFFFFFFFFu).Raw("x");
  Reader big(huge);
  EXPECT_FALSE(big.LongStr(&v));
  Reader empty("");
  uint64_t ll;
  EXPECT_FALSE(empty.LongLong(&ll));
  bool b;
  Reader none("");
  EXPECT_FALSE(none.Bit(&b));
}

TEST(AmqpWire, BitsPackLowFirstAndRunsEndAtOtherFields) {
  std::string out;
  Writer w(&out);
  for (bool b : {true, false, true, true, false, false, false, false, true}) w.Bit(b);  // 9 bits
  w.Octet(0x55);
  w.Bit(true);
  w.Short(0);
  EXPECT_EQ(Hex(out), "0d 01 55 01|00 00");

  Reader r(out);
  bool bits[9];
  for (bool& b : bits) ASSERT_TRUE(r.Bit(&b));
  EXPECT_TRUE(bits[0] && !bits[1] && bits[2] && bits[3] && !bits[4] && bits[8]);
  uint8_t o;
  ASSERT_TRUE(r.Octet(&o));
  EXPECT_EQ(o, 0x55);
  bool last;
  ASSERT_TRUE(r.Bit(&last));
  EXPECT_TRUE(last);
  uint16_t s;
  ASSERT_TRUE(r.Short(&s));
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(AmqpWire, ShortStringsAreCutTo255) {
  std::string out;
  Writer(&out).ShortStr(std::string(300, 'a'));
  EXPECT_EQ(out.size(), 256u);
  EXPECT_EQ(static_cast<uint8_t>(out[0]), 255);
  // At a character boundary: 254 ASCII bytes then a 2-byte character.
  out.clear();
  Writer(&out).ShortStr(std::string(254, 'a') + "éé");
  EXPECT_EQ(static_cast<uint8_t>(out[0]), 254);
  // Binary that is not UTF-8 is cut at 255 all the same.
  out.clear();
  Writer(&out).ShortStr(std::string(300, '\x80'));
  EXPECT_EQ(static_cast<uint8_t>(out[0]), 255);
}

TEST(AmqpWire, LengthPlaceholder) {
  std::string out = "x";
  Writer w(&out);
  const size_t at = w.BeginLength();
  w.Raw("hello");
  w.EndLength(at);
  EXPECT_EQ(Hex(out), Hex(Wire().Raw("x").U32(5).Raw("hello")));
}

TEST(AmqpWire, LoadStore) {
  char b[8];
  StoreU16(b, 0xBEEF);
  EXPECT_EQ(LoadU16(b), 0xBEEF);
  StoreU32(b, 0xDEADBEEF);
  EXPECT_EQ(LoadU32(b), 0xDEADBEEFu);
  StoreU64(b, 0x0123456789ABCDEFull);
  EXPECT_EQ(LoadU64(b), 0x0123456789ABCDEFull);
}

}  // namespace
}  // namespace wharf::amqp
