#include "server/server.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <tuple>

#include "common/log_safe.h"
#include "server/amqp_codec.h"
#include "server/connection.h"
#include "server/definitions.h"
#include "server/metrics.h"
#include "server/native_codec.h"
#include "server/process_stats.h"
#include "store/disk_guard.h"
#include "wharf/version.h"

namespace wharf::server {

Server::Server(const ServerOptions& options) : options_(options) {}

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  WHARF_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<Server> server(new Server(options));
  uint32_t io_threads = options.io_threads;
  if (io_threads == 0) {
    // One per core beyond the broker thread, but at least two: with a single I/O thread a
    // flooding publisher delays every other connection's acks and deliveries behind its
    // decoding (docs/benchmarks.md), and idle threads cost nothing.
    unsigned cores = std::max(2u, std::thread::hardware_concurrency());
    io_threads = std::max(2u, cores - 1);
  }
  for (uint32_t i = 0; i < io_threads; ++i) {
    server->io_contexts_.push_back(std::make_unique<asio::io_context>(1));
  }
  server->broker_context_ = std::make_unique<asio::io_context>(1);

  Server* raw = server.get();
  store::StoreOptions store_options;
  store_options.path = options.data_dir + "/store";
  store_options.memtable_bytes = options.store_memtable_bytes;
  store_options.block_cache_bytes = options.store_block_cache_bytes;
  store_options.min_blob_bytes = options.store_min_blob_bytes;
  store_options.disk_reserve_bytes = options.store_disk_reserve_bytes;
  store_options.ballast_path = options.data_dir + "/ballast";
  store_options.ballast_bytes = options.store_ballast_bytes;
  store_options.disk_low_bytes = options.disk_free_low_bytes;
  store_options.verify_checksums_at_start = options.store_verify_checksums;
  // Store completions run on the broker thread, followed by the usual flush.
  auto post = [raw](std::function<void()> fn) {
    asio::post(*raw->broker_context_, [raw, fn = std::move(fn)] {
      fn();
      raw->AfterBrokerWork();
    });
  };
  auto started = std::chrono::steady_clock::now();
  WHARF_ASSIGN_OR_RETURN(server->store_, store::RocksDbStore::Open(store_options, post));
  WHARF_ASSIGN_OR_RETURN(auto recovered, server->store_->Recover());

