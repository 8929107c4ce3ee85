// Test support for tests/unit/amqp: a builder of hand-written wire bytes, hex for readable
// failures, and a bridge to rabbitmq-c (librabbitmq), the reference encoder and decoder the
// golden tests compare with: FieldTable -> amqp_table_t, and rabbitmq-c's encoders as strings.
//
// Thread safety: not thread-safe; one per test.
#pragma once

#include <amqp.h>
#include <amqp_framing.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/field_table.h"

namespace wharf::amqp::testing {

// Hand-written wire bytes, big-endian.
class Wire {
 public:
  Wire& U8(uint8_t v) {
    s_.push_back(static_cast<char>(v));
    return *this;
  }
  Wire& U16(uint16_t v) { return U8(static_cast<uint8_t>(v >> 8)).U8(static_cast<uint8_t>(v)); }
  Wire& U32(uint32_t v) {
    return U16(static_cast<uint16_t>(v >> 16)).U16(static_cast<uint16_t>(v));
  }
  Wire& U64(uint64_t v) {
    return U32(static_cast<uint32_t>(v >> 32)).U32(static_cast<uint32_t>(v));
  }
  Wire& Char(char c) { return U8(static_cast<uint8_t>(c)); }
  // A table entry's name and type letter.
  Wire& Entry(std::string_view key, char type) { return Short(key).Char(type); }
  Wire& Short(std::string_view v) {  // shortstr
    U8(static_cast<uint8_t>(v.size()));
    s_.append(v);
    return *this;
  }
  Wire& Long(std::string_view v) {  // longstr
    U32(static_cast<uint32_t>(v.size()));
    s_.append(v);
    return *this;
  }
  Wire& Raw(std::string_view v) {
    s_.append(v);
    return *this;
  }
  const std::string& str() const { return s_; }
  operator std::string() const { return s_; }       // NOLINT: a builder
  operator std::string_view() const { return s_; }  // NOLINT: valid while the builder lives

 private:
  std::string s_;
};

inline std::string Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i > 0) out.push_back(i % 4 == 0 ? '|' : ' ');
    const auto c = static_cast<unsigned char>(bytes[i]);
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xF]);
  }
  return out;
}

inline amqp_bytes_t RmqBytes(const std::string& s) {
  return amqp_bytes_t{s.size(), const_cast<char*>(s.data())};
}

inline std::string FromRmq(amqp_bytes_t b) {
  return std::string(static_cast<const char*>(b.bytes), b.len);
}

// Owns what the rabbitmq-c structures built from Wharf's point into; the FieldTables given to
// Table() must outlive it.
class RmqArena {
 public:
  amqp_table_t Table(const FieldTable& table) {
    auto& entries = entries_.emplace_back(table.entries.size());
    for (size_t i = 0; i < table.entries.size(); ++i) {
      entries[i].key = RmqBytes(table.entries[i].first);
      entries[i].value = Value(table.entries[i].second);
    }
    return amqp_table_t{static_cast<int>(entries.size()), entries.data()};
  }

  amqp_field_value_t Value(const FieldValue& v) {
    amqp_field_value_t out{};
    out.kind = static_cast<uint8_t>(v.type);
    auto i64 = [&] { return std::get<int64_t>(v.value); };
    auto u64 = [&] { return std::get<uint64_t>(v.value); };
    switch (v.type) {
      case 't':
        out.value.boolean = std::get<bool>(v.value) ? 1 : 0;
        break;
      case 'b':
        out.value.i8 = static_cast<int8_t>(i64());
        break;
      case 'B':
        out.value.u8 = static_cast<uint8_t>(u64());
        break;
      case 's':
        out.value.i16 = static_cast<int16_t>(i64());
        break;
      case 'u':
        out.value.u16 = static_cast<uint16_t>(u64());
        break;
      case 'I':
        out.value.i32 = static_cast<int32_t>(i64());
        break;
      case 'i':
        out.value.u32 = static_cast<uint32_t>(u64());
        break;
      case 'l':
        out.value.i64 = i64();
        break;
      case 'L':
        out.value.u64 = static_cast<uint64_t>(i64());
        break;
      case 'T':
        out.value.u64 = u64();
        break;
      case 'f':
        out.value.f32 = std::get<float>(v.value);
        break;
      case 'd':
        out.value.f64 = std::get<double>(v.value);
        break;
      case 'D':
        out.value.decimal.decimals = std::get<Decimal>(v.value).scale;
        out.value.decimal.value = std::get<Decimal>(v.value).value;
        break;
      case 'S':
      case 'x':
        out.value.bytes = RmqBytes(std::get<std::string>(v.value));
        break;
      case 'F':
        out.value.table = Table(std::get<FieldTable>(v.value));
        break;
      case 'A': {
        const auto& array = std::get<FieldArray>(v.value);
        auto& values = values_.emplace_back();
        values.reserve(array.size());
        for (const FieldValue& e : array) values.push_back(Value(e));
        out.value.array = amqp_array_t{static_cast<int>(values.size()), values.data()};
        break;
      }
      default:  // V
        break;
    }
    return out;
  }

 private:
  std::deque<std::vector<amqp_table_entry_t>> entries_;
  std::deque<std::vector<amqp_field_value_t>> values_;
};

// A rabbitmq-c memory pool for its decoders.
class RmqPool {
 public:
  RmqPool() { init_amqp_pool(&pool_, 4096); }
  ~RmqPool() { empty_amqp_pool(&pool_); }
  RmqPool(const RmqPool&) = delete;
  RmqPool& operator=(const RmqPool&) = delete;
  amqp_pool_t* get() { return &pool_; }

 private:
  amqp_pool_t pool_;
};

// rabbitmq-c's encoding of a table, with its length prefix.
inline std::string RmqEncodeTable(amqp_table_t table) {
  std::string buf(1 << 20, '\0');
  size_t offset = 0;
  const int rc = amqp_encode_table(RmqBytes(buf), &table, &offset);
  EXPECT_EQ(rc, AMQP_STATUS_OK) << amqp_error_string2(rc);
  buf.resize(rc == AMQP_STATUS_OK ? offset : 0);
  return buf;
}

// rabbitmq-c's encoding of a method's arguments (no class or method id).
inline std::string RmqEncodeMethod(amqp_method_number_t number, void* decoded) {
  std::string buf(1 << 20, '\0');
  const int n = amqp_encode_method(number, decoded, RmqBytes(buf));
  EXPECT_GE(n, 0) << amqp_error_string2(n);
  buf.resize(n >= 0 ? static_cast<size_t>(n) : 0);
  return buf;
}

}  // namespace wharf::amqp::testing
