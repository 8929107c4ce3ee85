#include "amqp/wire.h"

#include <cstring>

#include "common/log_safe.h"

namespace wharf::amqp {

uint16_t LoadU16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint16_t>((u[0] << 8) | u[1]);
}

uint32_t LoadU32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

uint64_t LoadU64(const char* p) { return (uint64_t{LoadU32(p)} << 32) | LoadU32(p + 4); }

void StoreU16(char* p, uint16_t v) {
  p[0] = static_cast<char>(v >> 8);
  p[1] = static_cast<char>(v);
}

void StoreU32(char* p, uint32_t v) {
  p[0] = static_cast<char>(v >> 24);
  p[1] = static_cast<char>(v >> 16);
  p[2] = static_cast<char>(v >> 8);
  p[3] = static_cast<char>(v);
}

void StoreU64(char* p, uint64_t v) {
  StoreU32(p, static_cast<uint32_t>(v >> 32));
  StoreU32(p + 4, static_cast<uint32_t>(v));
}

const char* Reader::Take(size_t n) {
  next_bit_ = 8;
  if (!ok_ || data_.size() - pos_ < n) {
    ok_ = false;
    return nullptr;
  }
  const char* p = data_.data() + pos_;
  pos_ += n;
  return p;
}

bool Reader::Octet(uint8_t* v) {
  const char* p = Take(1);
  if (p == nullptr) return false;
  *v = static_cast<uint8_t>(*p);
  return true;
}

bool Reader::Short(uint16_t* v) {
  const char* p = Take(2);
  if (p == nullptr) return false;
  *v = LoadU16(p);
  return true;
}

bool Reader::Long(uint32_t* v) {
  const char* p = Take(4);
  if (p == nullptr) return false;
  *v = LoadU32(p);
  return true;
}

bool Reader::LongLong(uint64_t* v) {
  const char* p = Take(8);
  if (p == nullptr) return false;
  *v = LoadU64(p);
  return true;
}

bool Reader::Bytes(size_t n, std::string_view* v) {
  const char* p = Take(n);
  if (p == nullptr) return false;
  *v = std::string_view(p, n);
  return true;
}

bool Reader::ShortStr(std::string_view* v) {
  uint8_t length;
  return Octet(&length) && Bytes(length, v);
}

bool Reader::LongStr(std::string_view* v) {
  uint32_t length;
  return Long(&length) && Bytes(length, v);
}

bool Reader::Bit(bool* v) {
  if (next_bit_ >= 8) {
    const char* p = Take(1);
    if (p == nullptr) return false;
    bits_ = static_cast<uint8_t>(*p);
    next_bit_ = 0;
  }
  *v = ((bits_ >> next_bit_) & 1) != 0;
  ++next_bit_;
  return true;
}

void Writer::Octet(uint8_t v) {
  EndBits();
  out_->push_back(static_cast<char>(v));
}

void Writer::Short(uint16_t v) {
  EndBits();
  char b[2];
  StoreU16(b, v);
  out_->append(b, sizeof b);
}

void Writer::Long(uint32_t v) {
  EndBits();
  char b[4];
  StoreU32(b, v);
  out_->append(b, sizeof b);
}

void Writer::LongLong(uint64_t v) {
  EndBits();
  char b[8];
  StoreU64(b, v);
  out_->append(b, sizeof b);
}

void Writer::ShortStr(std::string_view v) {
  v = CutAtCharBoundary(v, kMaxShortStrBytes);
  Octet(static_cast<uint8_t>(v.size()));
  out_->append(v);
}

void Writer::LongStr(std::string_view v) {
  if (v.size() > UINT32_MAX) v = v.substr(0, UINT32_MAX);
  Long(static_cast<uint32_t>(v.size()));
  out_->append(v);
}

void Writer::Raw(std::string_view bytes) {
  EndBits();
  out_->append(bytes);
}

void Writer::Bit(bool v) {
  if (next_bit_ >= 8) {
    bits_at_ = out_->size();
    out_->push_back('\0');
    next_bit_ = 0;
  }
  if (v) (*out_)[bits_at_] = static_cast<char>((*out_)[bits_at_] | (1u << next_bit_));
  ++next_bit_;
}

size_t Writer::BeginLength() {
  EndBits();
  const size_t at = out_->size();
  out_->append(4, '\0');
  return at;
}

void Writer::EndLength(size_t at) {
  EndBits();
  const size_t length = out_->size() - at - 4;
  StoreU32(out_->data() + at, static_cast<uint32_t>(length));
}

}  // namespace wharf::amqp
