// server/metrics_server.h
//
// MetricsServer is wharfd's HTTP listener for operators (`--metrics-listen HOST:PORT`):
//   GET /metrics  Prometheus text format (server/metrics.h)
//   GET /healthz  200 "ok" when the broker thread answers and the store writes; 503 and the
//                 reason otherwise
// HTTP is cpp-httplib (Debian's libcpp-httplib-dev): a well-kept library rather than a parser
// of our own on a port that faces monitoring systems (docs/operations.md).
//
// Threads: "wharf-metrics" accepts; a pool of `workers` (cpp-httplib's ThreadPool, [server]
// metrics_threads, default 4) reads requests and answers. Idle and slow clients cannot hold
// the workers: a connection reaches accept() only once it has sent data (TCP_DEFER_ACCEPT, at
// most kDeferAccept), a kept-alive connection is closed after kIdleTimeout without a request,
// and a request or response that stalls for kIoTimeout is dropped. The handlers never touch
// broker state: `collect` (given by the Server) posts to the broker thread and waits for the
// copy, at most 2 s.
//
// Thread safety: Start and Stop from one thread; handlers run on the metrics thread.
#pragma once

#include <chrono>
#include <cstdint>
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

  static constexpr std::chrono::seconds kDeferAccept{5};
  static constexpr std::chrono::seconds kIdleTimeout{1};  // cpp-httplib counts whole seconds
  static constexpr std::chrono::seconds kIoTimeout{2};

  // Binds host:port (0 = any free port) and starts the threads. kIoError when it cannot bind.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& host, uint16_t port,
                                                      uint32_t workers, CollectFn collect,
                                                      HealthFn health);
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
