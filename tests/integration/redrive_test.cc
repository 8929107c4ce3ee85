// Redrive through the real wharfd, client and wharfctl (docs/lifecycle.md, "Redrive"): a
// dead-letter queue is moved back within a rate; kill -9 in the middle, and after the restart
// the task resumes and every message is live exactly once.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "integration/helpers.h"

namespace wharf {
namespace {

using std::chrono::milliseconds;

using testing::Ctl;
using testing::CtlStdout;

// Declares `dlq` and `source` (dead-lettering into it) and rejects `count` persistent
// messages "m0".. from `source` into `dlq`.
void FillDeadLetterQueue(Client& client, const std::string& source, const std::string& dlq,
                         int count) {
  testing::DeclareWithDeadLetterQueue(client, source, dlq);
  std::vector<std::future<Result<PublishResult>>> confirms;
  for (int i = 0; i < count; ++i) {
    Message m;
    m.body = "m" + std::to_string(i);
    m.persistent = true;
    confirms.push_back(client.PublishAsync("", source, m));
  }
  for (auto& c : confirms) ASSERT_TRUE(c.get().ok());
  int rejected = 0;
  while (rejected < count) {
    auto got = client.Receive(source, 1'000, milliseconds(2'000));
    ASSERT_TRUE(got.ok());
    ASSERT_FALSE(got->empty());
    for (const auto& d : *got) client.Reject(d.delivery_tag, /*requeue=*/false);
    rejected += static_cast<int>(got->size());
  }
  ASSERT_TRUE(client.Ping().ok());
}

uint64_t Ready(Client& client, const std::string& queue) {
  auto queues = client.ListQueues(queue);
  if (!queues.ok()) return UINT64_MAX;
  for (const auto& q : *queues) {
    if (q.name == queue) return q.ready;
  }
  return UINT64_MAX;
}

TEST(Redrive, KillMinusNineInTheMiddleResumesAndEachMessageIsLiveOnce) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  const int kMessages = 3'000;
  FillDeadLetterQueue(*client, "orders", "orders.dlq", kMessages);
  ASSERT_EQ(Ready(*client, "orders.dlq"), static_cast<uint64_t>(kMessages));

  int code = -1;
  nlohmann::json started =
      testing::ParseJson(CtlStdout(server, "redrive orders.dlq --rate 1000 --json", &code));
  ASSERT_EQ(code, 0) << started;
  EXPECT_EQ(started["state"], "running");
  EXPECT_EQ(started["rate"], 1000);
  std::string out;
  std::this_thread::sleep_for(milliseconds(1'200));
  server.Kill();
  ASSERT_TRUE(server.Restart());
  client = server.Connect();
  ASSERT_NE(client, nullptr);
  auto status = client->RedriveStatus("orders.dlq");
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->size(), 1u);
  const uint64_t moved_before = (*status)[0].moved;
  EXPECT_GT(moved_before, 0u);
  EXPECT_LT(moved_before, static_cast<uint64_t>(kMessages)) << "stopped in the middle";

  // Followed to its end by wharfctl.
  out = Ctl(server, "redrive status orders.dlq", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("orders.dlq"), std::string::npos) << out;
  for (int i = 0; i < 200; ++i) {
    status = client->RedriveStatus("orders.dlq");
    ASSERT_TRUE(status.ok());
    if ((*status)[0].state != RedriveInfo::State::kRunning) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_EQ((*status)[0].state, RedriveInfo::State::kFinished);
  EXPECT_EQ((*status)[0].moved, static_cast<uint64_t>(kMessages));
  nlohmann::json tasks = testing::ParseJson(CtlStdout(server, "redrive status --json", &code));
  EXPECT_EQ(code, 0) << tasks;
  ASSERT_EQ(tasks.size(), 1u) << tasks;
  EXPECT_EQ(tasks[0]["state"], "finished");
  EXPECT_EQ(tasks[0]["targets"], nlohmann::json({{"orders", 3000}}));

  server.Kill();
  ASSERT_TRUE(server.Restart());
  client = server.Connect();
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(Ready(*client, "orders.dlq"), 0u);
  std::set<std::string> bodies;
  size_t received = 0;
  // Until all are in (a recovered queue loads from disk as it drains: allow time), then one
  // more look for duplicates.
  for (bool last = false; !last;) {
    last = received >= static_cast<size_t>(kMessages);
    auto got = client->Receive("orders", 1'000, milliseconds(last ? 300 : 5'000));
    ASSERT_TRUE(got.ok());
    if (!last) {
      ASSERT_FALSE(got->empty()) << received << " received";
    }
    for (const auto& d : *got) {
      ++received;
      bodies.insert(d.message.body);
      EXPECT_EQ(d.message.deaths.size(), 1u);
      client->Ack(d.delivery_tag);
    }
  }
  EXPECT_EQ(received, static_cast<size_t>(kMessages)) << "each message once";
  EXPECT_EQ(bodies.size(), static_cast<size_t>(kMessages));
}

TEST(Redrive, WharfctlDryRunCancelAndErrors) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  FillDeadLetterQueue(*client, "jobs", "jobs.dlq", 40);
  int code = -1;
  std::string out = Ctl(server, "redrive jobs.dlq --dry-run", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("would move 40 (jobs 40)"), std::string::npos) << out;
  EXPECT_EQ(Ready(*client, "jobs.dlq"), 40u);