  broker::BrokerOptions broker_options;
  broker_options.max_message_bytes = options.max_message_bytes;
  broker_options.max_headers = options.max_headers;
  broker_options.max_consumers_per_session = options.max_consumers_per_channel;
  broker_options.page_limits.max_messages = options.page_max_messages;
  broker_options.page_limits.max_bytes = options.page_max_bytes;
  broker_options.delay_release_per_second = options.release_per_second;
  broker_options.delay_limits.max_messages = options.delay_ram_messages;
  broker_options.delay_limits.max_bytes = options.delay_ram_bytes;
  broker_options.max_delay_ms = options.max_delay_ms;
  broker_options.redrive_rate = options.redrive_rate;
  server->broker_ =
      std::make_unique<broker::Broker>(broker_options, &server->clock_, server->store_.get());
  WHARF_RETURN_IF_ERROR(server->broker_->Recover(recovered));
  server->users_ = std::make_unique<UserDirectory>(options, recovered.users);
  server->broker_->SetAccessSource(server->users_.get());
  spdlog::info("store {} opened and recovered in {} ms", store_options.path,
               std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - started)
                   .count());
  server->broker_timer_ = std::make_unique<asio::steady_timer>(*server->broker_context_);

  server->context_.options = &server->options_;
  server->context_.broker = server->broker_.get();
  server->context_.broker_context = server->broker_context_.get();
  server->context_.users = server->users_.get();
  server->login_checker_ =
      std::make_unique<LoginChecker>(options.login_threads, options.login_queue);
  server->login_throttle_ = std::make_unique<LoginThrottle>(
      LoginThrottle::Limits{std::chrono::milliseconds(options.login_failure_delay_ms),
                            std::chrono::milliseconds(options.login_failure_delay_max_ms),
                            options.login_throttle_addresses});
  server->context_.login_checker = server->login_checker_.get();
  server->context_.login_throttle = server->login_throttle_.get();
  server->context_.user_usage = &server->user_usage_;
  server->context_.user_changes = &server->user_changes_;
  server->context_.flow = &server->flow_;
  server->SetWatermarks(options);
  uint64_t partial_frames = options.partial_frame_bytes;
  if (partial_frames == ServerOptions::kPartialFrameAuto) {
    // 256 MiB, or a quarter of the memory watermark when that is lower: connections that send
    // half frames then cannot take the broker over the watermark on their own.
    partial_frames = 256u << 20;
    if (uint64_t memory = server->memory_high_.load(); memory != 0) {
      partial_frames = std::min(partial_frames, memory / 4);
    }
  }
  server->frame_budget_ = std::make_unique<FrameBudget>(partial_frames);
  server->context_.frame_budget = server->frame_budget_.get();
  spdlog::info(
      "partial frames: frames above 64 KiB being received hold at most {} MiB together ([limits] "
      "partial_frame_bytes); a frame must arrive within {} ms ([limits] frame_timeout_ms)",
      partial_frames >> 20, options.frame_timeout_ms);
  server->context_.store = server->store_.get();
  server->context_.after_broker_work = [raw] { raw->AfterBrokerWork(); };
  server->context_.on_session_closed = [raw](uint64_t id) { raw->OnSessionClosed(id); };
  server->context_.close_connections_of = [raw](const std::string& user, const std::string& why) {
    raw->CloseConnections([user](const Connection& c) { return c.user() == user; }, why);
  };
  server->context_.close_connections_in = [raw](const std::string& vhost, const std::string& why) {
    raw->CloseConnections([vhost](const Connection& c) { return c.vhost() == vhost; }, why);
  };

  WHARF_RETURN_IF_ERROR(server->SetFdLimit());
  const TlsOptions& tls = options.tls;
  if (tls.any()) {
    WHARF_ASSIGN_OR_RETURN(server->tls_.context, net::MakeServerTlsContext(tls.settings));
    server->tls_.settings = tls.settings;
  }
  auto native_codec = [](Connection& connection) {
    return std::make_unique<NativeCodec>(connection);
  };
  auto amqp_codec = [](Connection& connection) { return std::make_unique<AmqpCodec>(connection); };
  struct Wanted {
    Listener* listener;
    bool enabled;
    const char* protocol;
    Connection::CodecFactory codec;
    const std::string* host;
    uint16_t port;
    bool tls;
  };
  for (const Wanted& w : {
           Wanted{&server->native_, options.listen_enabled, "native", native_codec,
                  &options.listen_host, options.listen_port, false},
           Wanted{&server->amqp_, options.amqp.enabled, "AMQP 0-9-1", amqp_codec,
                  &options.amqp.listen_host, options.amqp.listen_port, false},
           Wanted{&server->native_tls_, tls.native_enabled, "native over TLS", native_codec,
                  &tls.native_host, tls.native_port, true},
           Wanted{&server->amqps_, tls.amqp_enabled, "AMQP 0-9-1 over TLS", amqp_codec,
                  &tls.amqp_host, tls.amqp_port, true},
       }) {
    if (!w.enabled) continue;
    w.listener->protocol = w.protocol;
    w.listener->make_codec = w.codec;
    w.listener->tls = w.tls;
    WHARF_RETURN_IF_ERROR(server->Listen(*w.listener, *w.host, w.port));
    if (options.loopback_guest && !w.listener->acceptor->local_endpoint().address().is_loopback()) {
      // guest/guest is refused from other hosts, but the broker is now reachable from them
      // and every local user and process can log in as an admin: say so once, at start.
      spdlog::warn(
          "listening ({}) on {} beyond loopback with the built-in admin guest/guest enabled "
          "(loopback connections only); set [auth] loopback_guest = false and configure "
          "[[auth.users]] for a shared host",
          w.protocol, *w.host);
    }
  }

  for (auto& context : server->io_contexts_) {
    server->work_guards_.push_back(asio::make_work_guard(*context));
  }
  server->work_guards_.push_back(asio::make_work_guard(*server->broker_context_));
  // Named, so that `top -H`, perf and gdb show which thread is which (docs/architecture.md).
  server->threads_.emplace_back([raw] {
    pthread_setname_np(pthread_self(), "wharf-broker");
    raw->broker_context_->run();
  });
  int io_index = 0;
  for (auto& context : server->io_contexts_) {
    std::string name = "wharf-io-" + std::to_string(io_index++);
    server->threads_.emplace_back([ctx = context.get(), name] {
      pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
      ctx->run();
    });
  }
  // Definitions go in before any client comes: a client sees them all or is not let in.
  if (!options.definitions_file.empty()) {
    WHARF_RETURN_IF_ERROR(server->ImportAtStart(options.definitions_file));
  }
  asio::post(*server->io_contexts_[0], [raw] {
    for (Listener* listener : raw->listeners()) {
      if (listener->acceptor) raw->Accept(*listener);
    }
  });
  server->flow_timer_ = std::make_unique<asio::steady_timer>(*server->io_contexts_[0]);
  asio::post(*server->io_contexts_[0], [raw] { raw->CheckFlow(); });
  // Recovered queues start loading their heads now, not at the first request.
  asio::post(*server->broker_context_, [raw] { raw->AfterBrokerWork(); });
  if (server->native_.acceptor) {
    spdlog::info("wharfd listening on {}:{} ({} I/O threads + 1 broker thread)",
                 options.listen_host, server->native_.port, io_threads);
  } else {
    spdlog::info(
        "wharfd: no plain native listener ([server] listen = \"off\"); {} I/O threads "
        "+ 1 broker thread",
        io_threads);
  }
  if (server->amqp_.acceptor) {
    spdlog::info("AMQP 0-9-1 listening on {}:{}", options.amqp.listen_host, server->amqp_.port);
  }
  if (server->native_tls_.acceptor) {
    spdlog::info("native protocol over TLS listening on {}:{}", tls.native_host,
                 server->native_tls_.port);
  }
  if (server->amqps_.acceptor) {
    spdlog::info("AMQP 0-9-1 over TLS listening on {}:{}", tls.amqp_host, server->amqps_.port);
  }
  if (options.metrics_enabled || tls.metrics_enabled) {
    server->http_auth_ = std::make_unique<HttpAuth>(
        server->users_.get(), server->login_checker_.get(), server->login_throttle_.get());
    HttpApi::Config api;
    api.auth = server->http_auth_.get();
    api.users = server->users_.get();
    api.broker = server->broker_.get();
    // As every batch of broker work: then flushed (writes committed, peers answered) and the
    // timer re-armed.
    api.post_to_broker = [raw](std::function<void()> fn) {
      asio::post(*raw->broker_context_, [raw, fn = std::move(fn)] {
        fn();
        raw->AfterBrokerWork();
      });
    };
    api.node = server->NodeFactsNow();
    api.server = &server->context_;
    api.history = &server->history_;
    server->history_timer_ = std::make_unique<asio::steady_timer>(*server->broker_context_);
    asio::post(*server->broker_context_, [raw] { raw->SampleHistory(); });
    api.import_definitions = [raw](json::Definitions definitions,
                                   std::function<void(ImportReport)> done) {
      ImportDefinitions(raw->context_, std::move(definitions), std::move(done));
    };
    server->http_api_ = std::make_unique<HttpApi>(std::move(api));
  }
  server->tls_source_ = [raw] { return raw->CurrentTls(); };
  for (bool https : {false, true}) {
    if (!(https ? tls.metrics_enabled : options.metrics_enabled)) continue;
    MetricsServer::Config config;
    config.host = https ? tls.metrics_host : options.metrics_host;
    config.port = https ? tls.metrics_port : options.metrics_port;
    config.workers = options.metrics_threads;
    config.collect = [raw] { return raw->CollectMetrics(); };
    config.health = [raw] { return raw->HealthProblem(); };
    config.tls = https ? &server->tls_source_ : nullptr;
    config.cert_login = tls.cert_login;
    config.auth = options.metrics_auth ? server->http_auth_.get() : nullptr;
    config.api = server->http_api_.get();
    auto metrics = MetricsServer::Start(std::move(config));
    if (!metrics.ok()) {
      server->Stop();
      return metrics.status();
    }
    spdlog::info("metrics on {}://{}:{}/metrics and /healthz{}; HTTP API under /api/",
                 https ? "https" : "http", https ? tls.metrics_host : options.metrics_host,
                 (*metrics)->port(),
                 options.metrics_auth ? ", for broker users only ([server] metrics_auth)" : "");
    (https ? server->metrics_tls_ : server->metrics_) = std::move(*metrics);
  }
  return server;
}

