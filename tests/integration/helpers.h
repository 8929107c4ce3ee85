// Helpers shared by the integration tests (the real wharfd, client and wharfctl).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "support/test_server.h"

namespace wharf::testing {

// A persistent message with this body.
inline Message PersistentMessage(const std::string& body) {
  Message m;
  m.body = body;
  m.persistent = true;
  return m;
}

// The wall clock in Unix milliseconds, as the broker stamps and compares due times.
inline int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Runs wharfctl against `server` with `args`; returns stdout and stderr together.
inline std::string Ctl(const TestServer& server, const std::string& args, int* code) {
  return RunCommand(
      std::string(WHARFCTL_PATH) + " --server " + server.address() + " " + args + " 2>&1", code);
}

// Runs wharfctl against `server` with `args`; returns stdout alone (stderr goes to the test's
// log), for output a parser reads.
inline std::string CtlStdout(const TestServer& server, const std::string& args, int* code) {
  return RunCommand(std::string(WHARFCTL_PATH) + " --server " + server.address() + " " + args,
                    code);
}

// `text` parsed by a real JSON parser; a test failure (and null) when it is not JSON.
inline nlohmann::json ParseJson(const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "): " << text;
    return nullptr;
  }
}

// Declares `dlq` and `queue`, which dead-letters into it (both durable).
inline void DeclareWithDeadLetterQueue(Client& client, const std::string& queue,
                                       const std::string& dlq) {
  QueueSpec d;
  d.name = dlq;
  d.durable = true;
  Status s = client.DeclareQueue(d).status();
  if (!s.ok()) ADD_FAILURE() << s.ToString();
  QueueSpec q;
  q.name = queue;
  q.durable = true;
  q.arguments["x-dead-letter-queue"] = dlq;
  s = client.DeclareQueue(q).status();
  if (!s.ok()) ADD_FAILURE() << s.ToString();
}

// A figure of /proc/`pid`/status in bytes, e.g. "VmRSS" (resident now) or "VmHWM" (the peak);
// 0 when it cannot be read.
inline uint64_t ProcStatusBytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

// True once `pred()` is (polled every 10 ms), false when it is not within `limit`.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(5'000)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// How many times `needle` occurs in `text` (log lines, typically).
inline size_t CountOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// A plain TCP connection to 127.0.0.1:`port` that sends `text` (maybe nothing) and stays open,
// for idle and slow clients; -1 (after ADD_FAILURE) when it cannot connect. The caller closes.
inline int OpenRawConnection(uint16_t port, const std::string& text = "") {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ADD_FAILURE() << "connect to port " << port << ": " << std::strerror(errno);
    if (fd >= 0) close(fd);
    return -1;
  }
  if (!text.empty() && send(fd, text.data(), text.size(), MSG_NOSIGNAL) < 0) {
    ADD_FAILURE() << "send: " << std::strerror(errno);
  }
  return fd;
}

}  // namespace wharf::testing
