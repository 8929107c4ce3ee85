// wharf-perf: see perf.h and docs/benchmarks.md. Exit codes: 0 run completed, 1 the run hit
// errors or the broker went away (the summary is printed either way), 2 bad usage.
#include <CLI/CLI.hpp>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/validators.h"
#include "perf/perf.h"
#include "wharf/types.h"
#include "wharf/version.h"

namespace {

using wharf::perf::Options;
using wharf::perf::Run;

volatile std::sig_atomic_t g_interrupted = 0;

// amqp://user:pass@host:port/vhost (vhost "%2f" or empty means "/").
bool ParseUri(const std::string& uri, Options* o) {
  const std::string scheme = "amqp://";
  if (uri.rfind(scheme, 0) != 0) return false;
  std::string rest = uri.substr(scheme.size());
  size_t at = rest.find('@');
  if (at != std::string::npos) {
    std::string creds = rest.substr(0, at);
    size_t colon = creds.find(':');
    o->user = creds.substr(0, colon);
    o->password = colon == std::string::npos ? "" : creds.substr(colon + 1);
    rest = rest.substr(at + 1);
  }
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  std::string vhost = slash == std::string::npos ? "" : rest.substr(slash + 1);
  o->vhost = vhost.empty() || vhost == "%2f" || vhost == "%2F" ? "/" : vhost;
  if (hostport.find(':') == std::string::npos) hostport += ":5672";
  return wharf::cli::ParseHostPort(hostport, &o->host, &o->port);
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "wharf-perf: %s\nRun 'wharf-perf --help' for usage.\n", message.c_str());
  return 2;
}

