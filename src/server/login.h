// server/login.h
//
// Login is the one password check every protocol's handshake uses (the native Authenticate, and
// AMQP's connection.start-ok): first the LoginThrottle's wait for the peer's address (recent
// failed logins from it slow the next ones down), then the user's check: the built-in guest by
// comparison and only from a loopback address, every other user (and an unknown one, against a
// dummy hash: the same time, the same answer) by PBKDF2 on a login thread (LoginChecker), never
// on the I/O thread.
//
// The answer comes back on the connection's I/O thread, never inside Start(): the caller may
// resume reading there, which it must not do inside its decoding loop.
//
// Thread safety: confined to the connection's I/O thread.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "server/server_context.h"
#include "wharf/status.h"

namespace wharf::server {

// The built-in guest's check (it has no hash: its password is known to everyone, and only
// loopback peers may use it, so there is nothing to hide by hashing): OK, kAuthenticationFailed
// for any other name or password, kAccessRefused for guest from a non-loopback peer. Every
// protocol's login and the HTTP listener's Basic check use it.
Status CheckBuiltinGuest(std::string_view user, std::string_view password, bool peer_is_loopback);

// Broker thread: whether `user` may open a connection into `vhost` now, in RabbitMQ's order
// (measured against 3.10.8): the vhost's existence (kVhostNotFound), its max-connections
// (kResourceExhausted), the user's permissions there (kAccessRefused). With
// `operators_need_no_permissions` (the native protocol, which wharfctl speaks), a user with the
// administrator or monitoring tag is admitted without permissions there, as RabbitMQ's
// rabbitmqctl and management API let such users manage and watch every vhost; each operation
// on a queue or exchange still needs them. The refusals' texts are RabbitMQ's: "access to vhost
// 'v' refused for user 'u'[: connection limit (N) is reached]".
Status CheckVhostAccess(const ServerContext& context, const std::string& user,
                        const std::string& vhost, bool operators_need_no_permissions = false);

class Login {
 public:
  // OK, or why the login is refused (kAuthenticationFailed, kAccessRefused, kResourceExhausted).
  using Done = std::function<void(Status)>;

  Login(ServerContext* context, asio::any_io_executor executor, std::string peer_address,
        bool peer_is_loopback);

  // Starts checking `user`'s `password`. A non-OK result refuses at once (too many failed logins
  // from this address to wait for them before `deadline`, the handshake's end); otherwise `done`
  // is called later on the executor. `keep_alive` is held until then.
  Status Start(std::string user, std::string password,
               std::chrono::steady_clock::time_point deadline, std::shared_ptr<void> keep_alive,
               Done done);
  // A login with the client certificate (SASL EXTERNAL): `user`, the name the verified
  // certificate gives, must be a configured or stored user; no password is checked. `done` is
  // called later on the executor with OK or kAuthenticationFailed.
  void StartExternal(std::string user, std::shared_ptr<void> keep_alive, Done done);
  // Stops a throttle wait still running; its check never starts.
  void Cancel() { timer_.cancel(); }
  // Counts the answer for the peer's address: a refused password slows this address's next
  // logins; a busy broker does not count against it.
  void Record(const Status& result);

 private:
  void Check(std::string user, std::string password, std::shared_ptr<void> keep_alive, Done done);

  ServerContext* const context_;
  const asio::any_io_executor executor_;
  const std::string peer_address_;
  const bool peer_is_loopback_;
  asio::steady_timer timer_;  // the LoginThrottle's wait
};

}  // namespace wharf::server
