// Unit tests for net/frame.h: length-prefixed framing.
#include "net/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace wharf::net {
namespace {

std::string Framed(std::string_view payload) {
  std::string out;
  AppendFrameHeader(static_cast<uint32_t>(payload.size()), &out);
  out.append(payload);
  return out;
}

// Takes every complete payload now buffered; fails the test on an error.
std::vector<std::string> TakeAll(FrameDecoder& decoder) {
  std::vector<std::string> out;
  while (true) {
    auto next = decoder.Next();
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok() || !next->has_value()) break;
    out.emplace_back(**next);
  }
  return out;
}

using Payloads = std::vector<std::string>;

TEST(AppendFrameHeader, WritesBigEndianLength) {
  std::string out = "x";
  AppendFrameHeader(0x01020304, &out);
  EXPECT_EQ(out, std::string("x\x01\x02\x03\x04", 5));
  out.clear();
  AppendFrameHeader(0, &out);
  EXPECT_EQ(out, std::string(4, '\0'));
  out.clear();
  AppendFrameHeader(0xFFFFFFFF, &out);
  EXPECT_EQ(out, std::string(4, '\xFF'));
  out.clear();
  AppendFrameHeader(300, &out);
  EXPECT_EQ(out, std::string("\x00\x00\x01\x2c", 4));
}

TEST(FrameDecoder, NeedsMoreBytesWhenEmpty) {
  FrameDecoder decoder(1024);
  auto next = decoder.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
  EXPECT_TRUE(decoder.Finish().ok());
}

TEST(FrameDecoder, DecodesWholeFrame) {
  FrameDecoder decoder(1024);
  decoder.Append(Framed("hello"));
  EXPECT_EQ(TakeAll(decoder), Payloads{"hello"});
  EXPECT_EQ(decoder.buffered(), 0u);
  EXPECT_TRUE(decoder.Finish().ok());
}

TEST(FrameDecoder, DecodesByteByByte) {
  FrameDecoder decoder(1024);
  std::string stream = Framed("first") + Framed("") + Framed("third one");
  std::vector<std::string> got;
  for (char c : stream) {
    decoder.Append(std::string_view(&c, 1));
    for (auto& p : TakeAll(decoder)) got.push_back(p);
  }
  EXPECT_EQ(got, (Payloads{"first", "", "third one"}));
  EXPECT_TRUE(decoder.Finish().ok());
}

TEST(FrameDecoder, DecodesSeveralFramesInOneChunk) {
  FrameDecoder decoder(1024);
  decoder.Append(Framed("a") + Framed("bb") + Framed("ccc") + std::string("\x00\x00", 2));
  EXPECT_EQ(TakeAll(decoder), (Payloads{"a", "bb", "ccc"}));
  EXPECT_EQ(decoder.buffered(), 2u);  // the start of a fourth header
}

TEST(FrameDecoder, DecodesZeroLengthFrame) {
  FrameDecoder decoder(1024);
  decoder.Append(Framed(""));
  auto next = decoder.Next();
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(next->has_value());
  EXPECT_TRUE((*next)->empty());
  EXPECT_TRUE(decoder.Finish().ok());
}

TEST(FrameDecoder, DecodesPayloadWithNulBytes) {
  FrameDecoder decoder(1024);
  std::string payload("\0a\0b", 4);
  decoder.Append(Framed(payload));
  EXPECT_EQ(TakeAll(decoder), Payloads{payload});
}

TEST(FrameDecoder, AcceptsFrameOfExactlyMaxSize) {
  FrameDecoder decoder(64);
  std::string payload(64, 'p');
  decoder.Append(Framed(payload));
  EXPECT_EQ(TakeAll(decoder), Payloads{payload});
}

TEST(FrameDecoder, RejectsMaxPlusOneAsSoonAsHeaderArrives) {
  FrameDecoder decoder(64);
  std::string header;
  AppendFrameHeader(65, &header);
  decoder.Append(header);  // no payload yet
  auto next = decoder.Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), StatusCode::kFrameTooLarge);
}

