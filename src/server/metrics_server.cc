#include "server/metrics_server.h"

#include <httplib.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

namespace wharf::server {

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host, uint16_t port,
                                                            CollectFn collect, HealthFn health) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  auto http = std::make_unique<httplib::Server>();
  // One worker: requests are answered one at a time, on this thread pool's single thread.
  http->new_task_queue = [] { return new httplib::ThreadPool(1); };
  http->set_read_timeout(5, 0);
  http->set_write_timeout(5, 0);
  http->set_keep_alive_max_count(100);
  http->Get("/metrics", [collect](const httplib::Request&, httplib::Response& res) {
    auto text = collect();
    if (!text) {
      res.status = 503;
      res.set_content("the broker thread did not answer in time\n", "text/plain");
      return;
    }
    res.set_content(*text, "text/plain; version=0.0.4; charset=utf-8");
  });
  http->Get("/healthz", [health](const httplib::Request&, httplib::Response& res) {
    std::string problem = health();
    res.status = problem.empty() ? 200 : 503;
    res.set_content(problem.empty() ? "ok\n" : problem + "\n", "text/plain");
  });
  int bound =
      port == 0 ? http->bind_to_any_port(host) : (http->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return Status(StatusCode::kIoError, "cannot listen for metrics on " + host + ":" +
                                            std::to_string(port) + ": " + std::strerror(errno));
  }
  server->port_ = static_cast<uint16_t>(bound);
  httplib::Server* raw = http.get();
  server->http_ = std::move(http);
  server->thread_ = std::thread([raw] {
    pthread_setname_np(pthread_self(), "wharf-metrics");
    raw->listen_after_bind();
  });
  // Stop() before the thread is listening would not reach it: wait until it is.
  for (int i = 0; i < 2'000 && !raw->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return server;
}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::Stop() {
  if (!http_) return;
  http_->stop();
  if (thread_.joinable()) thread_.join();
  http_.reset();
}

}  // namespace wharf::server
