// server/metrics_server.h
//
// MetricsServer is wharfd's HTTP listener for operators (`--metrics-listen HOST:PORT`):
//   GET /metrics  Prometheus text format (server/metrics.h)
//   GET /healthz  200 "ok" when the broker thread answers and the store writes; 503 and the
//                 reason otherwise
// HTTP is cpp-httplib (Debian's libcpp-httplib-dev): a well-kept library rather than a parser
// of our own on a port that faces monitoring systems (docs/operations.md).
//
// Threads: one, "wharf-metrics", accepts and answers (a pool of one worker: scrapes are rare
// and small). It never touches broker state: `collect` (given by the Server) posts to the
// broker thread and waits for the copy, at most `kCollectTimeout`.
//
// Thread safety: Start and Stop from one thread; handlers run on the metrics thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "wharf/result.h"

namespace httplib {
class Server;
}

namespace wharf::server {

class MetricsServer {
 public:
  // What /metrics shows (nullopt: the broker did not answer in time); and for /healthz, "" when
  // healthy, else the reason.
  using CollectFn = std::function<std::optional<std::string>()>;
  using HealthFn = std::function<std::string()>;

  // Binds host:port (0 = any free port) and starts the thread. kIoError when it cannot bind.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& host, uint16_t port,
                                                      CollectFn collect, HealthFn health);
  ~MetricsServer();  // Stop()

  uint16_t port() const { return port_; }
  void Stop();

 private:
  MetricsServer() = default;

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace wharf::server