namespace {

uint64_t Mib(uint64_t bytes) { return bytes >> 20; }

}  // namespace

void Server::SetWatermarks(const ServerOptions& options) {
  uint64_t memory = options.memory_high_bytes;
  if (memory == ServerOptions::kMemoryHighDefault) {
    memory = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
             static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 10 * 4;
  }
  memory_high_.store(memory);
  disk_free_low_.store(options.disk_free_low_bytes);
  spdlog::info(
      "flow control: publishing blocks above {} MiB of memory{} and below {} MiB of "
      "free disk{}",
      Mib(memory), memory == 0 ? " (off)" : "", Mib(options.disk_free_low_bytes),
      options.disk_free_low_bytes == 0 ? " (off)" : "");
}

void Server::CheckFlow() {
  std::string reason;
  const uint64_t memory_high = memory_high_.load();
  const uint64_t disk_low = disk_free_low_.load();
  if (memory_high != 0) {
    if (uint64_t resident = ResidentBytes(); resident > memory_high) {
      reason = "memory: wharfd uses " + std::to_string(Mib(resident)) +
               " MiB, above the high watermark of " + std::to_string(Mib(memory_high)) +
               " MiB ([flow] memory_high_bytes)";
    }
  }
  if (reason.empty() && disk_low != 0) {
    auto free = store::FreeDiskBytes(options_.data_dir);
    if (free && *free < disk_low) {
      reason = "disk: " + std::to_string(Mib(*free)) +
               " MiB free where the data directory is, below the watermark of " +
               std::to_string(Mib(disk_low)) + " MiB ([flow] disk_free_low_bytes)";
    }
  }
  if (reason.empty()) {
    // The store's reserve holds whatever the watermark says (store/disk_guard.h).
    if (Status full = store_->AcceptingMessages(); !full.ok()) {
      reason = "disk: " + std::string(full.message());
    }
  }
  const bool blocked = !reason.empty();
  if (flow_.Set(blocked, reason)) {
    if (blocked) {
      spdlog::warn("flow control: publishing blocked, consumers go on: {}", reason);
    } else {
      spdlog::warn("flow control: publishing resumes");
    }
    std::lock_guard lock(mu_);
    for (auto& [id, weak] : sessions_) {
      if (auto session = weak.lock()) {
        asio::post(session->executor(), [session] { session->OnFlowChanged(); });
      }
    }
  }
  flow_timer_->expires_after(kFlowCheckInterval);
  flow_timer_->async_wait([this](const asio::error_code& ec) {
    if (!ec) CheckFlow();
  });
}

