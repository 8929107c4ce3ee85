// server/connection.h
//
// Connection is the I/O-thread half of one client connection, whatever its protocol: the socket,
// the read loop and the frame decoder, the batches of requests in flight at the broker, the write
// buffers and back-pressure, the flow-control hold of publishes, the handshake timer and the
// login (server/login.h), and the close sequence. What the bytes mean is its Codec's business
// (server/codec.h: server/native_codec.h for the native protocol): the codec turns each frame
// into requests and posts them to the broker thread in batches, and encodes what comes back.
// The broker-thread half is the SessionCore (server/session_core.h).
//
// Back-pressure: the connection stops reading while it has kMaxBatchesInFlight batches at the
// broker or more than kMaxPendingWriteBytes waiting to be written, and resumes when both drop.
// A client that stops reading therefore also stops being read, and memory stays bounded.
//
// Partial frames: a connection buffers at most kFrameAllowanceBytes of its own; a larger frame
// first reserves the rest from the broker-wide FrameBudget (server/frame_budget.h) and is not
// read further until it has. A frame the broker has been reading for [limits] frame_timeout_ms
// without getting all of it closes the connection (FRAME_TIMEOUT).
//
// Close: BeginClose stops reading, lets the broker run everything already read (its replies go
// out first), then has the codec write its protocol's close and closes the socket once that is
// written (or after 5 s). CloseSocket has the codec close its broker sessions.
//
// Thread safety: confined to the connection's I/O thread; the object is shared (std::shared_ptr)
// with handlers posted back from the broker thread and the login threads.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "net/frame.h"
#include "server/codec.h"
#include "server/login.h"
#include "server/server_context.h"
#include "server/session_core.h"

namespace wharf::server {

class Connection final : public std::enable_shared_from_this<Connection> {
 public:
  using CodecFactory = std::function<std::unique_ptr<Codec>(Connection&)>;

  Connection(asio::ip::tcp::socket socket, uint64_t id, ServerContext* context,
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
  // A publish was decoded. True when publishing is blocked (the client is told so): the codec
  // holds this publish and everything after it until Codec::ReleaseHeld.
  bool HoldPublish();
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
  // Reading stops because this connection's own output is not being read.
  bool OwnOutputHoldsReading() const;
  bool ReadingAllowed() const;
  void OnRead(const asio::error_code& ec, size_t bytes);
  // Partial frames. True when the frame coming in has the memory it needs (reserved from the
  // FrameBudget now, or not needed); false when it waits for OnFrameGrant.
  bool ReserveFrameMemory();
  void OnFrameGrant(size_t bytes);
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
  // The login's answer (OK: logged in).
  void FinishLogin(Status result);
  void OnWritten(const asio::error_code& ec);
  void ReleaseQueuedBytes(uint64_t bytes);
  // Stops reading; once the broker has run what was read, has the codec write its close, then
  // closes the socket when that is written.
  void BeginClose(const Status& status, std::string reason);
  void SendClose(const Status& status);
  void CloseSocket(std::string_view reason);
  void SendBlockedNotice(bool blocked);

  // Set at construction, then immutable.
  const uint64_t id_;
  ServerContext* const context_;
  const std::string peer_;  // "127.0.0.1:41234"
  const asio::any_io_executor executor_;
  const std::shared_ptr<SessionCore> core_;

  asio::ip::tcp::socket socket_;
  asio::steady_timer close_timer_;
  asio::steady_timer handshake_timer_;
  Login login_;
  std::unique_ptr<Codec> codec_;  // before decoder_: it sizes the decoder
  net::FrameDecoder decoder_;
  // Partial frames: waiting in the FrameBudget's queue; the decoder's memory beyond its
  // allowance as last told to the budget's gauge.
  bool awaiting_grant_ = false;
  size_t noted_frame_memory_ = 0;
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
  bool reading_ = false;
  bool writing_ = false;
  bool client_closed_ = false;  // the client asked to close
  // Flow control: this connection published at least once; it was told it is blocked.
  bool has_published_ = false;
  bool told_blocked_ = false;
  bool close_sent_ = false;  // the close is queued: write nothing more, then close the socket
  bool opened_in_broker_ = false;
  uint32_t batches_in_flight_ = 0;
  std::string pending_write_;          // encoded, not yet handed to the socket
  std::string active_write_;           // being written by async_write
  uint64_t pending_queued_bytes_ = 0;  // SessionCore::queued_bytes share of pending_write_
  uint64_t active_queued_bytes_ = 0;   // SessionCore::queued_bytes share of active_write_
  std::string close_reason_;
};

}  // namespace wharf::server
