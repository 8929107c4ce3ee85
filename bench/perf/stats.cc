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

// Bodies are incompressible and differ from message to message in every byte: RocksDB
// compresses what it stores (per 4 KiB block, so identical bodies would compress too), and a
// body of one repeated letter would flatter Wharf's disk figures against RabbitMQ, which does
// not compress. StampBody refills the body after the send time with xorshift output.
std::string MakeBody(size_t size) { return std::string(std::max<size_t>(size, 8), '\0'); }

void StampBody(std::string* body) {
  uint64_t now = NowNanos();
  std::memcpy(body->data(), &now, sizeof now);
  uint64_t x = now | 1;
  size_t i = sizeof now;
  for (; i + 8 <= body->size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(body->data() + i, &x, 8);
  }
  for (; i < body->size(); ++i) (*body)[i] = static_cast<char>(x >> (8 * (i % 8)));
}

uint64_t BodyAgeMicros(const char* data, size_t size) {
  if (size < 8) return 0;
  uint64_t sent;
  std::memcpy(&sent, data, sizeof sent);
  uint64_t now = NowNanos();
  return now > sent ? (now - sent) / 1000 : 0;
}

}  // namespace wharf::perf