void Server::SampleHistory() {
  if (!history_timer_) return;  // stopping
  history_.Add(broker_->ListQueues(""), clock_.WallMillis());
  history_timer_->expires_after(OverviewHistory::kInterval);
  history_timer_->async_wait([this](const asio::error_code& ec) {
    if (!ec) SampleHistory();
  });
}

template <typename T>
std::optional<T> Server::AskBroker(std::function<T()> fn, std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<T>>();
  auto future = promise->get_future();
  asio::post(*broker_context_, [promise, fn = std::move(fn)] { promise->set_value(fn()); });
  if (future.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  try {
    return future.get();
  } catch (const std::future_error&) {  // the broker context went away with it
    return std::nullopt;
  }
}

api::NodeFacts Server::NodeFactsNow() const {
  api::NodeFacts facts;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  facts.node = std::string("wharf@") + host;
  facts.product_version = WHARF_VERSION;
  const TlsOptions& tls = options_.tls;
  // Named as RabbitMQ's /api/overview names its listeners ("amqp", "amqp/ssl").
  const std::tuple<const Listener*, const char*, std::string> listeners[] = {
      {&native_, "wharf", options_.listen_host},
      {&amqp_, "amqp", options_.amqp.listen_host},
      {&native_tls_, "wharf/ssl", tls.native_host},
      {&amqps_, "amqp/ssl", tls.amqp_host}};
  for (const auto& [listener, protocol, listen_host] : listeners) {
    if (listener->acceptor) facts.listeners.push_back({protocol, listen_host, listener->port});
  }
  return facts;
}

std::optional<std::string> Server::CollectMetrics() {
  // Copied on the broker thread, formatted here.
  auto metrics = AskBroker<broker::BrokerMetrics>([this] { return broker_->Metrics(); },
                                                  std::chrono::seconds(2));
  if (!metrics) return std::nullopt;
  metrics->publishing_blocked = flow_.blocked();
  store::StoreCounters counters = store_->counters();
  ProcessStats process = ReadProcessStats();
  FrameBudgetMetrics frames = frame_budget_->Metrics();
  return RenderMetrics(*metrics, &counters, clock_.WallMillis(), &process, &frames);
}

std::string Server::HealthProblem() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return "shutting down";
  }
  auto problem = AskBroker<std::string>(
      [this] {
        auto m = broker_->Metrics();
        return m.store_writable ? std::string()
                                : "the message store cannot write: " + m.store_error;
      },
      std::chrono::seconds(1));
  if (!problem) return "the broker thread did not answer within 1 s";
  return *problem;
}

