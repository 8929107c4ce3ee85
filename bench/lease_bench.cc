// Lease expiry with many deliveries in flight (docs/lifecycle.md): what a timer tick costs when
// nothing is due (it must not grow with the number in flight), and how fast a mass expiry is
// handled. A broker with no store, one queue, deliveries pulled and never settled.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "common/clock.h"
#include "null_peer.h"

namespace {

using std::chrono::milliseconds;
using wharf::bench::NullPeer;

// `in_flight` deliveries spread over 30 s of leases (lease 30 s, delivered over 30 s).
struct InFlight {
  wharf::ManualClock clock;
  std::unique_ptr<wharf::broker::Broker> broker;
  std::shared_ptr<NullPeer> peer = std::make_shared<NullPeer>();

  explicit InFlight(size_t in_flight) {
    broker = std::make_unique<wharf::broker::Broker>(wharf::broker::BrokerOptions{}, &clock);
    if (!broker->OpenSession(1, "bench", peer).ok()) std::abort();
    wharf::QueueSpec spec;
    spec.name = "q";
    (void)broker->DeclareQueue(1, spec);
    wharf::Message m;
    m.body.assign(64, 'x');
    for (size_t i = 0; i < in_flight; ++i) (void)broker->Publish(1, "", "q", m);
    broker->Flush();
    const size_t per_step = std::max<size_t>(in_flight / 3000, 1);  // one step per 10 ms
    while (peer->received < in_flight) {
      (void)broker->Receive(1, 1, "q", static_cast<uint32_t>(std::min<size_t>(per_step, 1000)), 0);
      broker->Flush();
      clock.Advance(milliseconds(10));
    }
  }
};

// A tick with nothing due, with 10k and 1M deliveries in flight: the same cost.
void BM_IdleTick(benchmark::State& state) {
  InFlight setup(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    setup.broker->OnTimer();
    benchmark::DoNotOptimize(setup.broker->NextDeadline());
  }
}
BENCHMARK(BM_IdleTick)->Arg(10'000)->Arg(1'000'000);

// Every lease of `range(0)` deliveries runs out: the time to redeliver them all, per message.
void BM_MassExpiry(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    InFlight setup(n);
    setup.clock.Advance(milliseconds(60'000));
    state.ResumeTiming();
    int ticks = 0;
    while (setup.broker->NextDeadline() && *setup.broker->NextDeadline() <= setup.clock.Now()) {
      setup.broker->OnTimer();
      ++ticks;
    }
    state.counters["ticks"] = ticks;
    state.PauseTiming();
    setup.broker.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_MassExpiry)->Arg(1'000'000)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
