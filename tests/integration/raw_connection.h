// RawConnection: a blocking socket speaking raw bytes to wharfd, for sending what no real client
// would (bad frames, half frames, slow frames). Shared by the integration tests.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <asio.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "net/frame.h"
#include "protocol/codec.h"

namespace wharf::testing {

namespace pb = ::wharf::wire::v1;

class RawConnection {
 public:
  using Frame = pb::Frame;

  // A non-zero `receive_buffer` sets SO_RCVBUF (before connecting, so the window stays
  // small): a connection that stops reading then holds little in the kernel.
  explicit RawConnection(uint16_t port, int receive_buffer = 0) : socket_(io_) {
    if (receive_buffer > 0) {
      socket_.open(asio::ip::tcp::v4());
      setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVBUF, &receive_buffer,
                 sizeof receive_buffer);
    }
    socket_.connect({asio::ip::make_address("127.0.0.1"), port});
  }

  void SendBytes(const std::string& bytes) { asio::write(socket_, asio::buffer(bytes)); }
  // Sends what the socket takes now, without waiting; returns how many bytes that was.
  size_t SendSome(std::string_view bytes) {
    ssize_t n =
        send(socket_.native_handle(), bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    return n > 0 ? static_cast<size_t>(n) : 0;
  }
  void SendFrame(const pb::Frame& frame) {
    std::string out;
    protocol::AppendFrame(frame, &out);
    SendBytes(out);
  }
  // True when something (a frame, or the end of the stream) can be read within `timeout`.
  bool WaitReadable(std::chrono::milliseconds timeout) {
    pollfd p{socket_.native_handle(), POLLIN, 0};
    return poll(&p, 1, static_cast<int>(timeout.count())) > 0;
  }
  void ShutdownWrite() { socket_.shutdown(asio::ip::tcp::socket::shutdown_send); }

  // The next frame, or nullopt at end of stream or after 5 s without one. (asio's blocking
  // reads wait for ever whatever SO_RCVTIMEO says: each read waits here first.)
  std::optional<pb::Frame> ReadFrame() {
    unsigned char header[4];
    if (!ReadExactly(header, sizeof header)) return std::nullopt;
    size_t length = (size_t{header[0]} << 24) | (size_t{header[1]} << 16) |
                    (size_t{header[2]} << 8) | header[3];
    std::string payload(length, '\0');
    if (!ReadExactly(payload.data(), length)) return std::nullopt;
    pb::Frame frame;
    if (!frame.ParseFromString(payload)) return std::nullopt;
    return frame;
  }

  // True when the broker has closed the connection (reads hit end of stream within 5 s).
  bool ClosedByPeer() {
    if (!WaitReadable(kReadTimeout)) return false;
    char c;
    asio::error_code ec;
    socket_.read_some(asio::buffer(&c, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

  // Hello + login as guest.
  void Handshake() {
    pb::Frame hello;
    hello.set_request_id(1);
    hello.mutable_hello()->set_protocol_version(1);
    SendFrame(hello);
    auto ok = ReadFrame();
    ASSERT_TRUE(ok && ok->has_hello_ok());
    pb::Frame auth;
    auth.set_request_id(2);
    auth.mutable_authenticate()->set_user("guest");
    auth.mutable_authenticate()->set_password("guest");
    SendFrame(auth);
    auto auth_ok = ReadFrame();
    ASSERT_TRUE(auth_ok && auth_ok->has_authenticate_ok());
  }

  // Reads the Error + Close pair the broker sends before closing; returns the error code (and
  // the error's message into `message`, when given).
  pb::ErrorCode ExpectErrorThenClose(std::string* message = nullptr) {
    auto error = ReadFrame();
    if (message && error && error->has_error()) *message = error->error().message();
    EXPECT_TRUE(error && error->has_error()) << (error ? error->DebugString() : "no frame");
    auto close = ReadFrame();
    EXPECT_TRUE(close && close->has_close()) << (close ? close->DebugString() : "no frame");
    EXPECT_TRUE(ClosedByPeer());
    return error && error->has_error() ? error->error().code() : pb::ERROR_CODE_UNSPECIFIED;
  }

 private:
  static constexpr std::chrono::milliseconds kReadTimeout{5'000};

  bool ReadExactly(void* out, size_t n) {
    auto* p = static_cast<char*>(out);
    auto deadline = std::chrono::steady_clock::now() + kReadTimeout;
    while (n > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !WaitReadable(left)) return false;
      asio::error_code ec;
      size_t got = socket_.read_some(asio::buffer(p, n), ec);
      if (ec) return false;
      p += got;
      n -= got;
    }
    return true;
  }

  asio::io_context io_;
  asio::ip::tcp::socket socket_;
};

// The 4-byte length prefix of an `n`-byte payload.
inline std::string LengthPrefix(uint32_t n) {
  std::string out;
  net::AppendFrameHeader(n, &out);
  return out;
}

}  // namespace wharf::testing
