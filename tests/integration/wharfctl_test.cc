// wharfctl against the real wharfd: bodies are bytes and are acked only once written, JSON is
// valid and typed and round-trips, flags are checked, the connection comes from flags, the
// environment or a config file, queue arguments are typed, and bash completes commands
// (docs/operations.md, "wharfctl").
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "integration/helpers.h"

namespace wharf {
namespace {

using std::chrono::milliseconds;
using testing::CtlStdout;
using testing::ParseJson;
using testing::RunCommand;

// Every byte value, NULs among them: what a protobuf body may hold.
std::string BinaryBody() {
  std::string body = "ab";
  body += '\0';
  for (int i = 0; i < 256; ++i) body += static_cast<char>(255 - i);
  return body;
}

uint64_t Ready(Client& client, const std::string& queue) {
  auto queues = client.ListQueues(queue);
  if (!queues.ok() || queues->empty()) return UINT64_MAX;
  return (*queues)[0].ready;
}

std::string WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(Wharfctl, ConsumeWritesBinaryBodiesWholeAndAcksOnlyWhatWasWritten) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  QueueSpec q;
  q.name = "q";
  ASSERT_TRUE(client->DeclareQueue(q).ok());
  Message binary;
  binary.body = BinaryBody();
  ASSERT_TRUE(client->Publish("", "q", binary).ok());
  int code = -1;
  std::string out = CtlStdout(server, "consume q --raw", &code);
  ASSERT_EQ(code, 0);
  EXPECT_EQ(out, binary.body) << "every byte, past the NUL, nothing added";
  EXPECT_EQ(Ready(*client, "q"), 0u);

  // stdout cannot take it: not acked, still there.
  Message m;
  m.body = "keep me";
  ASSERT_TRUE(client->Publish("", "q", m).ok());
  std::string err = RunCommand(
      std::string(WHARFCTL_PATH) + " --server " + server.address() + " consume q 2>&1 >/dev/full",
      &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("not acked"), std::string::npos) << err;
  EXPECT_EQ(Ready(*client, "q"), 1u);
  // A closed stdout takes nothing, so nothing is acked. (A pipe takes bytes before its reader
  // reads them: `| head -1` may lose what it never reads; docs/operations.md says so.)
  for (const char* body : {"m2", "m3"}) {
    m.body = body;
    ASSERT_TRUE(client->Publish("", "q", m).ok());
  }
  RunCommand(std::string(WHARFCTL_PATH) + " --server " + server.address() +
                 " consume q --count 3 2>/dev/null >&-",
             &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(Ready(*client, "q"), 3u);
  CtlStdout(server, "consume q", &code);  // "keep me"
  EXPECT_EQ(code, 0);

  // Several bodies with a record separator; --raw alone would run them together.
  out = CtlStdout(server, "consume q --count 5 --separator '\\0'", &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, std::string("m2\0m3\0", 6));
  CtlStdout(server, "consume q --count 2 --raw 2>/dev/null", &code);
  EXPECT_EQ(code, 2);

  // Tables that stdout cannot take are a failure too.
  RunCommand(std::string(WHARFCTL_PATH) + " --server " + server.address() +
                 " queues >/dev/full 2>/dev/null",
             &code);
  EXPECT_EQ(code, 1);
}

// --requeue only looks: no receive is counted, so even a queue that dead-letters at the
// first failed attempt keeps the message however often it is looked at.
TEST(Wharfctl, RequeueOnlyLooksAndCountsNoReceive) {
  testing::TestServer server;
  int code = -1;
  CtlStdout(server, "declare-queue q.dlq", &code);
  CtlStdout(server, "declare-queue q --arg x-max-attempts=1 --arg x-dead-letter-queue=q.dlq",
            &code);
  ASSERT_EQ(code, 0);
  CtlStdout(server, "publish '' q look", &code);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(CtlStdout(server, "consume q --requeue", &code), "look\n");
    EXPECT_EQ(code, 0);
  }
  nlohmann::json page = ParseJson(CtlStdout(server, "peek q --json", &code));
  ASSERT_EQ(page["messages"].size(), 1u) << page;
  EXPECT_EQ(page["messages"][0]["receive_count"], 0);
  nlohmann::json looked = ParseJson(CtlStdout(server, "get q --peek --json", &code));
  EXPECT_EQ(looked["payload"], "look");
  EXPECT_EQ(CtlStdout(server, "consume q", &code), "look\n") << "still there to take";
}

TEST(Wharfctl, JsonIsValidTypedAndABinaryMessageRoundTripsThroughPeekAndPublish) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  for (const char* name : {"q", "copy"}) {
    QueueSpec q;
    q.name = name;
    ASSERT_TRUE(client->DeclareQueue(q).ok());
  }
  Message m;
  m.body = BinaryBody();
  m.persistent = true;
  m.headers["n"] = int64_t{3};
  m.headers["tenant"] = std::string("acme");
  m.headers["ratio"] = 0.25;
  m.headers["raw"] = Bytes{std::string("\x00\xff", 2)};
  m.properties.content_type = "application/x-protobuf";
  m.properties.correlation_id = "c-1";
  m.properties.priority = 4;
  ASSERT_TRUE(client->Publish("", "q", m).ok());
  Message text;
  text.body = "plain";
  ASSERT_TRUE(client->Publish("", "q", text).ok());

