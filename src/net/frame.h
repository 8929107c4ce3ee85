// net/frame.h
//
// Length-prefixed framing for the native protocol. The layout on the wire:
//
//   frame   := length payload
//   length  := uint32, big-endian: the number of payload bytes (0 .. max_frame_bytes)
//   payload := length bytes (a serialized wharf.wire.v1.Frame; framing does not look inside)
//
// FrameDecoder turns a byte stream into payloads. It does no I/O: the connection reads into
// PrepareWrite()/CommitWrite() and then takes payloads with Next(). A length above the limit is
// kFrameTooLarge as soon as the 4-byte prefix is in, before any payload is buffered; bytes left
// over when the stream ends are kFrameTruncated (Finish()).
//
// Thread safety: not thread-safe; owned by one connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "wharf/result.h"

namespace wharf::net {

inline constexpr size_t kFrameHeaderBytes = 4;

// Appends the 4-byte big-endian length prefix for a payload of `length` bytes.
void AppendFrameHeader(uint32_t length, std::string* out);

class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}

  void set_max_frame_bytes(size_t max_frame_bytes) { max_frame_bytes_ = max_frame_bytes; }

  // Returns space for at least `n` more bytes; valid until the next call on this object.
  char* PrepareWrite(size_t n);
  // Declares that `n` bytes were written at PrepareWrite()'s pointer.
  void CommitWrite(size_t n);
  // Appends bytes (for tests and callers that already hold a buffer).
  void Append(std::string_view bytes);

  // The next complete payload, or nullopt if more bytes are needed. The view stays valid until
  // the next call to PrepareWrite/Append. kFrameTooLarge is sticky.
  Result<std::optional<std::string_view>> Next();

  // True when Next() would return a payload or an error without more bytes.
  bool FrameReady() const;

  // At end of stream: OK when no partial frame is buffered, else kFrameTruncated.
  Status Finish() const;

  size_t buffered() const { return end_ - begin_; }

 private:
  size_t max_frame_bytes_;
  std::string buffer_;
  size_t begin_ = 0;  // first unconsumed byte
  size_t end_ = 0;    // one past the last written byte
  bool too_large_ = false;
};

}  // namespace wharf::net
