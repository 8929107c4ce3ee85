// Online backups against the real wharfd (docs/operations.md, "Backup and restore"): a backup
// taken with `wharfctl backup` while publishers with confirms run, then a second wharfd started
// with --data-dir on the copy; and the refusals, each with its own reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integration/helpers.h"
#include "integration/small_disk.h"

namespace wharf {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::Ctl;
using testing::CtlStdout;
using testing::ParseJson;
using testing::TestServer;

// A message whose body says which it is, so that a garbled one shows.
std::string Body(uint64_t n) {
  std::string body = "message " + std::to_string(n) + " ";
  body.resize(1024, static_cast<char>('a' + n % 26));
  return body;
}

Message Numbered(uint64_t n) {
  Message m;
  m.persistent = true;
  m.properties.message_id = std::to_string(n);
  m.body = Body(n);
  return m;
}

// Confirmed publishes: which message, and when its confirm came.
struct Confirms {
  std::mutex mu;
  std::map<uint64_t, Clock::time_point> at;
};

// Publishes numbered messages to `queue` from `first` on, at most `window` unconfirmed, until
// `stop`; records each confirm.
void PublishUntil(Client& client, const std::string& queue, uint64_t first, uint64_t window,
                  const std::atomic<bool>& stop, Confirms* confirms) {
  std::atomic<uint64_t> outstanding{0};
  for (uint64_t n = first; !stop; ++n) {
    while (outstanding >= window && !stop)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    ++outstanding;
    client.PublishAsync("", queue, Numbered(n), [&, n](Result<PublishResult> r) {
      if (r.ok()) {
        std::lock_guard lock(confirms->mu);
        confirms->at[n] = Clock::now();
      }
      --outstanding;
    });
  }
  while (outstanding > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// Every message of `queue` on `client`'s broker: number -> body.
// A Receive that comes back empty ends it only once the queue has nothing ready: a queue just
// recovered reads its messages back from the disk, which a loaded machine may take longer than
// one Receive's wait to do.
std::map<uint64_t, std::string> DrainByNumber(Client& client, const std::string& queue) {
  std::map<uint64_t, std::string> out;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    auto batch = client.Receive(queue, 1000, std::chrono::milliseconds(500));
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok()) break;
    if (batch->empty()) {
      auto queues = client.ListQueues(queue);
      const bool nothing_ready =
          queues.ok() && std::none_of(queues->begin(), queues->end(), [&](const QueueInfo& q) {
            return q.name == queue && q.ready > 0;
          });
      if (nothing_ready) break;
      continue;
    }
    for (const Delivery& d : *batch) {
      const uint64_t n = std::stoull(d.message.properties.message_id);
      EXPECT_FALSE(out.contains(n)) << "message " << n << " twice";
      out[n] = d.message.body;
    }
    EXPECT_TRUE(client.AckSync(batch->back().delivery_tag, /*multiple=*/true).ok());
  }
  return out;
}

// A client of `server` (the loopback guest, an admin) and a durable queue `queue`; nullptr after
// a test failure.
std::unique_ptr<Client> ConnectWithQueue(const TestServer& server, const std::string& queue) {
  auto client = server.Connect();
  QueueSpec q;
  q.name = queue;
  if (client && !client->DeclareQueue(q).ok()) {
    ADD_FAILURE() << "cannot declare " << queue;
    return nullptr;
  }
  return client;
}

TEST(Backup, CopyTakenUnderLoadStartsWithEveryConfirmedMessageAndConfirmsGoOn) {
  TestServer server;
  auto admin = ConnectWithQueue(server, "orders");
  ASSERT_NE(admin, nullptr);
  // A backlog first (40 MB), so that the checkpoint has memtables to flush and files to link.
  constexpr uint64_t kBacklog = 40'000;
  Confirms confirms;
  {
    std::atomic<bool> stop{false};
    auto publisher = server.Connect();
    ASSERT_NE(publisher, nullptr);
    std::thread t([&] { PublishUntil(*publisher, "orders", 1, 256, stop, &confirms); });
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::lock_guard lock(confirms.mu);
      if (confirms.at.size() >= kBacklog) break;
    }
    stop = true;
    t.join();
  }
  const uint64_t backlog = confirms.at.rbegin()->first;

