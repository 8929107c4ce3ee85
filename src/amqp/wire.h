// amqp/wire.h
//
// AMQP 0-9-1's primitive domains on the wire (spec 4.2.5), every integer big-endian:
//
//   octet     u8                    short     u16
//   long      u32                   longlong  u64 (also timestamp)
//   shortstr  u8 length + bytes     longstr   u32 length + bytes (also a table's bytes)
//   bit       consecutive bit fields of a method share octets: the first in the lowest bit of
//             the first octet, up to 8 per octet; any other field ends the run (4.2.5.2).
//
// Reader takes them from a byte view with bounds checks. A read past the end returns false,
// leaves its output untouched and fails the reader for good (ok() is false; later reads fail
// too), so a decoder may read a whole method and check once. Strings come back as views into
// the input. Writer appends them to a std::string; it never writes a corrupt length: a
// shortstr longer than 255 bytes is cut to 255 (at a UTF-8 character boundary when the text
// is UTF-8), which callers avoid by validating names first.
//
// Thread safety: Reader and Writer are not thread-safe; each is used by one caller at a time.
// The free functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace wharf::amqp {

inline constexpr size_t kMaxShortStrBytes = 255;

// Big-endian loads and stores on raw bytes (no bounds checks: the caller has them).
uint16_t LoadU16(const char* p);
uint32_t LoadU32(const char* p);
uint64_t LoadU64(const char* p);
void StoreU16(char* p, uint16_t v);
void StoreU32(char* p, uint32_t v);
void StoreU64(char* p, uint64_t v);

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  bool Octet(uint8_t* v);
  bool Short(uint16_t* v);
  bool Long(uint32_t* v);
  bool LongLong(uint64_t* v);
  bool ShortStr(std::string_view* v);
  bool LongStr(std::string_view* v);
  // The next `n` bytes, as they are.
  bool Bytes(size_t n, std::string_view* v);
  // The next packed bit: a new octet is read when the run starts or its 8 bits are used.
  bool Bit(bool* v);

  bool ok() const { return ok_; }
  size_t offset() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  std::string_view rest() const { return data_.substr(pos_); }

 private:
  // The next `n` bytes, or null (and the reader failed) when fewer remain. Ends a bit run.
  const char* Take(size_t n);

  std::string_view data_;
  size_t pos_ = 0;
  bool ok_ = true;
  uint8_t bits_ = 0;       // the octet of the current bit run
  unsigned next_bit_ = 8;  // 8: no run (the next Bit reads an octet)
};

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}

  void Octet(uint8_t v);
  void Short(uint16_t v);
  void Long(uint32_t v);
  void LongLong(uint64_t v);
  void ShortStr(std::string_view v);  // cut to 255 bytes (see above)
  void LongStr(std::string_view v);
  void Raw(std::string_view bytes);
  void Bit(bool v);

  // A u32 length written later: BeginLength() appends 4 placeholder bytes and returns where
  // they are; EndLength(at) stores there the number of bytes appended after them since.
  size_t BeginLength();
  void EndLength(size_t at);

  std::string* out() const { return out_; }

 private:
  void EndBits() { next_bit_ = 8; }

  std::string* out_;
  size_t bits_at_ = 0;     // the octet of the current bit run
  unsigned next_bit_ = 8;  // 8: no run
};

}  // namespace wharf::amqp
