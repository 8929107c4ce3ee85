#include "server/metrics_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace wharf::server {

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host, uint16_t port,
                                                            uint32_t workers, CollectFn collect,
                                                            HealthFn health) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  auto http = std::make_unique<httplib::Server>();
  // cpp-httplib gives each connection a worker until it closes or goes idle, so idle and slow
  // clients are kept from the workers three ways (issue 15: 8 idle sockets held the one
  // worker and /healthz timed out):
  // - the kernel hands a connection to accept() only once it has sent something
  //   (TCP_DEFER_ACCEPT), so a socket that connects and says nothing never takes a worker;
  // - a worker gives up on a kept-alive connection idle for kIdleTimeout, and on a request or
  //   response that stalls for kIoTimeout;
  // - `workers` of them, so a few slow clients at once still leave one free.
  http->new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  // Deferred connections wait in the listen queue, which cpp-httplib 0.11 makes 5 long: a
  // sixth idle socket would make the kernel drop the next SYN (a 1 s retransmission for every
  // scrape). The queue is made as long as the system allows once the socket is bound.
  auto listen_fd = std::make_shared<int>(-1);
  http->set_socket_options([listen_fd](int sock) {
    httplib::default_socket_options(sock);
    int defer = static_cast<int>(kDeferAccept.count());
    setsockopt(sock, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof defer);
    *listen_fd = sock;
  });
  http->set_read_timeout(kIoTimeout);
  http->set_write_timeout(kIoTimeout);
  http->set_keep_alive_timeout(kIdleTimeout.count());
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
  // Listening again on a listening socket only sets its queue length (listen(2)).
  if (*listen_fd >= 0 && ::listen(*listen_fd, SOMAXCONN) != 0) {
    spdlog::warn("metrics listener: cannot lengthen the listen queue: {}", std::strerror(errno));
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