Status Server::ImportAtStart(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kInvalidConfig, "--definitions: cannot read '" + path + "'");
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  auto definitions = ParseDefinitions(text, std::nullopt);
  if (!definitions.ok()) {
    return Status(StatusCode::kInvalidConfig,
                  "--definitions " + path + ": " + std::string(definitions.status().message()));
  }
  auto promise = std::make_shared<std::promise<ImportReport>>();
  auto future = promise->get_future();
  asio::post(
      *broker_context_,
      [this, promise, definitions = std::make_shared<json::Definitions>(std::move(*definitions))] {
        ImportDefinitions(context_, std::move(*definitions),
                          [promise](ImportReport r) { promise->set_value(std::move(r)); });
        AfterBrokerWork();
      });
  ImportReport report;
  try {
    report = future.get();
  } catch (const std::future_error&) {
    return Status(StatusCode::kShuttingDown, "--definitions " + path + ": the broker stopped");
  }
  for (const std::string& line : report.skipped) {
    spdlog::info("--definitions {}: skipped {}", path, LogSafe(line, kLogSafeStatusBytes));
  }
  if (!report.ok()) {
    return Status(StatusCode::kInvalidConfig,
                  "--definitions " + path + ": " + std::to_string(report.errors.size()) +
                      " items could not be applied; the first: " + report.errors.front());
  }
  spdlog::info("--definitions {} imported", path);
  return Status::Ok();
}

Status Server::SetFdLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return Status(StatusCode::kIoError,
                  std::string("cannot read RLIMIT_NOFILE: ") + std::strerror(errno));
  }
  fd_soft_limit_ = limit.rlim_cur == RLIM_INFINITY ? uint64_t{INT32_MAX} : limit.rlim_cur;
  // A connection needs one; at least this many must be left beside the reserve.
  constexpr uint64_t kMinConnectionFds = 16;
  if (fd_soft_limit_ < options_.reserved_fds + kMinConnectionFds) {
    return Status(StatusCode::kInvalidConfig,
                  "the open file limit (RLIMIT_NOFILE, ulimit -n) is " +
                      std::to_string(fd_soft_limit_) + ", which leaves fewer than " +
                      std::to_string(kMinConnectionFds) + " for connections beside [limits] " +
                      "reserved_fds = " + std::to_string(options_.reserved_fds) +
                      "; raise the limit (LimitNOFILE= in the unit) or lower reserved_fds");
  }
  fd_limit_ = static_cast<int>(
      std::min<uint64_t>(fd_soft_limit_ - options_.reserved_fds, uint64_t{INT32_MAX}));
  spdlog::info(
      "connections are refused once {} file descriptors are open (RLIMIT_NOFILE {} "
      "less [limits] reserved_fds {})",
      fd_limit_, fd_soft_limit_, options_.reserved_fds);
  return Status::Ok();
}

