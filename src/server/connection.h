// server/connection.h
//
// Connection is the I/O-thread half of one client connection, whatever its protocol: the stream
// (a socket, or TLS over one: net/stream.h; a TLS connection starts with the handshake, under
// the handshake timer, before anything is read or written), the read loop and the frame decoder,
// the batches of requests in flight at the broker, the write buffers and back-pressure, the
// flow-control hold of publishes, the handshake timer and the login (server/login.h), and the close
// sequence. What the bytes mean is its Codec's business (server/codec.h: server/native_codec.h for
// the native protocol): the codec turns each frame into requests and posts them to the broker
// thread in batches, and encodes what comes back. The broker-thread half is the SessionCore
// (server/session_core.h).
//
// Back-pressure: the connection stops reading while it has kMaxBatchesInFlight batches at the
// broker or more than kMaxPendingWriteBytes waiting to be written, and resumes when both drop.
// A client that stops reading therefore also stops being read, and memory stays bounded.
//
// Partial frames: a connection buffers at most kFrameAllowanceBytes of its own; a larger frame
// first reserves the rest from the broker-wide FrameBudget (server/frame_budget.h) and is not
// read further until it has. A frame the broker has been reading for [limits] frame_timeout_ms
// without getting all of it closes the connection (FRAME_TIMEOUT). A protocol that assembles a
// message from several frames (AMQP's content) reserves its memory here too (ReserveContent).
//
// Close: BeginClose stops reading, lets the broker run everything already read (its replies go
// out first), then has the codec write its protocol's close and closes the socket once that is
// written (or after 5 s). CloseSocket has the codec close its broker sessions.
//
// Thread safety: confined to the connection's I/O thread; the object is shared (std::shared_ptr)
// with handlers posted back from the broker thread and the login threads.
#pragma once

#include <array>
#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "net/frame.h"
#include "net/stream.h"
#include "server/codec.h"
#include "server/login.h"
#include "server/server_context.h"
#include "server/session_core.h"

namespace wharf::server {

class Connection final : public std::enable_shared_from_this<Connection> {
 public:
  using CodecFactory = std::function<std::unique_ptr<Codec>(Connection&)>;

  Connection(std::unique_ptr<net::Stream> stream, uint64_t id, ServerContext* context,
             const CodecFactory& make_codec);
  ~Connection();

  uint64_t id() const { return id_; }
  const asio::any_io_executor& executor() const { return executor_; }
  ServerContext* context() const { return context_; }
  const std::string& peer() const { return peer_; }
  const std::string& user() const { return user_; }
  const std::shared_ptr<SessionCore>& core() const { return core_; }

  // Thread: I/O. Starts reading.
  void Start();
  // Thread: I/O. Takes this connection's place in its user's max-connections
  // (server/user_usage.h) until it closes; kResourceExhausted with RabbitMQ's words when the
  // user has that many open.
  Status TakeUserSlot();
  // Thread: I/O. Sends `status` and closes (e.g. too many connections).
  void Refuse(const Status& status) { BeginClose(status, std::string(status.message())); }
  // Thread: I/O. Graceful stop: read no more, let the broker finish what was read, then send
  // the protocol's close with `reason` and close the socket.
  void Shutdown(std::string reason);
  // Thread: I/O. Publishing was blocked or unblocked (ServerContext::flow): tells a publishing
  // client, and resumes a held publish.
  void OnFlowChanged();
  // Thread: I/O. An outbox from the broker thread (SessionCore::Flush).
  void OnOutbox(OutboxBatch outbox);