  // Publishers with confirms run through the backup.
  std::atomic<bool> stop{false};
  auto publisher = server.Connect();
  ASSERT_NE(publisher, nullptr);
  std::thread t([&] { PublishUntil(*publisher, "orders", 1'000'000, 64, stop, &confirms); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  const std::string target = server.dir() + "/backup";
  std::map<uint64_t, Clock::time_point> confirmed_before;
  {
    std::lock_guard lock(confirms.mu);
    confirmed_before = confirms.at;
  }
  const auto sent = Clock::now();
  int code = -1;
  const std::string out = CtlStdout(server, "backup " + target + " --json", &code);
  const auto answered = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stop = true;
  t.join();
  ASSERT_EQ(code, 0) << out << server.Log();
  auto info = ParseJson(out);
  EXPECT_EQ(info["directory"], target) << out;
  EXPECT_GT(info["files"].get<uint64_t>(), 3u) << out;
  EXPECT_GT(info["bytes"].get<uint64_t>(), 1u << 20) << out;

  // The broker kept confirming while the backup ran.
  uint64_t during = 0;
  double longest_gap_ms = 0;
  {
    std::lock_guard lock(confirms.mu);
    std::vector<Clock::time_point> times;
    for (const auto& [n, when] : confirms.at) {
      if (n >= 1'000'000 && when > sent && when < answered) times.push_back(when);
    }
    std::sort(times.begin(), times.end());
    during = times.size();
    Clock::time_point last = sent;
    for (auto when : times) {
      longest_gap_ms =
          std::max(longest_gap_ms, std::chrono::duration<double, std::milli>(when - last).count());
      last = when;
    }
  }
  const double backup_ms = std::chrono::duration<double, std::milli>(answered - sent).count();
  std::printf(
      "backup of %llu + %zu confirmed messages: %.0f ms as wharfctl saw it (%llu ms in the "
      "broker); %llu confirms during it, the longest wait between two %.1f ms\n",
      static_cast<unsigned long long>(backlog), confirmed_before.size() - backlog, backup_ms,
      static_cast<unsigned long long>(info["duration_ms"].get<uint64_t>()),
      static_cast<unsigned long long>(during), longest_gap_ms);
  EXPECT_GT(during, 0u) << "no confirm while the backup ran (" << backup_ms << " ms)";

  // A second broker on the copy has every message confirmed before the backup was asked for,
  // each whole, and nothing else than what was published.
  TestServer copy({}, 0, target);
  auto reader = copy.Connect();
  ASSERT_NE(reader, nullptr);
  auto found = DrainByNumber(*reader, "orders");
  uint64_t missing = 0;
  for (const auto& [n, when] : confirmed_before) {
    if (!found.contains(n) && ++missing <= 10)
      ADD_FAILURE() << "confirmed message " << n << " missing";
  }
  EXPECT_EQ(missing, 0u);
  uint64_t garbled = 0;
  for (const auto& [n, body] : found) {
    if (body != Body(n) && ++garbled <= 10) ADD_FAILURE() << "message " << n << " garbled";
  }
  EXPECT_EQ(garbled, 0u);
  std::printf("the copy holds %zu messages; %zu were confirmed before the backup was asked for\n",
              found.size(), confirmed_before.size());
  // The original broker is untouched: every confirmed message is still there.
  auto original = DrainByNumber(*admin, "orders");
  std::lock_guard lock(confirms.mu);
  EXPECT_GE(original.size(), confirms.at.size());
}

TEST(Backup, RefusalsAreSpecificAndLeaveNothingBehind) {
  TestServer server;
  int code = -1;
  const std::string dir = server.dir();

  // Relative: wharfctl refuses it itself, before connecting (the broker's working directory
  // is not wharfctl's).
  std::string out = Ctl(server, "backup relative/dir", &code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("is not absolute"), std::string::npos) << out;
  // ... and the broker as well, for clients that send one.
  auto admin = server.Connect();
  ASSERT_NE(admin, nullptr);
  auto relative = admin->Backup("relative/dir");
  EXPECT_EQ(relative.status().code(), StatusCode::kInvalidArgument) << relative.status().ToString();

  // Not empty.
  fs::create_directories(dir + "/taken/x");
  out = Ctl(server, "backup " + dir + "/taken", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("PRECONDITION_FAILED"), std::string::npos) << out;
  EXPECT_NE(out.find("already exists and is not empty"), std::string::npos) << out;
  // No parent.
  out = Ctl(server, "backup " + dir + "/no/such", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("does not exist"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir + "/no"));
  // Not an admin.
  out = Ctl(server, "add-user worker --new-password pw-worker", &code);
  ASSERT_EQ(code, 0) << out;
  out = Ctl(server, "set-permissions worker '.*' '.*' '.*'", &code);  // so it may log in
  ASSERT_EQ(code, 0) << out;
  out = Ctl(server, "--user worker --password pw-worker backup " + dir + "/b", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("ACCESS_REFUSED"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir + "/b"));
  // Each was logged at error (or warning, for the refused user) with its reason.
  const std::string log = server.Log();
  EXPECT_NE(log.find("already exists and is not empty"), std::string::npos) << log;
  EXPECT_NE(log.find("may not take a backup: it needs the tag administrator"), std::string::npos)
      << log;

  // An empty directory is filled; the text output says what was written.
  fs::create_directories(dir + "/empty");
  out = Ctl(server, "backup " + dir + "/empty", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("backup written to " + dir + "/empty"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(dir + "/empty/store/CURRENT"));
}

// A real file system as the target: a tmpfs that fills up during the copy, and a read-only one.
// Mounting needs root (CI runs as root); skipped otherwise, saying why.
TEST(Backup, FullOrReadOnlyTargetDiskIsSaidAndLeavesNothing) {
  testing::SmallDisk tiny(4);
  if (!tiny.mounted()) GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << tiny.error();
  testing::SmallDisk read_only(1, /*read_only=*/true);
  ASSERT_TRUE(read_only.mounted()) << read_only.error();
  TestServer server;
  auto client = ConnectWithQueue(server, "q");
  ASSERT_NE(client, nullptr);
  // 12 MiB of random bytes (RocksDB compresses what it flushes): more than the tmpfs holds.
  std::mt19937_64 random(7);
  std::vector<std::future<Result<PublishResult>>> confirms;
  for (int i = 0; i < 6'000; ++i) {
    Message m;
    m.persistent = true;
    m.body.resize(2048);
    for (size_t j = 0; j + 8 <= m.body.size(); j += 8) {
      const uint64_t word = random();
      std::memcpy(m.body.data() + j, &word, 8);
    }
    confirms.push_back(client->PublishAsync("", "q", m));
  }
  for (auto& c : confirms) ASSERT_TRUE(c.get().ok());

  const fs::path full_target = fs::path(tiny.dir()) / "backup";
  auto full = client->Backup(full_target.string());
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kStoreFull) << full.status().ToString();
  EXPECT_TRUE(fs::is_empty(full_target.parent_path())) << "a partial copy was left behind";

  const fs::path ro_target = fs::path(read_only.dir()) / "backup";
  auto ro = client->Backup(ro_target.string());
  ASSERT_FALSE(ro.ok());
  EXPECT_EQ(ro.status().code(), StatusCode::kPreconditionFailed) << ro.status().ToString();
  EXPECT_NE(ro.status().message().find("Read-only file system"), std::string::npos)
      << ro.status().ToString();
  EXPECT_NE(server.Log().find("failed, no partial copy left"), std::string::npos) << server.Log();
  // The broker is fine: a backup elsewhere works, and publishing goes on.
  EXPECT_TRUE(client->Backup(server.dir() + "/fine").ok());
  EXPECT_TRUE(client->Publish("", "q", Numbered(1)).ok());
}

}  // namespace
}  // namespace wharf
