// wharfd under systemd's Type=notify: READY=1 once the store is recovered and the listener
// accepts, STOPPING=1 when SIGTERM arrives (sd_notify(3), through NOTIFY_SOCKET).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <asio.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "support/test_server.h"

namespace wharf {
namespace {

// A unix datagram socket bound where NOTIFY_SOCKET points, as systemd's.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path.copy(address.sun_path, sizeof(address.sun_path) - 1);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ADD_FAILURE() << "bind " << path << ": " << std::strerror(errno);
    }
  }
  ~NotifySocket() {
    close(fd_);
    unlink(path_.c_str());
  }
  // The next datagram, or "" after `timeout_ms`.
  std::string Next(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return "";
    char buffer[4096];
    ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
  }
  // Datagrams until one contains `needle` (returned), or "" after `timeout_ms` each.
  std::string WaitFor(const std::string& needle, int timeout_ms, std::vector<std::string>* seen) {
    for (std::string message; !(message = Next(timeout_ms)).empty();) {
      seen->push_back(message);
      if (message.find(needle) != std::string::npos) return message;
    }
    return "";
  }

 private:
  std::string path_;
  int fd_ = -1;
};

bool Accepts(uint16_t port) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  asio::error_code ec;
  socket.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  return !ec;
}

TEST(SystemdNotify, ReadyAfterTheListenerAcceptsAndStoppingAtSigterm) {
  std::string dir = testing::MakeTempDir("wharf-notify");
  NotifySocket notify(dir + "/notify.sock");
  setenv("NOTIFY_SOCKET", (dir + "/notify.sock").c_str(), 1);
  testing::TestServer server;
  unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(server.running());

  std::vector<std::string> seen;
  std::string ready = notify.WaitFor("READY=1", 10'000, &seen);
  ASSERT_FALSE(ready.empty()) << "no READY=1; got " << seen.size() << " messages";
  EXPECT_NE(ready.find("STATUS=listening on 127.0.0.1:" + std::to_string(server.port())),
            std::string::npos)
      << ready;
  EXPECT_TRUE(Accepts(server.port())) << "READY=1 is sent only once the listener accepts";
  ASSERT_GE(seen.size(), 2u);
  EXPECT_NE(seen.front().find("STATUS=recovering"), std::string::npos) << seen.front();

  EXPECT_EQ(server.Stop(), 0);  // SIGTERM, then waits for the exit; the datagram stays queued
  std::string stopping = notify.WaitFor("STOPPING=1", 1'000, &seen);
  EXPECT_FALSE(stopping.empty()) << "no STOPPING=1 at SIGTERM";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wharf
