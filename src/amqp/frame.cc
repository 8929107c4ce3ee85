#include "amqp/frame.h"

#include <algorithm>

#include "amqp/properties.h"
#include "amqp/wire.h"

namespace wharf::amqp {
namespace {

Status MalformedFrame(std::string what) {
  return Status(StatusCode::kMalformedFrame, std::move(what));
}

// Appends type, channel and a placeholder size; returns where the size is.
size_t BeginFrame(uint8_t type, uint16_t channel, std::string* out) {
  Writer w(out);
  w.Octet(type);
  w.Short(channel);
  return w.BeginLength();
}

void EndFrame(size_t size_at, std::string* out) {
  Writer w(out);
  w.EndLength(size_at);
  w.Octet(kFrameEnd);
}

}  // namespace

Status ParseFrame(std::string_view whole, Frame* out) {
  if (whole.size() < kFrameOverheadBytes) {
    return MalformedFrame("frame of " + std::to_string(whole.size()) +
                          " bytes is shorter than the 8 bytes of a frame's header and end");
  }
  const uint32_t size = LoadU32(whole.data() + 3);
  if (size != whole.size() - kFrameOverheadBytes) {
    return MalformedFrame("frame size " + std::to_string(size) + " does not match the " +
                          std::to_string(whole.size() - kFrameOverheadBytes) + " payload bytes");
  }
  if (static_cast<uint8_t>(whole.back()) != kFrameEnd) {
    static constexpr char kHex[] = "0123456789abcdef";
    const auto end = static_cast<unsigned char>(whole.back());
    return MalformedFrame(std::string("invalid frame end 0x") + kHex[end >> 4] + kHex[end & 0xF] +
                          " (expected 0xce)");
  }
  const auto type = static_cast<uint8_t>(whole[0]);
  if (type != kFrameMethod && type != kFrameHeader && type != kFrameBody &&
      type != kFrameHeartbeat) {
    return MalformedFrame("unknown frame type " + std::to_string(type));
  }
  if (type == kFrameHeartbeat && size != 0) {
    return MalformedFrame("heartbeat frame with a payload of " + std::to_string(size) + " bytes");
  }
  out->type = type;
  out->channel = LoadU16(whole.data() + 1);
  out->payload = whole.substr(kFrameHeaderBytes, size);
  return Status::Ok();
}

size_t FrameSize(const char* header7) {
  return kFrameHeaderBytes + size_t{LoadU32(header7 + 3)} + 1;
}

void AppendFrame(uint8_t type, uint16_t channel, std::string_view payload, std::string* out) {
  const size_t at = BeginFrame(type, channel, out);
  out->append(payload);
  EndFrame(at, out);
}

void AppendMethodFrame(uint16_t channel, const Method& m, std::string* out) {
  const size_t at = BeginFrame(kFrameMethod, channel, out);
  EncodeMethod(m, out);
  EndFrame(at, out);
}

void AppendHeartbeat(std::string* out) { AppendFrame(kFrameHeartbeat, 0, {}, out); }

void AppendContent(uint16_t channel, std::string_view raw_properties, std::string_view body,
                   uint32_t frame_max, std::string* out) {
  const size_t at = BeginFrame(kFrameHeader, channel, out);
  AppendContentHeaderPayload(body.size(), raw_properties, out);
  EndFrame(at, out);
  if (body.empty()) return;
  size_t chunk = UINT32_MAX;  // a frame's size field is 32 bits
  if (frame_max != 0) chunk = std::max(frame_max, kMinFrameMax) - kFrameOverheadBytes;
  out->reserve(out->size() + body.size() + (body.size() / chunk + 1) * kFrameOverheadBytes);
  for (size_t offset = 0; offset < body.size(); offset += chunk) {
    AppendFrame(kFrameBody, channel, body.substr(offset, chunk), out);
  }
}

}  // namespace wharf::amqp