  out = Ctl(server, "redrive jobs.dlq --rate 2", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("at most 2 per second"), std::string::npos) << out;
  out = Ctl(server, "redrive jobs.dlq", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("already has a redrive running"), std::string::npos) << out;
  nlohmann::json cancelled =
      testing::ParseJson(CtlStdout(server, "redrive cancel jobs.dlq --json", &code));
  EXPECT_EQ(code, 0) << cancelled;
  EXPECT_EQ(cancelled["state"], "cancelled");
  out = Ctl(server, "redrive cancel jobs.dlq", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("has no redrive running"), std::string::npos) << out;
  out = Ctl(server, "redrive jobs.dlq --reason lost", &code);
  EXPECT_EQ(code, 2) << "checked before the broker is asked: " << out;
  EXPECT_NE(out.find("lost"), std::string::npos) << out;
  out = Ctl(server, "redrive nope", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("'nope' not found"), std::string::npos) << out;

  // --follow shows it to the end; the broker stays up through all of it.
  out = Ctl(server, "redrive jobs.dlq --reason rejected --limit 10 --follow", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("finished: moved 10 (jobs 10)"), std::string::npos) << out;
  EXPECT_EQ(Ready(*client, "jobs.dlq") + Ready(*client, "jobs"), 40u);
  EXPECT_TRUE(server.running());
}

TEST(Redrive, WharfctlRequeuesOneMessageByIdAndMovesTheRest) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  FillDeadLetterQueue(*client, "jobs", "jobs.dlq", 5);
  QueueSpec other;
  other.name = "other";
  ASSERT_TRUE(client->DeclareQueue(other).ok());
  auto page = client->Peek("jobs.dlq", 0, 10, false);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->messages.size(), 5u);
  char id[24];
  std::snprintf(id, sizeof id, "%016llx",
                static_cast<unsigned long long>(page->messages[2].message.id));

  int code = -1;
  std::string out = Ctl(server, std::string("requeue jobs.dlq ") + id, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find(std::string("message ") + id + " requeued from 'jobs.dlq' to 'jobs'"),
            std::string::npos)
      << out;
  auto back = client->Receive("jobs", 10, milliseconds(2'000));
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].message.body, "m2");
  client->Ack((*back)[0].delivery_tag);
  out = Ctl(server, std::string("requeue jobs.dlq ") + id, &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("is not ready in queue 'jobs.dlq'"), std::string::npos) << out;

  out = Ctl(server, "move jobs.dlq --to other", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("finished from 'jobs.dlq' to 'other': moved 4 (other 4)"), std::string::npos)
      << out;
  EXPECT_EQ(Ready(*client, "jobs.dlq"), 0u);
  EXPECT_EQ(Ready(*client, "other"), 4u);
  out = Ctl(server, "move other", &code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("--to is required"), std::string::npos) << out;
}

// A purge of a queue paged to disk: wharfctl waits for its removal from the disk; kill -9
// after it brings none of the purged messages back, and keeps the ones published after.
TEST(Purge, WharfctlWaitsForALargePurgeAndItStaysPurgedAfterKill9) {
  std::string dir = testing::MakeTempDir("wharf-purge");
  std::string config = dir + "/wharfd.toml";
  std::ofstream(config) << "[store]\npage_max_messages = 100\n";
  testing::TestServer server({"--config", config});
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  QueueSpec spec;
  spec.name = "deep";
  spec.durable = true;
  ASSERT_TRUE(client->DeclareQueue(spec).ok());
  constexpr int kMessages = 20'000;
  Message m;
  m.persistent = true;
  m.body = std::string(200, 'x');
  for (int i = 0; i < kMessages - 1; ++i) ASSERT_TRUE(client->PublishNoConfirm("", "deep", m).ok());
  ASSERT_TRUE(client->Publish("", "deep", m).ok());

  int code = -1;
  nlohmann::json purged = testing::ParseJson(CtlStdout(server, "purge deep --json", &code));
  ASSERT_EQ(code, 0) << purged;
  EXPECT_EQ(purged,
            nlohmann::json({{"queue", "deep"}, {"purged", 20000}, {"purge_reclaiming", 0}}));
  nlohmann::json shown = testing::ParseJson(CtlStdout(server, "queue show deep --json", &code));
  EXPECT_EQ(shown["ready"], 0) << shown;
  EXPECT_EQ(shown["purge_reclaiming"], 0) << shown;
  std::string out;
  m.body = "after";
  ASSERT_TRUE(client->Publish("", "deep", m).ok());

  server.Kill();
  ASSERT_TRUE(server.Restart());
  client = server.Connect();
  ASSERT_NE(client, nullptr);
  auto got = client->Receive("deep", 10, milliseconds(2'000));
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].message.body, "after");

  out = Ctl(server, "purge deep --no-wait", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out, "purged 0 messages from 'deep'\n") << "the one in flight stays";
  out = Ctl(server, "purge nope", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("'nope' not found"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wharf
