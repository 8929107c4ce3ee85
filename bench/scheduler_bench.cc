// The delay scheduler's insert and pop (docs/scheduler.md): a queue's timeline on its own, and
// a delayed publish through the whole broker (routing, id, envelope, timeline, scheduler) to a
// queue with no store. The durable path (plus the store's write) is measured end to end with
// wharf-perf --delay (bench/delayed.sh).
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "broker/delay_timeline.h"
#include "common/clock.h"

namespace {

using wharf::broker::DelayedMessage;
using wharf::broker::DelayKey;
using wharf::broker::DelayTimeline;

std::shared_ptr<const wharf::Envelope> Body() {
  auto e = std::make_shared<wharf::Envelope>();
  e->message.body.assign(256, 'x');
  return e;
}

// Delays spread over a day, as a timeline of retries and scheduled jobs looks.
std::vector<DelayKey> Keys(size_t n) {
  std::mt19937_64 rng(42);
  std::vector<DelayKey> keys(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = DelayKey{static_cast<int64_t>(rng() % 86'400'000), i + 1};
  }
  return keys;
}

// Insert `state.range(0)` messages into an empty timeline.
void BM_TimelineInsert(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto keys = Keys(n);
  auto body = Body();
  for (auto _ : state) {
    DelayTimeline timeline(/*backed=*/false, {});
    for (const auto& key : keys) timeline.Add(key, DelayedMessage{body, 0, 0, 0, nullptr});
    benchmark::DoNotOptimize(timeline.size());
    state.PauseTiming();
    timeline.Clear();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_TimelineInsert)->Arg(10'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// Pop everything from a timeline of `state.range(0)` messages, 64 at a time (the release slice).
void BM_TimelinePopDue(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto keys = Keys(n);
  auto body = Body();
  for (auto _ : state) {
    state.PauseTiming();
    DelayTimeline timeline(false, {});
    for (const auto& key : keys) timeline.Add(key, DelayedMessage{body, 0, 0, 0, nullptr});
    state.ResumeTiming();
    size_t popped = 0;
    while (popped < n) popped += timeline.TakeDue(INT64_MAX, 64).size();
    benchmark::DoNotOptimize(popped);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_TimelinePopDue)->Arg(10'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// A durable queue's timeline keeps 10,000 in RAM: beyond that an insert is a comparison and a
// count, or an eviction of the latest.
void BM_BackedTimelineInsert(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto keys = Keys(n);
  auto body = Body();
  for (auto _ : state) {
    DelayTimeline timeline(/*backed=*/true, {});
    for (const auto& key : keys) timeline.Add(key, DelayedMessage{body, 0, 0, 0, nullptr});
    benchmark::DoNotOptimize(timeline.size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_BackedTimelineInsert)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// Broker::Publish with a delay, 10,000 per iteration, into one queue (no store).
void BM_BrokerDelayedPublish(benchmark::State& state) {
  wharf::SystemClock clock;
  wharf::broker::Broker broker({}, &clock);
  wharf::QueueSpec spec;
  spec.name = "later";
  (void)broker.DeclareQueue(0, spec);
  std::mt19937_64 rng(7);
  wharf::Message message;
  message.body.assign(256, 'x');
  constexpr int kPerIteration = 10'000;
  for (auto _ : state) {
    for (int i = 0; i < kPerIteration; ++i) {
      wharf::broker::PublishTiming timing;
      timing.delay_ms = 60'000 + rng() % 86'400'000;
      auto outcome = broker.Publish(0, "", "later", message, 0, timing);
      benchmark::DoNotOptimize(outcome);
    }
    state.PauseTiming();
    (void)broker.PurgeQueue(0, "later");
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kPerIteration);
}
BENCHMARK(BM_BrokerDelayedPublish)->Unit(benchmark::kMillisecond);

}  // namespace
