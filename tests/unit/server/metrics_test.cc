// The Prometheus text wharfd serves on /metrics (server/metrics.h): names, labels, types,
// histogram buckets, and the per-queue series an operator alerts on.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "server/process_stats.h"
#include "wharf/version.h"

namespace wharf::server {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.starts_with(line + "\n");
}

broker::BrokerMetrics Sample() {
  broker::BrokerMetrics m;
  broker::QueueMetrics orders;
  orders.info.name = "orders";
  orders.info.ready = 7;
  orders.info.in_flight = 2;
  orders.info.delayed = 3;
  orders.info.consumers = 1;
  orders.info.published_total = 100;
  orders.info.delivered_total = 40;
  orders.info.acked_total = 30;
  orders.nacked_total = 5;
  orders.redelivered_total = 4;
  orders.dead_lettered_total = 2;
  orders.expired_total = 1;
  orders.duplicates_total = 6;
  orders.info.head_published_at_ms = 1'000'000 - 2'500;  // 2.5 s old
  orders.info.dead_letter_target = "orders.dlq";
  orders.info.purge_reclaiming = 9'000;
  orders.info.arguments["x-message-groups"] = true;
  orders.info.groups = 12;
  orders.info.groups_held = 4;
  broker::QueueMetrics dlq;
  dlq.info.name = "orders.dlq";
  dlq.info.ready = 2;
  dlq.dead_letter_queue = true;
  m.queues = {orders, dlq};
  m.connections = 3;
  m.consumers = 1;
  m.confirm_ms.Observe(0.3);
  m.confirm_ms.Observe(3);
  m.confirm_ms.Observe(20'000);  // beyond the last bucket
  return m;
}

TEST(Metrics, QueueSeriesAreLabelledAndTyped) {
  std::string text = RenderMetrics(Sample(), nullptr, 1'000'000);
  EXPECT_TRUE(Has(text, "wharf_connections 3")) << text;
  EXPECT_TRUE(Has(text, "wharf_consumers 1"));
  EXPECT_TRUE(Has(text, "# TYPE wharf_queue_ready gauge"));
  EXPECT_TRUE(Has(text, "wharf_queue_ready{vhost=\"/\",queue=\"orders\"} 7"));
  EXPECT_TRUE(Has(text, "wharf_queue_ready{vhost=\"/\",queue=\"orders.dlq\"} 2"));
  EXPECT_TRUE(Has(text, "wharf_queue_in_flight{vhost=\"/\",queue=\"orders\"} 2"));
  EXPECT_TRUE(Has(text, "wharf_queue_delayed{vhost=\"/\",queue=\"orders\"} 3"));
  EXPECT_TRUE(Has(text, "wharf_queue_oldest_ready_age_seconds{vhost=\"/\",queue=\"orders\"} 2.5"));
  EXPECT_EQ(text.find("wharf_queue_oldest_ready_age_seconds{vhost=\"/\",queue=\"orders.dlq\"}"),
            std::string::npos)
      << "no head in RAM: no sample rather than a wrong one";
  EXPECT_TRUE(Has(text, "wharf_dead_letter_queue_ready{vhost=\"/\",queue=\"orders.dlq\"} 2"));
  EXPECT_TRUE(Has(text, "wharf_queue_purge_reclaiming{vhost=\"/\",queue=\"orders\"} 9000"));
  EXPECT_EQ(text.find("wharf_queue_purge_reclaiming{vhost=\"/\",queue=\"orders.dlq\"}"),
            std::string::npos);
  EXPECT_TRUE(Has(text, "wharf_queue_groups{vhost=\"/\",queue=\"orders\"} 12"));
  EXPECT_TRUE(Has(text, "wharf_queue_groups_held{vhost=\"/\",queue=\"orders\"} 4"));
  EXPECT_EQ(text.find("wharf_queue_groups{vhost=\"/\",queue=\"orders.dlq\"}"), std::string::npos)
      << "a queue without groups has no such series";
  EXPECT_EQ(text.find("wharf_dead_letter_queue_ready{vhost=\"/\",queue=\"orders\"}"),
            std::string::npos);
  EXPECT_TRUE(Has(text, "# TYPE wharf_queue_acked_total counter"));
  EXPECT_TRUE(Has(text, "wharf_queue_published_total{vhost=\"/\",queue=\"orders\"} 100"));
  EXPECT_TRUE(Has(text, "wharf_queue_delivered_total{vhost=\"/\",queue=\"orders\"} 40"));
  EXPECT_TRUE(Has(text, "wharf_queue_acked_total{vhost=\"/\",queue=\"orders\"} 30"));
  EXPECT_TRUE(Has(text, "wharf_queue_nacked_total{vhost=\"/\",queue=\"orders\"} 5"));
  EXPECT_TRUE(Has(text, "wharf_queue_redelivered_total{vhost=\"/\",queue=\"orders\"} 4"));
  EXPECT_TRUE(Has(text, "wharf_queue_dead_lettered_total{vhost=\"/\",queue=\"orders\"} 2"));
  EXPECT_TRUE(Has(text, "wharf_queue_expired_total{vhost=\"/\",queue=\"orders\"} 1"));
  EXPECT_TRUE(Has(text, "wharf_queue_duplicates_total{vhost=\"/\",queue=\"orders\"} 6"));
  EXPECT_EQ(text.find("wharf_store_sync"), std::string::npos) << "no store given";
  EXPECT_TRUE(text.ends_with("\n"));
}

TEST(Metrics, HistogramsAreCumulativeInSeconds) {
  std::string text = RenderMetrics(Sample(), nullptr, 1'000'000);
  EXPECT_TRUE(Has(text, "# TYPE wharf_confirm_latency_seconds histogram")) << text;
  EXPECT_TRUE(Has(text, "wharf_confirm_latency_seconds_bucket{le=\"0.0001\"} 0"));
  EXPECT_TRUE(Has(text, "wharf_confirm_latency_seconds_bucket{le=\"0.0005\"} 1"));
  EXPECT_TRUE(Has(text, "wharf_confirm_latency_seconds_bucket{le=\"0.005\"} 2"));
  EXPECT_TRUE(Has(text, "wharf_confirm_latency_seconds_bucket{le=\"10\"} 2"));
  EXPECT_TRUE(Has(text, "wharf_confirm_latency_seconds_bucket{le=\"+Inf\"} 3"));
  EXPECT_TRUE(Has(text, "wharf_confirm_latency_seconds_count 3"));
  EXPECT_TRUE(Has(text, "wharf_confirm_latency_seconds_sum 20.0033"));
}

TEST(Metrics, StoreFigures) {
  store::StoreCounters store;
  store.bytes_written = 4096;
  store.writes = 10;
  store.syncs = 4;
  store.dedup_reads = 7;
  store.dedup_runs = 2;
  store.dedup_run_lookups = 3;
  store.dedup_stream_keys = 5;
  store.dedup_streams = 6;
  store.dedup_runs_converted = 1;
  store.sync_ms.Observe(1.5);
  std::string text = RenderMetrics(Sample(), &store, 1'000'000);
  EXPECT_TRUE(Has(text, "wharf_store_bytes_written_total 4096")) << text;
  EXPECT_TRUE(Has(text, "wharf_store_writes_total 10"));
  EXPECT_TRUE(Has(text, "wharf_store_syncs_total 4"));
  EXPECT_TRUE(Has(text, "wharf_store_dedup_reads_total 7"));
  EXPECT_TRUE(Has(text, "wharf_store_dedup_runs_total 2"));
  EXPECT_TRUE(Has(text, "wharf_store_dedup_run_lookups_total 3"));
  EXPECT_TRUE(Has(text, "wharf_store_dedup_stream_keys_total 5"));
  EXPECT_TRUE(Has(text, "wharf_store_dedup_streams_total 6"));
  EXPECT_TRUE(Has(text, "wharf_store_dedup_runs_converted_total 1"));
  EXPECT_TRUE(Has(text, "wharf_store_sync_latency_seconds_bucket{le=\"0.001\"} 0"));
  EXPECT_TRUE(Has(text, "wharf_store_sync_latency_seconds_bucket{le=\"0.0025\"} 1"));
  EXPECT_TRUE(Has(text, "wharf_store_writable 1"));
}

TEST(Metrics, TotalsOverAllQueuesBesideThePerQueueSeries) {
  std::string text = RenderMetrics(Sample(), nullptr, 1'000'000);
  EXPECT_TRUE(Has(text, "wharf_queues 2")) << text;
  EXPECT_TRUE(Has(text, "wharf_messages_ready 9"));  // 7 + 2
  EXPECT_TRUE(Has(text, "wharf_messages_delayed 3"));
  EXPECT_TRUE(Has(text, "# TYPE wharf_messages_ready gauge"));
}

TEST(Metrics, BuildInfoCarriesTheVersion) {
  std::string text = RenderMetrics(Sample(), nullptr, 1'000'000);
  EXPECT_TRUE(Has(text, "wharf_build_info{version=\"" WHARF_VERSION "\"} 1")) << text;
}

TEST(Metrics, ProcessFiguresUseThePrometheusNames) {
  ProcessStats process;
  process.resident_bytes = 50 << 20;
  process.virtual_bytes = 400 << 20;
  process.open_fds = 42;
  process.max_fds = 1024;
  process.start_time_seconds = 1'700'000'000.5;
  process.cpu_seconds = 12.25;
  std::string text = RenderMetrics(Sample(), nullptr, 1'000'000, &process);
  EXPECT_TRUE(Has(text, "process_resident_memory_bytes 52428800")) << text;
  EXPECT_TRUE(Has(text, "process_virtual_memory_bytes 419430400"));
  EXPECT_TRUE(Has(text, "process_open_fds 42"));
  EXPECT_TRUE(Has(text, "process_max_fds 1024"));
  EXPECT_TRUE(Has(text, "process_start_time_seconds 1700000000.5"));
  EXPECT_TRUE(Has(text, "# TYPE process_cpu_seconds_total counter"));
  EXPECT_TRUE(Has(text, "process_cpu_seconds_total 12.25"));
  EXPECT_EQ(RenderMetrics(Sample(), nullptr, 1'000'000).find("process_"), std::string::npos)
      << "no process figures given";
}

TEST(Metrics, PartialFrameFigures) {
  FrameBudgetMetrics frames;
  frames.limit_bytes = 256u << 20;
  frames.reserved_bytes = 17u << 20;
  frames.held_bytes = 3u << 20;
  frames.waiting = 2;
  frames.timeouts_total = 5;
  std::string text = RenderMetrics(Sample(), nullptr, 1'000'000, nullptr, &frames);
  EXPECT_TRUE(Has(text, "wharf_partial_frame_bytes 3145728")) << text;
  EXPECT_TRUE(Has(text, "wharf_partial_frame_reserved_bytes 17825792"));
  EXPECT_TRUE(Has(text, "wharf_partial_frame_limit_bytes 268435456"));
  EXPECT_TRUE(Has(text, "wharf_partial_frame_waiting_connections 2"));
  EXPECT_TRUE(Has(text, "# TYPE wharf_frame_timeouts_total counter"));
  EXPECT_TRUE(Has(text, "wharf_frame_timeouts_total 5"));
}

TEST(Metrics, ThisProcessCanBeRead) {
  ProcessStats process = ReadProcessStats();
  EXPECT_GT(process.resident_bytes, 0u);
  EXPECT_GE(process.virtual_bytes, process.resident_bytes);
  EXPECT_GE(process.open_fds, 3u);  // stdin, stdout, stderr at least
  EXPECT_GE(process.max_fds, process.open_fds);
  EXPECT_GT(process.start_time_seconds, 1'600'000'000);
  EXPECT_GE(process.cpu_seconds, 0);
  EXPECT_EQ(ResidentBytes() > 0, true);
}

}  // namespace
}  // namespace wharf::server
