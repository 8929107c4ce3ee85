// Unit tests for net/frame.h: length-prefixed framing.
#include "net/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
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
  char* space = decoder.PrepareWrite(64);
  std::memcpy(space, stream.data(), split);
  decoder.CommitWrite(split);
  EXPECT_EQ(decoder.buffered(), split);
  EXPECT_EQ(TakeAll(decoder), Payloads{});
  space = decoder.PrepareWrite(64);
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

}  // namespace
}  // namespace wharf::net
