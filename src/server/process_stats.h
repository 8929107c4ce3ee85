// server/process_stats.h
//
// What wharfd's own process uses, read from /proc/self: memory (flow control's watermark, the
// metrics), file descriptors, CPU time and start time. These are the figures Prometheus'
// standard process collector exports as process_* (server/metrics.h).
//
// Thread safety: pure reads of /proc; any thread.
#pragma once

#include <cstdint>

namespace wharf::server {

struct ProcessStats {
  uint64_t resident_bytes = 0;
  uint64_t virtual_bytes = 0;
  uint64_t open_fds = 0;
  uint64_t max_fds = 0;           // the soft RLIMIT_NOFILE
  double start_time_seconds = 0;  // since the Unix epoch
  double cpu_seconds = 0;         // user + system
};

// Resident memory only (/proc/self/statm): cheap enough for every flow-control check.
uint64_t ResidentBytes();

// Everything above; a figure that cannot be read stays 0.
ProcessStats ReadProcessStats();

}  // namespace wharf::server