// The command line into `o` (CLI11); an exit code when the program should stop there.
std::optional<int> ParseCommandLine(int argc, char** argv, Options* o, bool* server_given,
                                    bool* uri_given) {
  using wharf::cli::HostPort;
  using wharf::cli::Unsigned;
  CLI::App app("wharf-perf " WHARF_VERSION
               ": a load generator for Wharf (native protocol) and AMQP 0-9-1 brokers; a run "
               "needs --count and/or --duration",
               "wharf-perf");
  app.set_version_flag("--version", "wharf-perf " WHARF_VERSION);
  app.get_formatter()->column_width(36);
  app.footer(
      "Exit codes: 0 run completed, 1 the run hit errors or the broker went away (the "
      "summary is printed either way), 2 bad usage. See docs/benchmarks.md.");
  std::string server;
  app.add_option("--driver", o->driver, "native: the Wharf protocol; amqp: AMQP 0-9-1 (rabbitmq-c)")
      ->check(CLI::IsMember({"native", "amqp"}))
      ->capture_default_str();
  CLI::Option* server_opt =
      app.add_option("--server", server, "native broker (default 127.0.0.1:5680)")
          ->check(HostPort());
  CLI::Option* uri_opt =
      app.add_option("--uri", o->uri, "amqp broker (default amqp://guest:guest@127.0.0.1:5672/)");
  server_opt->excludes(uri_opt);
  app.add_flag("--tls", o->tls, "native: connect with TLS (the broker's [tls] listen port)");
  app.add_option("--ca", o->ca_file, "native: PEM CAs for the broker's certificate (with --tls)")
      ->check(CLI::ExistingFile);
  app.add_option("--user", o->user, "user (default guest, the loopback user)");
  app.add_option("--password", o->password, "password (default guest)");
  CLI::Option* vhost_opt =
      app.add_option("--vhost", o->vhost, "native: the virtual host to use (default /)");
  vhost_opt->excludes(uri_opt);
  app.add_option("--queue", o->queue, "queue name (with --queues N: NAME-0..NAME-N-1)")
      ->capture_default_str();
  app.add_option("--queues", o->queues, "number of queues")
      ->check(Unsigned(1, 100'000))
      ->capture_default_str();
  app.add_option("--exchange-type", o->exchange_type,
                 "publish through an exchange of this type bound to each queue (default: the "
                 "default exchange, by queue name)")
      ->check(CLI::IsMember({"direct", "fanout", "topic"}));
  app.add_option("--producers", o->producers, "producer connections")
      ->check(Unsigned(0, 10'000))
      ->capture_default_str();
  app.add_option("--consumers", o->consumers, "consumer connections")
      ->check(Unsigned(0, 10'000))
      ->capture_default_str();
  app.add_option("--size", o->size, "body size in bytes (at least 8: the send time is in it)")
      ->check(Unsigned(8, 512u << 20))
      ->capture_default_str();
  app.add_flag("--persistent", o->persistent, "durable queues and persistent messages");
  app.add_option("--confirm", o->confirm,
                 "publisher confirms, at most WINDOW unconfirmed per producer")
      ->check(Unsigned(1, 1'000'000));
  app.add_option("--amqp-writes", o->amqp_writes,
                 "amqp driver: each = rabbitmq-c's basic_publish, three send() calls per "
                 "message; batched = many publishes per send(), as the native client writes")
      ->check(CLI::IsMember({"each", "batched"}))
      ->capture_default_str();
  app.add_option("--prefetch", o->prefetch, "consumer prefetch")
      ->check(Unsigned(0, 65'535))
      ->capture_default_str();
  app.add_option("--ack-every", o->ack_every, "ack every Nth delivery with multiple=true")
      ->check(Unsigned(1, 65'535))
      ->capture_default_str();
  app.add_option("--rate", o->rate, "total publish rate in msgs/s (default: flat out)")
      ->check(wharf::cli::Finite(0, 1e9));
  app.add_option("--count", o->count, "total messages to publish")->check(Unsigned(1, UINT64_MAX));
  app.add_option("--duration", o->duration_s, "run for S seconds")
      ->check(wharf::cli::Finite(0, 1e7));
  app.add_option("--delay", o->delay_ms,
                 "publish every message delayed by MS (native only) and report how late each "
                 "was delivered")
      ->check(Unsigned(0, uint64_t{1} << 62));
  app.add_option("--dedup-window", o->dedup_window_ms,
                 "declare the queues with this deduplication window (x-deduplication-window, "
                 "native only, with --persistent) and give every message its own key")
      ->check(Unsigned(1, 604'800'000));
  app.add_flag("--dedup-keys", o->dedup_keys,
               "give every message its own deduplication id without declaring a window (what "
               "the key costs apart from the window; native only)");
  app.add_flag("--dedup-header", o->dedup_header,
               "with --dedup-window or --dedup-keys: carry each key in the message's "
               "x-deduplication-header instead of the publish's deduplication_id");
  app.add_flag("--dedup-random", o->dedup_random,
               "with --dedup-window or --dedup-keys: keys in no order (16 hex digits of a "
               "bijective hash of the sequence number, unique like UUIDs) instead of the "
               "sequence number itself");
  app.add_flag("--dedup-ordered", o->dedup_ordered,
               "with --dedup-window or --dedup-keys: keys in byte order (the sequence number "
               "zero-padded to 20 digits, rising like ULIDs or UUIDv7) instead of the bare "
               "sequence number, whose byte order is not its numeric order")
      ->excludes("--dedup-random");
  app.add_option("--max-priority", o->max_priority,
                 "declare the queues with x-max-priority N and publish priorities 0..N in turn")
      ->check(Unsigned(1, 255));
  app.add_option("--groups", o->groups,
                 "declare the queues with x-message-groups and spread the messages over N groups "
                 "(x-group-id; native only)")
      ->check(Unsigned(1, 100'000'000));
  app.add_option("--priority", o->priority,
                 "with --max-priority: publish every message at priority P")
      ->check(Unsigned(0, 255));
  app.add_flag("--delete", o->delete_queues, "delete the queues (and exchange) at the end");
  app.add_flag("--json", o->json, "print the summary as one JSON object (last line)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return Usage(e.what());
  }
  *server_given = server_opt->count() > 0;
  *uri_given = uri_opt->count() > 0;
  if (*server_given) wharf::cli::ParseHostPort(server, &o->host, &o->port);
  return std::nullopt;
}

double Rate(uint64_t n, double seconds) {
  return seconds > 0 ? static_cast<double>(n) / seconds : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool server_given = false, uri_given = false;
  if (auto rc = ParseCommandLine(argc, argv, &o, &server_given, &uri_given)) return *rc;
  if (o.driver == "amqp" && o.delay_ms > 0) return Usage("--delay needs the native driver");
  if (o.tls && o.driver == "amqp") return Usage("--tls is for the native driver");
  if (o.dedup_keys && o.driver == "amqp") return Usage("--dedup-keys needs the native driver");
  if (o.dedup_header && !o.dedup_keys && o.dedup_window_ms == 0) {
    return Usage("--dedup-header needs --dedup-window or --dedup-keys");
  }
  if (o.dedup_random && !o.dedup_keys && o.dedup_window_ms == 0) {
    return Usage("--dedup-random needs --dedup-window or --dedup-keys");
  }
  if (o.dedup_ordered && !o.dedup_keys && o.dedup_window_ms == 0) {
    return Usage("--dedup-ordered needs --dedup-window or --dedup-keys");
  }
  if (o.dedup_window_ms > 0 && (o.driver == "amqp" || !o.persistent)) {
    return Usage("--dedup-window needs the native driver and --persistent (durable queues)");
  }
  if (o.priority >= 0 && o.max_priority == 0) return Usage("--priority needs --max-priority");
  if (o.groups > 0 && o.driver == "amqp") return Usage("--groups needs the native driver");
  if (o.groups > 0 && o.max_priority > 0) {
    return Usage("--groups and --max-priority cannot be combined (a queue has one or the other)");
  }
  if (o.count == 0 && o.duration_s <= 0) {
    return Usage("a run is always bounded: give --count N and/or --duration S");
  }
  if (o.prefetch > 0 && o.ack_every > o.prefetch) {
    return Usage("--ack-every larger than --prefetch would stall the consumers");
  }
  if (o.driver == "amqp") {
    if (server_given) return Usage("--server is for the native driver; use --uri");
    if (!ParseUri(uri_given ? o.uri : "amqp://guest:guest@127.0.0.1:5672/", &o)) {
      return Usage("--uri must look like amqp://user:pass@host:port/vhost");
    }
  } else if (uri_given) {
    return Usage("--uri is for the amqp driver; use --server");
  } else if (o.amqp_writes != "each") {
    return Usage("--amqp-writes is for the amqp driver");
  }

  std::signal(SIGINT, [](int) { g_interrupted = 1; });
  std::signal(SIGPIPE, SIG_IGN);

  Run run;
  run.options = o;
  auto driver =
      o.driver == "native" ? wharf::perf::MakeNativeDriver() : wharf::perf::MakeAmqpDriver();
  if (wharf::Status s = driver->Setup(run); !s.ok()) {
    std::fprintf(stderr, "wharf-perf: setup failed: %s\n", s.ToString().c_str());
    return 1;
  }
  run.start = std::chrono::steady_clock::now();
  std::vector<std::thread> consumers, producers;
  for (int i = 0; i < o.consumers; ++i) {
    consumers.emplace_back([&run, &driver, i] { driver->Consume(run, i); });
  }
  for (int i = 0; i < o.producers; ++i) {
    producers.emplace_back([&run, &driver, i] { driver->Produce(run, i); });
  }
  std::thread producer_waiter([&] {
    for (auto& t : producers) t.join();
    run.producers_done = true;
  });

  // Each message reaches one queue, or every queue through a fanout exchange.
  // A consume-only run (--producers 0) drains --count messages already in the queues.
  auto expected = [&] {
    uint64_t per = o.exchange_type == "fanout" ? static_cast<uint64_t>(o.queues) : 1;
    return o.producers == 0 ? o.count : run.stats.published.load() * per;
  };
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - run.start).count();
  };
  uint64_t last_pub = 0, last_conf = 0, last_recv = 0, idle_ticks = 0;
  double producers_finished_at = -1;
  auto next_tick = run.start;
  while (!run.stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    double t = elapsed();
    if (g_interrupted) {
      std::fprintf(stderr, "wharf-perf: interrupted\n");
      run.stop = true;
      break;
    }
    if (o.duration_s > 0 && t >= o.duration_s) run.stop = true;
    if (run.producers_done && producers_finished_at < 0) producers_finished_at = t;
    if (run.producers_done) {
      bool drained = o.consumers == 0 || run.stats.received.load() >= expected();
      if (drained) run.stop = true;
    }
    if (std::chrono::steady_clock::now() >= next_tick + std::chrono::seconds(1)) {
      next_tick += std::chrono::seconds(1);
      uint64_t pub = run.stats.published, conf = run.stats.confirmed, recv = run.stats.received;
      std::fprintf(stderr, "[%5.1fs] published %9llu/s  confirmed %9llu/s  received %9llu/s\n", t,
                   static_cast<unsigned long long>(pub - last_pub),
                   static_cast<unsigned long long>(conf - last_conf),
                   static_cast<unsigned long long>(recv - last_recv));
      // Consumers that make no progress for 10 s after the producers finished: give up.
      idle_ticks = (run.producers_done && recv == last_recv) ? idle_ticks + 1 : 0;
      if (idle_ticks >= 10 + o.delay_ms / 1000) {
        run.Fail("consumers stalled: received " + std::to_string(recv) + " of " +
                 std::to_string(expected()));
        run.stop = true;
      }
      last_pub = pub, last_conf = conf, last_recv = recv;
    }
  }
  double total_s = elapsed();
  producer_waiter.join();
  for (auto& t : consumers) t.join();
  if (o.delete_queues) {
    if (wharf::Status s = driver->Teardown(run); !s.ok()) run.Fail("teardown: " + s.ToString());
  }

  auto& st = run.stats;
  double pub_s = producers_finished_at > 0 ? producers_finished_at : total_s;
  double pub_rate = Rate(st.published, pub_s);
  double cons_rate = Rate(st.received, total_s);
  uint64_t c50 = st.confirm_latency.Percentile(50), c95 = st.confirm_latency.Percentile(95),
           c99 = st.confirm_latency.Percentile(99), cmax = st.confirm_latency.Max();
  uint64_t e50 = st.e2e_latency.Percentile(50), e95 = st.e2e_latency.Percentile(95),
           e99 = st.e2e_latency.Percentile(99);
  auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf(
      "summary: %s driver, %d producer(s), %d consumer(s), %d queue(s), %zu-byte %s messages, "
      "confirm window %u, %.1f s\n",
      o.driver.c_str(), o.producers, o.consumers, o.queues, o.size,
      o.persistent ? "persistent" : "transient", o.confirm, total_s);
  std::printf("  publish   %12.0f msg/s   (%llu published, %llu confirmed)\n", pub_rate,
              u(st.published), u(st.confirmed));
  std::printf("  consume   %12.0f msg/s   (%llu received, %llu redelivered)\n", cons_rate,
              u(st.received), u(st.redelivered));
  std::printf("  confirm latency  p50 %llu us  p95 %llu us  p99 %llu us  max %llu us\n", u(c50),
              u(c95), u(c99), u(cmax));
  std::printf("  end-to-end       p50 %llu us  p95 %llu us  p99 %llu us\n", u(e50), u(e95), u(e99));
  uint64_t l50 = st.lateness.Percentile(50), l99 = st.lateness.Percentile(99),
           lmax = st.lateness.Max();
  if (o.delay_ms > 0) {
    std::printf("  lateness (delay %llu ms)  p50 %llu us  p99 %llu us  max %llu us  early %llu\n",
                u(o.delay_ms), u(l50), u(l99), u(lmax), u(st.early));
  }
  if (st.unsent > 0) {
    std::printf(
        "  unsent %llu (without confirm, not known to have reached the broker: not counted)\n",
        u(st.unsent));
  }
  std::printf("  errors %llu%s%s\n", u(st.errors),
              run.first_error.empty() ? "" : ": first: ", run.first_error.c_str());
  if (o.json) {
    // One line, keys in this order, through nlohmann-json (a first error may hold any bytes).
    auto whole = [](double v) { return static_cast<int64_t>(std::llround(v)); };
    nlohmann::ordered_json summary = {
        {"driver", o.driver},
        {"pub_rate", whole(pub_rate)},
        {"cons_rate", whole(cons_rate)},
        {"conf_p50_us", c50},
        {"conf_p95_us", c95},
        {"conf_p99_us", c99},
        {"conf_max_us", cmax},
        {"e2e_p50_us", e50},
        {"e2e_p95_us", e95},
        {"e2e_p99_us", e99},
        {"published", st.published.load()},
        {"confirmed", st.confirmed.load()},
        {"received", st.received.load()},
        {"redelivered", st.redelivered.load()},
        {"errors", st.errors.load()},
        {"unsent", st.unsent.load()},
        {"seconds", std::round(total_s * 100) / 100},
        {"dedup_window_ms", o.dedup_window_ms},
        {"dedup_keys", o.dedup_keys || o.dedup_window_ms > 0},
        {"dedup_header", o.dedup_header},
        {"dedup_random", o.dedup_random},
        {"dedup_ordered", o.dedup_ordered},
        {"max_priority", o.max_priority},
        {"groups", o.groups},
        {"delay_ms", o.delay_ms},
        {"late_p50_us", l50},
        {"late_p99_us", l99},
        {"late_max_us", lmax},
        {"early", st.early.load()},
        {"first_error", run.first_error.empty() ? nlohmann::ordered_json()
                                                : nlohmann::ordered_json(run.first_error)}};
    std::puts(
        summary.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  } else {
    std::printf(
        "RESULT driver=%s pub_rate=%.0f conf_p50_us=%llu conf_p95_us=%llu conf_p99_us=%llu "
        "conf_max_us=%llu cons_rate=%.0f e2e_p50_us=%llu e2e_p95_us=%llu e2e_p99_us=%llu "
        "published=%llu confirmed=%llu received=%llu redelivered=%llu errors=%llu seconds=%.2f "
        "delay_ms=%llu late_p50_us=%llu late_p99_us=%llu late_max_us=%llu early=%llu\n",
        o.driver.c_str(), pub_rate, u(c50), u(c95), u(c99), u(cmax), cons_rate, u(e50), u(e95),
        u(e99), u(st.published), u(st.confirmed), u(st.received), u(st.redelivered), u(st.errors),
        total_s, u(o.delay_ms), u(l50), u(l99), u(lmax), u(st.early));
  }
  return st.errors == 0 && st.early == 0 ? 0 : 1;
}
