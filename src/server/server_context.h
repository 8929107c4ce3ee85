// server/server_context.h
//
// ServerContext is what every Session needs from the server that owns it.
//
// Thread safety: the fields are set before the first session starts and then only read, except
// where a line says otherwise.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "broker/broker.h"
#include "server/frame_budget.h"
#include "server/login_checker.h"
#include "server/login_throttle.h"
#include "server/options.h"
#include "server/user_changes.h"
#include "server/user_directory.h"
#include "server/user_usage.h"
#include "store/message_store.h"

namespace wharf::server {

// Flow control (docs/operations.md): whether publishing is blocked, and why. Written by the
// server's watermark check (I/O thread 0), read by every session's I/O thread.
class FlowState {
 public:
  bool blocked() const { return blocked_.load(std::memory_order_acquire); }
  std::string reason() const {
    std::lock_guard lock(mu_);
    return reason_;
  }
  // Returns true when that changed the state.
  bool Set(bool blocked, std::string reason) {
    std::lock_guard lock(mu_);
    reason_ = std::move(reason);
    return blocked_.exchange(blocked, std::memory_order_acq_rel) != blocked;
  }

 private:
  std::atomic<bool> blocked_{false};
  mutable std::mutex mu_;  // a leaf lock
  std::string reason_;
};

struct ServerContext {
  const ServerOptions* options = nullptr;
  // The broker and the io_context of the thread that owns it. Touch the broker only from
  // handlers posted to broker_context.
  broker::Broker* broker = nullptr;
  asio::io_context* broker_context = nullptr;
  // Who may log in (thread-safe), and the store, for user changes (call from the broker thread).
  UserDirectory* users = nullptr;
  // Thread: broker. Runs user changes one at a time.
  UserChanges* user_changes = nullptr;
  store::MessageStore* store = nullptr;
  // Logins (thread-safe): password checks off the I/O threads, and failures per address.
  LoginChecker* login_checker = nullptr;
  LoginThrottle* login_throttle = nullptr;
  // What each user has open, against its limits (thread-safe).
  UserUsage* user_usage = nullptr;
  // Thread: broker. Call after every batch of broker work: flushes peers and re-arms the timer.
  std::function<void()> after_broker_work;
  FlowState* flow = nullptr;  // set by the server before any session starts
  // Partial frames of all connections (thread-safe).
  FrameBudget* frame_budget = nullptr;
  // Thread: the session's I/O thread. Called once when a session's socket is closed.
  std::function<void(uint64_t session_id)> on_session_closed;
  // Thread: any. Closes every connection logged in as `user`, saying `why` (a deleted user's,
  // as RabbitMQ's delete_user: AMQP 320 CONNECTION_FORCED, native ACCESS_REFUSED).
  std::function<void(const std::string& user, const std::string& why)> close_connections_of;
  // Thread: any. The same for every connection opened into `vhost` (a deleted vhost's, as
  // RabbitMQ's delete_vhost).
  std::function<void(const std::string& vhost, const std::string& why)> close_connections_in;
};

}  // namespace wharf::server
