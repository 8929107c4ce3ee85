// net/frame.h
//
// Framing: how a connection's byte stream is cut into frames. Three shapes (Framing):
//
//   kLengthPrefixed (the native protocol):
//     frame   := length payload
//     length  := uint32, big-endian: the number of payload bytes (0 .. max_frame_bytes)
//     payload := length bytes (a serialized wharf.wire.v1.Frame; framing does not look inside)
//     Next() returns the payload.
//   kProtocolHeader (AMQP's first 8 bytes, "AMQP" 0 0 9 1, or whatever a client sends instead):
//     Next() returns the first 8 bytes as one frame.
//   kAmqp (AMQP 0-9-1 frames):
//     frame   := type(1) channel(2) size(4, big-endian) payload(size) frame-end(1)
//     max_frame_bytes bounds the whole frame (8 + size); the AMQP codec sets it to frame-max + 8
//     (RabbitMQ takes a payload of up to frame-max). A frame over it is refused in RabbitMQ's
//     words: "type 1, all octets = <<>>: {frame_too_large,PAYLOAD,MAX - 16}".
//     Next() returns the whole frame, header and frame-end included (amqp/frame.h parses it).
//
// FrameDecoder turns a byte stream into frames. It does no I/O: the connection reads into
// PrepareWrite()/CommitWrite() and then takes payloads with Next(). A length above the limit is
// kFrameTooLarge as soon as the 4-byte prefix is in, before any payload is buffered; bytes left
// over when the stream ends are kFrameTruncated (Finish()).
//
// Memory: the buffer grows with the bytes that arrive, never with the length a prefix declares,
// so a frame announced as 17 MiB of which 1 MiB came costs about 1 MiB. Beyond `free_bytes`
// (every connection's allowance: a read's worth) the buffer grows only as far as the caller has
// granted it (AddGrant), which is how the broker bounds the memory of all connections' partial
// frames together (server/frame_budget.h): a frame that needs more than the allowance asks for
// WantedGrant() bytes once its prefix is in, and PrepareWrite() offers no space beyond the
// allowance until they are granted. While such a frame is in, nothing past its end is read, so
// the buffer never holds more than max(free_bytes, the frame). With the default free_bytes
// (unlimited) no grant is ever needed: the client's decoder.
//
// Thread safety: not thread-safe; owned by one connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "wharf/result.h"

namespace wharf::net {

inline constexpr size_t kFrameHeaderBytes = 4;

enum class Framing { kLengthPrefixed, kProtocolHeader, kAmqp };

// Appends the 4-byte big-endian length prefix for a payload of `length` bytes.
void AppendFrameHeader(uint32_t length, std::string* out);

class FrameDecoder {
 public:
  static constexpr size_t kUnlimited = SIZE_MAX;

  explicit FrameDecoder(size_t max_frame_bytes, size_t free_bytes = kUnlimited)
      : max_frame_bytes_(max_frame_bytes), free_bytes_(free_bytes) {}

  void set_max_frame_bytes(size_t max_frame_bytes) { max_frame_bytes_ = max_frame_bytes; }
  // A larger allowance from here on (an AMQP connection's: one whole frame).
  void set_free_bytes(size_t free_bytes) { free_bytes_ = free_bytes; }
  // How frames are cut from here on (the bytes already buffered included).
  void set_framing(Framing framing) { framing_ = framing; }
  Framing framing() const { return framing_; }

  // Space for up to `n` more bytes, valid until the next call on this object. Smaller than `n`
  // when the buffer may not grow that far (the allowance and the grant), or when a frame larger
  // than the allowance is in and fewer bytes complete it; empty only while such a frame waits
  // for its grant (WantedGrant() > 0).
  std::span<char> PrepareWrite(size_t n);
  // Declares that `n` bytes were written at PrepareWrite()'s pointer.
  void CommitWrite(size_t n);
  // Appends bytes (for tests and callers that already hold a buffer). Returns how many were
  // taken: fewer than given only when the buffer may grow no further.
  size_t Append(std::string_view bytes);

  // The next complete payload, or nullopt if more bytes are needed. The view stays valid until
  // the next call to PrepareWrite/Append/Trim. kFrameTooLarge is sticky.
  Result<std::optional<std::string_view>> Next();

  // True when Next() would return a payload or an error without more bytes.
  bool FrameReady() const;

  // At end of stream: OK when no partial frame is buffered, else kFrameTruncated.
  Status Finish() const;

  // Bytes received and not yet taken by Next().
  size_t buffered() const { return end_ - begin_; }
  // Bytes taken by Next() since the start: with buffered(), where in the stream the next frame
  // starts (its identity, for timing it).
  uint64_t consumed() const { return consumed_; }
  // The buffer's size: what this connection holds in memory for framing.
  size_t capacity() const { return capacity_; }
  // The declared size (prefix + payload) of the frame being received, when its prefix is in
  // and its length within the limit; else 0.
  size_t frame_bytes() const { return CurrentFrameBytes(); }

  // Grants: the bytes the frame now being received needs beyond the allowance and does not
  // have (0: none needed); AddGrant hands them over. Trim() gives back what is no longer needed.
  size_t WantedGrant() const;
  void AddGrant(size_t bytes) { granted_ += bytes; }
  size_t granted() const { return granted_; }
  // After the payloads taken by Next() are done with: shrinks the buffer to what is still
  // buffered (at least the allowance, when that is not unlimited) and returns the grant no
  // longer needed, which the caller gives back. Invalidates the views Next() returned.
  size_t Trim();
  // Drops everything buffered and the buffer itself (the connection is gone); returns the
  // grant, which the caller gives back.
  size_t Clear();

 private:
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };
  // The declared size (prefix + payload) of the frame at begin_, when its prefix is in and its
  // length within the limit; else 0.
  size_t CurrentFrameBytes() const;
  // The bytes of a frame's header: what must be in before its size is known.
  size_t HeaderBytes() const;
  // The whole size the frame at begin_ declares (its header must be in); and the part of it
  // max_frame_bytes_ bounds.
  size_t DeclaredFrameBytes() const;
  size_t BoundedBytes(size_t frame_bytes) const;
  // The payload (what Next() returns) of a whole frame of `frame_bytes` at begin_.
  std::string_view Payload(size_t frame_bytes) const;
  // How large the buffer may be: the allowance plus the grant.
  size_t CapacityLimit() const;
  // Moves the unconsumed bytes to the front.
  void Compact();
  // Reallocates the buffer to `capacity` bytes (after Compact, at least buffered()).
  void Resize(size_t capacity);

  size_t max_frame_bytes_;
  size_t free_bytes_;
  Framing framing_ = Framing::kLengthPrefixed;
  size_t granted_ = 0;
  std::unique_ptr<char, FreeDeleter> buffer_;  // malloc'd: grown with realloc, never zeroed
  size_t capacity_ = 0;
  size_t begin_ = 0;  // first unconsumed byte
  size_t end_ = 0;    // one past the last written byte
  uint64_t consumed_ = 0;
  bool too_large_ = false;
};

}  // namespace wharf::net