  int code = -1;
  std::string out = CtlStdout(server, "peek q --json", &code);
  ASSERT_EQ(code, 0);
  nlohmann::json page = ParseJson(out);
  ASSERT_EQ(page["messages"].size(), 2u) << out;
  EXPECT_EQ(page["more"], false);
  EXPECT_TRUE(page["next_after"].is_null());
  const nlohmann::json& first = page["messages"][0];
  EXPECT_EQ(first["payload_encoding"], "base64");
  EXPECT_EQ(first["payload_bytes"], m.body.size());
  EXPECT_EQ(first["properties"]["headers"]["n"], 3) << "a number, not \"3\"";
  EXPECT_EQ(first["properties"]["headers"]["tenant"], "acme") << "not \"\\\"acme\\\"\"";
  EXPECT_EQ(first["properties"]["headers"]["ratio"], 0.25);
  EXPECT_EQ(first["properties"]["content_type"], "application/x-protobuf");
  EXPECT_TRUE(first["properties"]["reply_to"].is_null());
  EXPECT_TRUE(first["last_error"].is_null());
  EXPECT_EQ(page["messages"][1]["payload_encoding"], "string");
  EXPECT_EQ(page["messages"][1]["payload"], "plain");

  // Re-published from the peek: the same bytes, headers and properties arrive.
  RunCommand(std::string(WHARFCTL_PATH) + " --server " + server.address() + " peek q --json | " +
                 WHARFCTL_PATH + " --server " + server.address() + " publish '' copy --message -",
             &code);
  ASSERT_EQ(code, 0);
  auto got = client->Receive("copy", 2, milliseconds(2'000));
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].message.body, m.body);
  EXPECT_EQ((*got)[0].message.headers, m.headers);
  EXPECT_EQ((*got)[0].message.properties, m.properties);
  EXPECT_TRUE((*got)[0].message.persistent);
  EXPECT_EQ((*got)[1].message.body, "plain");

  // consume --json: one valid object a line, the same shape.
  out = CtlStdout(server, "consume q --count 2 --json", &code);
  ASSERT_EQ(code, 0);
  size_t newline = out.find('\n');
  ASSERT_NE(newline, std::string::npos);
  nlohmann::json consumed = ParseJson(out.substr(0, newline));
  EXPECT_EQ(consumed["queue"], "q");
  EXPECT_EQ(consumed["redelivered"], false);
  EXPECT_EQ(consumed["receive_count"], 1);
  EXPECT_EQ(consumed["payload_encoding"], "base64");
  EXPECT_EQ(ParseJson(out.substr(newline + 1))["payload"], "plain");

  // Every listing parses.
  for (const char* listing :
       {"queues --json", "exchanges --json", "bindings --json", "consumers --json",
        "connections --json", "users --json", "redrive status --json", "queue show q --json"}) {
    out = CtlStdout(server, listing, &code);
    EXPECT_EQ(code, 0) << listing;
    EXPECT_FALSE(ParseJson(out).is_null()) << listing;
  }
}

