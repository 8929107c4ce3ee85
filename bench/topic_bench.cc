// Topic routing with 10,000 bindings on one exchange: the cost per publish should depend on the
// key, not on the number of bindings.
#include <benchmark/benchmark.h>

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

}  // namespace
