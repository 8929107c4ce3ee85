#include "server/login.h"

#include <spdlog/spdlog.h>

#include "broker/broker.h"
#include "common/log_safe.h"
#include "server/user_directory.h"

namespace wharf::server {

Status CheckVhostAccess(const ServerContext& context, const std::string& user,
                        const std::string& vhost, bool operators_need_no_permissions) {
  const std::string refused = "access to vhost '" + CutForDisplay(vhost) + "' refused for user '" +
                              CutForDisplay(user) + "'";
  Status admitted = context.broker->CheckVhostConnection(vhost);
  if (admitted.code() == StatusCode::kResourceExhausted) {
    return Status(admitted.code(), refused + ": " + std::string(admitted.message()));
  }
  WHARF_RETURN_IF_ERROR(admitted);
  auto access = context.users->AccessOf(user);
  if (operators_need_no_permissions && access->HasTag(broker::kMonitoringTags)) {
    return Status::Ok();
  }
  if (!access->CanUseVhost(vhost)) {
    return Status(StatusCode::kAccessRefused, refused);
  }
  return Status::Ok();
}
namespace {

constexpr std::string_view kGuestUser = "guest";
constexpr std::string_view kGuestPassword = "guest";

}  // namespace

Status CheckBuiltinGuest(std::string_view user, std::string_view password, bool peer_is_loopback) {
  if (user != kGuestUser || password != kGuestPassword) {
    return Status(StatusCode::kAuthenticationFailed, "wrong user name or password");
  }
  if (!peer_is_loopback) {
    return Status(StatusCode::kAccessRefused,
                  "user 'guest' may only connect from a loopback address");
  }
  return Status::Ok();
}

Login::Login(ServerContext* context, asio::any_io_executor executor, std::string peer_address,
             bool peer_is_loopback)
    : context_(context),
      executor_(executor),
      peer_address_(std::move(peer_address)),
      peer_is_loopback_(peer_is_loopback),
      timer_(executor) {}

Status Login::Start(std::string user, std::string password,
                    std::chrono::steady_clock::time_point deadline,
                    std::shared_ptr<void> keep_alive, Done done) {
  // Every login, right or wrong, known user or not, waits its turn behind this address's
  // recent failures (server/login_throttle.h), then is checked off the I/O thread.
  const auto now = std::chrono::steady_clock::now();
  const auto max_wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
  auto wait = context_->login_throttle->Admit(peer_address_, now, max_wait);
  if (!wait) {
    return Status(StatusCode::kResourceExhausted, "login refused: too many failed logins from " +
                                                      peer_address_ + "; try again later");
  }
  if (wait->count() == 0) {
    Check(std::move(user), std::move(password), std::move(keep_alive), std::move(done));
    return Status::Ok();
  }
  spdlog::debug("peer={} login waits {} ms after failed logins from this address", peer_address_,
                wait->count());
  timer_.expires_after(*wait);
  timer_.async_wait([this, user = std::move(user), password = std::move(password),
                     keep_alive = std::move(keep_alive),
                     done = std::move(done)](const asio::error_code& ec) mutable {
    // Cancelled: the connection is closing (and `this` may be going with it).
    if (ec) return;
    Check(std::move(user), std::move(password), std::move(keep_alive), std::move(done));
  });
  return Status::Ok();
}

void Login::StartExternal(std::string user, std::shared_ptr<void> keep_alive, Done done) {
  auto known = context_->users->Find(user);
  Status result;
  if (!known || known->source == "builtin") {
    // The certificate was verified, but names no one this broker knows (guest included: its
    // password is public, a certificate must not make it reachable from afar).
    result = Status(StatusCode::kAuthenticationFailed, "the client certificate names '" +
                                                           CutForDisplay(user) +
                                                           "', which is not a user of this broker");
  }
  asio::post(executor_, [keep_alive = std::move(keep_alive), done = std::move(done), result] {
    done(result);
  });
}

void Login::Check(std::string user, std::string password, std::shared_ptr<void> keep_alive,
                  Done done) {
  auto known = context_->users->Find(user);
  if (known && known->source == "builtin") {
    Status result = CheckBuiltinGuest(user, password, peer_is_loopback_);
    asio::post(executor_, [keep_alive, done = std::move(done), result] { done(result); });
    return;
  }
  // An unknown user is checked against the dummy hash: the same time, the same answer.
  std::string hash = known ? known->password_hash : std::string();
  auto answer = [executor = executor_, keep_alive, done](bool matches) {
    asio::post(executor, [keep_alive, done, matches] {
      done(matches ? Status::Ok()
                   : Status(StatusCode::kAuthenticationFailed, "wrong user name or password"));
    });
  };
  if (!context_->login_checker->Submit(std::move(password), std::move(hash), std::move(answer))) {
    Status busy(StatusCode::kResourceExhausted,
                "the broker is busy checking other logins ([auth] hash_queue = " +
                    std::to_string(context_->options->login_queue) + "); try again later");
    asio::post(executor_, [keep_alive, done = std::move(done), busy] { done(busy); });
  }
}

void Login::Record(const Status& result) {
  if (result.ok()) {
    context_->login_throttle->Succeeded(peer_address_);
  } else if (result.code() != StatusCode::kResourceExhausted) {
    context_->login_throttle->Failed(peer_address_, std::chrono::steady_clock::now());
  }
}

}  // namespace wharf::server