TEST(Wharfctl, FlagsAreCheckedNotIgnored) {
  testing::TestServer server;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  QueueSpec q;
  q.name = "q";
  ASSERT_TRUE(client->DeclareQueue(q).ok());
  int code = -1;
  std::string err = testing::Ctl(server, "publish '' q x --persistant", &code);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("--persistant"), std::string::npos) << err;
  EXPECT_EQ(Ready(*client, "q"), 0u) << "a misspelt flag publishes nothing";
  CtlStdout(server, "publish '' q x --count=2", &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(Ready(*client, "q"), 2u) << "--opt=value";
  RunCommand(std::string(WHARFCTL_PATH) + " queues --server " + server.address() + " >/dev/null",
             &code);
  EXPECT_EQ(code, 0) << "a global option after the command";
  for (const char* bad :
       {"publish '' q x --delay -5", "publish '' q x --count 0", "publish '' q x --ttl 1x",
        "consume q --wait -1", "peek q -n 5000", "declare-exchange e fanoutt", "redrive q --rate 0",
        "publish '' q x --delay 5 --deliver-at 5", "nope"}) {
    testing::Ctl(server, bad, &code);
    EXPECT_EQ(code, 2) << bad;
  }
  EXPECT_EQ(Ready(*client, "q"), 2u);
  // Every value is checked before wharfctl connects: with no broker, still a usage error.
  for (const char* bad :
       {"consume q --separator '\\q'", "publish '' q x --deliver-at 2027-02-30T00:00:00Z",
        "publish '' q x --header k:int=abc", "declare-queue q --arguments '[1]'",
        "delayed cancel q not-hex", "requeue q xyz", "redrive", "publish", "consume q --wait nan",
        "consume q --raw --count 2"}) {
    RunCommand(std::string(WHARFCTL_PATH) + " --server 127.0.0.1:1 " + bad + " 2>/dev/null", &code);
    EXPECT_EQ(code, 2) << bad;
  }
  err = RunCommand(std::string(WHARFCTL_PATH) + " --server 127.0.0.1:70000 queues 2>&1", &code);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("70000"), std::string::npos) << err;

  // Help and version need no broker.
  const std::string offline = std::string(WHARFCTL_PATH) + " --server 127.0.0.1:1 ";
  std::string out = RunCommand(offline + "--version", &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "wharfctl " WHARF_VERSION_FOR_TESTS "\n");
  for (const char* help : {"--help", "help", "help publish", "publish --help",
                           "help redrive status", "redrive status --help"}) {
    out = RunCommand(offline + help, &code);
    EXPECT_EQ(code, 0) << help;
    EXPECT_NE(out.find("Usage: wharfctl"), std::string::npos) << help << ": " << out;
  }
  out = RunCommand(offline + "help publish", &code);
  EXPECT_NE(out.find("--persistent"), std::string::npos) << out;
  EXPECT_EQ(out.find("declare-queue"), std::string::npos) << "publish's help only: " << out;
}