Status Server::Listen(Listener& listener, const std::string& host, uint16_t port) {
  asio::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) {
    // Not a literal address: resolve it (e.g. "localhost").
    asio::ip::tcp::resolver resolver(*io_contexts_[0]);
    auto results = resolver.resolve(host, "", ec);
    if (ec || results.empty()) {
      return Status(StatusCode::kInvalidConfig, "cannot resolve listen host '" + host + "'");
    }
    address = results.begin()->endpoint().address();
  }
  asio::ip::tcp::endpoint endpoint(address, port);
  listener.acceptor = std::make_unique<asio::ip::tcp::acceptor>(*io_contexts_[0]);
  listener.retry_timer = std::make_unique<asio::steady_timer>(*io_contexts_[0]);
  auto& acceptor = *listener.acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status(StatusCode::kIoError, std::string("cannot listen (") + listener.protocol +
                                            ") on " + host + ":" + std::to_string(port) + ": " +
                                            ec.message());
  }
  listener.port = acceptor.local_endpoint().port();
  return Status::Ok();
}

void Server::Accept(Listener& listener) {
  asio::io_context& target = *io_contexts_[next_io_context_];
  next_io_context_ = (next_io_context_ + 1) % io_contexts_.size();
  listener.acceptor->async_accept(target, [this, &listener](const asio::error_code& ec,
                                                            asio::ip::tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted) return;  // Stop() closed the acceptor
      // Out of file descriptors, typically: the pending connection stays in the backlog, so
      // retrying at once would spin. Wait a little; say so once per kAcceptLogInterval.
      if (uint64_t held = 0; accept_error_log_.Allow(std::chrono::steady_clock::now(), &held)) {
        spdlog::warn("accept failed: {}; retrying every 100 ms ({} failures since the last line)",
                     ec.message(), held + 1);
      }
      listener.retry_timer->expires_after(std::chrono::milliseconds(100));
      listener.retry_timer->async_wait([this, &listener](const asio::error_code& e) {
        if (!e) Accept(listener);
      });
      return;
    }
    uint64_t id = next_session_id_++;
    std::optional<Status> refusal;
    if (socket.native_handle() >= fd_limit_) {
      // Every descriptor below this one is open: the rest are the store's.
      refusal = Status(StatusCode::kResourceExhausted,
                       "the broker is at its file descriptor limit for connections; try again "
                       "later");
      if (uint64_t held = 0; fd_refusal_log_.Allow(std::chrono::steady_clock::now(), &held)) {
        spdlog::warn(
            "refusing connections: {} file descriptors open, the limit for connections (RLIMIT_"
            "NOFILE {} less [limits] reserved_fds {}); {} refused since the last line",
            fd_limit_, fd_soft_limit_, options_.reserved_fds, held + 1);
      }
    }
    std::unique_ptr<net::Stream> stream;
    if (listener.tls) {
      stream = std::make_unique<net::Stream>(std::move(socket), CurrentTls().context);
    } else {
      stream = std::make_unique<net::Stream>(std::move(socket));
    }
    auto session =
        std::make_shared<Connection>(std::move(stream), id, &context_, listener.make_codec);
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      if (!refusal && sessions_.size() >= options_.max_connections) {
        refusal = Status(StatusCode::kResourceExhausted,
                         "the broker already has its maximum of " +
                             std::to_string(options_.max_connections) + " connections");
      }
      sessions_.emplace(id, session);
    }
    asio::post(session->executor(), [session, refusal] {
      session->Start();
      if (refusal) session->Refuse(*refusal);
    });
    Accept(listener);
  });
}

Status Server::ReloadTls(const ServerOptions& options) {
  if (!tls_enabled()) return Status::Ok();  // no TLS listener: nothing uses the files
  WHARF_ASSIGN_OR_RETURN(auto fresh, net::MakeServerTlsContext(options.tls.settings));
  std::lock_guard lock(tls_mu_);
  tls_ = net::ServerTls{std::move(fresh), options.tls.settings};
  return Status::Ok();
}

