// The operator's HTTP listener of the real wharfd (`--metrics-listen`): /metrics in Prometheus
// text format with per-queue series, and /healthz (docs/operations.md).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "integration/helpers.h"
#include "wharf/version.h"

namespace wharf {
namespace {

using std::chrono::milliseconds;

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(Metrics, ScrapeShowsQueuesCountersAndLatencies) {
  testing::TestServer server({"--metrics-listen", "127.0.0.1:0"});
  ASSERT_NE(server.metrics_port(), 0);
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  testing::DeclareWithDeadLetterQueue(*client, "orders", "orders.dlq");
  for (int i = 0; i < 3; ++i) {
    Message m;
    m.body = "m" + std::to_string(i);
    m.persistent = true;
    ASSERT_TRUE(client->Publish("", "orders", m).ok());
  }
  auto got = client->Receive("orders", 1, milliseconds(2'000));
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  ASSERT_TRUE(client->RejectSync((*got)[0].delivery_tag, /*requeue=*/false).ok());

  httplib::Client http("127.0.0.1", server.metrics_port());
  http.set_read_timeout(5, 0);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/plain; version=0.0.4"),
            std::string::npos);
  const std::string& text = res->body;
  EXPECT_TRUE(Has(text, "wharf_connections 1")) << text;
  EXPECT_TRUE(Has(text, "wharf_queue_ready{vhost=\"/\",queue=\"orders\"} 2")) << text;
  EXPECT_TRUE(Has(text, "wharf_dead_letter_queue_ready{vhost=\"/\",queue=\"orders.dlq\"} 1"))
      << text;
  EXPECT_TRUE(Has(text, "wharf_queue_published_total{vhost=\"/\",queue=\"orders\"} 3")) << text;
  EXPECT_TRUE(Has(text, "wharf_queue_delivered_total{vhost=\"/\",queue=\"orders\"} 1")) << text;
  EXPECT_TRUE(Has(text, "wharf_queue_nacked_total{vhost=\"/\",queue=\"orders\"} 1")) << text;
  EXPECT_TRUE(Has(text, "wharf_queue_dead_lettered_total{vhost=\"/\",queue=\"orders\"} 1")) << text;
  EXPECT_TRUE(Has(text, "wharf_confirm_latency_seconds_count 3")) << text;
  EXPECT_NE(text.find("wharf_store_sync_latency_seconds_count "), std::string::npos) << text;
  EXPECT_EQ(text.find("wharf_store_sync_latency_seconds_count 0\n"), std::string::npos)
      << "the confirms were synced";
  EXPECT_NE(text.find("wharf_queue_oldest_ready_age_seconds{vhost=\"/\",queue=\"orders\"} "),
            std::string::npos)
      << text;
  // Totals beside the per-queue series, the version, and the standard process figures.
  EXPECT_TRUE(Has(text, "wharf_messages_ready 3")) << text;  // 2 in orders, 1 in orders.dlq
  EXPECT_TRUE(Has(text, "wharf_build_info{version=\"" WHARF_VERSION "\"} 1")) << text;
  for (const char* name :
       {"process_resident_memory_bytes ", "process_virtual_memory_bytes ", "process_open_fds ",
        "process_max_fds ", "process_start_time_seconds ", "process_cpu_seconds_total "}) {
    size_t at = text.find(std::string("\n") + name);
    ASSERT_NE(at, std::string::npos) << name << text;
    double value = std::stod(text.substr(at + 1 + std::strlen(name)));
    if (std::string(name) != "process_cpu_seconds_total ") {
      EXPECT_GT(value, 0) << name;
    }
  }

  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  auto missing = http.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(server.Stop(), 0) << "stops cleanly with the listener on";
}

TEST(Metrics, ABadMetricsAddressIsRefusedAtStart) {
  int code = -1;
  std::string out =
      testing::RunCommand(std::string(WHARFD_PATH_FOR_TESTS) +
                              " --metrics-listen nonsense --data-dir /nonexistent 2>&1",
                          &code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("must look like HOST:PORT"), std::string::npos) << out;
}

TEST(Metrics, Issue15HealthzAnswersWhileIdleAndSlowClientsAreConnected) {
  testing::TestServer server({"--metrics-listen", "127.0.0.1:0"});
  ASSERT_NE(server.metrics_port(), 0);
  std::vector<int> fds;
  // 16 connections that say nothing, and 2 that start a request and stall (fewer than the
  // 4 workers: each holds one for up to 2 s).
  for (int i = 0; i < 16; ++i) fds.push_back(testing::OpenRawConnection(server.metrics_port()));
  for (int i = 0; i < 2; ++i)
    fds.push_back(testing::OpenRawConnection(server.metrics_port(), "GET /healthz HT"));
  for (int round = 0; round < 3; ++round) {
    httplib::Client http("127.0.0.1", server.metrics_port());
    http.set_connection_timeout(2, 0);
    http.set_read_timeout(2, 0);
    auto start = std::chrono::steady_clock::now();
    auto res = http.Get("/healthz");
    auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(res) << "round " << round << ": " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_LT(took, std::chrono::seconds(2)) << "round " << round;
    auto metrics = http.Get("/metrics");
    ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
    EXPECT_EQ(metrics->status, 200);
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

}  // namespace
}  // namespace wharf