TEST(Wharfctl, ConnectionFromTheEnvironmentOrAConfigFile) {
  testing::TestServer server;
  int code = -1;
  CtlStdout(server, "add-user ops --admin --new-password pw-ops", &code);
  ASSERT_EQ(code, 0);
  const std::string ctl = std::string(WHARFCTL_PATH);
  auto user_of_own_connection = [&](const std::string& out) -> std::string {
    nlohmann::json connections = ParseJson(out);
    if (!connections.is_array() || connections.empty()) return "";
    return connections.back()["user"].get<std::string>();
  };
  std::string out =
      RunCommand("WHARF_SERVER=" + server.address() + " WHARF_USER=ops WHARF_PASSWORD=pw-ops " +
                     ctl + " connections --json",
                 &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(user_of_own_connection(out), "ops");
  RunCommand("WHARF_SERVER=" + server.address() + " WHARF_USER=ops WHARF_PASSWORD=wrong " + ctl +
                 " queues 2>/dev/null",
             &code);
  EXPECT_EQ(code, 1) << "AUTHENTICATION_FAILED";

  const std::string dir = testing::MakeTempDir("wharfctl-config");
  const std::string config = WriteFile(dir + "/wharfctl.toml", "server = \"" + server.address() +
                                                                   "\"\nuser = \"ops\"\n"
                                                                   "password = \"pw-ops\"\n");
  ::chmod(config.c_str(), 0600);
  out = RunCommand(ctl + " --config " + config + " connections --json", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(user_of_own_connection(out), "ops");
  out = RunCommand("WHARFCTL_CONFIG=" + config + " " + ctl + " connections --json", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(user_of_own_connection(out), "ops");
  // A flag wins over the file.
  RunCommand(ctl + " --config " + config + " --password wrong queues 2>/dev/null", &code);
  EXPECT_EQ(code, 1);
  // A password others can read is warned about.
  ::chmod(config.c_str(), 0644);
  std::string err = RunCommand(ctl + " --config " + config + " queues 2>&1 >/dev/null", &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(err.find("chmod 600"), std::string::npos) << err;
  RunCommand(ctl + " --config " + dir + "/missing.toml queues 2>/dev/null", &code);
  EXPECT_EQ(code, 2) << "a config file named but missing";
  // The environment wins over the file.
  const std::string elsewhere = WriteFile(dir + "/elsewhere.toml", "server = \"127.0.0.1:1\"\n");
  out = RunCommand(
      "WHARF_SERVER=" + server.address() + " " + ctl + " --config " + elsewhere + " queues --json",
      &code);
  EXPECT_EQ(code, 0) << out;
  WriteFile(dir + "/typo.toml", "sever = \"127.0.0.1:1\"\n");
  std::string typo = RunCommand(ctl + " --config " + dir + "/typo.toml queues 2>&1", &code);
  EXPECT_EQ(code, 2);
  EXPECT_NE(typo.find("sever"), std::string::npos) << typo;
  std::filesystem::remove_all(dir);
}

TEST(Wharfctl, DeclareQueueTakesTypedArguments) {
  testing::TestServer server;
  int code = -1;
  CtlStdout(server, "declare-queue orders.dlq", &code);
  ASSERT_EQ(code, 0);
  std::string out = CtlStdout(server,
                              "declare-queue orders --arg x-max-length=2 --arg "
                              "x-dead-letter-queue=orders.dlq --arg x-lease-ms=30000 --json",
                              &code);
  ASSERT_EQ(code, 0) << out;
  nlohmann::json queue = ParseJson(out);
  EXPECT_EQ(queue["arguments"]["x-max-length"], 2);
  EXPECT_EQ(queue["arguments"]["x-dead-letter-queue"], "orders.dlq");
  EXPECT_EQ(queue["dead_letter_target"], "orders.dlq");
  // The limit works: the oldest of three goes to the dead-letter queue.
  CtlStdout(server, "publish '' orders x --count 3", &code);
  nlohmann::json queues = ParseJson(CtlStdout(server, "queues --json", &code));
  for (const auto& q : queues) {
    if (q["name"] == "orders") {
      EXPECT_EQ(q["ready"], 2);
    } else if (q["name"] == "orders.dlq") {
      EXPECT_EQ(q["ready"], 1);
    }
  }
  std::string err = testing::Ctl(server, "declare-queue bad --arg x-max-length=abc", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("x-max-length"), std::string::npos) << err;
  CtlStdout(server, "declare-queue json --arguments '{\"x-max-length\": 5}'", &code);
  EXPECT_EQ(code, 0);
  testing::Ctl(server, "declare-queue bad --arguments '{oops'", &code);
  EXPECT_EQ(code, 2);
}

TEST(Wharfctl, BashCompletesCommandsAndOptions) {
  const std::string dir = testing::MakeTempDir("wharfctl-completion");
  int code = -1;
  RunCommand(std::string(WHARFCTL_PATH) + " completion bash > " + dir + "/wharfctl", &code);
  ASSERT_EQ(code, 0);
  auto complete = [&](const std::string& words) {
    return RunCommand("bash -c 'source " + dir + "/wharfctl; COMP_WORDS=(" + words +
                          "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _wharfctl; echo "
                          "${COMPREPLY[@]}'",
                      &code);
  };
  EXPECT_EQ(complete("wharfctl redr"), "redrive\n");
  EXPECT_EQ(complete("wharfctl redrive st"), "start status\n");
  EXPECT_EQ(complete("wharfctl publish --pers"), "--persistent\n");
  EXPECT_EQ(complete("wharfctl --serv"), "--server\n");
  EXPECT_EQ(complete("wharfctl ge"), "get\n") << "aliases too";
  EXPECT_EQ(complete("wharfctl get --pe"), "--peek\n") << "and their options";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wharf
