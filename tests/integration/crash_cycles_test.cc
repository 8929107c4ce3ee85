// The crash test: the real wharfd killed with SIGKILL over and over under load, restarted on the
// same data directory each time (docs/storage.md, "kill -9"; docs/testing.md).
//
// Its promises, checked after the last restart:
// - every message the broker confirmed is delivered at least once (duplicates are allowed: an
//   ack not yet on disk at the kill; they are counted and printed);
// - every confirmed delayed message is delivered, and never before its due time, in
//   particular not released early by a recovery while it was still waiting at a kill; those due
//   beyond the run are still waiting at the end, listed with their own due time;
// - every confirmed message of a queue whose consumer rejects everything reaches its
//   dead-letter queue, with its death record;
// - no publish is confirmed as routed to no queue (every queue was declared before the first
//   kill: one lost by a crash would make later publishes reach nothing, issue 20).
//
// WHARF_CRASH_CYCLES sets the number of kills (20 by default, what `make test` runs);
// bench/crash-cycles.sh runs 100 on a Release build. WHARF_CRASH_SEED repeats a run's choices
// of kill points and due times (not its timing).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "integration/helpers.h"
#include "support/test_server.h"
#include "wharf/client.h"

namespace wharf {
namespace {

using std::chrono::milliseconds;
using testing::NowMs;
using testing::TestServer;

// Queues: plain messages; delayed ones; ones rejected by their consumer, and their dead-letter
// queue.
constexpr char kPlain[] = "crash";
constexpr char kDelayed[] = "crash-delayed";
constexpr char kRejected[] = "crash-rejected";
constexpr char kDead[] = "crash-dead";

// Delayed messages are due from "already due" (up to 1 s in the past) to kSpreadMs after their
// publish; one in ten a day after it, beyond the run.
constexpr int64_t kSpreadMs = 3'000;
constexpr int64_t kFarMs = 24 * 3600 * 1000;
// A delivery counts as early when it is seen more than this before its due time. The broker
// releases a message once its wall clock in whole milliseconds reaches the due time, and both
// times below come from the same machine's wall clock read after the release (the broker's
// first_received_at_ms, the client's arrival time), so 1 ms (the clock's granularity as used
// here) is the whole allowance.
constexpr int64_t kEarlyToleranceMs = 1;

Message PersistentId(const std::string& id) {
  Message m;
  m.body = "payload " + id;
  m.persistent = true;
  m.properties.message_id = id;
  return m;
}

// A confirmed delayed message.
struct DelayedSent {
  int64_t due_ms = 0;  // exact for deliver_at_ms; a lower bound for delay_ms (send time + delay)
  int64_t confirmed_ms = 0;
  bool far = false;  // due beyond the run
};

// The deliveries of one message id.
struct Seen {
  int count = 0;
  int64_t earliest_ms = std::numeric_limits<int64_t>::max();  // broker or client time
};

// Everything the load confirmed and received, across all restarts.
struct Ledger {
  std::mutex mu;
  uint64_t next_id = 0;
  uint64_t published[3] = {0, 0, 0};  // plain, delayed, rejected
  std::set<std::string> confirmed;    // plain
  std::map<std::string, int> received;
  std::map<std::string, DelayedSent> delayed_confirmed;
  std::map<std::string, Seen> delayed_received;
  std::set<std::string> rejected_confirmed;
  std::map<std::string, int> dead_received;
  uint64_t wrong_deaths = 0;          // dead-lettered without the expected death record
  std::vector<int64_t> kill_ms;       // when each kill happened
  std::atomic<uint64_t> unrouted{0};  // confirmed but routed to no queue: a queue was lost
};

// One message to publish and what to do once it is confirmed.
struct Outgoing {
  std::string queue;
  Message message;
  PublishOptions options;
  std::function<void()> on_confirm;
};

// Publishes flat out on its own connection, at most `window` unconfirmed, until destroyed;
// the destructor closes the connection, which fails the publishes still unconfirmed. A confirm
// that reached no queue counts in `unrouted`, not as confirmed.
class Publisher {
 public:
  Publisher(std::unique_ptr<Client> client, int window, std::atomic<uint64_t>& unrouted,
            std::function<Outgoing()> next)
      : window_(window),
        unrouted_(unrouted),
        next_(std::move(next)),
        client_(std::move(client)),
        thread_([this] { Run(); }) {}
  ~Publisher() {
    stop_ = true;
    thread_.join();
    client_.reset();
  }

