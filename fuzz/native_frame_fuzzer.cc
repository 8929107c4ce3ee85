// fuzz/native_frame_fuzzer.cc
//
// The native protocol as a broker reads it from a client, and as the C++ client reads replies:
// net::FrameDecoder cuts the byte stream (in chunks of fuzzed sizes, with a bounded allowance and
// grants, as a connection reads under server/frame_budget.h), and every payload goes through
// what NativeCodec::OnFrame does with it: PeekFrame (the header and death counts taken before
// parsing), parsing as a wharf.wire.v1.Frame, the header check and MoveFromWire of a publish,
// and FromWire of each request the broker converts; then the client's conversions of replies.
//
// Checked besides "no crash, no leak, no undefined behaviour":
// - each payload is exactly the stream's bytes after its 4-byte prefix;
// - when the frame parses, PeekFrame's request id is the parsed one and its counts are never
//   below the parsed message's (the broker refuses too many headers from the count alone,
//   before parsing, so an undercount would let a frame of a million headers be parsed).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "net/frame.h"
#include "protocol/codec.h"
#include "quiet_protobuf.h"
#include "wharf/wire/v1/frame.pb.h"

namespace {

namespace wire = ::wharf::wire::v1;

using wharf::fuzz::Check;

void OnPayload(std::string_view payload) {
  const wharf::protocol::FramePeek peek = wharf::protocol::PeekFrame(payload);
  wire::Frame frame;
  if (!frame.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) return;
  Check(peek.request_id == frame.request_id(), "PeekFrame reads the parsed request id");
  switch (frame.body_case()) {
    case wire::Frame::kPublish: {
      const wire::Message& m = frame.publish().message();
      Check(peek.publish_headers >= static_cast<uint64_t>(m.headers_size()),
            "PeekFrame counts at least the parsed headers");
      Check(peek.publish_deaths >= static_cast<uint64_t>(m.deaths_size()),
            "PeekFrame counts at least the parsed death records");
      if (wharf::protocol::CheckHeaderValues(m.headers()).ok()) {
        wharf::Message message =
            wharf::protocol::MoveFromWire(frame.mutable_publish()->mutable_message());
        // Back to the wire and in again: what the broker hands a consumer.
        wire::Message again;
        wharf::protocol::ToWire(message, &again);
        Check(wharf::protocol::CheckHeaderValues(again.headers()).ok(),
              "a converted message's headers all have values");
        wharf::Message twice = wharf::protocol::MoveFromWire(&again);
        Check(twice.body == message.body && twice.headers.size() == message.headers.size(),
              "a message survives a round trip through the wire");
      }
      break;
    }
    case wire::Frame::kDeclareExchange: {
      std::optional<wharf::ExchangeType> type;
      (void)wharf::protocol::FromWire(frame.declare_exchange(), &type);
      break;
    }
    case wire::Frame::kDeclareQueue:
      (void)wharf::protocol::FromWire(frame.declare_queue());
      break;
    case wire::Frame::kBind:
      (void)wharf::protocol::FromWire(frame.bind());
      break;
    case wire::Frame::kUnbind:
      (void)wharf::protocol::FromWire(frame.unbind());
      break;
    case wire::Frame::kStartRedrive:
      (void)wharf::protocol::FromWire(frame.start_redrive());
      break;
    // What the C++ client converts from the broker's replies.
    case wire::Frame::kError:
      (void)wharf::protocol::FromWire(frame.error());
      break;
    case wire::Frame::kListQueuesOk:
      for (const auto& q : frame.list_queues_ok().queues()) (void)wharf::protocol::FromWire(q);
      break;
    case wire::Frame::kListDelayedOk:
      for (const auto& m : frame.list_delayed_ok().messages()) (void)wharf::protocol::FromWire(m);
      break;
    case wire::Frame::kPeekOk:
      for (const auto& m : frame.peek_ok().messages()) (void)wharf::protocol::FromWire(m);
      break;
    case wire::Frame::kListBindingsOk:
      for (const auto& b : frame.list_bindings_ok().bindings()) (void)wharf::protocol::FromWire(b);
      break;
    case wire::Frame::kListConsumersOk:
      for (const auto& c : frame.list_consumers_ok().consumers()) {
        (void)wharf::protocol::FromWire(c);
      }
      break;
    case wire::Frame::kListConnectionsOk:
      for (const auto& c : frame.list_connections_ok().connections()) {
        (void)wharf::protocol::FromWire(c);
      }
      break;
    case wire::Frame::kRedriveStatusOk:
      for (const auto& t : frame.redrive_status_ok().tasks()) (void)wharf::protocol::FromWire(t);
      break;
    case wire::Frame::kListExchangesOk:
      for (const auto& e : frame.list_exchanges_ok().exchanges()) {
        (void)wharf::protocol::FromWire(e);
      }
      break;
    case wire::Frame::kListUsersOk:
      for (const auto& u : frame.list_users_ok().users()) (void)wharf::protocol::FromWire(u);
      break;
    case wire::Frame::kBackupOk:
      (void)wharf::protocol::FromWire(frame.backup_ok());
      break;
    case wire::Frame::kDelivery:
      (void)wharf::protocol::MoveFromWire(frame.mutable_delivery()->mutable_message());
      break;
    case wire::Frame::kReceiveOk:
      for (auto& d : *frame.mutable_receive_ok()->mutable_deliveries()) {
        (void)wharf::protocol::MoveFromWire(d.mutable_message());
      }
      break;
    default:
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // Byte 0: the limits; byte 1: the seed of the read sizes. The rest is the stream.
  static constexpr size_t kMaxFrames[] = {64, 4096, 1 << 20, 16 << 20};
  static constexpr size_t kAllowances[] = {wharf::net::FrameDecoder::kUnlimited, 16, 512, 65536};
  wharf::net::FrameDecoder decoder(kMaxFrames[data[0] & 3], kAllowances[(data[0] >> 2) & 3]);
  uint32_t seed = data[1] | 1u;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);
  size_t written = 0;
  uint64_t taken = 0;  // stream bytes Next() has passed: prefixes and payloads
  size_t grant = 0;
  while (true) {
    seed = seed * 1103515245u + 12345u;
    const size_t want = std::min<size_t>(1 + (seed >> 16) % 700, stream.size() - written);
    if (want > 0) {
      std::span<char> space = decoder.PrepareWrite(want);
      if (space.empty()) {
        const size_t wanted = decoder.WantedGrant();
        Check(wanted > 0, "PrepareWrite offers no space only while a frame waits for a grant");
        decoder.AddGrant(wanted);
        grant += wanted;
        continue;
      }
      const size_t n = std::min(space.size(), want);
      std::memcpy(space.data(), stream.data() + written, n);
      decoder.CommitWrite(n);
      written += n;
    }
    bool failed = false;
    while (true) {
      auto next = decoder.Next();
      if (!next.ok()) {
        failed = true;
        break;
      }
      if (!next->has_value()) break;
      std::string_view payload = **next;
      Check(taken + wharf::net::kFrameHeaderBytes + payload.size() <= written,
            "a payload is within what was written");
      Check(std::memcmp(payload.data(), stream.data() + taken + wharf::net::kFrameHeaderBytes,
                        payload.size()) == 0,
            "a payload is the stream's bytes after its prefix");
      taken += wharf::net::kFrameHeaderBytes + payload.size();
      Check(decoder.consumed() == taken, "consumed() counts the bytes taken");
      OnPayload(payload);
    }
    if (failed) break;
    const size_t returned = decoder.Trim();
    Check(returned <= grant, "Trim returns no more than was granted");
    grant -= returned;
    if (want == 0) {
      (void)decoder.Finish();
      break;
    }
  }
  Check(decoder.Clear() <= grant, "Clear returns no more than was granted");
  return 0;
}
