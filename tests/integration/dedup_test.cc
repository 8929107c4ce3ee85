// Publish deduplication windows through the real wharfd (docs/lifecycle.md, "Deduplication"):
// a publisher that retries every publish after the broker was killed mid-confirm ends with
// each id exactly once in the queue (its messages in RAM, or nearly all paged), and the
// confirms of the retries say which were duplicates; an id sent as the publish's deduplication_id
// and as the x-deduplication-header is one key; the deduplication_id is checked and not delivered.
// The rising ids are written in runs, and the retries are looked up in them (docs/storage.md).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/test_server.h"
#include "wharf/client.h"

namespace wharf {
namespace {

using testing::TestServer;

constexpr int kMessages = 20'000;

// Order `id`, its key in the x-deduplication-header (`in_header`) or in `options`'
// deduplication_id.
Message Keyed(int id, bool in_header, PublishOptions* options) {
  Message m;
  m.persistent = true;
  m.body = "order " + std::to_string(id);
  std::string key = "order-" + std::to_string(id);
  options->deduplication_id.clear();
  if (in_header) {
    m.headers["x-deduplication-header"] = std::move(key);
  } else {
    options->deduplication_id = std::move(key);
  }
  return m;
}

// Publishes ids [0, kMessages) with up to 64 unconfirmed; returns the confirmed ids (with
// their results). Stops early, when a publish fails (the broker went away). Even ids carry
// their key in the header and odd ones in the publish's deduplication_id, or the other way
// round with `swap`.
std::map<int, PublishResult> PublishAll(Client& client, bool swap) {
  std::map<int, PublishResult> confirmed;
  std::deque<std::pair<int, std::future<Result<PublishResult>>>> window;
  auto settle = [&]() -> bool {
    auto [id, future] = std::move(window.front());
    window.pop_front();
    auto r = future.get();
    if (!r.ok()) return false;
    confirmed.emplace(id, *r);
    return true;
  };
  bool ok = true;
  for (int id = 0; id < kMessages && ok; ++id) {
    PublishOptions options;
    Message m = Keyed(id, (id % 2 == 0) != swap, &options);
    window.emplace_back(id, client.PublishAsync("", "orders", m, options));
    if (window.size() >= 64) ok = settle();
  }
  while (!window.empty()) settle();
  return confirmed;
}

// A durable queue `name`, with a 10-minute deduplication window when `windowed`.
Status DeclareDurable(Client& client, const std::string& name, bool windowed) {
  QueueSpec spec;
  spec.name = name;
  spec.durable = true;
  if (windowed) spec.arguments["x-deduplication-window"] = int64_t{600'000};
  return client.DeclareQueue(spec).status();
}

// A counter of the store's from /metrics.
double StoreCounter(const TestServer& server, const std::string& name) {
  httplib::Client http("127.0.0.1", server.metrics_port());
  http.set_read_timeout(5, 0);
  auto res = http.Get("/metrics");
  if (!res || res->status != 200) return -1;
  const size_t at = res->body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(res->body.substr(at + name.size() + 2));
}

// A publisher that retries every publish after a kill -9 mid-confirm ends with each id once.
// `extra_args` for wharfd: with a low page_max_messages nearly every publish is paged at
// once, so it is counted, not held, until its commit answers (docs/lifecycle.md,
// "Deduplication").
void RetryEveryPublishAfterAKill9(std::vector<std::string> extra_args) {
  extra_args.insert(extra_args.end(), {"--metrics-listen", "127.0.0.1:0"});
  TestServer server(std::move(extra_args));
  {
    auto admin = server.Connect();
    ASSERT_NE(admin, nullptr);
    ASSERT_TRUE(DeclareDurable(*admin, "orders", true).ok());
  }
  // The first run: killed while publishes are in flight.
  std::map<int, PublishResult> before;
  {
    auto publisher = server.Connect();
    ASSERT_NE(publisher, nullptr);
    auto run = std::async(std::launch::async, [&] { return PublishAll(*publisher, false); });
    // Kill once some are confirmed, so the crash falls among publishes in flight.
    auto watcher = server.Connect();
    ASSERT_NE(watcher, nullptr);
    for (int i = 0; i < 2'000; ++i) {
      auto queues = watcher->ListQueues();
      if (queues.ok() && !queues->empty() && (*queues)[0].ready >= kMessages / 10) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    server.Kill();
    before = run.get();
  }
  ASSERT_GT(before.size(), 0u);
  ASSERT_LT(before.size(), static_cast<size_t>(kMessages)) << "the kill came too late";
  ASSERT_TRUE(server.Restart()) << server.Log();
  ASSERT_NE(server.metrics_port(), 0);

  // The retry: every publish again, whatever its fate was, each key in the other carrier.
  auto publisher = server.Connect();
  ASSERT_NE(publisher, nullptr);
  std::map<int, PublishResult> after = PublishAll(*publisher, true);
  ASSERT_EQ(after.size(), static_cast<size_t>(kMessages)) << server.Log();
  size_t duplicates = 0;
  for (const auto& [id, result] : after) {
    if (result.duplicate_of != 0) ++duplicates;
    if (auto first = before.find(id); first != before.end()) {
      // Confirmed before the kill: a duplicate of that very message.
      EXPECT_EQ(result.duplicate_of, first->second.message_id) << "order " << id;
    }
  }
  // At least those confirmed before; more when the kill fell after a write but before its
  // confirm left.
  EXPECT_GE(duplicates, before.size());
  // The ids rise, so most were written in runs (keys.h), and the retries after the restart
  // were looked up in the runs read back from the store.
  EXPECT_GT(StoreCounter(server, "wharf_store_dedup_runs_total"), 0);
  EXPECT_GT(StoreCounter(server, "wharf_store_dedup_run_lookups_total"), 0);

  std::multiset<std::string> bodies;
  while (true) {
    auto got = publisher->Receive("orders", 500, std::chrono::milliseconds(500));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    if (got->empty()) break;
    for (const Delivery& d : *got) bodies.insert(d.message.body);
    ASSERT_TRUE(publisher->AckSync(got->back().delivery_tag, /*multiple=*/true).ok());
  }
  EXPECT_EQ(bodies.size(), static_cast<size_t>(kMessages)) << "each id exactly once";
  for (int id = 0; id < kMessages; ++id) {
    EXPECT_EQ(bodies.count("order " + std::to_string(id)), 1u) << "order " << id;
  }
  ASSERT_TRUE(server.running());
}

TEST(Dedup, ARetryingPublisherEndsWithEachIdOnceAfterAKill9MidConfirm) {
  RetryEveryPublishAfterAKill9({});
}

TEST(Dedup, ARetryingPublisherEndsWithEachIdOnceAfterAKill9IntoAPagedQueue) {
  const std::string dir = testing::MakeTempDir("wharf-dedup");
  const std::string config = dir + "/wharfd.toml";
  std::ofstream(config) << "[store]\npage_max_messages = 500\n";
  RetryEveryPublishAfterAKill9({"--config", config});
  std::filesystem::remove_all(dir);
}

TEST(Dedup, ThePublishDeduplicationIdIsCheckedAndNotDelivered) {
  TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(DeclareDurable(*client, "orders", true).ok());
  ASSERT_TRUE(DeclareDurable(*client, "plain", false).ok());

  Message m;
  m.persistent = true;
  m.body = "first";
  PublishOptions options;
  options.deduplication_id = std::string(129, 'k');
  // Too long, whether or not the queue has a window; the connection stays usable.
  for (const char* queue : {"orders", "plain"}) {
    auto bad = client->Publish("", queue, m, options);
    ASSERT_FALSE(bad.ok()) << queue;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find("deduplication_id"), std::string_view::npos)
        << bad.status().ToString();
  }
  options.deduplication_id = std::string("\0id\xff", 4);  // any bytes
  auto first = client->Publish("", "orders", m, options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->duplicate_of, 0u);
  // The id wins over a header naming another key.
  m.body = "again";
  m.headers["x-deduplication-header"] = "other";
  auto again = client->Publish("", "orders", m, options);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->duplicate_of, first->message_id);
  // The header alone is a key of its own.
  m.body = "by header";
  auto header = client->Publish("", "orders", m);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->duplicate_of, 0u);

  auto got = client->Receive("orders", 10, std::chrono::milliseconds(1000));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].message.body, "first");
  EXPECT_TRUE((*got)[0].message.headers.empty()) << "the id is not delivered";
  EXPECT_EQ((*got)[1].message.body, "by header");
  EXPECT_EQ((*got)[1].message.headers.count("x-deduplication-header"), 1u);
  ASSERT_TRUE(server.running());
}

}  // namespace
}  // namespace wharf
