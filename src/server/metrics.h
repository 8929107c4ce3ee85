// server/metrics.h
//
// The Prometheus text exposition of wharfd's figures (docs/operations.md lists every metric):
// names prefixed `wharf_`, per-queue series labelled queue="NAME", latencies in seconds.
// MetricsServer (server/metrics_server.h) serves it on /metrics.
//
// Thread safety: a pure function of its arguments.
#pragma once

#include <cstdint>
#include <string>

#include "broker/broker.h"
#include "store/rocksdb_store.h"

namespace wharf::server {

// `store` may be null (no store figures). `now_ms`: Unix ms, for message ages.
std::string RenderMetrics(const broker::BrokerMetrics& broker, const store::StoreCounters* store,
                          int64_t now_ms);

}  // namespace wharf::server
