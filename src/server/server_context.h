// server/server_context.h
//
// ServerContext is what every Session needs from the server that owns it.
//
// Thread safety: the fields are set before the first session starts and then only read, except
// where a line says otherwise.
#pragma once

#include <asio.hpp>
#include <cstdint>
#include <functional>

#include "broker/broker.h"
#include "server/options.h"
#include "server/user_directory.h"
#include "store/message_store.h"

namespace wharf::server {

struct ServerContext {
  const ServerOptions* options = nullptr;
  // The broker and the io_context of the thread that owns it. Touch the broker only from
  // handlers posted to broker_context.
  broker::Broker* broker = nullptr;
  asio::io_context* broker_context = nullptr;
  // Who may log in (thread-safe), and the store, for user changes (call from the broker thread).
  UserDirectory* users = nullptr;
  store::MessageStore* store = nullptr;
  // Thread: broker. Call after every batch of broker work: flushes peers and re-arms the timer.
  std::function<void()> after_broker_work;
  // Thread: the session's I/O thread. Called once when a session's socket is closed.
  std::function<void(uint64_t session_id)> on_session_closed;
};

}  // namespace wharf::server
