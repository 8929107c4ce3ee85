// Frame encode and decode: what the I/O threads spend per publish and per delivery.
#include <benchmark/benchmark.h>

#include "net/frame.h"
#include "protocol/codec.h"

namespace {

namespace pb = ::wharf::wire::v1;

pb::Frame PublishFrame(size_t body) {
  wharf::Message m;
  m.body.assign(body, 'x');
  m.headers["trace-id"] = std::string("4bf92f3577b34da6");
  m.properties.content_type = "application/octet-stream";
  m.persistent = true;
  pb::Frame frame;
  frame.set_request_id(12345);
  auto* p = frame.mutable_publish();
  p->set_exchange("orders");
  p->set_routing_key("order.created.eu");
  wharf::protocol::ToWire(m, p->mutable_message());
  return frame;
}

void BM_EncodePublish(benchmark::State& state) {
  pb::Frame frame = PublishFrame(static_cast<size_t>(state.range(0)));
  std::string out;
  for (auto _ : state) {
    out.clear();
    wharf::protocol::AppendFrame(frame, &out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(out.size()));
}
BENCHMARK(BM_EncodePublish)->Arg(256)->Arg(4096)->Arg(65536);

// Decode as the server does: cut the frame, parse it, move the message out.
void BM_DecodePublish(benchmark::State& state) {
  std::string bytes;
  wharf::protocol::AppendFrame(PublishFrame(static_cast<size_t>(state.range(0))), &bytes);
  wharf::net::FrameDecoder decoder(64u << 20);
  for (auto _ : state) {
    decoder.Append(bytes);
    auto payload = decoder.Next();
    pb::Frame frame;
    frame.ParseFromArray((*payload)->data(), static_cast<int>((*payload)->size()));
    wharf::Message m = wharf::protocol::MoveFromWire(frame.mutable_publish()->mutable_message());
    benchmark::DoNotOptimize(m.body.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(bytes.size()));
}
BENCHMARK(BM_DecodePublish)->Arg(256)->Arg(4096)->Arg(65536);

}  // namespace
