// server/http_auth.h
//
// HttpAuth decides whether a request to the HTTP listeners (/metrics, /healthz; [server]
// metrics_auth) comes from a broker user, with the same rules as a protocol login
// (server/login.h): HTTP Basic credentials, each request checked by PBKDF2 on the login threads
// (LoginChecker) after the failed-login throttle of its address (LoginThrottle), the built-in
// guest from loopback addresses only; or a client certificate the TLS handshake verified that
// names a configured or stored user ([tls] cert_login), without a password.
//
// The answers are HTTP's: 401 with a reason (the caller adds WWW-Authenticate) for missing or
// wrong credentials, 403 for guest from afar, 429 while the address is throttled (never a wait:
// a sleeping worker would be one fewer for everyone else), 503 when the login threads are full.
// A user who logs in but has neither the monitoring nor the administrator tag (broker/access.h)
// gets 403, as from RabbitMQ's management API.
//
// A password that passed is remembered a minute (server/credential_cache.h): a console polling
// every few seconds costs one PBKDF2 check a minute, not one per request.
//
// Thread safety: thread-safe. Check blocks its caller (an HTTP worker) for one password check
// at most.
#pragma once

#include <chrono>
#include <string>

#include "server/credential_cache.h"
#include "server/login_checker.h"
#include "server/login_throttle.h"
#include "server/user_directory.h"

namespace wharf::server {

class HttpAuth {
 public:
  struct Request {
    std::string authorization;     // the Authorization header; "" when none
    std::string certificate_user;  // the user a verified client certificate names; "" when none
    std::string peer_address;      // as printed by asio (IPv4, IPv6, or IPv4 mapped in IPv6)
  };
  struct Answer {
    int status = 200;    // 200, 401, 403 (guest from afar, no monitoring tag), 429 or 503
    std::string reason;  // why not (for the response and the log); "" for 200
    std::string user;    // who asked, when known (also for a refusal, for the log)
    // Credentials were checked and refused (a wrong password, guest from afar): worth a
    // warning. A request without credentials (a browser's first), malformed ones, 429 and 503
    // are not, and cannot be made to flood the log.
    bool failed_login = false;
  };

  // The longest a request waits for its password check (queued and run) before 503.
  static constexpr std::chrono::seconds kCheckTimeout{10};

  HttpAuth(const UserDirectory* users, LoginChecker* checker, LoginThrottle* throttle)
      : users_(users), checker_(checker), throttle_(throttle) {}

  // Who asks, with the monitoring or administrator tag (/metrics, /healthz).
  Answer Check(const Request& request) const;
  // Who asks: 200 with the user, or why not; no tag checked (the HTTP API checks its own).
  Answer Authenticate(const Request& request) const;

 private:
  Answer CheckPassword(const std::string& user, std::string password,
                       const std::string& peer_address) const;

  // Set at construction, then immutable; each thread-safe and outliving this.
  const UserDirectory* const users_;
  LoginChecker* const checker_;
  LoginThrottle* const throttle_;
  mutable CredentialCache verified_;
};

}  // namespace wharf::server
