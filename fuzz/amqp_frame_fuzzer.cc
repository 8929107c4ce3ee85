// fuzz/amqp_frame_fuzzer.cc
//
// AMQP 0-9-1 as the broker reads it from a client: the 8-byte protocol header, then frames cut
// by net::FrameDecoder (AMQP framing, a fuzzed frame-max, reads of fuzzed sizes) and parsed by
// amqp::ParseFrame; a method frame's payload decoded (DecodeMethod), a content header's
// (DecodeContentHeader, DecodeProperties), and every frame described as RabbitMQ's error texts
// quote it (FrameSnippet).
//
// Checked besides "no crash": each frame is the stream's bytes; a decoded method or property
// set encodes to bytes that decode and encode to the same bytes again (what the broker sends
// back, a basic.deliver's properties above all, is what it read).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "amqp/erlang_text.h"
#include "amqp/frame.h"
#include "amqp/methods.h"
#include "amqp/properties.h"
#include "amqp_checks.h"
#include "fuzz_check.h"
#include "net/frame.h"

namespace {

using wharf::fuzz::Check;
namespace amqp = wharf::amqp;

void OnFrame(std::string_view whole) {
  amqp::Frame frame;
  if (!amqp::ParseFrame(whole, &frame).ok()) {
    (void)amqp::FrameSnippet(static_cast<uint8_t>(whole[0]), whole.substr(7));
    return;
  }
  (void)amqp::FrameSnippet(frame.type, frame.payload);
  if (frame.type == amqp::kFrameMethod) {
    amqp::Method method;
    if (!amqp::DecodeMethod(frame.payload, &method).ok()) return;
    (void)amqp::MethodName(method);
    (void)amqp::HasContent(method);
    wharf::fuzz::CheckMethodEncoding(method);
  } else if (frame.type == amqp::kFrameHeader) {
    amqp::ContentHeader header;
    if (!amqp::DecodeContentHeader(frame.payload, &header).ok()) return;
    amqp::BasicProperties properties;
    if (!amqp::DecodeProperties(header.raw_properties, &properties).ok()) return;
    wharf::fuzz::CheckPropertiesEncoding(properties);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // Byte 0: frame-max; byte 1: the seed of the read sizes. Then the stream, protocol header
  // first (the fuzzer finds it from the seeds).
  static constexpr size_t kFrameMax[] = {amqp::kMinFrameMax, 131072, 64, 1 << 20};
  const size_t frame_max = kFrameMax[data[0] & 3] + amqp::kFrameOverheadBytes;
  wharf::net::FrameDecoder decoder(amqp::kMinFrameMax + amqp::kFrameOverheadBytes);
  decoder.set_framing(wharf::net::Framing::kProtocolHeader);
  uint32_t seed = data[1] | 1u;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);
  size_t written = 0;
  uint64_t taken = 0;
  bool header = true;
  while (true) {
    seed = seed * 1103515245u + 12345u;
    const size_t want = std::min<size_t>(1 + (seed >> 16) % 5000, stream.size() - written);
    if (want > 0) {
      std::span<char> space = decoder.PrepareWrite(want);
      Check(!space.empty(), "an unlimited allowance always offers space");
      const size_t n = std::min(space.size(), want);
      std::memcpy(space.data(), stream.data() + written, n);
      decoder.CommitWrite(n);
      written += n;
    }
    while (true) {
      auto next = decoder.Next();
      if (!next.ok()) return 0;
      if (!next->has_value()) break;
      std::string_view frame = **next;
      Check(taken + frame.size() <= written, "a frame is within what was written");
      Check(std::memcmp(frame.data(), stream.data() + taken, frame.size()) == 0,
            "a frame is the stream's bytes");
      taken += frame.size();
      if (header) {
        // The connection goes on only after AMQP 0-9-1's header; tune sets the frame-max.
        if (frame != amqp::kProtocolHeader) return 0;
        header = false;
        decoder.set_framing(wharf::net::Framing::kAmqp);
        decoder.set_max_frame_bytes(frame_max);
        continue;
      }
      OnFrame(frame);
    }
    decoder.Trim();
    if (want == 0) break;
  }
  (void)decoder.Finish();
  return 0;
}
