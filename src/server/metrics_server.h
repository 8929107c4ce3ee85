// server/metrics_server.h
//
// MetricsServer is one of wharfd's HTTP listeners for operators (`--metrics-listen HOST:PORT`
// in clear text, [tls] metrics_listen over HTTPS; one MetricsServer each):
//   GET /metrics  Prometheus text format (server/metrics.h)
//   GET /healthz  200 "ok" when the broker thread answers and the store writes; 503 and the
//                 reason otherwise
//   /api/...      the HTTP API (server/http_api.h), which always asks for a broker user
//   GET /, /console/{file}  the web console (server/console_assets.h; docs/console.md), public
//                 static files whose scripts call the API with the user who logs in
// HTTP is cpp-httplib (Debian's libcpp-httplib-dev): a well-kept library rather than a parser
// of our own on a port that faces monitoring systems (docs/operations.md). Over HTTPS the TLS is
// cpp-httplib's SSLServer on OpenSSL, whose one context follows the broker's current [tls]
// context handshake by handshake (net::FollowServerTls), so SIGHUP reaches it too. With `auth`,
// /metrics and /healthz must come from a broker user (server/http_auth.h); a refusal is 401 with
// WWW-Authenticate (Basic realm "wharf"), or 403, 429, 503, logged at warning for a refused
// password or guest from afar and at debug otherwise.
//
// Threads: "wharf-metrics" (clear text) or "wharf-https" accepts; a pool of `workers`
// (cpp-httplib's ThreadPool, [server] metrics_threads, default 4) reads requests and answers. Idle
// and slow clients cannot hold the workers: a connection reaches accept() only once it has sent
// data (TCP_DEFER_ACCEPT, at most kDeferAccept), a kept-alive connection is closed after
// kIdleTimeout without a request, and a request or response that stalls for kIoTimeout is dropped.
// The handlers never touch broker state: `collect` (given by the Server) posts to the broker thread
// and waits for the copy, at most 2 s.
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

#include "net/tls.h"
#include "server/http_api.h"
#include "server/http_auth.h"
#include "server/options.h"
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
  // The longest request body taken (a message published through the API, as JSON).
  static constexpr size_t kMaxBody = 16u << 20;

  struct Config {
    std::string host;
    uint16_t port = 0;  // 0 = any free port
    uint32_t workers = 4;
    CollectFn collect;
    HealthFn health;
    // HTTPS with the broker's current TLS context when set (outlives the server).
    const net::ServerTlsSource* tls = nullptr;
    // Which user a verified client certificate names (HTTPS only).
    TlsOptions::CertLogin cert_login = TlsOptions::CertLogin::kOff;
    // Credentials asked of /metrics and /healthz when set (outlives the server).
    const HttpAuth* auth = nullptr;
    // Answers /api/ (outlives the server); no API when null.
    const HttpApi* api = nullptr;
  };

  // Binds host:port and starts the threads. kIoError when it cannot bind.
  static Result<std::unique_ptr<MetricsServer>> Start(Config config);
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
