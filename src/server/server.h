// server/server.h
//
// Server is the composition root of wharfd: it owns the threads, the broker, the listener and
// the sessions, and wires them together (docs/architecture.md).
//
//   I/O threads (options.io_threads): one asio::io_context each; each connection is pinned to
//     one of them, round-robin at accept time. Thread 0 also runs the acceptor.
//   Broker thread: one io_context that owns the Broker and its deadline timer.
//   Store writer and reader: owned by the RocksDbStore (store/rocksdb_store.h); they post
//     completions to the broker thread.
//   Metrics (when --metrics-listen is given): the MetricsServer's HTTP threads; they read
//     broker state only through AskBroker (a copy made on the broker thread).
//
// Thread safety: Start() and Stop() may be called from any thread; port() is immutable.
#pragma once

#include <array>
#include <asio.hpp>
#include <asio/ssl/context.hpp>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "broker/broker.h"
#include "common/clock.h"
#include "common/log_limiter.h"
#include "server/connection.h"
#include "server/metrics_server.h"
#include "server/options.h"
#include "server/server_context.h"
#include "store/rocksdb_store.h"

namespace wharf::server {

class Connection;

class Server {
 public:
  // Binds the listener and starts every thread. Errors: kIoError (cannot bind), kInvalidConfig.
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The plain native listener's port; 0 when it is off.
  uint16_t port() const { return native_.port; }
  // The AMQP listener's port; 0 when it is off.
  uint16_t amqp_port() const { return amqp_.port; }
  // The TLS listeners' ports ([tls] listen, amqp_listen); 0 when off.
  uint16_t tls_port() const { return native_tls_.port; }
  uint16_t amqps_port() const { return amqps_.port; }
  // The metrics listener's port; 0 when it is off.
  uint16_t metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  // The HTTPS metrics listener's port ([tls] metrics_listen); 0 when it is off.
  uint16_t metrics_tls_port() const { return metrics_tls_ ? metrics_tls_->port() : 0; }

  // Stops accepting, lets each connection finish what it sent, closes every connection with
  // a Close frame, then joins the threads. Idempotent.
  void Stop();

  // SIGHUP: the config file's users as they are now (server/user_directory.h).
  void ReloadUsers(const ServerOptions& options) { users_->ReloadConfigUsers(options); }
  // SIGHUP: the [tls] certificate, key and CA files read again; connections accepted from now
  // on use them, open ones keep theirs. On an error the old ones stay (and it is returned).
  Status ReloadTls(const ServerOptions& options);
  // Whether it started with a TLS listener (ReloadTls has files to reload).
  bool tls_enabled() const { return options_.tls.any(); }
  // Flow control's watermarks (at start, and on SIGHUP); checked every kFlowCheckInterval.
  void SetWatermarks(const ServerOptions& options);

 private:
  explicit Server(const ServerOptions& options);
  // Works out fd_limit_ from RLIMIT_NOFILE and [limits] reserved_fds. kInvalidConfig when the
  // limit leaves too few for connections.
  Status SetFdLimit();
  // --definitions: imports the file on the broker thread and waits for it; an error stops the
  // start.
  Status ImportAtStart(const std::string& path);
  // A listener: its acceptor and retry timer (I/O thread 0) and the codec of its connections.
  struct Listener {
    const char* protocol = "";
    std::unique_ptr<asio::ip::tcp::acceptor> acceptor;
    std::unique_ptr<asio::steady_timer> retry_timer;
    Connection::CodecFactory make_codec;
    uint16_t port = 0;
    bool tls = false;  // connections start with the TLS handshake (tls_context_)
  };
  Status Listen(Listener& listener, const std::string& host, uint16_t port);
  std::array<Listener*, 4> listeners() { return {&native_, &amqp_, &native_tls_, &amqps_}; }
  void Accept(Listener& listener);
  void AfterBrokerWork();
  void OnSessionClosed(uint64_t session_id);
  // ServerContext::close_connections_of and _in: each connection is asked `which` on its own
  // thread (its user and vhost are that thread's), and closed with `why` when it answers true.
  void CloseConnections(std::function<bool(const Connection&)> which, const std::string& why);
  // Runs `fn` on the broker thread and waits for its result (nullopt after `timeout`). The
  // promise is shared with the posted handler, so a late answer never outlives its target.
  template <typename T>
  std::optional<T> AskBroker(std::function<T()> fn, std::chrono::milliseconds timeout);
  // For the metrics thread: /metrics' text (nullopt: the broker did not answer in time), and
  // /healthz' problem ("" when healthy).
  std::optional<std::string> CollectMetrics();
  // This node's name, version and protocol listeners, for the HTTP API (once they listen).
  api::NodeFacts NodeFactsNow() const;
  std::string HealthProblem();
  // The TLS context and settings new connections get now (any thread).
  net::ServerTls CurrentTls();
  // I/O thread 0, every kFlowCheckInterval: blocks or unblocks publishing (docs/operations.md).
  void CheckFlow();
  static constexpr std::chrono::milliseconds kFlowCheckInterval{250};
  // Broker thread, every OverviewHistory::kInterval: the totals into history_.
  void SampleHistory();

