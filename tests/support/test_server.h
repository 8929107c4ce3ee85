// tests/support/test_server.h
//
// TestServer runs the real wharfd binary as a child process on an ephemeral 127.0.0.1 port with
// a temporary data directory, for integration and crash tests. Connect() gives a client logged
// in as the loopback guest. The destructor kills the child and removes the directory.
//
// Thread safety: not thread-safe; one test thread owns it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wharf/client.h"

namespace wharf::testing {

class TestServer {
 public:
  // Starts wharfd with `extra_args` appended (e.g. {"--config", path}). Fails the current
  // test (ADD_FAILURE) if it does not become ready within 10 s. A non-zero `fd_limit` is set
  // as the child's RLIMIT_NOFILE (soft and hard) before it runs wharfd (ulimit -n). A
  // non-empty `data_dir` is used instead of <dir()>/data (the log stays in dir()).
  explicit TestServer(std::vector<std::string> extra_args = {}, uint64_t fd_limit = 0,
                      std::string data_dir = "");
  ~TestServer();

  // The plain native listener's port; 0 when a config turned it off.
  uint16_t port() const { return port_; }
  // The metrics listener's port, when started with --metrics-listen; else 0.
  uint16_t metrics_port() const { return metrics_port_; }
  // The AMQP 0-9-1 listener's port (on a free port unless the test said otherwise); 0 when off.
  uint16_t amqp_port() const { return amqp_port_; }
  // The TLS listeners' ports ([tls] listen and amqp_listen in a config file); 0 when off.
  uint16_t tls_port() const { return tls_port_; }
  uint16_t amqps_port() const { return amqps_port_; }
  // The HTTPS metrics listener's port ([tls] metrics_listen); 0 when off.
  uint16_t https_port() const { return https_port_; }
  const std::string& dir() const { return dir_; }
  // The wharfd child's process id (-1 when it is not running), e.g. to read /proc/PID/status.
  pid_t pid() const { return pid_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // True while the wharfd child is alive (a crashed child is reaped here).
  bool running();

  ClientOptions Options() const;
  std::unique_ptr<Client> Connect() const;  // ADD_FAILURE and nullptr on error

  // Kills wharfd if it runs and starts it again on the same data directory (on a new port).
  // Returns false (after ADD_FAILURE) when it does not come up.
  bool Restart();
  // SIGTERM and wait; returns the exit status (or -1).
  int Stop();
  // SIGKILL and wait.
  void Kill();
  // Sends `signal` (e.g. SIGHUP) and returns at once.
  void Signal(int signal);
  // The daemon's log so far (stderr).
  std::string Log() const;

 private:
  void Launch();

  std::vector<std::string> extra_args_;
  uint64_t fd_limit_ = 0;
  std::string dir_;
  std::string data_dir_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  uint16_t metrics_port_ = 0;
  uint16_t amqp_port_ = 0;
  uint16_t tls_port_ = 0;
  uint16_t amqps_port_ = 0;
  uint16_t https_port_ = 0;
};

// A fresh temporary directory under $TMPDIR (or /tmp), removed by the caller.
std::string MakeTempDir(const std::string& prefix);

// Runs `command` with /bin/sh and returns its stdout; `exit_code` gets its exit status (-1 if
// it did not exit normally). For driving wharfctl and wharf-perf as subprocesses.
std::string RunCommand(const std::string& command, int* exit_code);

}  // namespace wharf::testing
