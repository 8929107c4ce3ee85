// server/overview_history.h
//
// OverviewHistory keeps the broker's totals per vhost (message rates, ready and unacknowledged
// messages) sampled every kInterval, the last kKeep samples (10 minutes), so that the web
// console's overview charts the last minutes as soon as it opens (GET /api/overview/history,
// docs/http-api.md). The broker keeps each queue's current rates, not their history; this is
// the one history, of the totals only. A caller is shown the sum over the vhosts it sees.
//
// Threads: Add from the broker thread (the Server's sampling timer), Samples from the HTTP
// workers.
// Thread safety: thread-safe (one mutex, a leaf).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "wharf/types.h"

namespace wharf::server {

class OverviewHistory {
 public:
  static constexpr std::chrono::seconds kInterval{5};
  static constexpr size_t kKeep = 120;

  struct Totals {
    double publish_rate = 0;
    double deliver_rate = 0;
    double ack_rate = 0;
    uint64_t ready = 0;
    uint64_t unacked = 0;
  };
  struct Sample {
    int64_t at_ms = 0;  // Unix ms
    Totals totals;      // over the vhosts asked for
  };

  // Records the totals of `queues` (by vhost) at `at_ms`; the oldest sample goes past kKeep.
  void Add(const std::vector<QueueInfo>& queues, int64_t at_ms);
  // Every sample kept, oldest first, summed over the vhosts `sees` accepts.
  std::vector<Sample> Samples(const std::function<bool(const std::string&)>& sees) const;

 private:
  struct Taken {
    int64_t at_ms = 0;
    std::map<std::string, Totals> vhosts;
  };

  mutable std::mutex mu_;
  std::deque<Taken> samples_;  // GUARDED_BY(mu_), oldest first
};

}  // namespace wharf::server
