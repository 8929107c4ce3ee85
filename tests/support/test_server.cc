#include "support/test_server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace wharf::testing {

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  char* made = mkdtemp(buf.data());
  return made ? std::string(made) : std::string();
}

TestServer::TestServer(std::vector<std::string> extra_args, uint64_t fd_limit, std::string data_dir)
    : extra_args_(std::move(extra_args)), fd_limit_(fd_limit) {
  dir_ = MakeTempDir("wharf-test");
  data_dir_ = data_dir.empty() ? dir_ + "/data" : std::move(data_dir);
  Launch();
}

bool TestServer::Restart() {
  Kill();
  Launch();
  return pid_ > 0 && port_ != 0;
}

void TestServer::Launch() {
  std::string ready = dir_ + "/ready";
  std::string log = dir_ + "/wharfd.log";
  std::error_code ec;
  std::filesystem::remove(ready, ec);
  port_ = 0;
  // The AMQP listener on a free port too: never 5672, which a RabbitMQ on this machine or
  // another test's wharfd may hold. A test's own --amqp-listen comes later and wins.
  std::vector<std::string> args = {WHARFD_PATH,   "--listen",    "127.0.0.1:0", "--amqp-listen",
                                   "127.0.0.1:0", "--data-dir",  data_dir_,     "--ready-file",
                                   ready,         "--log-level", "debug"};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  pid_ = fork();
  if (pid_ == 0) {
    // Appended: a test that restarts the broker keeps every run's log.
    FILE* out = std::freopen(log.c_str(), "a", stderr);
    (void)out;
    if (fd_limit_ != 0) {
      rlimit limit{fd_limit_, fd_limit_};
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(ready);
    std::string line;
    if (in && std::getline(in, line)) {
      // The plain native listener's "host:port", or "off".
      port_ =
          line == "off" ? 0 : static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
      // "metrics host:port", "amqp host:port", "tls host:port", "amqps host:port" and "https
      // host:port" follow when those listeners are on (the file is renamed into place whole).
      amqp_port_ = tls_port_ = amqps_port_ = https_port_ = 0;
      while (std::getline(in, line)) {
        auto port = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
        if (line.starts_with("metrics ")) metrics_port_ = port;
        if (line.starts_with("amqp ")) amqp_port_ = port;
        if (line.starts_with("tls ")) tls_port_ = port;
        if (line.starts_with("amqps ")) amqps_port_ = port;
        if (line.starts_with("https ")) https_port_ = port;
      }
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      ADD_FAILURE() << "wharfd exited during start-up:\n" << Log();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "wharfd did not become ready in 10 s:\n" << Log();
}

void TestServer::Signal(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

TestServer::~TestServer() {
  Kill();
  std::error_code ec;
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir_, ec);
}

ClientOptions TestServer::Options() const {
  ClientOptions options;
  options.host = "127.0.0.1";
  options.port = port_;
  options.request_timeout = std::chrono::seconds(10);
  return options;
}

std::unique_ptr<Client> TestServer::Connect() const {
  auto client = Client::Connect(Options());
  if (!client.ok()) {
    ADD_FAILURE() << "connect failed: " << client.status().ToString();
    return nullptr;
  }
  return std::move(client).value();
}

bool TestServer::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

int TestServer::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void TestServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string TestServer::Log() const {
  std::ifstream in(dir_ + "/wharfd.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RunCommand(const std::string& command, int* exit_code) {
  std::array<char, 4096> buf{};
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace wharf::testing
