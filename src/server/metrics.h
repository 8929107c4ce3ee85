// server/metrics.h
//
// The Prometheus text exposition of wharfd's figures (docs/operations.md lists every metric):
// names prefixed `wharf_`, per-queue series labelled queue="NAME" beside their totals over all
// queues, latencies in seconds; the standard process_* figures; wharf_build_info.
// MetricsServer (server/metrics_server.h) serves it on /metrics.
//
// Thread safety: a pure function of its arguments.
#pragma once

#include <cstdint>
#include <string>

#include "broker/broker.h"
#include "server/frame_budget.h"
#include "server/process_stats.h"
#include "store/rocksdb_store.h"

namespace wharf::server {

// `store`, `process` and `frames` may be null (no store, process_* or partial frame figures).
// `now_ms`: Unix ms, for message ages.
std::string RenderMetrics(const broker::BrokerMetrics& broker, const store::StoreCounters* store,
                          int64_t now_ms, const ProcessStats* process = nullptr,
                          const FrameBudgetMetrics* frames = nullptr);

}  // namespace wharf::server
