// common/histogram.h
//
// Histogram: counts of observed values (milliseconds) in fixed buckets, plus their count and
// sum, as Prometheus histograms are exported (server/metrics.h). Buckets are upper bounds,
// "le" in Prometheus' terms; a value above the last bound counts in the implicit +Inf bucket.
//
// Thread safety: none; each owner observes on its own thread (or under its own lock) and hands
// out copies.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace wharf {

class Histogram {
 public:
  // From 0.1 ms to 10 s: fsync latencies on SSDs to stalled disks.
  static std::vector<double> LatencyBoundsMs() {
    return {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1'000, 2'500, 10'000};
  }

  explicit Histogram(std::vector<double> bounds = LatencyBoundsMs())
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

  void Observe(double value) {
    auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
    ++counts_[static_cast<size_t>(it - bounds_.begin())];
    ++count_;
    sum_ += value;
  }

  const std::vector<double>& bounds() const { return bounds_; }
  // Per bucket (not cumulative); the last one is +Inf.
  const std::vector<uint64_t>& counts() const { return counts_; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace wharf
