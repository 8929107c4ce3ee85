// server/amqp_session.h
//
// AmqpSession is one AMQP 0-9-1 connection on the broker thread: its channels (AmqpChannel,
// server/amqp_channel.h: one broker session each, all owned by the connection, so exclusive
// queues live as long as the connection), the methods of each batch the I/O thread's AmqpCodec
// (server/amqp_codec.h) decoded, run in order, and the hard errors that end the connection.
//
// Channel numbers: the I/O thread checks that a method's channel is open (channel.open before
// anything else, never twice); the broker thread drops methods for a channel it has already
// closed (a soft error: the client's frames that were on their way still arrive until it
// answers close-ok) and, after a hard error, every method.
//
// Thread safety: confined to the broker thread (made on the I/O thread at login, before the
// broker sees it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "amqp/methods.h"
#include "server/server_context.h"
#include "server/session_core.h"
#include "wharf/message.h"

namespace wharf::server {

class AmqpChannel;

// What the client said of itself in connection.start-ok (its capabilities change what the
// broker may send it).
struct AmqpClientInfo {
  bool consumer_cancel_notify = false;  // basic.cancel from the broker
  bool connection_blocked = false;      // connection.blocked / unblocked
  bool authentication_failure_close = false;
  std::string product;  // client properties, for listings and logs
  std::string version;
  std::string platform;
};

// One decoded method on its way to the broker thread.
struct AmqpRequest {
  enum class Kind : uint8_t {
    kMethod,    // `method` on `channel`
    kCloseAll,  // connection.close: every channel closes (requeueing) before close-ok goes
  };
  Kind kind = Kind::kMethod;
  uint16_t channel = 0;
  amqp::Method method;
  // basic.publish: the message, made on the I/O thread (body, raw properties, their view).
  Message message;
  // Its expiration is "0": it expires unless it is delivered at once (PublishTiming).
  bool expire_undelivered = false;
  // A publish the I/O thread refused (oversize, bad expiration, user-id): the channel closes
  // with it, in order. `error_code` is the AMQP reply code.
  uint16_t error_code = 0;
  std::string error_text;
};

// The notices in an outbox (Outbound CodecNotice) the I/O thread acts on.
enum AmqpNotice : uint32_t {
  kAmqpChannelClosedByServer = 1,  // a soft error closed the channel: drop its frames until
                                   // close-ok
  kAmqpChannelCloseOk = 2,         // the channel's close-ok went out: its number is free
  kAmqpConnectionError = 3,        // a hard error: close the connection with it
};

class AmqpSession final : public std::enable_shared_from_this<AmqpSession> {
 public:
  // `vhost`: the one connection.open named; every channel's names are looked up there.
  AmqpSession(uint64_t connection_id, std::string user, std::string vhost, std::string peer,
              ServerContext* context, std::shared_ptr<SessionCore> core, AmqpClientInfo client,
              uint32_t frame_max);
  ~AmqpSession();

  // Runs a batch of the connection's methods, in order, then ends the batch.
  void Execute(std::vector<AmqpRequest>& batch);
  // The connection's output drained: every channel's consumers get deliveries again.
  void Resume();
  // Every channel's broker session closes (its deliveries requeued, consumers cancelled),
  // then the connection's exclusive queues go. Idempotent.
  void CloseAll();

  // For the channels.
  uint64_t id() const { return id_; }
  const std::string& user() const { return user_; }
  const std::string& vhost() const { return vhost_; }
  const std::string& peer() const { return peer_; }
  const AmqpClientInfo& client() const { return client_; }
  uint32_t frame_max() const { return frame_max_; }
  ServerContext* context() const { return context_; }
  SessionCore& core() const { return *core_; }
  // A hard error (connection.close with `code`): nothing more of this connection runs.
  void ConnectionError(uint16_t code, std::string text, uint16_t class_id, uint16_t method_id);
  // A channel closed (soft error or client close): it is forgotten.
  void ForgetChannel(uint16_t number);
  bool failed() const { return failed_; }

 private:
  void OpenChannel(uint16_t number);

  const uint64_t id_;
  const std::string user_;
  const std::string vhost_;
  const std::string peer_;
  ServerContext* const context_;
  const std::shared_ptr<SessionCore> core_;
  const AmqpClientInfo client_;
  const uint32_t frame_max_;
  std::map<uint16_t, std::shared_ptr<AmqpChannel>> channels_;
  bool failed_ = false;
  bool closed_ = false;
};

// The broker session id of channel `number` of connection `connection_id`: apart from every
// connection id (the native protocol's session ids), unique while the connection lives.
inline uint64_t AmqpChannelSessionId(uint64_t connection_id, uint16_t number) {
  return (uint64_t{1} << 63) | (connection_id << 16) | number;
}

}  // namespace wharf::server
