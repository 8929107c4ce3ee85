// net/stream.h
//
// Stream is one connection's byte stream: a TCP socket, or TLS over one (asio::ssl, OpenSSL).
// The server's Connection and the C++ client read and write through it and do not care which;
// only the start (the TLS handshake) and the end (TLS's close_notify) differ, and Stream hides
// both: on a plain socket the handshake completes at once and the shutdown is TCP's.
//
// TLS itself is OpenSSL's through asio: the handshake, records, ciphers and certificate checks
// are never written here (docs/security.md).
//
// Thread safety: as an asio socket. Used from one thread (its owner's I/O thread), with at most
// one read and one write outstanding; a handshake or shutdown with nothing else outstanding.
#pragma once

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <memory>
#include <string>
#include <utility>
#include <variant>

namespace wharf::net {

class Stream {
 public:
  using Socket = asio::ip::tcp::socket;
  using Tls = asio::ssl::stream<Socket>;

  // Plain TCP.
  explicit Stream(Socket socket) : stream_(std::in_place_type<Socket>, std::move(socket)) {}
  // TLS over `socket` with `context`'s certificates and settings, kept alive by the stream (a
  // reload swaps the server's context; connections made before it keep theirs).
  Stream(Socket socket, std::shared_ptr<asio::ssl::context> context)
      : context_(std::move(context)),
        stream_(std::in_place_type<Tls>, std::move(socket), *context_) {}

  bool tls() const { return std::holds_alternative<Tls>(stream_); }
  // The TCP socket under it (options, addresses, close).
  Socket& socket() {
    if (auto* t = std::get_if<Tls>(&stream_)) return t->next_layer();
    return std::get<Socket>(stream_);
  }
  // The TLS stream (nullptr when plain): the peer's certificate, the protocol version.
  Tls* tls_stream() { return std::get_if<Tls>(&stream_); }

  template <typename Buffers, typename Handler>
  void AsyncReadSome(const Buffers& buffers, Handler&& handler) {
    if (auto* t = std::get_if<Tls>(&stream_)) {
      t->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      std::get<Socket>(stream_).async_read_some(buffers, std::forward<Handler>(handler));
    }
  }
  // Writes all of `buffers` (asio::async_write).
  template <typename Buffers, typename Handler>
  void AsyncWrite(const Buffers& buffers, Handler&& handler) {
    if (auto* t = std::get_if<Tls>(&stream_)) {
      asio::async_write(*t, buffers, std::forward<Handler>(handler));
    } else {
      asio::async_write(std::get<Socket>(stream_), buffers, std::forward<Handler>(handler));
    }
  }
  // TLS: the handshake, as the server or the client; plain: `handler` runs (posted) at once
  // with no error.
  template <typename Handler>
  void AsyncHandshake(asio::ssl::stream_base::handshake_type type, Handler&& handler) {
    if (auto* t = std::get_if<Tls>(&stream_)) {
      t->async_handshake(type, std::forward<Handler>(handler));
    } else {
      asio::post(socket().get_executor(),
                 [h = std::forward<Handler>(handler)]() mutable { h(asio::error_code()); });
    }
  }
  // The end of sending. TLS: close_notify is sent and the peer's awaited (the handler runs
  // when it arrives, the peer closes, or the socket is closed); plain: TCP's shutdown of the
  // sending side, and the handler runs (posted) at once.
  template <typename Handler>
  void AsyncShutdown(Handler&& handler) {
    if (auto* t = std::get_if<Tls>(&stream_)) {
      t->async_shutdown(std::forward<Handler>(handler));
    } else {
      asio::error_code ignored;
      socket().shutdown(Socket::shutdown_send, ignored);
      asio::post(socket().get_executor(),
                 [h = std::forward<Handler>(handler)]() mutable { h(asio::error_code()); });
    }
  }
  // Closes the TCP socket at once (outstanding operations end with operation_aborted).
  void Close() {
    asio::error_code ignored;
    socket().shutdown(Socket::shutdown_both, ignored);
    socket().close(ignored);
  }

  // "TLSv1.3 TLS_AES_256_GCM_SHA384" once the handshake is done; "" when plain.
  std::string TlsDescription();

 private:
  std::shared_ptr<asio::ssl::context> context_;
  std::variant<Socket, Tls> stream_;
};

}  // namespace wharf::net
