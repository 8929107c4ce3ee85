#include <algorithm>
#include <cstring>

#include "perf/perf.h"

namespace wharf::perf {

uint64_t Latencies::Percentile(double p) {
  std::lock_guard lock(mu_);
  if (samples_.empty()) return 0;
  if (!sorted_) {
    std::sort(samples_.begin(), samples_.end());
    sorted_ = true;
  }
  size_t index = static_cast<size_t>(p / 100.0 * static_cast<double>(samples_.size() - 1) + 0.5);
  return samples_[std::min(index, samples_.size() - 1)];
}

uint64_t Latencies::Max() { return Percentile(100); }

std::string MakeBody(size_t size) { return std::string(std::max<size_t>(size, 8), 'w'); }

void StampBody(std::string* body) {
  uint64_t now = NowNanos();
  std::memcpy(body->data(), &now, sizeof now);
}

uint64_t BodyAgeMicros(const char* data, size_t size) {
  if (size < 8) return 0;
  uint64_t sent;
  std::memcpy(&sent, data, sizeof sent);
  uint64_t now = NowNanos();
  return now > sent ? (now - sent) / 1000 : 0;
}

}  // namespace wharf::perf
