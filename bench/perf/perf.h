// bench/perf/perf.h
//
// wharf-perf: a load generator in the manner of RabbitMQ's PerfTest and `nats bench`. One
// binary, two drivers: `native` (the Wharf client) and `amqp` (AMQP 0-9-1 through rabbitmq-c),
// so the same scenario runs against wharfd and RabbitMQ.
//
// Thread safety: Run and Stats are shared by every producer and consumer thread; their members
// are atomics or guarded by their own mutex. A Driver creates one connection per producer or
// consumer thread and never shares one between threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "wharf/status.h"

namespace wharf::perf {

struct Options {
  std::string driver = "native";
  std::string host = "127.0.0.1";
  uint16_t port = 5680;
  std::string user = "guest";
  std::string password = "guest";
  std::string uri;  // amqp://user:pass@host:port/vhost
  std::string vhost = "/";
  std::string queue = "perf";
  int producers = 1;
  int consumers = 1;
  int queues = 1;
  size_t size = 256;
  bool persistent = false;
  uint32_t confirm = 0;  // window; 0 = no confirms
  uint32_t prefetch = 100;
  uint32_t ack_every = 1;
  std::string exchange_type;  // "" = default exchange, routed by queue name
  double rate = 0;            // msgs/s over all producers; 0 = flat out
  uint64_t count = 0;         // total messages to publish (0 = no limit)
  double duration_s = 0;      // 0 = no limit
  bool delete_queues = false;
  bool json = false;
  uint64_t delay_ms = 0;  // delayed delivery (native only): lateness is measured
  // Queues with this deduplication window (x-deduplication-window), each message with its own
  // key (Publish.deduplication_id); 0 = none. Native only, with --persistent.
  uint64_t dedup_window_ms = 0;
  bool tls = false;         // native: TLS to the broker's [tls] listen port
  std::string ca_file;      // its CA certificates (PEM)
  bool dedup_keys = false;  // keys without a window (--dedup-keys)
  // The keys in each message's x-deduplication-header instead of Publish.deduplication_id.
  bool dedup_header = false;
  // Keys in no order (like UUIDs or hashes) instead of rising sequence numbers.
  bool dedup_random = false;
  // Keys in byte order (zero-padded sequence numbers, rising like ULIDs or UUIDv7) instead of
  // bare ones, whose byte order is not their numeric order ("10" sorts before "9").
  bool dedup_ordered = false;
  // Queues with x-max-priority this high, and messages whose priorities cycle through 0..it
  // (one level after another); 0 = none.
  uint32_t max_priority = 0;
  // Queues with message groups (x-message-groups), message n of a producer in group
  // "g<n mod groups>" (x-group-id); 0 = none. Native only.
  uint64_t groups = 0;
  // Every message at this priority instead (-1: in turn, as above).
  int priority = -1;
  // The priority of a producer's message number `n`.
  uint8_t PriorityOf(uint64_t n) const {
    if (priority >= 0) return static_cast<uint8_t>(priority);
    return static_cast<uint8_t>(max_priority == 0 ? 0 : n % (uint64_t{max_priority} + 1));
  }
  // amqp driver: "each" = rabbitmq-c's amqp_basic_publish (three send() calls per message);
  // "batched" = many publishes per send() (amqp_driver.cc, PublishWriter).
  std::string amqp_writes = "each";

  std::string QueueName(int i) const {
    return queues == 1 ? queue : queue + "-" + std::to_string(i);
  }
  std::string RoutingKey(int i) const {
    return exchange_type.empty() ? QueueName(i) : "perf." + std::to_string(i);
  }
  std::string ExchangeName() const { return exchange_type.empty() ? "" : queue + "-exchange"; }
};

// Latency samples in microseconds.
class Latencies {
 public:
  void Add(uint64_t micros) {
    std::lock_guard lock(mu_);
    samples_.push_back(static_cast<uint32_t>(std::min<uint64_t>(micros, UINT32_MAX)));
  }
  // p in [0, 100]; 0 when empty. Sorts once (call after the run).
  uint64_t Percentile(double p);
  uint64_t Max();
  size_t size() {
    std::lock_guard lock(mu_);
    return samples_.size();
  }

 private:
  std::mutex mu_;
  std::vector<uint32_t> samples_;
  bool sorted_ = false;
};

struct Stats {
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> confirmed{0};
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> redelivered{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> unsent{0};  // without confirm, not known read by the broker
  std::atomic<uint64_t> early{0};   // delayed messages delivered before their time (a bug)
  Latencies confirm_latency;
  Latencies e2e_latency;
  Latencies lateness;  // with --delay: delivery time minus due time
};

// Shared state of one run.
struct Run {
  Options options;
  Stats stats;
  std::atomic<bool> stop{false};  // everyone stops (deadline, broker gone, Ctrl-C)
  std::atomic<bool> producers_done{false};
  std::atomic<uint64_t> tickets{0};  // publish slots taken, for --count
  std::chrono::steady_clock::time_point start;
  std::mutex error_mu;
  std::string first_error;

  // Takes one publish slot; false when --count is used up or the run is stopping.
  bool TakeTicket() {
    if (stop.load(std::memory_order_relaxed)) return false;
    if (options.count == 0) return true;
    return tickets.fetch_add(1, std::memory_order_relaxed) < options.count;
  }
  void Fail(const std::string& what) {
    stats.errors.fetch_add(1);
    std::lock_guard lock(error_mu);
    if (first_error.empty()) first_error = what;
  }
  // The broker is gone: stop everything.
  void Abort(const std::string& what) {
    Fail(what);
    stop = true;
  }
};

// Steady-clock nanoseconds; the first 8 bytes of every body carry the send time.
inline uint64_t NowNanos() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
std::string MakeBody(size_t size);
void StampBody(std::string* body);                      // writes NowNanos() into the body
uint64_t BodyAgeMicros(const char* data, size_t size);  // now - stamp, 0 if too short

class Driver {
 public:
  virtual ~Driver() = default;
  // Declares the queues (and exchange and bindings) the run uses.
  virtual Status Setup(Run& run) = 0;
  virtual Status Teardown(Run& run) = 0;
  // Each runs on its own thread with its own connection until the run ends.
  virtual void Produce(Run& run, int index) = 0;
  virtual void Consume(Run& run, int index) = 0;
};

std::unique_ptr<Driver> MakeNativeDriver();
std::unique_ptr<Driver> MakeAmqpDriver();

}  // namespace wharf::perf