  // --- For the codec (I/O thread) ---------------------------------------------------------------
  // Checks `user`'s password (server/login.h); reads nothing more until the answer, which ends
  // in Codec::OnLoggedIn or the close of the connection. Non-OK: refused at once.
  Status StartLogin(std::string user, std::string password);
  // A login with the client certificate (SASL EXTERNAL; docs/security.md): as the user its
  // subject names ([tls] cert_login). `requested`, when not empty, must be that name.
  // kAuthenticationFailed without a verified certificate or with another name.
  Status StartExternalLogin(const std::string& requested);
  // The user a verified client certificate names ([tls] cert_login); "" when the connection
  // has none (clear text, no certificate sent, or cert_login off): EXTERNAL is not offered.
  const std::string& certificate_user() const { return certificate_user_; }
  // A publish was decoded. True when publishing is blocked (the client is told so): the codec
  // holds this publish and everything after it until Codec::ReleaseHeld.
  bool HoldPublish();
  // Runs `open` on the broker thread (registering the connection there, where its vhost and
  // the vhost's limits are known), then `then` with its result back on this thread, unless
  // the connection closed meanwhile.
  void OpenInBroker(std::function<Status()> open, std::function<void(const Status&)> then);
  // The codec is no longer paused() (Codec): decoding goes on. Thread: I/O.
  void ResumeReading() { ReadLoop(); }
  // The virtual host the connection opened (set by the codec once the broker accepted it);
  // "" before. Thread: I/O.
  const std::string& vhost() const { return vhost_; }
  void set_vhost(std::string vhost) { vhost_ = std::move(vhost); }
  // The client asked to close: the codec's OnFrame error that follows is not an error.
  void NoteClientClosed() { client_closed_ = true; }
  // Output: append encoded bytes to output(), then StartWrite().
  std::string& output() { return pending_write_; }
  void StartWrite();
  // The codec posted a batch of requests to the broker thread; its SessionCore::EndBatch is
  // what counts it done.
  void NoteBatchPosted() { ++batches_in_flight_; }
  // The largest frame from now on (after login).
  void SetMaxFrameBytes(size_t bytes) { decoder_.set_max_frame_bytes(bytes); }
  // How frames are cut from now on (AMQP: the protocol header, then frames).
  void SetFraming(net::Framing framing) { decoder_.set_framing(framing); }
  // What the connection may buffer of a frame without the FrameBudget, from now on (at least
  // kFrameAllowanceBytes). AMQP: one whole frame, frame-max, so that the body frames of a
  // content that holds a reservation never wait for another one (ReserveContent).
  void SetFrameAllowance(size_t bytes);
  // Heartbeats (AMQP): when a byte was last read from or written to the socket; whether the
  // connection holds its reading back (flow control, back-pressure), so that a silent peer
  // is not its fault; whether it may still write (no close queued, socket open).
  std::chrono::steady_clock::time_point last_read_at() const { return last_read_at_; }
  std::chrono::steady_clock::time_point last_write_at() const { return last_write_at_; }
  bool ReadHeldBack() const { return state_ == State::kOpen && !reading_ && !ReadingAllowed(); }
  // Reading stops because this connection's own output is not being read.
  bool OwnOutputHoldsReading() const;
  // Content assembled from frames (AMQP: a publish's body, one per channel `key`): `bytes` of
  // the FrameBudget, so that every connection's partial messages together stay within
  // [limits] partial_frame_bytes. True: reserved now. False: the connection decodes and reads
  // nothing more until they are (the FrameBudget's queue, as a large frame waits), or for ever
  // when they would take the connection past a quarter of the budget (or one largest message;
  // the codec's content clock then ends it). Each key holds at most one reservation;
  // ReleaseContent gives it back (or gives up the wait), and the connection's close gives
  // back all.
  bool ReserveContent(uint16_t key, uint64_t bytes);
  void ReleaseContent(uint16_t key);
  // Whether the reservation of `key` still waits for its grant.
  bool ContentWaiting(uint16_t key) const { return content_waiting_ == key; }
  bool CanWrite() const { return !close_sent_ && state_ != State::kClosed; }
  bool open() const { return state_ == State::kOpen; }
  // A protocol error found by the codec outside OnFrame (a heartbeat timeout, an error the
  // broker thread reported): stop and close with `status`.
  void Fail(const Status& status, std::string reason) { BeginClose(status, std::move(reason)); }

 private:
  // kAuthChecking: the password is being checked (Login); nothing more is read until the
  // answer comes back.
  enum class State { kHandshake, kAuthChecking, kOpen, kClosing, kClosed };

  static constexpr uint32_t kMaxBatchesInFlight = 2;
  static constexpr size_t kMaxPendingWriteBytes = 8u << 20;
  static constexpr size_t kReadChunk = 64u << 10;
  // Requests per batch, in frame bytes. Small batches keep one connection's flood from
  // delaying everyone else's acks at the broker: with two batches in flight, another
  // connection waits behind at most 8 KiB of this one's requests (docs/benchmarks.md).
  static constexpr size_t kMaxBatchBytes = 4u << 10;
  // What a connection may buffer without the FrameBudget: a handshake frame, or a read.
  static constexpr size_t kFrameAllowanceBytes = (64u << 10) + net::kFrameHeaderBytes;

