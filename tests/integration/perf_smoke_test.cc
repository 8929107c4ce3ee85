// Short runs of wharf-perf's drivers (native, and AMQP against wharfd's AMQP port) against a
// real wharfd, so the load generator keeps working as the broker changes. Speed is not asserted
// here (docs/benchmarks.md has figures).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "integration/helpers.h"
#include "support/test_server.h"

namespace wharf {
namespace {

// Parses the RESULT line: key=value pairs.
std::map<std::string, std::string> ParseResult(const std::string& output) {
  std::map<std::string, std::string> out;
  size_t at = output.rfind("RESULT ");
  if (at == std::string::npos) return out;
  std::istringstream line(output.substr(at + 7, output.find('\n', at) - at - 7));
  std::string pair;
  while (line >> pair) {
    size_t eq = pair.find('=');
    if (eq != std::string::npos) out[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  return out;
}

// Runs wharf-perf with `args`; returns its exit code and stdout+stderr.
int RunPerf(const std::vector<std::string>& args, std::string* output,
            const std::function<void()>& while_running = nullptr) {
  std::string dir = testing::MakeTempDir("wharf-perf");
  std::string path = dir + "/out.txt";
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::freopen(path.c_str(), "w", stdout);
    (void)f;
    dup2(fileno(stdout), fileno(stderr));
    std::vector<std::string> all = {WHARF_PERF_PATH};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (while_running) while_running();
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  *output = ss.str();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A run of `count` messages ended well: all published, confirmed and received, no errors,
// confirm latencies measured, and --delete removed its queues.
void ExpectEverythingConfirmedAndConsumed(const testing::TestServer& server, int code,
                                          const std::string& output, const std::string& count) {
  EXPECT_EQ(code, 0) << output;
  auto result = ParseResult(output);
  EXPECT_EQ(result["published"], count) << output;
  EXPECT_EQ(result["confirmed"], count) << output;
  EXPECT_EQ(result["received"], count) << output;
  EXPECT_EQ(result["errors"], "0") << output;
  EXPECT_NE(result["conf_p99_us"], "0") << output;
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  auto queues = client->ListQueues("perf");
  ASSERT_TRUE(queues.ok());
  EXPECT_TRUE(queues->empty());
}

TEST(PerfSmoke, NativeRunPublishesConfirmsAndConsumesEverything) {
  testing::TestServer server;
  std::string output;
  int code =
      RunPerf({"--server", server.address(), "--producers", "2", "--consumers", "2", "--queues",
               "2", "--count", "4000", "--confirm", "100", "--size", "64", "--delete"},
              &output);
  ExpectEverythingConfirmedAndConsumed(server, code, output, "4000");
}

TEST(PerfSmoke, AmqpDriverAgainstWharfsAmqpPortConfirmsAndConsumesEverything) {
  // The same rabbitmq-c driver that measures RabbitMQ (bench/compare-rabbitmq.sh).
  testing::TestServer server;
  std::string output;
  int code = RunPerf({"--driver", "amqp", "--uri",
                      "amqp://guest:guest@127.0.0.1:" + std::to_string(server.amqp_port()) + "/",
                      "--producers", "2", "--consumers", "2", "--queues", "2", "--count", "4000",
                      "--confirm", "100", "--persistent", "--size", "64", "--delete"},
                     &output);
  ExpectEverythingConfirmedAndConsumed(server, code, output, "4000");
}

TEST(PerfSmoke, AmqpDriverWithBatchedWritesConfirmsAndConsumesEverything) {
  // --amqp-writes batched encodes publishes and acks itself (rabbitmq-c's encoders, its own
  // framing), many per send(): a small body, and one split over three body frames (frame_max
  // 131072).
  testing::TestServer server;
  std::string uri = "amqp://guest:guest@127.0.0.1:" + std::to_string(server.amqp_port()) + "/";
  for (auto [size, count] : {std::pair<std::string, std::string>{"64", "4000"}, {"300000", "60"}}) {
    SCOPED_TRACE("size " + size);
    std::string output;
    int code =
        RunPerf({"--driver",    "amqp",    "--amqp-writes", "batched", "--uri",        uri,
                 "--producers", "2",       "--consumers",   "2",       "--queues",     "2",
                 "--count",     count,     "--confirm",     "100",     "--persistent", "--size",
                 size,          "--delete"},
                &output);
    ExpectEverythingConfirmedAndConsumed(server, code, output, count);
  }
}

TEST(PerfSmoke, TopicExchangeAndJsonOutput) {
  testing::TestServer server;
  std::string output;
  int code = RunPerf({"--server", server.address(), "--exchange-type", "topic", "--queues", "3",
                      "--consumers", "3", "--count", "900", "--ack-every", "10", "--json"},
                     &output);
  EXPECT_EQ(code, 0) << output;
  std::string last = output.substr(output.rfind('{'));
  nlohmann::json summary = testing::ParseJson(last);
  EXPECT_EQ(summary["received"], 900) << output;
  EXPECT_EQ(summary["errors"], 0) << output;
  EXPECT_TRUE(summary["first_error"].is_null()) << output;
  EXPECT_TRUE(summary["pub_rate"].is_number_integer()) << output;
}

TEST(PerfSmoke, BrokerGoingAwayStopsTheRunWithASummary) {
  testing::TestServer server;
  std::string output;
  int code = RunPerf(
      {"--server", server.address(), "--duration", "30", "--confirm", "50", "--rate", "2000"},
      &output, [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        server.Kill();
      });
  EXPECT_EQ(code, 1) << output;
  auto result = ParseResult(output);
  ASSERT_FALSE(result.empty()) << output;
  EXPECT_NE(result["confirmed"], "0") << output;
  EXPECT_LT(std::stod(result["seconds"]), 20.0) << output;
}

TEST(PerfSmoke, UnboundedRunIsRefused) {
  std::string output;
  EXPECT_EQ(RunPerf({"--server", "127.0.0.1:1"}, &output), 2) << output;
  EXPECT_EQ(
      RunPerf({"--server", "127.0.0.1:1", "--count", "10", "--prefetch", "10", "--ack-every", "20"},
              &output),
      2)
      << output;
}

}  // namespace
}  // namespace wharf
