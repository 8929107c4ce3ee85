// Unit tests for amqp/frame.h: framing, heartbeats, and content split at frame-max.
#include "amqp/frame.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "amqp/properties.h"
#include "unit/amqp/amqp_test_util.h"

namespace wharf::amqp {
namespace {

using testing::Hex;
using testing::Wire;

// Cuts a stream of whole frames, parsing each.
std::vector<Frame> Frames(const std::string& stream) {
  std::vector<Frame> frames;
  size_t at = 0;
  while (at < stream.size()) {
    EXPECT_GE(stream.size() - at, kFrameHeaderBytes);
    if (stream.size() - at < kFrameHeaderBytes) break;
    const size_t size = FrameSize(stream.data() + at);
    EXPECT_LE(size, stream.size() - at);
    if (size > stream.size() - at) break;
    Frame f;
    Status st = ParseFrame(std::string_view(stream).substr(at, size), &f);
    EXPECT_TRUE(st.ok()) << st.ToString();
    frames.push_back(f);
    at += size;
  }
  return frames;
}

TEST(AmqpFrame, ProtocolHeader) { EXPECT_EQ(Hex(kProtocolHeader), "41 4d 51 50|00 00 09 01"); }

TEST(AmqpFrame, AppendAndParse) {
  std::string out = "prefix";
  AppendFrame(kFrameBody, 0x1234, std::string("bo\0dy", 5), &out);
  EXPECT_EQ(Hex(out.substr(6)),
            Hex(Wire().U8(3).U16(0x1234).U32(5).Raw(std::string("bo\0dy", 5)).U8(0xCE)));
  const std::string_view whole = std::string_view(out).substr(6);
  EXPECT_EQ(FrameSize(whole.data()), whole.size());
  Frame f;
  ASSERT_TRUE(ParseFrame(whole, &f).ok());
  EXPECT_EQ(f.type, kFrameBody);
  EXPECT_EQ(f.channel, 0x1234);
  EXPECT_EQ(f.payload, std::string_view("bo\0dy", 5));
  EXPECT_EQ(f.payload.data(), whole.data() + 7);  // a view, not a copy
}

TEST(AmqpFrame, FrameSizeReadsTheFullLength) {
  const std::string header = Wire().U8(1).U16(0).U32(0xFFFFFFFFu);
  EXPECT_EQ(FrameSize(header.data()), size_t{0xFFFFFFFFu} + 8);
}

TEST(AmqpFrame, Heartbeat) {
  std::string out;
  AppendHeartbeat(&out);
  EXPECT_EQ(Hex(out), "08 00 00 00|00 00 00 ce");
  Frame f;
  ASSERT_TRUE(ParseFrame(out, &f).ok());
  EXPECT_EQ(f.type, kFrameHeartbeat);
  // On another channel it parses; refusing it (505) is the connection's.
  ASSERT_TRUE(ParseFrame(Wire().U8(8).U16(3).U32(0).U8(0xCE), &f).ok());
  EXPECT_EQ(f.channel, 3);
  // A heartbeat has no payload.
  EXPECT_EQ(ParseFrame(Wire().U8(8).U16(0).U32(1).U8(0).U8(0xCE), &f).code(),
            StatusCode::kMalformedFrame);
}

TEST(AmqpFrame, MethodFrame) {
  std::string out;
  AppendMethodFrame(7, BasicAck{.delivery_tag = 9, .multiple = true}, &out);
  EXPECT_EQ(Hex(out), Hex(Wire().U8(1).U16(7).U32(13).U16(60).U16(80).U64(9).U8(1).U8(0xCE)));
  Frame f;
  ASSERT_TRUE(ParseFrame(out, &f).ok());
  Method m;
  ASSERT_TRUE(DecodeMethod(f.payload, &m).ok());
  EXPECT_TRUE(std::get<BasicAck>(m) == (BasicAck{.delivery_tag = 9, .multiple = true}));
}

TEST(AmqpFrame, ShortFramesFail) {
  const std::string good = Wire().U8(1).U16(0).U32(0).U8(0xCE);
  Frame f;
  ASSERT_TRUE(ParseFrame(good, &f).ok());
  for (size_t k = 0; k < good.size(); ++k) {
    EXPECT_EQ(ParseFrame(good.substr(0, k), &f).code(), StatusCode::kMalformedFrame) << k;
  }
}

TEST(AmqpFrame, BadFrameEndFails) {
  Frame f;
  for (uint8_t end : {0x00, 0xCD, 0xCF, 0xFF}) {
    Status st = ParseFrame(Wire().U8(1).U16(0).U32(1).U8(0).U8(end), &f);
    EXPECT_EQ(st.code(), StatusCode::kMalformedFrame);
    EXPECT_NE(st.message().find("frame end"), std::string_view::npos) << st.ToString();
  }
}

TEST(AmqpFrame, SizeMismatchFails) {
  Frame f;
  EXPECT_EQ(ParseFrame(Wire().U8(1).U16(0).U32(2).U8(0).U8(0xCE), &f).code(),
            StatusCode::kMalformedFrame);
  EXPECT_EQ(ParseFrame(Wire().U8(1).U16(0).U32(0).U8(0).U8(0xCE), &f).code(),
            StatusCode::kMalformedFrame);
  EXPECT_EQ(ParseFrame(Wire().U8(1).U16(0).U32(0xFFFFFFFFu).U8(0xCE), &f).code(),
            StatusCode::kMalformedFrame);
}

TEST(AmqpFrame, UnknownTypeFails) {
  Frame f;
  for (uint8_t type : {0, 4, 5, 7, 9, 0xCE, 0xFF}) {
    Status st = ParseFrame(Wire().U8(type).U16(0).U32(0).U8(0xCE), &f);
    EXPECT_EQ(st.code(), StatusCode::kMalformedFrame) << int{type};
    EXPECT_NE(st.message().find("unknown frame type"), std::string_view::npos);
  }
}

// AppendContent's output: one header frame, then body frames of at most frame_max bytes each
// (payload frame_max - 8), the body reassembled exactly.
void ExpectContent(size_t body_size, uint32_t frame_max, size_t expected_body_frames) {
  SCOPED_TRACE("body " + std::to_string(body_size) + ", frame_max " + std::to_string(frame_max));
  std::string body(body_size, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7 + 3);
  BasicProperties p;
  p.delivery_mode = 2;
  std::string raw;
  EncodeProperties(p, &raw);
  std::string out;
  AppendContent(5, raw, body, frame_max, &out);
  const std::vector<Frame> frames = Frames(out);
  ASSERT_EQ(frames.size(), 1 + expected_body_frames);
  EXPECT_EQ(frames[0].type, kFrameHeader);
  EXPECT_EQ(frames[0].channel, 5);
  ContentHeader h;
  ASSERT_TRUE(DecodeContentHeader(frames[0].payload, &h).ok());
  EXPECT_EQ(h.class_id, 60);
  EXPECT_EQ(h.body_size, body_size);
  EXPECT_EQ(Hex(h.raw_properties), Hex(raw));
  std::string reassembled;
  for (size_t i = 1; i < frames.size(); ++i) {
    EXPECT_EQ(frames[i].type, kFrameBody);
    EXPECT_EQ(frames[i].channel, 5);
    EXPECT_FALSE(frames[i].payload.empty());
    if (frame_max != 0) {
      EXPECT_LE(frames[i].payload.size() + kFrameOverheadBytes, std::max(frame_max, kMinFrameMax));
    }
    reassembled.append(frames[i].payload);
  }
  EXPECT_EQ(reassembled, body);
}

TEST(AmqpFrame, ContentSplitsAtFrameMaxLessEight) {
  constexpr uint32_t kMax = 4096;
  constexpr size_t kChunk = kMax - 8;
  ExpectContent(0, kMax, 0);  // an empty body has no body frame
  ExpectContent(1, kMax, 1);
  ExpectContent(kMax - 9, kMax, 1);
  ExpectContent(kMax - 8, kMax, 1);  // exactly frame_max on the wire
  ExpectContent(kMax - 7, kMax, 2);
  ExpectContent(2 * kChunk - 1, kMax, 2);
  ExpectContent(2 * kChunk, kMax, 2);
  ExpectContent(2 * kChunk + 1, kMax, 3);
  ExpectContent(3 * kChunk, kMax, 3);
  ExpectContent(131072 - 9, 131072, 1);
  ExpectContent(131072 - 8, 131072, 1);
  ExpectContent(131072 - 7, 131072, 2);
  ExpectContent(10 * (131072 - 8), 131072, 10);
}

TEST(AmqpFrame, ContentWithoutLimitIsOneBodyFrame) {
  ExpectContent(0, 0, 0);
  ExpectContent(1 << 20, 0, 1);
}

TEST(AmqpFrame, FrameMaxBelowTheMinimumCountsAsTheMinimum) {
  ExpectContent(4088, 100, 1);
  ExpectContent(4089, 1, 2);
}

TEST(AmqpFrame, ContentHeaderBytes) {
  std::string out;
  AppendContent(1, Wire().U16(0), "", 4096, &out);
  EXPECT_EQ(Hex(out), Hex(Wire().U8(2).U16(1).U32(14).U16(60).U16(0).U64(0).U16(0).U8(0xCE)));
}

}  // namespace
}  // namespace wharf::amqp
