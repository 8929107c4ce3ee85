#include "server/metrics_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>

#include "common/log_safe.h"
#include "server/console_assets.h"

namespace wharf::server {

namespace {

std::string CertificateUser(const httplib::Request& request, TlsOptions::CertLogin mode) {
  // Only a certificate the handshake verified is there (verify = optional or required).
  switch (mode) {
    case TlsOptions::CertLogin::kOff:
      return "";
    case TlsOptions::CertLogin::kCommonName:
      return net::PeerCommonName(request.ssl);
    case TlsOptions::CertLogin::kDistinguishedName:
      return net::PeerSubject(request.ssl);
  }
  return "";
}

// Answers the request itself (Handled) when `auth` refuses it.
httplib::Server::HandlerResponse Authenticate(const HttpAuth& auth, TlsOptions::CertLogin mode,
                                              const std::string& scheme,
                                              const httplib::Request& request,
                                              httplib::Response& response) {
  HttpAuth::Request asked{request.get_header_value("Authorization"), CertificateUser(request, mode),
                          request.remote_addr};
  HttpAuth::Answer answer = auth.Check(asked);
  if (answer.status == 200) return httplib::Server::HandlerResponse::Unhandled;
  response.status = answer.status;
  if (answer.status == 401) response.set_header("WWW-Authenticate", "Basic realm=\"wharf\"");
  response.set_content(answer.reason + "\n", "text/plain");
  // A failed login is worth a warning (they are throttled per address); a request without
  // credentials (a browser's first), malformed ones, 429 and 503 are not.
  if (!answer.failed_login) {
    spdlog::debug("{} peer={} {} {} refused ({}): {}", scheme, request.remote_addr, request.method,
                  LogSafe(request.path), answer.status, LogSafe(answer.reason));
  } else {
    spdlog::warn("{} peer={} user={} {} {} refused ({}): {}", scheme, request.remote_addr,
                 LogSafe(answer.user), request.method, LogSafe(request.path), answer.status,
                 LogSafe(answer.reason));
  }
  return httplib::Server::HandlerResponse::Handled;
}

bool IsApiPath(const std::string& path) { return path == "/api" || path.rfind("/api/", 0) == 0; }
// The web console's files: static, public (no broker state in them); the API they call asks
// for a user itself.
bool IsConsolePath(const std::string& path) {
  return path == "/" || path.rfind("/console/", 0) == 0;
}

// GET / and /console/{file}: the embedded console (server/console_assets.h), with headers that
// keep its pages to this origin's scripts and out of frames.
void ServeConsole(const httplib::Request& request, httplib::Response& response) {
  const std::string path = request.path == "/" ? "index.html" : request.path.substr(9);
  auto asset = FindConsoleAsset(path);
  if (!asset) {
    response.status = 404;
    response.set_content("no such file in the console\n", "text/plain");
    return;
  }
  response.set_header("Content-Security-Policy",
                      "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                      "base-uri 'none'; form-action 'none'");
  response.set_header("X-Content-Type-Options", "nosniff");
  response.set_header("X-Frame-Options", "DENY");
  response.set_header("Referrer-Policy", "no-referrer");
  response.set_header("Cache-Control", "no-cache");
  response.set_content(std::string(asset->bytes), std::string(ConsoleContentType(path)));
}

// /api/...: the request as HttpApi takes it, its answer as HTTP's. The path's segments are
// cut from the raw target and decoded one by one, so a vhost "/" (%2F) stays one segment.
void ServeApi(const HttpApi& api, TlsOptions::CertLogin mode, const std::string& scheme,
              const httplib::Request& request, httplib::Response& response) {
  HttpApi::Request asked;
  asked.method = request.method;
  std::string_view path = request.target;
  path = path.substr(0, path.find('?'));
  // Routed on the decoded path, split on the raw one: "/%61pi/..." is not taken for "/api/".
  if (path != "/api" && !path.starts_with("/api/")) {
    response.status = 404;
    response.set_content(R"({"error":"Object Not Found","reason":"Not Found"})",
                         "application/json");
    return;
  }
  path.remove_prefix(std::min<size_t>(path.size(), 5));  // "/api/"
  while (!path.empty()) {
    const size_t slash = path.find('/');
    asked.path.push_back(httplib::detail::decode_url(std::string(path.substr(0, slash)), false));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  // "/api/queues/" is "/api/queues", as with RabbitMQ.
  if (!asked.path.empty() && asked.path.back().empty()) asked.path.pop_back();
  asked.params = request.params;
  asked.body = request.body;
  asked.credentials = HttpAuth::Request{request.get_header_value("Authorization"),
                                        CertificateUser(request, mode), request.remote_addr};
  HttpApi::Response answer = api.Handle(asked);
  response.status = answer.status;
  response.set_header("Cache-Control", "no-cache");
  // Not to a script's request (the console's): the browser would show its own login box.
  if (answer.ask_credentials && request.get_header_value("X-Requested-With").empty()) {
    response.set_header("WWW-Authenticate", "Basic realm=\"wharf\"");
  }
  if (!answer.allow.empty()) response.set_header("Allow", answer.allow);
  if (!answer.body.empty()) response.set_content(answer.body, "application/json");
  if (answer.failed_login) {
    spdlog::warn("{} peer={} user={} {} {} refused ({})", scheme, request.remote_addr,
                 LogSafe(answer.user), request.method, LogSafe(request.path), answer.status);
  } else if (answer.status >= 400) {
    spdlog::debug("{} peer={} user={} {} {}: {}", scheme, request.remote_addr, LogSafe(answer.user),
                  request.method, LogSafe(request.path), answer.status);
  }
}

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(Config config) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  const std::string scheme = config.tls ? "https" : "http";
  std::unique_ptr<httplib::Server> http;
  if (config.tls) {
    const net::ServerTlsSource* source = config.tls;
    auto https = std::make_unique<httplib::SSLServer>([source](SSL_CTX& ctx) {
      // A bare context: each handshake moves onto the broker's current one (net/tls.h).
      net::FollowServerTls(&ctx, source);
      return true;
    });
    if (!https->is_valid()) {
      return Status(StatusCode::kIoError, "cannot set up TLS for the HTTPS metrics listener");
    }
    http = std::move(https);
  } else {
    http = std::make_unique<httplib::Server>();
  }
  const uint32_t workers = config.workers;
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
  // A request body (the API's publish) of at most kMaxBody; a longer one is refused 413.
  http->set_payload_max_length(kMaxBody);
  if (config.auth) {
    http->set_pre_routing_handler(
        [auth = config.auth, mode = config.cert_login, scheme](const httplib::Request& request,
                                                               httplib::Response& response) {
          // The API asks for credentials itself, always; the console's files are public.
          if (IsApiPath(request.path) || IsConsolePath(request.path)) {
            return httplib::Server::HandlerResponse::Unhandled;
          }
          return Authenticate(*auth, mode, scheme, request, response);
        });
  }
  http->Get("/metrics",
            [collect = std::move(config.collect)](const httplib::Request&, httplib::Response& res) {
              auto text = collect();
              if (!text) {
                res.status = 503;
                res.set_content("the broker thread did not answer in time\n", "text/plain");
                return;
              }
              res.set_content(*text, "text/plain; version=0.0.4; charset=utf-8");
            });
  http->Get("/healthz",
            [health = std::move(config.health)](const httplib::Request&, httplib::Response& res) {
              std::string problem = health();
              res.status = problem.empty() ? 200 : 503;
              res.set_content(problem.empty() ? "ok\n" : problem + "\n", "text/plain");
            });
  if (config.api) {
    auto serve = [api = config.api, mode = config.cert_login, scheme](
                     const httplib::Request& request, httplib::Response& response) {
      ServeApi(*api, mode, scheme, request, response);
    };
    const std::string pattern = "/api(/.*)?";
    http->Get(pattern, serve);
    http->Post(pattern, serve);
    http->Put(pattern, serve);
    http->Delete(pattern, serve);
    http->Patch(pattern, serve);
    http->Get("/", ServeConsole);
    http->Get("/console/(.*)", ServeConsole);
  }
  const std::string& host = config.host;
  const uint16_t port = config.port;
  int bound =
      port == 0 ? http->bind_to_any_port(host) : (http->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return Status(StatusCode::kIoError, "cannot listen for metrics (" + scheme + ") on " + host +
                                            ":" + std::to_string(port) + ": " +
                                            std::strerror(errno));
  }
  // Listening again on a listening socket only sets its queue length (listen(2)).
  if (*listen_fd >= 0 && ::listen(*listen_fd, SOMAXCONN) != 0) {
    spdlog::warn("metrics listener: cannot lengthen the listen queue: {}", std::strerror(errno));
  }
  server->port_ = static_cast<uint16_t>(bound);
  httplib::Server* raw = http.get();
  server->http_ = std::move(http);
  server->thread_ = std::thread([raw, tls = config.tls != nullptr] {
    pthread_setname_np(pthread_self(), tls ? "wharf-https" : "wharf-metrics");
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
