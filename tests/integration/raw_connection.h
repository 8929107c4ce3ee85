// A raw protocol connection for the integration tests: frames built by hand, sent over a
// blocking socket, for what no real client would send (broken frames) or do (stop reading).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <asio.hpp>
#include <optional>
#include <string>

#include "protocol/codec.h"

namespace wharf::testing {

// A blocking socket speaking raw bytes.
class RawConnection {
 public:
  using Frame = ::wharf::wire::v1::Frame;

  // A non-zero `receive_buffer` sets SO_RCVBUF (before connecting, so the window stays
  // small): a connection that stops reading then holds little in the kernel.
  explicit RawConnection(uint16_t port, int receive_buffer = 0) : socket_(io_) {
    if (receive_buffer > 0) {
      socket_.open(asio::ip::tcp::v4());
      setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVBUF, &receive_buffer,
                 sizeof receive_buffer);
    }
    socket_.connect({asio::ip::make_address("127.0.0.1"), port});
    timeval tv{5, 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

  void SendBytes(const std::string& bytes) { asio::write(socket_, asio::buffer(bytes)); }
  void SendFrame(const Frame& frame) {
    std::string out;
    protocol::AppendFrame(frame, &out);
    SendBytes(out);
  }
  void ShutdownWrite() { socket_.shutdown(asio::ip::tcp::socket::shutdown_send); }

  // The next frame, or nullopt at end of stream / timeout.
  std::optional<Frame> ReadFrame() {
    unsigned char header[4];
    asio::error_code ec;
    asio::read(socket_, asio::buffer(header), ec);
    if (ec) return std::nullopt;
    size_t length = (size_t{header[0]} << 24) | (size_t{header[1]} << 16) |
                    (size_t{header[2]} << 8) | header[3];
    std::string payload(length, '\0');
    asio::read(socket_, asio::buffer(payload), ec);
    if (ec) return std::nullopt;
    Frame frame;
    if (!frame.ParseFromString(payload)) return std::nullopt;
    return frame;
  }

  // True when the broker has closed the connection (reads hit end of stream).
  bool ClosedByPeer() {
    char c;
    asio::error_code ec;
    socket_.read_some(asio::buffer(&c, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

  // Hello + login as guest.
  void Handshake() {
    Frame hello;
    hello.set_request_id(1);
    hello.mutable_hello()->set_protocol_version(1);
    SendFrame(hello);
    auto ok = ReadFrame();
    ASSERT_TRUE(ok && ok->has_hello_ok());
    Frame auth;
    auth.set_request_id(2);
    auth.mutable_authenticate()->set_user("guest");
    auth.mutable_authenticate()->set_password("guest");
    SendFrame(auth);
    auto auth_ok = ReadFrame();
    ASSERT_TRUE(auth_ok && auth_ok->has_authenticate_ok());
  }

  // Reads the Error + Close pair the broker sends before closing; returns the error code.
  ::wharf::wire::v1::ErrorCode ExpectErrorThenClose() {
    auto error = ReadFrame();
    EXPECT_TRUE(error && error->has_error()) << (error ? error->DebugString() : "no frame");
    auto close = ReadFrame();
    EXPECT_TRUE(close && close->has_close()) << (close ? close->DebugString() : "no frame");
    EXPECT_TRUE(ClosedByPeer());
    return error && error->has_error() ? error->error().code()
                                       : ::wharf::wire::v1::ERROR_CODE_UNSPECIFIED;
  }

 private:
  asio::io_context io_;
  asio::ip::tcp::socket socket_;
};

}  // namespace wharf::testing
