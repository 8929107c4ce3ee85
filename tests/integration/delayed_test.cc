// Delayed delivery through the real wharfd and client (docs/scheduler.md): a delayed message
// arrives no earlier than its time, persistent ones survive kill -9 (those that fell due
// while the broker was down arrive right after start, in due order), and wharfctl lists and
// cancels them.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "integration/helpers.h"
#include "support/test_server.h"

namespace wharf {
namespace {

using testing::NowMs;
using testing::RunCommand;

using std::chrono::milliseconds;

QueueSpec Durable(const std::string& name) {
  QueueSpec spec;
  spec.name = name;
  spec.durable = true;
  return spec;
}

// Pulls until `count` messages arrived or `timeout` passed; records when each arrived.
std::vector<std::pair<std::string, int64_t>> Drain(Client& client, const std::string& queue,
                                                   size_t count, milliseconds timeout) {
  std::vector<std::pair<std::string, int64_t>> got;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (got.size() < count && std::chrono::steady_clock::now() < deadline) {
    auto batch = client.Receive(queue, 100, milliseconds(200));
    if (!batch.ok()) break;
    for (const auto& d : *batch) {
      got.emplace_back(d.message.body, NowMs());
      client.Ack(d.delivery_tag);
    }
  }
  return got;
}

TEST(Delayed, ArrivesNoEarlierThanItsTimeAndShowsInQueueStats) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->DeclareQueue(Durable("jobs")).ok());
  const int64_t start = NowMs();
  PublishOptions later;
  later.delay_ms = 400;
  ASSERT_TRUE(client->Publish("", "jobs", testing::PersistentMessage("in-400ms"), later).ok());
  PublishOptions sooner;
  sooner.deliver_at_ms = start + 200;
  ASSERT_TRUE(client->Publish("", "jobs", testing::PersistentMessage("at-200ms"), sooner).ok());
  auto queues = client->ListQueues("jobs");
  ASSERT_TRUE(queues.ok());
  ASSERT_EQ(queues->size(), 1u);
  EXPECT_EQ((*queues)[0].delayed, 2u);
  EXPECT_EQ((*queues)[0].ready, 0u);
  EXPECT_EQ((*queues)[0].next_delayed_at_ms, start + 200);
  auto got = Drain(*client, "jobs", 2, milliseconds(5'000));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, "at-200ms");
  EXPECT_GE(got[0].second, start + 200);
  EXPECT_EQ(got[1].first, "in-400ms");
  EXPECT_GE(got[1].second, start + 400);
}

TEST(Delayed, SurvivesKillAndFiresPastDueMessagesInOrderAfterStart) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->DeclareQueue(Durable("q")).ok());
  const int64_t start = NowMs();
  // Due while the broker is down, in an order unlike publish order; one long after.
  for (auto [body, offset] : std::vector<std::pair<std::string, int64_t>>{
           {"third", 900}, {"first", 300}, {"second", 600}, {"after-restart", 60'000}}) {
    PublishOptions at;
    at.deliver_at_ms = start + offset;
    ASSERT_TRUE(client->Publish("", "q", testing::PersistentMessage(body), at).ok());
  }
  Message transient;
  transient.body = "transient";
  PublishOptions at;
  at.deliver_at_ms = start + 300;
  ASSERT_TRUE(client->Publish("", "q", transient, at).ok());
  client.reset();
  server.Kill();
  std::this_thread::sleep_for(milliseconds(1'000));  // all but one fall due while down
  ASSERT_TRUE(server.Restart());
  client = server.Connect();
  ASSERT_NE(client, nullptr);
  auto got = Drain(*client, "q", 3, milliseconds(5'000));
  std::vector<std::string> bodies;
  for (const auto& [body, when] : got) bodies.push_back(body);
  EXPECT_EQ(bodies, (std::vector<std::string>{"first", "second", "third"}));
  auto more = client->Receive("q", 10, milliseconds(300));
  ASSERT_TRUE(more.ok());
  EXPECT_TRUE(more->empty()) << "the non-persistent one is gone, the late one still waits";
  auto queues = client->ListQueues("q");
  ASSERT_TRUE(queues.ok());
  EXPECT_EQ((*queues)[0].delayed, 1u);
  EXPECT_EQ((*queues)[0].next_delayed_at_ms, start + 60'000);
}

TEST(Delayed, NackWithDelayRetriesLaterWithTheCount) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->DeclareQueue(Durable("work")).ok());
  ASSERT_TRUE(client->Publish("", "work", testing::PersistentMessage("flaky")).ok());
  auto first = client->Receive("work", 1, milliseconds(2'000));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  const int64_t nacked_at = NowMs();
  ASSERT_TRUE(client->NackWithDelaySync((*first)[0].delivery_tag, milliseconds(300)).ok());
  auto queues = client->ListQueues("work");
  ASSERT_TRUE(queues.ok());
  EXPECT_EQ((*queues)[0].delayed, 1u);
  auto again = client->Receive("work", 1, milliseconds(3'000));
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_GE(NowMs(), nacked_at + 300);
  EXPECT_EQ((*again)[0].message.body, "flaky");
  EXPECT_EQ((*again)[0].receive_count, 2u);
  EXPECT_TRUE((*again)[0].redelivered);
  EXPECT_TRUE(client->AckSync((*again)[0].delivery_tag).ok());
}

TEST(Delayed, WharfctlListsAndCancels) {
  testing::TestServer server;
  auto ctl = [&](const std::string& args) {
    return std::string(WHARFCTL_PATH) + " --server " + server.address() + " " + args;
  };
  int code = -1;
  RunCommand(ctl("declare-queue later"), &code);
  ASSERT_EQ(code, 0);
  std::string published = RunCommand(
      ctl("publish '' later first --persistent --deliver-at 2099-01-01T00:00:00Z"), &code);
  ASSERT_EQ(code, 0) << published;
  // "published message <16 hex digits> to 1 queue(s)"
  ASSERT_GE(published.size(), 34u);
  std::string id = published.substr(18, 16);
  RunCommand(ctl("publish '' later second --persistent --delay 3600000 --count 3"), &code);
  ASSERT_EQ(code, 0);

  nlohmann::json first_page =
      testing::ParseJson(RunCommand(ctl("delayed list later -n 3 --json"), &code));
  ASSERT_EQ(code, 0);
  EXPECT_EQ(first_page["more"], true) << first_page;
  ASSERT_EQ(first_page["messages"].size(), 3u);
  for (const auto& m : first_page["messages"]) EXPECT_NE(m["message_id"], id) << "2099 comes last";
  EXPECT_TRUE(first_page["next_after"].is_string());
  std::string table = RunCommand(ctl("delayed list later -n 3"), &code);
  ASSERT_EQ(code, 0);
  size_t more = table.find("more: ");
  ASSERT_NE(more, std::string::npos) << table;
  // The hint's command gives the next page.
  std::string next = table.substr(more + 6);
  next = next.substr(next.find("delayed list"));
  next.pop_back();  // newline
  nlohmann::json page2 = testing::ParseJson(RunCommand(ctl(next + " --json"), &code));
  ASSERT_EQ(code, 0) << next;
  ASSERT_EQ(page2["messages"].size(), 1u) << page2;
  EXPECT_EQ(page2["messages"][0]["message_id"], id);
  EXPECT_EQ(page2["messages"][0]["deliver_at_ms"], 4070908800000) << "2099-01-01T00:00:00Z";
  EXPECT_EQ(page2["more"], false);
  EXPECT_TRUE(page2["next_after"].is_null());
  std::string cancelled = RunCommand(ctl("delayed cancel later " + id), &code);
  EXPECT_EQ(code, 0) << cancelled;
  RunCommand(ctl("delayed cancel later " + id + " 2>/dev/null"), &code);
  EXPECT_EQ(code, 1) << "no longer waiting";
  nlohmann::json queues = testing::ParseJson(RunCommand(ctl("queues --json"), &code));
  EXPECT_EQ(queues[0]["delayed"], 3) << queues;
  RunCommand(ctl("delayed cancel missing " + id + " 2>/dev/null"), &code);
  EXPECT_EQ(code, 1);
  RunCommand(ctl("delayed cancel later not-hex 2>/dev/null"), &code);
  EXPECT_EQ(code, 2);
  RunCommand(ctl("publish '' later x --delay 5 --deliver-at 5 2>/dev/null"), &code);
  EXPECT_EQ(code, 2) << "both timings: a usage error";
}

}  // namespace
}  // namespace wharf