 private:
  void Run() {
    if (client_ == nullptr) return;  // the connect failure is reported
    while (!stop_) {
      if (outstanding_ >= window_) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        continue;
      }
      Outgoing out = next_();
      ++outstanding_;
      client_->PublishAsync(
          "", out.queue, out.message,
          [this, done = std::move(out.on_confirm)](Result<PublishResult> result) {
            if (result.ok() && result->routed_queues == 0) {
              ++unrouted_;
            } else if (result.ok()) {
              done();
            }
            --outstanding_;
          },
          out.options);
    }
  }

  std::atomic<bool> stop_{false};
  std::atomic<int> outstanding_{0};
  const int window_;
  std::atomic<uint64_t>& unrouted_;
  std::function<Outgoing()> next_;
  std::unique_ptr<Client> client_;
  std::thread thread_;
};

// The load of one cycle: three publishers and four consumers on connections of their own.
class Load {
 public:
  Load(Ledger& ledger, uint32_t seed) : ledger_(ledger), rng_(seed) {}

  void StartConsuming(const TestServer& server) {
    Consume(server, kPlain, [this](Client& c, const Delivery& d) {
      {
        std::lock_guard lock(ledger_.mu);
        ++ledger_.received[d.message.properties.message_id];
      }
      c.Ack(d.delivery_tag);
    });
    Consume(server, kDelayed, [this](Client& c, const Delivery& d) {
      const int64_t now = NowMs();
      {
        std::lock_guard lock(ledger_.mu);
        Seen& seen = ledger_.delayed_received[d.message.properties.message_id];
        ++seen.count;
        seen.earliest_ms = std::min(seen.earliest_ms, now);
        if (d.first_received_at_ms > 0) {
          seen.earliest_ms = std::min(seen.earliest_ms, d.first_received_at_ms);
        }
      }
      c.Ack(d.delivery_tag);
    });
    Consume(server, kRejected,
            [](Client& c, const Delivery& d) { c.Nack(d.delivery_tag, false, /*requeue=*/false); });
    Consume(server, kDead, [this](Client& c, const Delivery& d) {
      const bool as_expected = !d.message.deaths.empty() &&
                               d.message.deaths[0].reason == "rejected" &&
                               d.message.deaths[0].queue == kRejected;
      {
        std::lock_guard lock(ledger_.mu);
        ++ledger_.dead_received[d.message.properties.message_id];
        if (!as_expected) ++ledger_.wrong_deaths;
      }
      c.Ack(d.delivery_tag);
    });
  }

  void StartPublishing(const TestServer& server) {
    publishers_.push_back(std::make_unique<Publisher>(server.Connect(), 500, ledger_.unrouted,
                                                      [this] { return Plain(); }));
    publishers_.push_back(std::make_unique<Publisher>(server.Connect(), 200, ledger_.unrouted,
                                                      [this] { return Delayed(); }));
    publishers_.push_back(std::make_unique<Publisher>(server.Connect(), 200, ledger_.unrouted,
                                                      [this] { return Rejected(); }));
  }
  void StopPublishing() { publishers_.clear(); }

  // The broker is gone: unconfirmed publishes fail, consumers stop.
  ~Load() {
    publishers_.clear();
    consumers_.clear();
  }

 private:
  void Consume(const TestServer& server, const std::string& queue,
               std::function<void(Client&, const Delivery&)> handle) {
    std::unique_ptr<Client> client = server.Connect();
    if (client == nullptr) return;  // the connect failure is reported
    Client* raw = client.get();
    auto tag = client->Subscribe(queue, 200, [raw, handle](Delivery d) { handle(*raw, d); });
    EXPECT_TRUE(tag.ok()) << queue << ": " << tag.status().ToString();
    consumers_.push_back(std::move(client));
  }

  std::string NextId(const char* prefix, int kind) {
    std::lock_guard lock(ledger_.mu);
    ++ledger_.published[kind];
    return prefix + std::to_string(ledger_.next_id++);
  }

  Outgoing Plain() {
    std::string id = NextId("c", 0);
    return {kPlain, PersistentId(id), {}, [this, id] {
              std::lock_guard lock(ledger_.mu);
              ledger_.confirmed.insert(id);
            }};
  }

  Outgoing Rejected() {
    std::string id = NextId("r", 2);
    return {kRejected, PersistentId(id), {}, [this, id] {
              std::lock_guard lock(ledger_.mu);
              ledger_.rejected_confirmed.insert(id);
            }};
  }

