// amqp/frame.h
//
// AMQP 0-9-1 frames (spec 4.2.3). After the 8-byte protocol header, the connection carries
// frames:
//
//   frame   := type (octet) channel (short) size (long) payload (size bytes) frame-end (0xCE)
//   type    := 1 method | 2 content header | 3 content body | 8 heartbeat
//
// The connection cuts frames itself (FrameSize from the first 7 bytes, checked against its
// negotiated frame-max: RabbitMQ answers a larger one with 501 FRAME_ERROR) and hands each
// whole frame to ParseFrame. ParseFrame checks the frame-end octet, that the size matches, the
// type, and that a heartbeat is empty; each failure is StatusCode::kMalformedFrame (RabbitMQ:
// 501 FRAME_ERROR). A heartbeat on a channel other than 0 parses; rejecting it (505
// UNEXPECTED_FRAME) is the connection's.
//
// Content (a message) is a header frame and then body frames of at most frame-max - 8 payload
// bytes each; an empty body has no body frame at all (amqp.md 1.3.12). The header frame is not
// split, so it may exceed frame-max when the properties are huge (RabbitMQ refuses that;
// clients never send one).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "amqp/methods.h"
#include "wharf/status.h"

namespace wharf::amqp {

inline constexpr uint8_t kFrameMethod = 1, kFrameHeader = 2, kFrameBody = 3, kFrameHeartbeat = 8;
inline constexpr uint8_t kFrameEnd = 0xCE;
inline constexpr size_t kFrameHeaderBytes = 7, kFrameOverheadBytes = 8;
// The smallest frame-max a peer may negotiate (the spec's frame-min-size); 0 = no limit.
inline constexpr uint32_t kMinFrameMax = 4096;
inline constexpr std::string_view kProtocolHeader{"AMQP\x00\x00\x09\x01", 8};

struct Frame {
  uint8_t type = 0;
  uint16_t channel = 0;
  std::string_view payload;  // a view into the bytes given to ParseFrame
};

// One whole frame: the 7-byte header, the payload and the frame-end octet.
Status ParseFrame(std::string_view whole, Frame* out);

// The size of the whole frame whose first 7 bytes are at `header7`: 7 + payload size + 1.
size_t FrameSize(const char* header7);

void AppendFrame(uint8_t type, uint16_t channel, std::string_view payload, std::string* out);
void AppendMethodFrame(uint16_t channel, const Method& m, std::string* out);
void AppendHeartbeat(std::string* out);

// A content header frame (class 60, weight 0, body size, `raw_properties`), then the body in
// frames of at most frame_max - 8 payload bytes each (frame_max 0 = no limit: one body frame;
// a frame_max below kMinFrameMax is taken as kMinFrameMax). An empty body has no body frame.
void AppendContent(uint16_t channel, std::string_view raw_properties, std::string_view body,
                   uint32_t frame_max, std::string* out);

}  // namespace wharf::amqp
