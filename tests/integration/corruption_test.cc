// A damaged store and the real wharfd (issue 20; docs/operations.md, "A corrupt store"): the
// start is refused with the damaged file named and the exact repair command, `wharfd --repair`
// salvages every message outside the damaged part, and wharfd then starts and delivers them,
// each byte-identical to what was published. The unit tests (tests/unit/store/corruption_test.cc)
// damage every other kind of file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "support/test_server.h"
#include "wharf/client.h"

namespace wharf {
namespace {

namespace fs = std::filesystem;
using testing::RunCommand;
using testing::TestServer;

std::string Body(int i) { return "body-" + std::to_string(i) + std::string(100 + i % 50, 'x'); }

TEST(Corruption, WharfdRefusesADamagedLogAndRepairSalvagesEveryOtherMessage) {
  // Before issue 20 wharfd started on such a store with a warning, having dropped every
  // confirmed message logged after the damaged record (1,490 of 3,000 came back).
  constexpr int kMessages = 3000;
  const std::string data = testing::MakeTempDir("wharf-corrupt-");
  TestServer server({}, 0, data);
  {
    auto client = server.Connect();
    ASSERT_NE(client, nullptr);
    QueueSpec spec;
    spec.name = "orders";
    spec.durable = true;
    ASSERT_TRUE(client->DeclareQueue(spec).ok());
    // Confirmed in groups of 50 in flight, so that the log holds many records.
    for (int i = 0; i < kMessages; i += 50) {
      std::vector<std::future<Result<PublishResult>>> confirms;
      for (int j = i; j < i + 50; ++j) {
        Message m;
        m.body = Body(j);
        m.persistent = true;
        m.properties.message_id = std::to_string(j);
        confirms.push_back(client->PublishAsync("", "orders", m));
      }
      for (auto& confirm : confirms) ASSERT_TRUE(confirm.get().ok());
    }
  }
  ASSERT_EQ(server.Stop(), 0);

  fs::path log;
  for (const auto& entry : fs::directory_iterator(data + "/store")) {
    if (entry.path().extension() == ".log" &&
        (log.empty() || fs::file_size(entry.path()) > fs::file_size(log))) {
      log = entry.path();
    }
  }
  ASSERT_FALSE(log.empty());
  ASSERT_GT(fs::file_size(log), 300'000u);
  {
    std::fstream f(log, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(log) / 2));
    f.put('\x5a');
  }

  int code = 0;
  // timeout: were the start not refused, wharfd would run on.
  std::string refused =
      RunCommand("timeout 20 " + std::string(WHARFD_PATH_FOR_TESTS) +
                     " --listen 127.0.0.1:0 --amqp-listen 127.0.0.1:0 --data-dir " + data + " 2>&1",
                 &code);
  EXPECT_EQ(code, 1) << refused;
  EXPECT_NE(refused.find(log.filename().string() + ": damaged records"), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("wharfd --repair --data-dir " + data), std::string::npos) << refused;

  std::string repaired =
      RunCommand(std::string(WHARFD_PATH_FOR_TESTS) + " --repair --data-dir " + data, &code);
  ASSERT_EQ(code, 0) << repaired;
  auto at = repaired.find("queue orders: ");
  ASSERT_NE(at, std::string::npos) << repaired;
  const int salvaged = std::stoi(repaired.substr(at + 14));
  // A damaged record costs the rest of its 32 KiB block of the log: a few hundred messages
  // of about 200 bytes, and nothing after it.
  EXPECT_GE(salvaged, kMessages - 300) << repaired;
  EXPECT_LT(salvaged, kMessages) << repaired;
  bool set_aside = false;
  for (const auto& entry : fs::directory_iterator(data)) {
    set_aside |= entry.path().filename().string().starts_with("store.corrupt-");
  }
  EXPECT_TRUE(set_aside) << "the damaged store is kept";

  ASSERT_TRUE(server.Restart());
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  std::map<int, int> seen;
  while (true) {
    auto batch = client->Receive("orders", 500, std::chrono::milliseconds(500));
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    if (batch->empty()) break;
    for (const Delivery& d : *batch) {
      int i = std::stoi(d.message.properties.message_id);
      EXPECT_EQ(d.message.body, Body(i)) << "a wrong message for " << i;
      ++seen[i];
      client->Ack(d.delivery_tag);
    }
  }
  EXPECT_EQ(static_cast<int>(seen.size()), salvaged);
  for (const auto& [i, n] : seen) EXPECT_EQ(n, 1) << "message " << i << " delivered twice";
  // What was lost is one span of the log: every message before it and after it came back.
  std::vector<int> missing;
  for (int i = 0; i < kMessages; ++i) {
    if (!seen.contains(i)) missing.push_back(i);
  }
  ASSERT_FALSE(missing.empty());
  EXPECT_LT(missing.back() - missing.front(), 300) << "the loss is one contiguous span";
  EXPECT_TRUE(seen.contains(kMessages - 1)) << "what followed the damage was kept";
  server.Stop();
  fs::remove_all(data);
}

}  // namespace
}  // namespace wharf
