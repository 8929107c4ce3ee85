// server/amqp_codec.h
//
// AmqpCodec is AMQP 0-9-1 (RabbitMQ's dialect; docs/amqp.md) on a connection's I/O thread: the
// protocol header, connection.start / start-ok (PLAIN and AMQPLAIN through the shared Login),
// tune / tune-ok (frame-max, channel-max, heartbeat), open / open-ok, and from then on each
// frame: methods are decoded, a publish's content header and body frames are put together
// into a Message (converted here, off the broker thread), and every method of an open channel
// goes in a batch to the broker thread, where AmqpSession runs it. On the way out it encodes
// deliveries (basic.deliver and its content, split at this connection's frame-max), and the
// connection's own notices (connection.blocked / unblocked, connection.close).
//
// Heartbeats: a heartbeat frame goes out after half the negotiated interval with nothing
// written; a peer that sent nothing for two intervals is closed, except while the broker
// itself holds the connection's reading back (flow control, back-pressure), as RabbitMQ does.
//
// Errors: a hard error found here (a bad frame, a method on a channel that is not open, a
// frame out of order) closes the connection with RabbitMQ's reply code and the failing
// method's class and method ids; soft errors are the broker thread's (AmqpChannel).
//
// Thread safety: confined to the connection's I/O thread.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amqp/frame.h"
#include "amqp/methods.h"
#include "server/amqp_session.h"
#include "server/codec.h"
#include "server/connection.h"

namespace wharf::server {

class AmqpCodec final : public Codec {
 public:
  explicit AmqpCodec(Connection& connection);
  ~AmqpCodec() override;

  // RabbitMQ's limit before tune: a payload of frame-max 4096 (with its 8-octet fudge).
  size_t handshake_frame_bytes() const override {
    return amqp::kMinFrameMax + amqp::kFrameOverheadBytes;
  }
  net::Framing initial_framing() const override { return net::Framing::kProtocolHeader; }
  bool drains_after_close() const override { return true; }
  bool counts_user_at_login() const override { return false; }
  Status OnFrame(std::string_view frame, bool* ends_batch) override;
  bool holding() const override { return held_.has_value(); }
  void ReleaseHeld() override;
  bool PostBatch() override;
  void OnLoggedIn() override;
  bool paused() const override { return stage_ == Stage::kOpening; }
  void Encode(Outbound& item, std::string* out) override;
  void EncodeClose(const Status& status, std::string_view reason, std::string* out) override;
  void EncodeBlocked(bool blocked, std::string_view reason, std::string* out) override;
  void PostResume() override;
  void CloseSessions() override;

 private:
  // kOpening: connection.open is with the broker thread (its vhost, the vhost's limits); the
  // codec is paused() until the answer.
  enum class Stage { kAwaitHeader, kAwaitStartOk, kAwaitTuneOk, kAwaitOpen, kOpening, kOpen };
  // A channel as the I/O thread sees it.
  struct ChannelState {
    enum class State { kOpen, kClosingByServer, kClosingByClient } state = State::kOpen;
    // A basic.publish waiting for its content header and body.
    std::optional<AmqpRequest> publish;
    uint64_t body_size = 0;  // still to come
    bool header_seen = false;
    std::string raw_properties;
    // The memory of its body (AmqpCodec "Content memory"): from the connection's allowance,
    // or reserved from the FrameBudget; and the time it has been arriving.
    uint64_t content_total = 0;
    uint64_t content_own = 0;
    bool content_reserved = false;
    std::chrono::steady_clock::duration content_age{};
    // More body came than the header said: dropped, and waiting for ever, as RabbitMQ does.
    bool overflowed = false;
    // The channel's place in its user's max-channels (server/user_usage.h), while it is open.
    UserUsage::Slot user_slot;
  };
  // A hard error: connection.close with it.
  struct HardError {
    uint16_t code = 0;
    std::string text;
    uint16_t class_id = 0;
    uint16_t method_id = 0;
  };

  Status Fail(uint16_t code, std::string text, uint16_t class_id = 0, uint16_t method_id = 0);
  Status OnHeader(std::string_view bytes);
  // The handshake's next method, `M` on channel 0; anything else is 503.
  template <typename M>
  Status Expect(const amqp::Frame& frame, M* out);
  Status OnStartOk(const amqp::Frame& frame);
  Status OnTuneOk(const amqp::Frame& frame);
  Status OnOpen(const amqp::Frame& frame);
  // The broker's answer to connection.open: open-ok, or RabbitMQ's 530.
  void OnOpened(const std::string& vhost, const Status& opened);
  Status OnMethod(const amqp::Frame& frame, bool* ends_batch);
  Status OnChannelZero(amqp::Method& method);
  Status OnContentHeader(const amqp::Frame& frame);
  Status OnContentBody(const amqp::Frame& frame);
  // 505 for a frame that is not the content the publish on that channel waits for (its header,
  // or more body), blaming the publish (60/40) as RabbitMQ does.
  Status ContentExpected(const ChannelState& state);
  // The publish on `channel` has its whole body: it goes into the batch (or is held).
  Status FinishPublish(uint16_t channel, ChannelState& state);
  void Send(uint16_t channel, const amqp::Method& method);
  void Queue(AmqpRequest request);
  void StartHeartbeats();
  void OnHeartbeatTimer();
  // Content memory: a publish's body is assembled from body frames; the bodies being assembled
  // on all channels take up to kContentAllowanceBytes of the connection's own, and each
  // content beyond that reserves its whole size from the FrameBudget (Connection::
  // ReserveContent) when its header comes. False: reading waits for the grant.
  bool TakeContentMemory(uint16_t channel, ChannelState& state, uint64_t bytes);
  void ReleaseContentMemory(uint16_t channel, ChannelState& state);
  // The slow-sender clock of contents: every kContentTick, each content that holds memory
  // ages unless the broker itself holds the connection's reading back; one older than
  // [limits] frame_timeout_ms closes the connection (FRAME_TIMEOUT), as a slow frame does.
  void ArmContentTimer();
  void OnContentTimer();
  void EncodeDelivery(uint16_t channel, const broker::Delivery& delivery, std::string* out);

  Connection& connection_;
  ServerContext* const context_;
  const AmqpOptions& options_;
  Stage stage_ = Stage::kAwaitHeader;
  AmqpClientInfo client_;
  std::string mechanism_;
  uint32_t frame_max_ = amqp::kMinFrameMax;
  uint16_t channel_max_ = 0;
  uint16_t heartbeat_s_ = 0;
  std::map<uint16_t, ChannelState> channels_;
  std::vector<AmqpRequest> batch_;
  // Flow control: a publish read while publishing is blocked, and everything after it, waits.
  std::optional<AmqpRequest> held_;
  std::optional<HardError> hard_error_;
  bool bad_header_ = false;         // the client spoke another protocol: answer with ours
  bool heartbeat_timeout_ = false;  // the peer is gone: nothing is written
  std::shared_ptr<AmqpSession> session_;
  asio::steady_timer heartbeat_timer_;
  bool heartbeat_armed_ = false;
  static constexpr uint64_t kContentAllowanceBytes = 64u << 10;
  static constexpr std::chrono::milliseconds kContentTick{250};
  uint64_t content_own_ = 0;  // of the allowance, in use
  asio::steady_timer content_timer_;
  bool content_timer_armed_ = false;
};

}  // namespace wharf::server