  // Set at construction, then immutable.
  const ServerOptions options_;
  SystemClock clock_;

  // What each user has open (thread-safe). Before the I/O contexts: the connections and
  // channels they hold give their slots back when destroyed.
  UserUsage user_usage_;
  UserChanges user_changes_;  // the broker thread's

  // Declaration order matters for destruction: sessions hold sockets of the I/O contexts, and
  // the broker and broker context hold sessions, so those go first (see ~Server).
  std::vector<std::unique_ptr<asio::io_context>> io_contexts_;
  std::unique_ptr<asio::io_context> broker_context_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work_guards_;
  std::vector<std::thread> threads_;
  Listener native_;      // I/O thread 0; no acceptor when [server] listen is off
  Listener amqp_;        // I/O thread 0; no acceptor when [amqp] is off
  Listener native_tls_;  // I/O thread 0; no acceptor unless [tls] listen
  Listener amqps_;       // I/O thread 0; no acceptor unless [tls] amqp_listen

  // Guarded by tls_mu_: the TLS settings and files new connections get (a null context without
  // TLS listeners); replaced whole on SIGHUP.
  std::mutex tls_mu_;
  net::ServerTls tls_;
  // CurrentTls() for the HTTPS listener's handshakes (any thread; outlives metrics_tls_).
  net::ServerTlsSource tls_source_;

  // The message store: its own threads; completions are posted to the broker thread.
  std::unique_ptr<store::RocksDbStore> store_;

  std::unique_ptr<UserDirectory> users_;
  // Logins: the hashing threads (stopped in Stop(), before the I/O contexts they post to) and
  // the failures per address.
  std::unique_ptr<LoginChecker> login_checker_;
  std::unique_ptr<LoginThrottle> login_throttle_;

  // Flow control: the state sessions read, the watermarks, and the check's timer (I/O 0).
  FlowState flow_;
  std::atomic<uint64_t> memory_high_{0};
  std::atomic<uint64_t> disk_free_low_{0};
  std::unique_ptr<asio::steady_timer> flow_timer_;

  // What all connections hold in partial frames (server/frame_budget.h).
  std::unique_ptr<FrameBudget> frame_budget_;

  // Credentials on the HTTP listeners: always for /api/, for /metrics and /healthz with
  // [server] metrics_auth. Null when no HTTP listener is on.
  std::unique_ptr<HttpAuth> http_auth_;
  std::unique_ptr<HttpApi> http_api_;  // /api/ on the HTTP listeners; null when none is on
  // The totals the console charts (server/overview_history.h), sampled on the broker thread by
  // history_timer_ every OverviewHistory::kInterval while an HTTP listener is on.
  OverviewHistory history_;
  std::unique_ptr<asio::steady_timer> history_timer_;
  // Stopped first in Stop(): their handlers post to the broker thread. The clear-text and the
  // HTTPS listener; each null when off.
  std::unique_ptr<MetricsServer> metrics_;
  std::unique_ptr<MetricsServer> metrics_tls_;

  // Confined to the broker thread.
  std::unique_ptr<broker::Broker> broker_;
  std::unique_ptr<asio::steady_timer> broker_timer_;
  std::optional<SteadyTime> armed_deadline_;

  ServerContext context_;

  // Set at start: an accepted socket whose descriptor number is at least this is refused.
  // Descriptors are allocated lowest first, so such a number means every one below it is open:
  // RLIMIT_NOFILE - reserved_fds are in use, and the rest stay for the store.
  int fd_limit_ = 0;
  uint64_t fd_soft_limit_ = 0;  // RLIMIT_NOFILE's soft limit at start

  // Confined to I/O thread 0 (the acceptor's).
  size_t next_io_context_ = 0;
  uint64_t next_session_id_ = 1;
  // Refused connections and failed accepts are logged at most once per kAcceptLogInterval,
  // with the count since the last line.
  static constexpr std::chrono::seconds kAcceptLogInterval{10};
  LogLimiter fd_refusal_log_{kAcceptLogInterval};
  LogLimiter accept_error_log_{kAcceptLogInterval};

  // Guarded by mu_: the live sessions, for shutdown.
  std::mutex mu_;
  std::condition_variable sessions_cv_;
  std::unordered_map<uint64_t, std::weak_ptr<Connection>> sessions_;
  bool stopping_ = false;
};

}  // namespace wharf::server