TEST(FrameDecoder, FrameTooLargeIsSticky) {
  FrameDecoder decoder(64);
  std::string header;
  AppendFrameHeader(65, &header);
  decoder.Append(header);
  EXPECT_EQ(decoder.Next().status().code(), StatusCode::kFrameTooLarge);
  // Further bytes, even a valid frame, do not clear the error.
  decoder.Append(std::string(65, 'x') + Framed("ok"));
  EXPECT_EQ(decoder.Next().status().code(), StatusCode::kFrameTooLarge);
  EXPECT_EQ(decoder.Next().status().code(), StatusCode::kFrameTooLarge);
}

TEST(FrameDecoder, PartialHeaderWaits) {
  FrameDecoder decoder(64);
  decoder.Append(std::string("\x00\x00\x00", 3));
  auto next = decoder.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
}

TEST(FrameDecoder, TruncatedStreamIsFrameTruncatedOnFinish) {
  {
    FrameDecoder decoder(64);
    std::string frame = Framed("abcdef");
    decoder.Append(frame.substr(0, frame.size() - 1));  // last payload byte missing
    EXPECT_EQ(TakeAll(decoder), Payloads{});
    EXPECT_EQ(decoder.Finish().code(), StatusCode::kFrameTruncated);
  }
  {
    FrameDecoder decoder(64);
    decoder.Append(std::string("\x00\x00", 2));  // half a header
    EXPECT_EQ(decoder.Finish().code(), StatusCode::kFrameTruncated);
  }
  {
    FrameDecoder decoder(64);
    decoder.Append(Framed("done") + Framed("cut").substr(0, 5));
    EXPECT_EQ(TakeAll(decoder), Payloads{"done"});
    EXPECT_EQ(decoder.Finish().code(), StatusCode::kFrameTruncated);
  }
}

TEST(FrameDecoder, HttpRequestIsFrameTooLarge) {
  FrameDecoder decoder(16u << 20);
  decoder.Append("GET / HTTP/1.1\r\n");
  // "GET " read as a big-endian length is about 1.2 GB.
  EXPECT_EQ(decoder.Next().status().code(), StatusCode::kFrameTooLarge);
}

TEST(FrameDecoder, PrepareWriteAndCommitWriteFeedTheDecoder) {
  FrameDecoder decoder(1024);
  std::string stream = Framed("one") + Framed("two");
  // Write in two reads, with more space prepared than used.
  size_t split = 5;
  char* space = decoder.PrepareWrite(64).data();
  std::memcpy(space, stream.data(), split);
  decoder.CommitWrite(split);
  EXPECT_EQ(decoder.buffered(), split);
  EXPECT_EQ(TakeAll(decoder), Payloads{});
  space = decoder.PrepareWrite(64).data();
  std::memcpy(space, stream.data() + split, stream.size() - split);
  decoder.CommitWrite(stream.size() - split);
  EXPECT_EQ(TakeAll(decoder), (Payloads{"one", "two"}));
  EXPECT_EQ(decoder.buffered(), 0u);
}

TEST(FrameDecoder, LongStreamOfFramesDecodesInOrder) {
  // Exercises compaction of consumed bytes across many small reads.
  FrameDecoder decoder(256);
  std::string stream;
  std::vector<std::string> expected;
  for (int i = 0; i < 500; ++i) {
    expected.push_back(std::string(static_cast<size_t>(i % 200), static_cast<char>('a' + i % 26)));
    stream += Framed(expected.back());
  }
  std::vector<std::string> got;
  for (size_t pos = 0; pos < stream.size(); pos += 37) {
    decoder.Append(std::string_view(stream).substr(pos, 37));
    for (auto& p : TakeAll(decoder)) got.push_back(p);
  }
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(decoder.Finish().ok());
}

// --- Memory: what a frame costs while it arrives ---------------------------------------------