  // Due times: one in ten beyond the run, three in twenty already due, the rest spread over
  // kSpreadMs, half as a relative delay_ms and half as an absolute deliver_at_ms.
  Outgoing Delayed() {
    std::string id = NextId("d", 1);
    const int pick = std::uniform_int_distribution<int>(0, 99)(rng_);
    const int64_t now = NowMs();
    PublishOptions options;
    DelayedSent sent;
    if (pick < 10) {
      options.deliver_at_ms = now + kFarMs;
      sent.far = true;
    } else if (pick < 25) {
      options.deliver_at_ms = now - std::uniform_int_distribution<int64_t>(1, 1'000)(rng_);
    } else {
      const int64_t offset = std::uniform_int_distribution<int64_t>(1, kSpreadMs)(rng_);
      if (pick % 2 == 0) {
        options.delay_ms = static_cast<uint64_t>(offset);
      } else {
        options.deliver_at_ms = now + offset;
      }
    }
    // The broker counts a delay from its receipt of the publish, which is after `now`.
    sent.due_ms = options.delay_ms != 0 ? now + static_cast<int64_t>(options.delay_ms)
                                        : options.deliver_at_ms;
    return {kDelayed, PersistentId(id), options, [this, id, sent]() mutable {
              sent.confirmed_ms = NowMs();
              std::lock_guard lock(ledger_.mu);
              ledger_.delayed_confirmed[id] = sent;
            }};
  }

  Ledger& ledger_;
  std::mt19937 rng_;  // used by the delayed publisher's thread only
  std::vector<std::unique_ptr<Client>> consumers_;
  std::vector<std::unique_ptr<Publisher>> publishers_;
};

QueueInfo Stats(Client& client, const std::string& queue) {
  auto queues = client.ListQueues(queue);  // every queue whose name starts with `queue`
  if (!queues.ok()) {
    ADD_FAILURE() << queue << ": " << queues.status().ToString();
    return {};
  }
  for (const QueueInfo& info : *queues) {
    if (info.name == queue) return info;
  }
  ADD_FAILURE() << queue << " is not listed";
  return {};
}

// True once every queue is empty but for the delayed messages due beyond the run.
bool Settled(Client& client) {
  for (const char* queue : {kPlain, kDelayed, kRejected, kDead}) {
    QueueInfo info = Stats(client, queue);
    if (info.ready != 0 || info.in_flight != 0) return false;
    if (info.delayed != 0 && info.next_delayed_at_ms < NowMs() + kFarMs / 2) return false;
  }
  return true;
}

// The delayed messages still waiting in `queue`: message id -> due time.
std::map<std::string, int64_t> ListAllDelayed(Client& client, const std::string& queue) {
  std::map<std::string, int64_t> waiting;
  int64_t after_due = 0;
  uint64_t after_id = 0;
  while (true) {
    auto page = client.ListDelayed(queue, after_due, after_id, 1'000);
    if (!page.ok()) {
      ADD_FAILURE() << page.status().ToString();
      break;
    }
    for (const auto& m : page->messages) {
      waiting[m.message.properties.message_id] = m.deliver_at_ms;
    }
    if (!page->more) break;
    after_due = page->next_after_deliver_at_ms;
    after_id = page->next_after_message_id;
  }
  return waiting;
}

// Confirmed ids never received; reports the first few.
uint64_t CountLost(const std::set<std::string>& confirmed, const std::map<std::string, int>& got,
                   const char* what) {
  uint64_t lost = 0;
  for (const auto& id : confirmed) {
    if (!got.contains(id) && ++lost <= 10) {
      ADD_FAILURE() << "confirmed " << what << " message " << id << " was never delivered";
    }
  }
  return lost;
}

uint64_t CountDuplicates(const std::map<std::string, int>& got) {
  uint64_t duplicates = 0;
  for (const auto& [id, count] : got) duplicates += count > 1 ? count - 1 : 0;
  return duplicates;
}

using ull = unsigned long long;

// Publishers with confirms (plain, delayed, rejected-and-dead-lettered) and consumers with acks
// run flat out; each cycle ends in a SIGKILL at a random moment and a restart on the same data
// directory. A quarter of the cycles kill wharfd 0-20 ms after the restart's ready file
// appeared, with no load (the recovery itself, releasing what fell due meanwhile, is
// interrupted); the others kill it 20-600 ms into the load: during heavy publishing (two in
// five cycles), during publishing with no consumers, so that a backlog builds up for the
// recoveries and cycles that follow (three in twenty), or after the publishers stopped, with
// consumers and releases only (one in five).
TEST(Durability, KillNineUnderLoadLosesNoConfirmedMessage) {
  int cycles = 20;
  if (const char* env = std::getenv("WHARF_CRASH_CYCLES")) cycles = std::max(1, std::atoi(env));
  uint32_t seed = std::random_device{}();
  if (const char* env = std::getenv("WHARF_CRASH_SEED")) seed = std::strtoul(env, nullptr, 10);
  std::printf("crash test: seed %u (WHARF_CRASH_SEED)\n", seed);
  std::mt19937 rng(seed);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const auto started = std::chrono::steady_clock::now();

  // Small RAM windows, so that queues page to disk and the delayed timeline keeps most of its
  // messages on disk only, loading them as it drains (docs/storage.md, docs/scheduler.md): the
  // kills land in those paths too.
  const std::string config_dir = testing::MakeTempDir("wharf-crash-config");
  const std::string config = config_dir + "/wharfd.toml";
  std::ofstream(config) << "[store]\npage_max_messages = 2000\n"
                           "[scheduler]\nram_messages = 500\n";
  TestServer server({"--config", config});
  {
    auto setup = server.Connect();
    ASSERT_NE(setup, nullptr);
    for (const char* queue : {kPlain, kDelayed}) {
      QueueSpec spec;
      spec.name = queue;
      spec.durable = true;
      ASSERT_TRUE(setup->DeclareQueue(spec).ok()) << queue;
    }
    testing::DeclareWithDeadLetterQueue(*setup, kRejected, kDead);
  }
  Ledger ledger;
  enum Kill { kInRecovery, kPublishing, kBacklog, kAfterPublishing, kKinds };
  int kills[kKinds] = {};
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const int pick = uniform(0, 19);
    const Kill kind = pick < 5    ? kInRecovery
                      : pick < 13 ? kPublishing
                      : pick < 16 ? kBacklog
                                  : kAfterPublishing;
    ++kills[kind];
    if (kind == kInRecovery) {
      std::this_thread::sleep_for(milliseconds(uniform(0, 2) == 0 ? 0 : uniform(1, 20)));
      server.Kill();
    } else {
      Load load(ledger, rng());
      if (kind != kBacklog) load.StartConsuming(server);
      load.StartPublishing(server);
      const int run_ms = uniform(20, 600);
      if (kind == kAfterPublishing) {
        const int publish_ms = uniform(0, run_ms);
        std::this_thread::sleep_for(milliseconds(publish_ms));
        load.StopPublishing();
        std::this_thread::sleep_for(milliseconds(run_ms - publish_ms));
      } else {
        std::this_thread::sleep_for(milliseconds(run_ms));
      }
      server.Kill();
    }
    {
      std::lock_guard lock(ledger.mu);
      ledger.kill_ms.push_back(NowMs());
    }
    ASSERT_TRUE(server.Restart()) << "cycle " << cycle;
  }

  // The last run: consumers only, until everything due has been delivered.
  int64_t last_due = 0;
  {
    std::lock_guard lock(ledger.mu);
    for (const auto& [id, sent] : ledger.delayed_confirmed) {
      if (!sent.far) last_due = std::max(last_due, sent.due_ms);
    }
  }
  std::map<std::string, int64_t> still_waiting;
  {
    Load load(ledger, rng());
    load.StartConsuming(server);
    auto watcher = server.Connect();
    ASSERT_NE(watcher, nullptr);
    const bool settled = testing::Eventually(
        [&] { return NowMs() > last_due && Settled(*watcher); }, milliseconds(60'000));
    EXPECT_TRUE(settled) << "the queues did not empty within a minute";
    still_waiting = ListAllDelayed(*watcher, kDelayed);
  }
  std::filesystem::remove_all(config_dir);  // read at every restart, no more to come
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::lock_guard lock(ledger.mu);
  const uint64_t lost = CountLost(ledger.confirmed, ledger.received, "plain");
  const uint64_t dead_lost = CountLost(ledger.rejected_confirmed, ledger.dead_received, "rejected");

  // Delayed: every confirmed one delivered (or, due beyond the run, still waiting with its due
  // time), none early, none of those still delayed at a kill released early after it.
  uint64_t delayed_lost = 0, early = 0, far = 0, far_delivered = 0, far_missing = 0;
  uint64_t across_a_kill = 0, delayed_duplicates = 0;
  int64_t least_margin = std::numeric_limits<int64_t>::max();
  for (const auto& [id, sent] : ledger.delayed_confirmed) {
    auto got = ledger.delayed_received.find(id);
    if (sent.far) {
      ++far;
      if (got != ledger.delayed_received.end() && ++far_delivered <= 10) {
        ADD_FAILURE() << "delayed message " << id << " due at " << sent.due_ms
                      << " was delivered at " << got->second.earliest_ms;
      }
      auto waiting = still_waiting.find(id);
      if ((waiting == still_waiting.end() || waiting->second != sent.due_ms) &&
          ++far_missing <= 10) {
        ADD_FAILURE() << "delayed message " << id << " due at " << sent.due_ms
                      << " is not waiting with that due time at the end";
      }
      continue;
    }
    const bool waited_at_a_kill =
        std::any_of(ledger.kill_ms.begin(), ledger.kill_ms.end(),
                    [&](int64_t kill) { return sent.confirmed_ms < kill && kill < sent.due_ms; });
    across_a_kill += waited_at_a_kill ? 1 : 0;
    if (got == ledger.delayed_received.end()) {
      if (++delayed_lost <= 10) {
        ADD_FAILURE() << "confirmed delayed message " << id << " due at " << sent.due_ms
                      << " was never delivered";
      }
      continue;
    }
    const int64_t margin = got->second.earliest_ms - sent.due_ms;
    least_margin = std::min(least_margin, margin);
    if (margin < -kEarlyToleranceMs && ++early <= 10) {
      ADD_FAILURE() << "delayed message " << id << " due at " << sent.due_ms << " was delivered "
                    << -margin << " ms early" << (waited_at_a_kill ? ", after a kill" : "");
    }
  }
  for (const auto& [id, seen] : ledger.delayed_received) {
    delayed_duplicates += seen.count > 1 ? seen.count - 1 : 0;
  }
  const uint64_t duplicates = CountDuplicates(ledger.received);
  const uint64_t dead_duplicates = CountDuplicates(ledger.dead_received);

  std::printf(
      "crash test: %d kills (%d in recovery, %d while publishing, %d while publishing with no "
      "consumers, %d after publishing), %.1f s\n"
      "  plain:    %llu published, %zu confirmed, %zu distinct received, %llu duplicate "
      "deliveries, %llu lost\n"
      "  delayed:  %llu published, %zu confirmed (%llu due beyond the run), %zu distinct "
      "delivered, %llu duplicate deliveries, %llu lost, %llu early (tolerance %lld ms, least "
      "margin %lld ms), %llu waited across a kill; beyond the run: %zu waiting, %llu delivered, "
      "%llu missing\n"
      "  rejected: %llu published, %zu confirmed, %zu distinct dead-lettered, %llu duplicate "
      "deliveries, %llu lost, %llu without the death record\n"
      "  confirmed but routed to no queue: %llu\n",
      cycles, kills[kInRecovery], kills[kPublishing], kills[kBacklog], kills[kAfterPublishing],
      seconds, static_cast<ull>(ledger.published[0]), ledger.confirmed.size(),
      ledger.received.size(), static_cast<ull>(duplicates), static_cast<ull>(lost),
      static_cast<ull>(ledger.published[1]), ledger.delayed_confirmed.size(), static_cast<ull>(far),
      ledger.delayed_received.size(), static_cast<ull>(delayed_duplicates),
      static_cast<ull>(delayed_lost), static_cast<ull>(early),
      static_cast<long long>(kEarlyToleranceMs), static_cast<long long>(least_margin),
      static_cast<ull>(across_a_kill), still_waiting.size(), static_cast<ull>(far_delivered),
      static_cast<ull>(far_missing), static_cast<ull>(ledger.published[2]),
      ledger.rejected_confirmed.size(), ledger.dead_received.size(),
      static_cast<ull>(dead_duplicates), static_cast<ull>(dead_lost),
      static_cast<ull>(ledger.wrong_deaths), static_cast<ull>(ledger.unrouted.load()));
  ::testing::Test::RecordProperty("confirmed", static_cast<int>(ledger.confirmed.size()));
  ::testing::Test::RecordProperty("duplicates", static_cast<int>(duplicates));
  ::testing::Test::RecordProperty("delayed_confirmed",
                                  static_cast<int>(ledger.delayed_confirmed.size()));
  EXPECT_EQ(lost, 0u);
  EXPECT_EQ(delayed_lost, 0u);
  EXPECT_EQ(early, 0u);
  EXPECT_EQ(far_delivered, 0u);
  EXPECT_EQ(far_missing, 0u);
  EXPECT_EQ(dead_lost, 0u);
  EXPECT_EQ(ledger.wrong_deaths, 0u);
  EXPECT_EQ(ledger.unrouted.load(), 0u) << "publishes confirmed but routed to no queue";
  EXPECT_GT(ledger.confirmed.size(), 0u);
  EXPECT_GT(ledger.delayed_confirmed.size(), 0u);
  EXPECT_GT(ledger.rejected_confirmed.size(), 0u);
}

}  // namespace
}  // namespace wharf
