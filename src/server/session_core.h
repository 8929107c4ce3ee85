// server/session_core.h
//
// SessionCore is the broker-thread half of one client connection, whatever its protocol: the
// outbox where replies and the deliveries the broker pushes collect during a batch of work, and
// the hand-over of that outbox to the connection's I/O thread (server/connection.h) once per
// batch, where the protocol's codec encodes and writes it.
//
// A protocol's broker-side handler (server/native_session.h for the native protocol) implements
// broker::SessionPeer for each broker session it opens: it turns the broker's answers into its
// protocol's replies and hands them, and the deliveries, to this core. Each item carries the
// channel it belongs to (0 for the native protocol, which has one session per connection).
//
// Output accounting: every delivery's size (broker::OutputBytes) is added to `queued_bytes` when
// it enters the outbox and subtracted by the I/O thread once written; the broker holds push
// deliveries back (Writable() false) while 8 MiB wait, or once the connection is closing.
//
// Thread safety: confined to the broker thread, except the two atomics, which the I/O thread
// changes (queued_bytes down, closing set).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "broker/envelope.h"
#include "protocol/codec.h"
#include "server/server_context.h"

namespace wharf::server {

class Connection;

// A completed pull (native Receive): deliveries may be empty when its wait ran out.
struct ReceiveDone {
  uint64_t request_id = 0;
  std::vector<broker::Delivery> deliveries;
};
// The broker cancelled a consumer (its queue was deleted).
struct CancelNotice {
  std::string consumer_tag;
  std::string reason;
};
// Something the protocol's I/O half must act on, in order with the output around it (AMQP: a
// channel closed by the broker, a hard error); `kind` and the rest mean what the codec says.
struct CodecNotice {
  uint32_t kind = 0;
  uint16_t code = 0;
  std::string text;
  uint16_t class_id = 0;
  uint16_t method_id = 0;
};
// One item of output, encoded on the I/O thread by the connection's codec. A reply is a native
// frame, or bytes the protocol's handler already encoded.
struct Outbound {
  uint16_t channel = 0;
  std::variant<broker::Delivery, ReceiveDone, CancelNotice, protocol::wire::Frame, std::string,
               CodecNotice>
      item;
};
// What one hand-over carries to the I/O thread.
struct OutboxBatch {
  std::vector<Outbound> items;
  uint32_t batches_done = 0;  // request batches of the connection run since the last one
  uint64_t queued_bytes = 0;  // counted in queued_bytes until written
};

class SessionCore {
 public:
  // Deliveries are held back while this much output waits to be written.
  static constexpr uint64_t kMaxQueuedBytes = 8u << 20;

  explicit SessionCore(ServerContext* context) : context_(context) {}

  // Thread: I/O, before the broker first sees this connection. Output goes to `connection`.
  void Attach(std::shared_ptr<Connection> connection) { connection_ = std::move(connection); }
  // Thread: broker, after the broker closed the connection's sessions: nothing more goes out
  // (and the core no longer keeps the connection alive).
  void Detach() { connection_.reset(); }

  // Thread: broker. Output of a batch of work; sent by Flush().
  void Add(uint16_t channel, protocol::wire::Frame frame);
  void AddBytes(uint16_t channel, std::string bytes);
  void AddDelivery(uint16_t channel, broker::Delivery delivery);
  void AddReceiveDone(uint16_t channel, ReceiveDone done);
  void AddCancelNotice(uint16_t channel, CancelNotice notice);
  void AddNotice(uint16_t channel, CodecNotice notice);
  // Thread: broker. The end of one batch of the connection's requests: the broker's pending work
  // is flushed (after_broker_work) and the outbox sent, which also tells the I/O thread that the
  // batch is done.
  void EndBatch();
  void Flush();
  bool Writable() const;

  // Shared with the I/O thread.
  std::atomic<uint64_t> queued_bytes{0};
  std::atomic<bool> closing{false};

 private:
  ServerContext* const context_;
  std::shared_ptr<Connection> connection_;
  std::vector<Outbound> outbox_;
  uint32_t batches_done_ = 0;
  uint64_t outbox_queued_bytes_ = 0;
};

}  // namespace wharf::server