std::string Header(size_t length) {
  std::string out;
  AppendFrameHeader(static_cast<uint32_t>(length), &out);
  return out;
}

// A frame announced as 17 MiB of which 1 MiB came holds about 1 MiB, not 17.
TEST(FrameDecoder, ALargeFrameTakesMemoryAsItsBytesCome) {
  FrameDecoder decoder(32u << 20);
  decoder.Append(Header(17u << 20));
  const std::string chunk(64u << 10, 'x');
  for (int i = 0; i < 16; ++i) {
    std::span<char> space = decoder.PrepareWrite(chunk.size());
    ASSERT_EQ(space.size(), chunk.size());
    std::memcpy(space.data(), chunk.data(), chunk.size());
    decoder.CommitWrite(chunk.size());
  }
  EXPECT_EQ(decoder.buffered(), kFrameHeaderBytes + (1u << 20));
  EXPECT_LE(decoder.capacity(), 2u << 20);
  EXPECT_FALSE(decoder.FrameReady());
}

// With an allowance, a frame larger than it reads only the allowance until it is granted the
// rest of its declared size; then it completes, and Trim gives the grant and memory back.
TEST(FrameDecoder, AFrameBeyondTheAllowanceWaitsForItsGrant) {
  const size_t allowance = 1024;
  FrameDecoder decoder(1u << 20, allowance);
  const std::string payload(10'000, 'p');
  const std::string frame = Framed(payload);
  EXPECT_EQ(decoder.Append(frame), allowance);  // no further without a grant
  EXPECT_EQ(decoder.WantedGrant(), frame.size() - allowance);
  EXPECT_TRUE(decoder.PrepareWrite(4096).empty());
  EXPECT_LE(decoder.capacity(), allowance);
  EXPECT_FALSE(decoder.FrameReady());

  decoder.AddGrant(decoder.WantedGrant());
  EXPECT_EQ(decoder.WantedGrant(), 0u);
  EXPECT_EQ(decoder.Append(std::string_view(frame).substr(allowance)), frame.size() - allowance);
  EXPECT_LE(decoder.capacity(), frame.size());
  EXPECT_EQ(TakeAll(decoder), Payloads{payload});
  EXPECT_EQ(decoder.Trim(), frame.size() - allowance);
  EXPECT_EQ(decoder.granted(), 0u);
  EXPECT_EQ(decoder.capacity(), 0u);  // empty: all of it goes
  EXPECT_EQ(decoder.Append(Framed("small")), Framed("small").size());
  EXPECT_EQ(TakeAll(decoder), Payloads{"small"});
}

// While a granted frame comes in, nothing past its end is read: the buffer holds that frame,
// never the frame plus a read.
TEST(FrameDecoder, ReadsNoFurtherThanTheEndOfALargeFrame) {
  const size_t allowance = 1024;
  FrameDecoder decoder(1u << 20, allowance);
  const std::string frame = Framed(std::string(5000, 'a'));
  decoder.Append(frame.substr(0, 100));
  decoder.AddGrant(decoder.WantedGrant());
  std::span<char> space = decoder.PrepareWrite(64u << 10);
  EXPECT_EQ(space.size(), frame.size() - 100);
  EXPECT_EQ(decoder.Append(frame.substr(100) + Framed("next")), frame.size() - 100);
  EXPECT_EQ(decoder.capacity(), frame.size());
  EXPECT_EQ(TakeAll(decoder), Payloads{std::string(5000, 'a')});
  decoder.Trim();
  EXPECT_EQ(decoder.Append(Framed("next")), Framed("next").size());
  EXPECT_EQ(TakeAll(decoder), Payloads{"next"});
}

// Frames within the allowance never need a grant, however they fall across reads.
TEST(FrameDecoder, FramesWithinTheAllowanceNeedNoGrant) {
  const size_t allowance = 256;
  FrameDecoder decoder(allowance - kFrameHeaderBytes, allowance);
  std::string stream;
  std::vector<std::string> expected;
  for (int i = 0; i < 300; ++i) {
    expected.emplace_back(static_cast<size_t>(i % 253), static_cast<char>('a' + i % 26));
    stream += Framed(expected.back());
  }
  std::vector<std::string> got;
  size_t pos = 0;
  while (pos < stream.size()) {
    EXPECT_EQ(decoder.WantedGrant(), 0u);
    size_t taken = decoder.Append(std::string_view(stream).substr(pos, 100));
    ASSERT_GT(taken, 0u);
    pos += taken;
    for (auto& p : TakeAll(decoder)) got.push_back(p);
    EXPECT_EQ(decoder.Trim(), 0u);
    EXPECT_LE(decoder.capacity(), allowance);
  }
  EXPECT_EQ(got, expected);
}

// consumed() + buffered() say where the frame being received starts: its identity.
TEST(FrameDecoder, ConsumedCountsTheBytesTaken) {
  FrameDecoder decoder(1024);
  decoder.Append(Framed("one") + Framed("three") + Header(10));
  EXPECT_EQ(TakeAll(decoder), (Payloads{"one", "three"}));
  EXPECT_EQ(decoder.consumed(), Framed("one").size() + Framed("three").size());
  EXPECT_EQ(decoder.frame_bytes(), kFrameHeaderBytes + 10);
  EXPECT_EQ(decoder.Clear(), 0u);
  EXPECT_EQ(decoder.buffered(), 0u);
}

}  // namespace
}  // namespace wharf::net

