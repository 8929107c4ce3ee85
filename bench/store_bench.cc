// Store batch append: what one group commit costs, synced (a publisher waits for its confirm)
// and not (acks, publishes without confirms), by batch size. Real RocksDB in a temporary
// directory under $TMPDIR (so on the disk the broker would use); 256-byte bodies.
//
// Each iteration commits one StoreBatch of `batch` messages (one inline entry each) and
// waits for its completion, so the synced figure includes one fsync per iteration: messages/s
// at batch 1 is the disk's fsync rate, and larger batches show what group commit buys.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "store/rocksdb_store.h"

namespace {

using wharf::store::EntryRef;
using wharf::store::RocksDbStore;
using wharf::store::StoreBatch;

class Fixture {
 public:
  Fixture() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base ? base : "/tmp") + "/wharf-store-bench-XXXXXX";
    dir_ = mkdtemp(templ.data());
    wharf::store::StoreOptions options;
    options.path = dir_;
    // Completions run inline on the store's thread: the benchmark only waits for them.
    auto store = RocksDbStore::Open(options, [](std::function<void()> fn) { fn(); });
    if (!store.ok()) throw std::runtime_error(store.status().ToString());
    store_ = std::move(store).value();
    (void)store_->Recover();
    StoreBatch batch;
    wharf::QueueSpec spec;
    spec.name = "bench";
    batch.Add(StoreBatch::PutQueue{spec, 1});
    Commit(std::move(batch), true);
  }
  ~Fixture() {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void Commit(StoreBatch batch, bool sync) {
    std::unique_lock lock(mu_);
    bool done = false;
    store_->Commit(std::move(batch), sync, [&](wharf::Status) {
      std::lock_guard inner(mu_);
      done = true;
      cv_.notify_one();
    });
    cv_.wait(lock, [&] { return done; });
  }

  StoreBatch Messages(int count) {
    StoreBatch batch;
    for (int i = 0; i < count; ++i) {
      wharf::Envelope e;
      e.message.id = ++next_id_;
      e.message.body.assign(256, 'x');
      e.message.persistent = true;
      e.exchange = "";
      e.routing_key = "bench";
      // As the broker writes a message for one queue: inside its entry.
      batch.Add(
          StoreBatch::PutEntry{EntryRef{1, next_id_, next_id_, 0, wharf::store::kEntryInline,
                                        std::make_shared<const wharf::Envelope>(std::move(e))}});
    }
    return batch;
  }

 private:
  std::string dir_;
  std::unique_ptr<RocksDbStore> store_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_id_ = 0;
};

void Append(benchmark::State& state, bool sync) {
  Fixture fixture;
  const int batch = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    StoreBatch messages = fixture.Messages(batch);
    state.ResumeTiming();
    fixture.Commit(std::move(messages), sync);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * batch);
}

void BM_AppendSynced(benchmark::State& state) { Append(state, true); }
void BM_AppendUnsynced(benchmark::State& state) { Append(state, false); }
BENCHMARK(BM_AppendSynced)->Arg(1)->Arg(10)->Arg(100)->Arg(1000)->UseRealTime();
BENCHMARK(BM_AppendUnsynced)->Arg(1)->Arg(10)->Arg(100)->Arg(1000)->UseRealTime();

}  // namespace
