// amqp/field_table.h
//
// AMQP field tables (spec 4.2.5.5 with the 0-9-1 errata, RabbitMQ's reading), lossless: each
// value keeps its wire letter, so decoding a table and encoding it again gives the same bytes
// (two exceptions below). Tables carry message headers, the arguments of declares, binds and
// consumes, the client and server properties, and AMQPLAIN's login.
//
// The letters, as RabbitMQ's rabbit_binary_parser reads them, and where each value lives:
//
//   t  bool (octet; any non-zero octet is true)   -> bool
//   b  int8     s  int16    I  int32    l  int64  -> int64_t
//   L  int64 (RabbitMQ reads it signed, like l)   -> int64_t
//   B  uint8    u  uint16   i  uint32             -> uint64_t
//   T  timestamp, u64 seconds                     -> uint64_t
//   f  float32  d  float64                        -> float / double (bit patterns kept)
//   D  decimal: scale octet + u32 value           -> Decimal
//   S  longstr (binary-safe, not necessarily UTF-8), x  byte array (longstr) -> std::string
//   F  table (u32 length + entries)  -> FieldTable
//   A  array (u32 length + values, each with its letter) -> FieldArray
//   V  void, no bytes                -> std::monostate
//   U  int16 in the 0-9-1 spec's list, absent from RabbitMQ's parser: read as int16 and
//      stored as 's' (so it is written back as 's': not byte-identical). Never written.
//
// The second exception: a `t` octet other than 0 or 1 is written back as 1.
//
// Decoding is bounded: every length is checked against the bytes there are (a table claiming
// more is an error, never a read past the end), and containers (F, A) nest at most
// kMaxFieldDepth deep, so hostile input cannot exhaust the stack. Errors are
// StatusCode::kMalformedFrame (RabbitMQ answers 501 FRAME_ERROR): a truncated value, an
// unknown letter, too deep a nesting. Keys are shortstrs, any bytes; duplicates are kept in
// wire order (Find finds the first, as RabbitMQ's table_lookup does).
//
// Encoding never fails. A value whose variant alternative does not belong to its letter (a
// programming error; the factories below never build one) is written as that letter's zero or
// empty value; an unknown letter is written as V; a key longer than 255 bytes is cut.
//
// Thread safety: value types, not synchronised. DecodeTable and AppendTable are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "wharf/status.h"

namespace wharf::amqp {

// How deep F and A values may nest in a decoded table: the top-level table is depth 0, each
// container value one more. 64 is far beyond any client's use (x-death is 2 deep).
inline constexpr int kMaxFieldDepth = 64;

struct Decimal {
  uint8_t scale = 0;  // digits after the point
  uint32_t value = 0;
  friend bool operator==(const Decimal&, const Decimal&) = default;
};

struct FieldValue;
using FieldArray = std::vector<FieldValue>;

struct FieldTable {
  // Declared here, defined below FieldValue: std::pair<std::string, FieldValue> needs
  // FieldValue complete, and clang (unlike GCC) instantiates the implicit members here, inside
  // FieldValue's own definition (its variant asks whether FieldTable is destructible).
  FieldTable();
  FieldTable(const FieldTable&);
  FieldTable(FieldTable&&) noexcept;
  FieldTable& operator=(const FieldTable&);
  FieldTable& operator=(FieldTable&&) noexcept;
  ~FieldTable();

  std::vector<std::pair<std::string, FieldValue>> entries;  // wire order kept

  // The first entry of that key, or null.
  const FieldValue* Find(std::string_view key) const;
  FieldValue* Find(std::string_view key);
  // Replaces the first entry of that key (dropping any later duplicates), or appends one.
  void Set(std::string key, FieldValue v);
  // Removes every entry of that key.
  void Erase(std::string_view key);
  bool empty() const;

  friend bool operator==(const FieldTable& a, const FieldTable& b);
};

struct FieldValue {
  // The wire letter: t b B s u I i l L f d D S x T F A V.
  char type = 'V';
  // signed b s I l L -> int64_t; unsigned B u i T -> uint64_t; S and x -> std::string;
  // t -> bool; f -> float; d -> double; D -> Decimal; F -> FieldTable; A -> FieldArray;
  // V -> monostate.
  std::variant<std::monostate, bool, int64_t, uint64_t, float, double, Decimal, std::string,
               FieldTable, FieldArray>
      value;

  static FieldValue Bool(bool v);
  // `type` is an integer letter: b s I l L (and B u i T, stored as uint64_t: a negative value
  // then wraps). The value is written in the letter's width (its low bits).
  static FieldValue Int(char type, int64_t v);
  // `type` is an integer letter: B u i T (and b s I l L, stored as int64_t).
  static FieldValue UInt(char type, uint64_t v);
  static FieldValue LongStr(std::string v);    // S
  static FieldValue ByteArray(std::string v);  // x
  static FieldValue Timestamp(uint64_t seconds);
  static FieldValue Table(FieldTable v);
  static FieldValue Array(FieldArray v);
  static FieldValue Void();
  static FieldValue Float(float v);
  static FieldValue Double(double v);
  static FieldValue Dec(Decimal v);

  // The value of an integer letter (b B s u I i l L; not T), when it fits int64_t.
  std::optional<int64_t> AsInt() const;
  // The bytes of an S or x value, else null.
  const std::string* AsString() const;
  // The value of a t, else nullopt.
  std::optional<bool> AsBool() const;
  // The table of an F / the array of an A, else null.
  const FieldTable* AsTable() const;
  const FieldArray* AsArray() const;

  // Same letter and same value (floats compare as numbers: a NaN equals nothing).
  friend bool operator==(const FieldValue& a, const FieldValue& b);
};

inline FieldTable::FieldTable() = default;
inline FieldTable::FieldTable(const FieldTable&) = default;
inline FieldTable::FieldTable(FieldTable&&) noexcept = default;
inline FieldTable& FieldTable::operator=(const FieldTable&) = default;
inline FieldTable& FieldTable::operator=(FieldTable&&) noexcept = default;
inline FieldTable::~FieldTable() = default;
inline bool FieldTable::empty() const { return entries.empty(); }
inline bool operator==(const FieldTable& a, const FieldTable& b) { return a.entries == b.entries; }

// Decodes a table's entries: `bytes` WITHOUT the 4-byte length prefix (the table's content, as
// a method's table field holds after its length, and as AMQPLAIN's response is). On error,
// *out is unchanged.
Status DecodeTable(std::string_view bytes, FieldTable* out);

// Appends the table WITH its 4-byte length prefix, as a method argument or a property holds it.
void AppendTable(const FieldTable& table, std::string* out);

}  // namespace wharf::amqp
