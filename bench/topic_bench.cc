// Topic routing with 10,000 bindings on one exchange: the cost per publish should depend on the
// key, not on the number of bindings. And the worst case of issue 15: '#'-heavy patterns against a
// 127-word key, whose cost must stay linear in words times trie nodes.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "broker/exchange.h"
#include "broker/queue.h"

namespace {

using wharf::broker::Exchange;
using wharf::broker::Queue;

struct TenThousandBindings {
  std::vector<std::unique_ptr<Queue>> queues;
  std::unique_ptr<Exchange> exchange;

  explicit TenThousandBindings(int wildcard_percent) {
    wharf::ExchangeSpec spec;
    spec.name = "events";
    spec.type = wharf::ExchangeType::kTopic;
    exchange = std::make_unique<Exchange>(spec);
    for (int i = 0; i < 10000; ++i) {
      wharf::QueueSpec q;
      q.name = "q" + std::to_string(i);
      queues.push_back(std::make_unique<Queue>(q, 0));
      // Region.service.event patterns; some with wildcards.
      std::string pattern = "region" + std::to_string(i % 50) + ".svc" + std::to_string(i % 200) +
                            ".event" + std::to_string(i);
      if (i % 100 < wildcard_percent) {
        pattern = "region" + std::to_string(i % 50) + ".*.event" + std::to_string(i % 97) + ".#";
      }
      bool added = false;
      (void)exchange->Bind(queues.back().get(), pattern, {}, &added);
    }
  }
};

void BM_TopicRoute10kBindings(benchmark::State& state) {
  TenThousandBindings setup(static_cast<int>(state.range(0)));
  std::vector<std::string> keys;
  for (int i = 0; i < 1000; ++i) {
    keys.push_back("region" + std::to_string(i % 50) + ".svc" + std::to_string(i % 200) + ".event" +
                   std::to_string(i * 7 % 10000));
  }
  std::vector<Queue*> out;
  size_t i = 0;
  for (auto _ : state) {
    out.clear();
    setup.exchange->Route(keys[i++ % keys.size()], {}, &out);
    benchmark::DoNotOptimize(out.data());
  }
}
// Argument: percent of the 10k bindings that use wildcards.
BENCHMARK(BM_TopicRoute10kBindings)->Arg(0)->Arg(10)->Arg(50);

void BM_TopicBind10k(benchmark::State& state) {
  for (auto _ : state) {
    TenThousandBindings setup(10);
    benchmark::DoNotOptimize(setup.exchange.get());
  }
}
BENCHMARK(BM_TopicBind10k)->Unit(benchmark::kMillisecond);

// `count` (at most 1024) '#'-heavy patterns in the "#.#.a.#.#.b.#.#..." style: twelve literals
// "a" or "b", the first ten set by the pattern's number in binary so that they part early in the
// trie, and a last literal "zz" that the key does not have, so nothing matches and the old matcher
// tried every split of the key between the '#' words.
std::vector<std::string> HashHeavyPatterns(int count) {
  std::vector<std::string> patterns;
  for (int i = 0; i < count; ++i) {
    std::string pattern = "#.#";
    for (int k = 0; k < 12; ++k) {
      // Words 7 to 9 flip the a/b alternation by bits 7 to 9, so that the first
      // 128 patterns are those of the first version of this benchmark.
      bool a = (k >= 7 && k % 2 == 0) != (k < 10 && ((i >> k) & 1) != 0);
      pattern += a ? ".a.#.#" : ".b.#.#";
    }
    patterns.push_back(pattern + ".zz");
  }
  return patterns;
}

// 127 words "a" or "b" (a fixed pseudo-random mix, so every pattern's literals occur in order).
std::string HashHeavyKey() {
  std::string key;
  uint32_t state = 15;
  for (int i = 0; i < 127; ++i) {
    state = state * 1103515245u + 12345u;
    if (i > 0) key += '.';
    key += (state >> 16) & 1 ? "a" : "b";
  }
  return key;
}

void BM_TopicRouteHashHeavyWorstCase(benchmark::State& state) {
  wharf::ExchangeSpec spec;
  spec.name = "events";
  spec.type = wharf::ExchangeType::kTopic;
  Exchange exchange(spec);
  std::vector<std::unique_ptr<Queue>> queues;
  for (const std::string& pattern : HashHeavyPatterns(static_cast<int>(state.range(0)))) {
    wharf::QueueSpec q;
    q.name = "q" + std::to_string(queues.size());
    queues.push_back(std::make_unique<Queue>(q, 0));
    bool added = false;
    (void)exchange.Bind(queues.back().get(), pattern, {}, &added);
  }
  const std::string key = HashHeavyKey();
  std::vector<Queue*> out;
  for (auto _ : state) {
    out.clear();
    exchange.Route(key, {}, &out);
    benchmark::DoNotOptimize(out.data());
  }
  if (!out.empty()) state.SkipWithError("the worst-case key must match nothing");
}
// Argument: the number of patterns (issue 15 had 100); the cost grows with the trie's size.
BENCHMARK(BM_TopicRouteHashHeavyWorstCase)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace
