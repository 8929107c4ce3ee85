#include "net/frame.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace wharf::net {
namespace {

constexpr size_t kProtocolHeaderBytes = 8;  // "AMQP" 0 0 9 1
constexpr size_t kAmqpHeaderBytes = 7;      // type, channel, size
constexpr size_t kAmqpOverheadBytes = 8;    // the header and the frame-end octet

size_t DeclaredLength(const char* header) {
  const auto* p = reinterpret_cast<const unsigned char*>(header);
  return (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
}

}  // namespace

void AppendFrameHeader(uint32_t length, std::string* out) {
  char header[kFrameHeaderBytes] = {static_cast<char>(length >> 24),
                                    static_cast<char>(length >> 16), static_cast<char>(length >> 8),
                                    static_cast<char>(length)};
  out->append(header, sizeof header);
}

size_t FrameDecoder::HeaderBytes() const {
  switch (framing_) {
    case Framing::kProtocolHeader:
      return kProtocolHeaderBytes;
    case Framing::kAmqp:
      return kAmqpHeaderBytes;
    default:
      return kFrameHeaderBytes;
  }
}

size_t FrameDecoder::DeclaredFrameBytes() const {
  const char* header = buffer_.get() + begin_;
  switch (framing_) {
    case Framing::kProtocolHeader:
      return kProtocolHeaderBytes;
    case Framing::kAmqp:  // type, channel, then the payload's size; the frame-end follows it
      return kAmqpHeaderBytes + DeclaredLength(header + 3) + 1;
    default:
      return kFrameHeaderBytes + DeclaredLength(header);
  }
}

size_t FrameDecoder::BoundedBytes(size_t frame_bytes) const {
  // The native limit is on the payload, AMQP's frame-max on the whole frame.
  return framing_ == Framing::kLengthPrefixed ? frame_bytes - kFrameHeaderBytes : frame_bytes;
}

std::string_view FrameDecoder::Payload(size_t frame_bytes) const {
  if (framing_ == Framing::kLengthPrefixed) {
    return {buffer_.get() + begin_ + kFrameHeaderBytes, frame_bytes - kFrameHeaderBytes};
  }
  return {buffer_.get() + begin_, frame_bytes};
}

size_t FrameDecoder::CurrentFrameBytes() const {
  if (too_large_ || end_ - begin_ < HeaderBytes()) return 0;
  const size_t frame = DeclaredFrameBytes();
  if (BoundedBytes(frame) > max_frame_bytes_) return 0;
  return frame;
}

size_t FrameDecoder::CapacityLimit() const {
  return free_bytes_ > kUnlimited - granted_ ? kUnlimited : free_bytes_ + granted_;
}

void FrameDecoder::Compact() {
  if (begin_ == 0) return;
  if (end_ > begin_) std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
}

void FrameDecoder::Resize(size_t capacity) {
  if (capacity == capacity_) return;
  if (capacity == 0) {
    buffer_.reset();
    capacity_ = 0;
    return;
  }
  // realloc: a large buffer grows in place or by remapping, without copying, where it can.
  void* grown = std::realloc(buffer_.get(), capacity);
  if (grown == nullptr) throw std::bad_alloc();
  (void)buffer_.release();
  buffer_.reset(static_cast<char*>(grown));
  capacity_ = capacity;
}

std::span<char> FrameDecoder::PrepareWrite(size_t n) {
  // After a large frame, give the memory back once everything has been consumed (a decoder
  // with an allowance does it in Trim).
  constexpr size_t kKeepBytes = 256u << 10;
  if (begin_ == end_) {
    begin_ = end_ = 0;
    if (free_bytes_ == kUnlimited && capacity_ > kKeepBytes && n <= kKeepBytes) Resize(0);
  }
  const size_t pending = end_ - begin_;
  // While a frame larger than the allowance comes in, read no further than its end: the
  // buffer then never holds more than that frame.
  if (size_t frame = CurrentFrameBytes(); frame > free_bytes_ && frame > pending) {
    n = std::min(n, frame - pending);
  }
  const size_t limit = CapacityLimit();
  if (pending >= limit) return {};
  n = std::min(n, limit - pending);
  if (capacity_ - end_ < n) {
    // Slide unconsumed bytes to the front before growing.
    Compact();
    if (capacity_ - end_ < n) {
      // Grow by half at least, so that a frame arriving in many reads is copied a bounded
      // number of times, but never past the limit, nor ahead of the bytes that came.
      Resize(std::min(limit, std::max(pending + n, capacity_ + capacity_ / 2)));
    }
  }
  return {buffer_.get() + end_, n};
}

void FrameDecoder::CommitWrite(size_t n) { end_ += n; }

size_t FrameDecoder::Append(std::string_view bytes) {
  size_t taken = 0;
  while (taken < bytes.size()) {
    std::span<char> space = PrepareWrite(bytes.size() - taken);
    if (space.empty()) break;
    std::memcpy(space.data(), bytes.data() + taken, space.size());
    CommitWrite(space.size());
    taken += space.size();
  }
  return taken;
}

Result<std::optional<std::string_view>> FrameDecoder::Next() {
  if (too_large_) {
    return Status(StatusCode::kFrameTooLarge, "frame exceeds the maximum frame size");
  }
  if (end_ - begin_ < HeaderBytes()) return std::optional<std::string_view>();
  const size_t frame = DeclaredFrameBytes();
  if (size_t length = BoundedBytes(frame); length > max_frame_bytes_) {
    too_large_ = true;
    if (framing_ == Framing::kAmqp) {
      // RabbitMQ's words (rabbit_reader): the type, the payload's size and frame-max less the
      // 8 octets of a frame's header and end.
      return Status(StatusCode::kFrameTooLarge,
                    "type " + std::to_string(static_cast<uint8_t>(buffer_.get()[begin_])) +
                        ", all octets = <<>>: {frame_too_large," +
                        std::to_string(length - kAmqpOverheadBytes) + "," +
                        std::to_string(max_frame_bytes_ - 2 * kAmqpOverheadBytes) + "}");
    }
    return Status(StatusCode::kFrameTooLarge, "frame of " + std::to_string(length) +
                                                  " bytes exceeds the maximum of " +
                                                  std::to_string(max_frame_bytes_));
  }
  if (end_ - begin_ < frame) return std::optional<std::string_view>();
  std::string_view payload = Payload(frame);
  begin_ += frame;
  consumed_ += frame;
  return std::optional<std::string_view>(payload);
}

bool FrameDecoder::FrameReady() const {
  if (too_large_) return true;
  if (end_ - begin_ < HeaderBytes()) return false;
  const size_t frame = DeclaredFrameBytes();
  return BoundedBytes(frame) > max_frame_bytes_ || end_ - begin_ >= frame;
}

Status FrameDecoder::Finish() const {
  if (end_ == begin_) return Status::Ok();
  return Status(StatusCode::kFrameTruncated, "stream ended " + std::to_string(end_ - begin_) +
                                                 " bytes into an incomplete frame");
}

size_t FrameDecoder::WantedGrant() const {
  const size_t frame = CurrentFrameBytes();
  if (frame <= free_bytes_) return 0;
  const size_t needed = frame - free_bytes_;
  return needed > granted_ ? needed - granted_ : 0;
}

size_t FrameDecoder::Trim() {
  if (begin_ == end_) begin_ = end_ = 0;
  if (free_bytes_ == kUnlimited) return 0;
  const size_t frame = CurrentFrameBytes();
  const size_t needed = frame > free_bytes_ ? frame - free_bytes_ : 0;
  const size_t release = granted_ > needed ? granted_ - needed : 0;
  granted_ -= release;
  // Give back a buffer grown for a frame that has been taken (all of it when it is empty).
  if (const size_t limit = CapacityLimit(); capacity_ > limit) {
    Compact();
    Resize(end_ == 0 ? 0 : std::max(end_, limit));
  }
  return release;
}

size_t FrameDecoder::Clear() {
  Resize(0);
  begin_ = end_ = 0;
  const size_t release = granted_;
  granted_ = 0;
  return release;
}

}  // namespace wharf::net