// AMQP framing (net::Framing): the 8-byte protocol header, then whole frames.
namespace amqp_framing {

std::string AmqpFrame(uint8_t type, uint16_t channel, std::string_view payload) {
  std::string f;
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(channel >> 8));
  f.push_back(static_cast<char>(channel));
  wharf::net::AppendFrameHeader(static_cast<uint32_t>(payload.size()), &f);
  f.append(payload);
  f.push_back(static_cast<char>(0xCE));
  return f;
}

TEST(FrameDecoderAmqp, TheProtocolHeaderThenWholeFramesHeaderAndEndIncluded) {
  wharf::net::FrameDecoder decoder(4096);
  decoder.set_framing(wharf::net::Framing::kProtocolHeader);
  std::string stream =
      std::string("AMQP\0\0\x09\x01", 8) + AmqpFrame(1, 0, "abc") + AmqpFrame(8, 0, "");
  // Byte by byte: nothing comes out before a frame is whole.
  std::vector<std::string> frames;
  for (char c : stream) {
    decoder.Append(std::string_view(&c, 1));
    auto next = decoder.Next();
    ASSERT_TRUE(next.ok());
    if (!next->has_value()) continue;
    frames.emplace_back(**next);
    if (frames.size() == 1) decoder.set_framing(wharf::net::Framing::kAmqp);
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0], std::string("AMQP\0\0\x09\x01", 8));
  EXPECT_EQ(frames[1], AmqpFrame(1, 0, "abc"));
  EXPECT_EQ(frames[2], AmqpFrame(8, 0, ""));
}

TEST(FrameDecoderAmqp, TheLimitIsOnTheWholeFrameAsFrameMaxIs) {
  wharf::net::FrameDecoder decoder(4096);
  decoder.set_framing(wharf::net::Framing::kAmqp);
  // 4088 payload bytes + 8 = 4096: allowed; one more is too large before any payload comes.
  std::string fits = AmqpFrame(3, 1, std::string(4088, 'x'));
  decoder.Append(fits);
  auto next = decoder.Next();
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ((*next)->size(), 4096u);
  std::string over = AmqpFrame(3, 1, std::string(4089, 'x'));
  decoder.Append(over.substr(0, 7));
  EXPECT_EQ(decoder.frame_bytes(), 0u);
  auto refused = decoder.Next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), wharf::StatusCode::kFrameTooLarge);
}

}  // namespace amqp_framing