net::ServerTls Server::CurrentTls() {
  std::lock_guard lock(tls_mu_);
  return tls_;
}

void Server::AfterBrokerWork() {
  broker_->Flush();
  auto next = broker_->NextDeadline();
  if (!next || (armed_deadline_ && *armed_deadline_ <= *next)) return;
  armed_deadline_ = next;
  broker_timer_->expires_at(*next);
  broker_timer_->async_wait([this](const asio::error_code& ec) {
    if (ec) return;
    armed_deadline_.reset();
    broker_->OnTimer();
    AfterBrokerWork();
  });
}

void Server::OnSessionClosed(uint64_t session_id) {
  std::lock_guard lock(mu_);
  sessions_.erase(session_id);
  if (sessions_.empty()) sessions_cv_.notify_all();
}

void Server::CloseConnections(std::function<bool(const Connection&)> which,
                              const std::string& why) {
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, weak] : sessions_) {
      if (auto connection = weak.lock()) live.push_back(std::move(connection));
    }
  }
  // A connection's user and vhost are its I/O thread's to read.
  for (auto& connection : live) {
    asio::post(connection->executor(), [connection, which, why] {
      if (which(*connection)) connection->Refuse(Status(StatusCode::kAccessRefused, why));
    });
  }
}

void Server::Stop() {
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  // Their handlers ask the broker thread, and wait for the login threads.
  if (metrics_) metrics_->Stop();
  if (metrics_tls_) metrics_tls_->Stop();
  {
    std::lock_guard lock(mu_);
    if (threads_.empty()) return;  // Start() failed before any thread ran
    for (auto& [id, weak] : sessions_) {
      if (auto session = weak.lock()) live.push_back(std::move(session));
    }
  }
  spdlog::info("wharfd stopping: closing {} connections", live.size());
  // Before any connection closes, so that their deliveries come back without counting.
  // AskBroker's promise is shared with the posted handler: a broker thread that answers after
  // the 5 s wait writes into a live promise, not into this frame.
  AskBroker<bool>(
      [this] {
        broker_->BeginShutdown();
        broker_->Flush();        // commits whatever the broker still spreads over flushes
        history_timer_.reset();  // no more samples (SampleHistory stops)
        return true;
      },
      std::chrono::seconds(5));
  asio::post(*io_contexts_[0], [this] {
    asio::error_code ignored;
    for (Listener* listener : listeners()) {
      if (!listener->acceptor) continue;
      listener->acceptor->close(ignored);
      listener->retry_timer->cancel();
    }
    if (flow_timer_) flow_timer_->cancel();
  });
  for (auto& session : live) {
    asio::post(session->executor(), [session] { session->Shutdown("server shutting down"); });
  }
  live.clear();
  {
    std::unique_lock lock(mu_);
    if (!sessions_cv_.wait_for(lock, std::chrono::seconds(10),
                               [this] { return sessions_.empty(); })) {
      spdlog::warn("wharfd stopping: {} connections did not close in 10 s", sessions_.size());
    }
  }
  // No check may post to an I/O context once they stop.
  login_checker_->Stop();
  // Let the broker thread run the CloseSession work the sessions posted (and commit what it
  // changed), then write everything the store holds, then run its last completions.
  auto drain_broker = [this] { AskBroker<bool>([] { return true; }, std::chrono::seconds(5)); };
  drain_broker();
  store_->Close();
  drain_broker();
  for (auto& guard : work_guards_) guard.reset();
  for (auto& context : io_contexts_) context->stop();
  broker_context_->stop();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  spdlog::info("wharfd stopped");
}

Server::~Server() {
  Stop();
  // Sessions hold sockets of the I/O contexts: release every holder of a session first.
  broker_.reset();
  store_.reset();  // after the broker, which points at it
  broker_timer_.reset();
  history_timer_.reset();
  broker_context_.reset();
  for (Listener* listener : listeners()) {
    listener->acceptor.reset();
    listener->retry_timer.reset();
  }
  flow_timer_.reset();
  io_contexts_.clear();
}

}  // namespace wharf::server
