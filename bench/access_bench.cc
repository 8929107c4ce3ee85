// The cost of permission checks (broker/access.h): a pattern match per check, and the
// session's cache of allowed checks that a publisher's stream to one exchange hits.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "broker/access.h"
#include "broker/broker.h"
#include "common/clock.h"
#include "null_peer.h"

namespace {

using wharf::UserPermission;
using wharf::broker::Access;
using wharf::broker::Permission;
using wharf::broker::ResourceKind;

std::shared_ptr<const Access> AppAccess() {
  return *Access::Make("app", {}, {UserPermission{"/", "^app\\.", "^app\\.", "^app\\."}});
}

// Arg 1: a name the pattern allows; 0: one it refuses.
void BM_AccessCheck(benchmark::State& state) {
  auto access = AppAccess();
  const std::string name = state.range(0) ? "app.orders.created" : "billing.invoices.created";
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        access->Allows("/", Permission::kWrite, ResourceKind::kExchange, name));
  }
}
BENCHMARK(BM_AccessCheck)->Arg(1)->Arg(0);

class OneUser : public wharf::broker::AccessSource {
 public:
  uint64_t access_generation() const override { return 1; }
  std::shared_ptr<const Access> AccessOf(std::string_view) const override { return access_; }
  std::shared_ptr<const Access> access_ = AppAccess();
};

// Broker::Authorize as Publish calls it: `distinct` exchange names in turn (up to 8 stay in
// the session's cache; 9 never hit it).
void BM_BrokerAuthorize(benchmark::State& state) {
  wharf::ManualClock clock;
  wharf::broker::Broker broker(wharf::broker::BrokerOptions{}, &clock);
  OneUser users;
  broker.SetAccessSource(&users);
  if (!broker.OpenSession(1, "app", std::make_shared<wharf::bench::NullPeer>()).ok()) std::abort();
  std::vector<std::string> names;
  for (int64_t i = 0; i < state.range(0); ++i) names.push_back("app.x" + std::to_string(i));
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(broker.Authorize(1, Permission::kWrite, ResourceKind::kExchange,
                                              names[i++ % names.size()]));
  }
}
BENCHMARK(BM_BrokerAuthorize)->Arg(1)->Arg(8)->Arg(9);

}  // namespace
