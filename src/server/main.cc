// wharfd: the Wharf broker daemon. Parses flags and the config file, sets up logging, starts
// the Server and stops it cleanly on SIGINT or SIGTERM. The only top-level catch lives here.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>

#include <CLI/CLI.hpp>
#include <asio.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "protocol/protobuf_log.h"
#include "server/log_file.h"
#include "server/log_format.h"
#include "server/options.h"
#include "server/server.h"
#include "store/store_repair.h"
#include "wharf/version.h"

namespace {

constexpr const char* kFooter = R"(
Flags override the config file; --opt VALUE and --opt=VALUE both work. Exit codes: 0 clean
stop, 1 start-up failure, 2 bad usage (an unknown option, a missing or bad value).
--repair salvages every readable message of a damaged store (docs/operations.md, "A corrupt
store"): the damaged store is kept aside as <data_dir>/store.corrupt-<time>; exit code 0 once
the repaired store is in place, 1 when it could not be repaired (then nothing changed, unless
the message says where each store is).
Signals: SIGTERM/SIGINT stop cleanly; SIGHUP reopens the log file and reloads the config
file's users. Under systemd (Type=notify), READY=1 is sent once the store is recovered and
the listeners accept, STOPPING=1 when a stop begins.)";

// A --listen / --metrics-listen value: "host:port" with a port 0-65535.
CLI::Validator HostPortCheck() {
  return CLI::Validator(
      [](std::string& text) {
        std::string host;
        uint16_t port = 0;
        wharf::Status s = wharf::server::ParseHostPort(text, &host, &port);
        return s.ok() ? std::string() : std::string(s.message());
      },
      "");
}

// Every sink's format (server/log_format.h): the journal's when stderr is the journal.
void SetLogFormat(wharf::server::LogFormat format, bool to_stderr) {
  bool journal = to_stderr && wharf::server::StderrIsJournal();
  spdlog::set_formatter(wharf::server::MakeLogFormatter(format, journal));
}

int Fail(const std::string& message, int code) {
  spdlog::critical("{}", message);
  return code;
}

// SIGHUP: reopen the log file (logrotate moved it) and take the config file's users as they
// are now. Everything else in the config needs a restart.
void Reload(const std::string& config_path, wharf::server::RotatingLogFile* log,
            wharf::server::Server& server) {
  if (log) {
    try {
      log->Reopen();
    } catch (const spdlog::spdlog_ex& e) {
      std::fprintf(stderr, "wharfd: cannot reopen the log file: %s\n", e.what());
    }
  }
  if (config_path.empty()) {
    spdlog::info("SIGHUP: log reopened; no config file to reload users from");
    return;
  }
  wharf::server::ServerOptions fresh;
  wharf::Status s = wharf::server::LoadConfigFile(config_path, &fresh);
  if (!s.ok()) {
    spdlog::error("SIGHUP: config not reloaded, users unchanged: {}", s.ToString());
    return;
  }
  server.ReloadUsers(fresh);
  server.SetWatermarks(fresh);
  // The TLS files ([tls] cert, key, ca and their settings): new connections get them.
  wharf::Status tls = server.ReloadTls(fresh);
  if (!tls.ok()) {
    spdlog::error("SIGHUP: TLS files not reloaded, new connections keep the old ones: {}",
                  tls.ToString());
  }
  spdlog::info(
      "SIGHUP: log reopened; {} users, the flow watermarks{} of {} reloaded (other settings "
      "need a restart)",
      fresh.users.size(), tls.ok() && server.tls_enabled() ? " and the TLS files" : "",
      config_path);
}

int Run(int argc, char** argv) {
  using wharf::server::ServerOptions;
  ServerOptions options;
  std::string amqp_listen;
  std::string config_path, listen, data_dir, log_level, ready_file, definitions, metrics_listen,
      log_file, log_format;
  bool repair = false;
  CLI::App app("wharfd: the Wharf message broker daemon", "wharfd");
  app.set_version_flag("--version", "wharfd " WHARF_VERSION, "Print the version and exit");
  app.set_help_flag("-h,--help", "Print this help and exit");
  app.footer(kFooter);
  // A flag given twice: the last one counts (scripts append overrides).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--config", config_path,
                 "TOML config file (see config/wharfd.toml); built-in defaults without it")
      ->type_name("FILE");
  app.add_option("--listen", listen,
                 "Address to listen on (default 127.0.0.1:5680; port 0 picks a free one; "
                 "\"off\" turns the clear-text native listener off: needs [tls] listen)")
      ->type_name("HOST:PORT|off")
      ->check(HostPortCheck() | CLI::IsMember({"off"}));
  app.add_option("--amqp-listen", amqp_listen,
                 "Address of the AMQP 0-9-1 listener (default 127.0.0.1:5672; port 0 picks a "
                 "free one; \"off\" turns it off)")
      ->type_name("HOST:PORT|off")
      ->check(HostPortCheck() | CLI::IsMember({"off"}));
  app.add_option("--data-dir", data_dir, "Where the broker keeps its data (default ./data)")
      ->type_name("DIR");
  app.add_option("--log-level", log_level, "Log level (default info)")
      ->type_name("LEVEL")
      ->check(CLI::IsMember(wharf::server::LogLevelNames()));
  app.add_option("--log-file", log_file,
                 "Log to FILE (rotated by size, [log] in the config) instead of stderr")
      ->type_name("FILE");
  app.add_option("--log-format", log_format,
                 "text (default; UTC timestamps) or json (one object per line)")
      ->type_name("FORMAT")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--metrics-listen", metrics_listen,
                 "Serve Prometheus /metrics and /healthz over HTTP there (off by default; port 0 "
                 "picks a free one)")
      ->type_name("HOST:PORT")
      ->check(HostPortCheck());
  app.add_option("--ready-file", ready_file,
                 "Write \"host:port\" to FILE once listening (\"off\" without it), then a line "
                 "\"NAME host:port\" per other listener: metrics, amqp, tls, amqps, https")
      ->type_name("FILE");
  app.add_option("--definitions", definitions,
                 "Import this definitions file (RabbitMQ's JSON, from rabbitmqctl "
                 "export_definitions or wharfctl export) before accepting connections; a file "
                 "that cannot be applied whole stops the start (docs/definitions.md)")
      ->type_name("FILE");
  app.add_flag("--repair", repair,
               "Repair a damaged message store (the --config and --data-dir of a normal start), "
               "print what was salvaged and exit; wharfd must not be running");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForVersion& e) {
    std::puts(e.what());
    return 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help: printed to stdout
    std::fprintf(stderr, "wharfd: %s\nRun 'wharfd --help' for the options.\n", e.what());
    return 2;
  }

  if (!config_path.empty()) {
    wharf::Status s = wharf::server::LoadConfigFile(config_path, &options);
    if (!s.ok()) return Fail(s.ToString(), 1);
  }
  if (!listen.empty()) {
    wharf::Status s = wharf::server::ParseListenAddress(listen, &options);
    if (!s.ok()) return Fail(s.ToString(), 2);
  }
  if (!metrics_listen.empty()) {
    wharf::Status s = wharf::server::ParseMetricsAddress(metrics_listen, &options);
    if (!s.ok()) return Fail(s.ToString(), 2);
  }
  if (!amqp_listen.empty()) {
    wharf::Status s = wharf::server::ParseAmqpAddress(amqp_listen, &options);
    if (!s.ok()) return Fail(s.ToString(), 2);
  }
  if (!data_dir.empty()) options.data_dir = data_dir;
  if (!log_level.empty()) options.log_level = log_level;
  if (!ready_file.empty()) options.ready_file = ready_file;
  if (!definitions.empty()) options.definitions_file = definitions;
  if (!log_file.empty()) options.log_file = log_file;
  if (!log_format.empty()) options.log_format = log_format;
  wharf::Status valid = wharf::server::ValidateOptions(options);
  if (!valid.ok()) return Fail(valid.ToString(), 2);
  std::shared_ptr<wharf::server::RotatingLogFile> log_sink;
  if (!options.log_file.empty()) {
    try {
      log_sink = std::make_shared<wharf::server::RotatingLogFile>(
          options.log_file, options.log_max_bytes, options.log_max_files);
    } catch (const spdlog::spdlog_ex& e) {
      return Fail("cannot open the log file '" + options.log_file + "': " + e.what(), 1);
    }
    auto logger = std::make_shared<spdlog::logger>("wharfd", log_sink);
    spdlog::set_default_logger(logger);
    spdlog::flush_every(std::chrono::seconds(1));
    spdlog::flush_on(spdlog::level::warn);
  }
  SetLogFormat(*wharf::server::ParseLogFormat(options.log_format), options.log_file.empty());
  spdlog::set_level(spdlog::level::from_str(options.log_level));

  // Each connection is a file descriptor: raise the soft limit as far as allowed, and say so
  // when max_connections cannot be reached (accept then fails and is retried every 100 ms).
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    if (files.rlim_cur < files.rlim_max) {
      files.rlim_cur = files.rlim_max;
      setrlimit(RLIMIT_NOFILE, &files);
      getrlimit(RLIMIT_NOFILE, &files);
    }
    constexpr rlim_t kReservedFiles = 64;  // data files, logs, listener
    if (files.rlim_cur < options.max_connections + kReservedFiles) {
      spdlog::warn("max_connections is {} but only {} file descriptors are allowed (ulimit -n)",
                   options.max_connections, files.rlim_cur);
    }
  }

  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  if (ec) return Fail("cannot create data_dir '" + options.data_dir + "': " + ec.message(), 1);

  // The repair command for this configuration, as the error of a damaged store gives it.
  // Quoted for a POSIX shell where needed, so that it can be pasted as it is.
  auto quoted = [](const std::string& word) {
    if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
                                                "WXYZ0123456789/._-+=:,@%") == std::string::npos) {
      return word;
    }
    std::string out = "'";
    for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  };
  std::string repair_command = "wharfd --repair";
  if (!config_path.empty()) repair_command += " --config " + quoted(config_path);
  if (!data_dir.empty()) repair_command += " --data-dir " + quoted(data_dir);
  if (repair) {
    const std::string store = options.data_dir + "/store";
    spdlog::info("repairing the message store at {}", store);
    auto report = wharf::store::RepairStore(store);
    if (!report.ok()) return Fail("repair failed: " + report.status().ToString(), 1);
    std::fputs(wharf::store::FormatRepairReport(*report).c_str(), stdout);
    spdlog::info("repair finished; start wharfd as usual");
    return 0;
  }

  sd_notify(0, "STATUS=recovering the message store");
  auto server = wharf::server::Server::Start(options);
  if (!server.ok()) {
    std::string message = server.status().ToString();
    const std::string generic = "wharfd --repair (with the --config and --data-dir of this start;";
    if (auto at = message.find(generic); at != std::string::npos) {
      message.replace(at, generic.size() + 1, repair_command + " (");  // and its space
    }
    return Fail(message, 1);
  }

  if (!options.ready_file.empty()) {
    std::string tmp = options.ready_file + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      // The plain native listener first ("off" when there is none), then the others by name.
      if (options.listen_enabled) {
        out << options.listen_host << ":" << (*server)->port() << "\n";
      } else {
        out << "off\n";
      }
      if (options.metrics_enabled) {
        out << "metrics " << options.metrics_host << ":" << (*server)->metrics_port() << "\n";
      }
      if (options.amqp.enabled) {
        out << "amqp " << options.amqp.listen_host << ":" << (*server)->amqp_port() << "\n";
      }
      if (options.tls.native_enabled) {
        out << "tls " << options.tls.native_host << ":" << (*server)->tls_port() << "\n";
      }
      if (options.tls.amqp_enabled) {
        out << "amqps " << options.tls.amqp_host << ":" << (*server)->amqps_port() << "\n";
      }
      if (options.tls.metrics_enabled) {
        out << "https " << options.tls.metrics_host << ":" << (*server)->metrics_tls_port() << "\n";
      }
    }
    std::filesystem::rename(tmp, options.ready_file, ec);
    if (ec) return Fail("cannot write ready file: " + ec.message(), 1);
  }
  // The store is recovered and the listeners accept (Server::Start returned): systemd may
  // start what depends on wharfd. A no-op when NOTIFY_SOCKET is unset.
  std::string status =
      "listening on " + (options.listen_enabled
                             ? options.listen_host + ":" + std::to_string((*server)->port())
                             : std::string("no clear-text native port"));
  if (options.tls.native_enabled) {
    status += ", TLS on " + options.tls.native_host + ":" + std::to_string((*server)->tls_port());
  }
  if (options.tls.amqp_enabled) {
    status += ", AMQPS on " + options.tls.amqp_host + ":" + std::to_string((*server)->amqps_port());
  }
  if (options.metrics_enabled) {
    status +=
        ", metrics on " + options.metrics_host + ":" + std::to_string((*server)->metrics_port());
  }
  if (options.tls.metrics_enabled) {
    status += ", metrics over HTTPS on " + options.tls.metrics_host + ":" +
              std::to_string((*server)->metrics_tls_port());
  }
  if (options.amqp.enabled) {
    status +=
        ", AMQP on " + options.amqp.listen_host + ":" + std::to_string((*server)->amqp_port());
  }
  sd_notify(0, ("READY=1\nSTATUS=" + status).c_str());

  asio::io_context signals_context(1);
  asio::signal_set signals(signals_context, SIGINT, SIGTERM, SIGHUP);
  std::function<void(const asio::error_code&, int)> on_signal = [&](const asio::error_code& error,
                                                                    int signal) {
    if (error) return;
    if (signal != SIGHUP) {
      spdlog::info("received {}, shutting down", strsignal(signal));
      sd_notify(0, "STOPPING=1\nSTATUS=stopping: closing connections");
      return;  // run() returns: nothing else waits
    }
    Reload(config_path, log_sink.get(), **server);
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  signals_context.run();
  (*server)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("wharfd"));
  SetLogFormat(wharf::server::LogFormat::kText, /*to_stderr=*/true);
  // libprotobuf's own lines (a client's invalid UTF-8) go through spdlog, not past it.
  wharf::protocol::InstallProtobufLogHandler();
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    spdlog::critical("fatal: {}", e.what());
    return 1;
  }
}