  bool Reading() const;  // in a state that reads requests
  void ReadLoop();
  bool ReadingAllowed() const;
  void OnRead(const asio::error_code& ec, size_t bytes);
  // Partial frames. True when the frame coming in has the memory it needs (reserved from the
  // FrameBudget now, or not needed); false when it waits for OnFrameGrant.
  bool ReserveFrameMemory();
  void OnFrameGrant(uint64_t bytes);
  void OnContentGrant(uint64_t bytes);
  // What the FrameBudget calls when it grants `bytes` late: `on_grant` on this connection's
  // I/O thread, or the bytes given straight back when the connection is gone.
  std::function<void()> GrantHandler(uint64_t bytes, void (Connection::*on_grant)(uint64_t));
  // After decoding: gives back the decoder's memory and grant that are no longer needed.
  void TrimFrameBuffer();
  // Tells the FrameBudget's gauge how much the decoder holds beyond its allowance.
  void NoteFrameMemory();
  // Leaves the FrameBudget's queue; with `drop_buffer`, after the socket closed, gives back
  // everything the decoder holds.
  void LeaveFrameBudget(bool drop_buffer);
  // The slow-sender clock: counts the time a read of an incomplete frame is pending.
  void StartFrameClock();
  void StopFrameClock();
  void ArmFrameTimer(std::chrono::steady_clock::duration after);
  void OnFrameTimer();
  // Turns buffered frames into batches of about kMaxBatchBytes while the broker has room.
  void DecodeBuffered();
  // Posts the batch that waited for the one at the broker (DecodeBuffered), if any.
  void PostWaitingBatch();
  // The login's answer (OK: logged in).
  void FinishLogin(Status result);
  void OnWritten(const asio::error_code& ec);
  void ReleaseQueuedBytes(uint64_t bytes);
  // Stops reading; once the broker has run what was read, has the codec write its close, then
  // closes the socket when that is written.
  void BeginClose(const Status& status, std::string reason);
  void SendClose(const Status& status);
  // After the close is written (Codec::drains_after_close): shut down sending and read until the
  // peer closes (TLS: send close_notify and wait for the peer's).
  void Drain();
  void OnDrained(const asio::error_code& ec);
  void DrainMore();
  // TLS: the handshake's end; reading and writing start.
  void OnTlsHandshake(const asio::error_code& ec);
  void CloseSocket(std::string_view reason);
  void SendBlockedNotice(bool blocked);

  // Set at construction, then immutable.
  const uint64_t id_;
  ServerContext* const context_;
  const std::string peer_;  // "127.0.0.1:41234"
  std::string vhost_;
  const asio::any_io_executor executor_;
  const std::shared_ptr<SessionCore> core_;

  std::unique_ptr<net::Stream> stream_;
  bool tls_handshaking_ = false;  // nothing is read or written until the handshake is done
  std::string certificate_user_;  // set once the handshake is done
  asio::steady_timer close_timer_;
  asio::steady_timer handshake_timer_;
  Login login_;
  std::unique_ptr<Codec> codec_;  // before decoder_: it sizes the decoder
  net::FrameDecoder decoder_;
  size_t frame_allowance_;  // what decoder_ may hold without a grant (SetFrameAllowance)
  // Partial frames: waiting in the FrameBudget's queue; the decoder's memory beyond its
  // allowance as last told to the budget's gauge.
  bool awaiting_grant_ = false;
  size_t noted_frame_memory_ = 0;
  // Content reservations (ReserveContent) by key, and the one waiting for its grant.
  std::map<uint16_t, uint64_t> content_reserved_;
  std::optional<uint16_t> content_waiting_;
  bool content_waiting_own_ = false;    // over the connection's own cap, not in the budget's queue
  uint64_t content_waiting_bytes_ = 0;  // what that content asks for
  // The slow-sender clock: the frame timed (where it starts in the stream), the time reads of it
  // were pending before the current one, and whether (since when) the current read counts.
  asio::steady_timer frame_timer_;
  bool frame_timer_armed_ = false;
  std::optional<uint64_t> timed_frame_;
  std::chrono::steady_clock::duration frame_read_time_{};
  bool read_timed_ = false;
  std::chrono::steady_clock::time_point read_started_;
  State state_ = State::kHandshake;
  std::string user_;
  UserUsage::Slot user_slot_;  // once logged in (native) or opened (AMQP); given back at close
  bool reading_ = false;
  bool writing_ = false;
  bool client_closed_ = false;  // the client asked to close
  // Flow control: this connection published at least once; it was told it is blocked.
  bool has_published_ = false;
  bool told_blocked_ = false;
  bool close_sent_ = false;  // the close is queued: write nothing more, then close the socket
  bool draining_ = false;    // the close is written: reading until the peer closes
  std::array<char, 4096> drain_buffer_{};
  std::chrono::steady_clock::time_point last_read_at_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_write_at_ = std::chrono::steady_clock::now();
  bool opened_in_broker_ = false;
  uint32_t batches_in_flight_ = 0;
  size_t waiting_batch_bytes_ = 0;     // of requests decoded, not yet posted (DecodeBuffered)
  std::string pending_write_;          // encoded, not yet handed to the socket
  std::string active_write_;           // being written by async_write
  uint64_t pending_queued_bytes_ = 0;  // SessionCore::queued_bytes share of pending_write_
  uint64_t active_queued_bytes_ = 0;   // SessionCore::queued_bytes share of active_write_
  std::string close_reason_;
};

}  // namespace wharf::server
