// server/session.h
//
// Session is one client connection of the native protocol. It has two halves that live on two
// threads and meet only through asio::post:
//
//   I/O half (the connection's I/O thread): the socket, the frame decoder, the handshake and
//   login, the write buffer. It decodes frames, turns each request into a Request and posts
//   whole batches (everything one read produced) to the broker thread. It never blocks.
//
//   Broker half (the broker thread): runs each batch against the Broker (reading each request's
//   fields and building its reply frame here), collects replies and the deliveries the broker
//   pushes (SessionPeer) into `outbox_`, and posts the outbox back to the I/O half once per
//   batch, where deliveries are converted and every frame is serialized and written.
//
// Back-pressure: the I/O half stops reading while it has kMaxBatchesInFlight batches at the
// broker or more than kMaxPendingWriteBytes waiting to be written, and resumes when both drop.
// A client that stops reading therefore also stops being read, and memory stays bounded.
//
// Partial frames: a connection buffers at most kFrameAllowanceBytes of its own; a larger frame
// first reserves the rest from the broker-wide FrameBudget (server/frame_budget.h) and is not
// read further until it has. A frame the broker has been reading for [limits] frame_timeout_ms
// without getting all of it closes the connection (FRAME_TIMEOUT).
//
// Thread safety: members are grouped below by the thread that owns them. The object is shared
// (std::shared_ptr) between the two threads; neither half touches the other's members.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "broker/session_peer.h"
#include "common/log_limiter.h"
#include "net/frame.h"
#include "protocol/codec.h"
#include "server/server_context.h"

namespace wharf::server {

class Session final : public broker::SessionPeer, public std::enable_shared_from_this<Session> {
 public:
  Session(asio::ip::tcp::socket socket, uint64_t id, ServerContext* context);

  uint64_t id() const { return id_; }
  const asio::any_io_executor& executor() const { return executor_; }

  // Thread: I/O. Starts reading.
  void Start();
  // Thread: I/O. Sends `status` and closes (e.g. too many connections).
  void Refuse(const Status& status) { BeginClose(status, std::string(status.message())); }
  // Thread: I/O. Graceful stop: read no more, let the broker finish what was read, then send
  // Close with `reason` and close the socket.
  void Shutdown(std::string reason);

  // SessionPeer. Thread: broker.
  void Deliver(broker::Delivery delivery) override;
  void CompleteReceive(uint64_t request_id, std::vector<broker::Delivery> deliveries) override;
  void PublishDone(uint64_t request_id, const PublishResult& result, const Status& status) override;
  void CancelDelayedDone(uint64_t request_id, const Result<bool>& result) override;
  void ListDelayedDone(uint64_t request_id, const Result<DelayedPage>& result) override;
  void RedriveDone(uint64_t request_id, const Result<RedriveInfo>& result) override;
  void PeekDone(uint64_t request_id, const Result<PeekPage>& result) override;
  void PurgeDone(uint64_t request_id, const Result<uint64_t>& result) override;
  void DeleteQueueDone(uint64_t request_id, const Result<uint64_t>& result) override;
  void ConsumerCancelled(const std::string& consumer_tag, std::string_view reason) override;
  void Flush() override;

  // Thread: the session's I/O thread. Publishing was blocked or unblocked (ServerContext::flow):
  // tells a publishing client, and resumes a held publish.
  void OnFlowChanged();
  bool Writable() const override;

 private:
  // kAuthChecking: the password is being checked on the LoginChecker's thread (after the
  // LoginThrottle's wait); nothing more is read until the answer comes back.
  enum class State { kAwaitHello, kAwaitAuth, kAuthChecking, kOpen, kClosing, kClosed };

  // A decoded request on its way to the broker thread.
  struct Request {
    uint64_t request_id = 0;
    protocol::wire::Frame frame;
    Message message;     // Publish only: converted on the I/O thread
    Status early_error;  // found while decoding; answered in order by the broker thread
  };
  struct ReceiveDone {
    uint64_t request_id;
    std::vector<broker::Delivery> deliveries;
  };
  struct CancelNotice {
    std::string consumer_tag;
    std::string reason;
  };
  using Outbound = std::variant<broker::Delivery, ReceiveDone, CancelNotice, protocol::wire::Frame>;
  struct OutboxBatch {
    std::vector<Outbound> items;
    uint32_t batches_done = 0;
    uint64_t queued_bytes = 0;  // counted in queued_bytes_ until written
  };

  static constexpr uint32_t kMaxBatchesInFlight = 2;
  static constexpr size_t kMaxPendingWriteBytes = 8u << 20;
  static constexpr size_t kReadChunk = 64u << 10;
  // Requests per batch, in frame bytes. Small batches keep one connection's flood from
  // delaying everyone else's acks at the broker: with two batches in flight, another
  // connection waits behind at most 8 KiB of this one's requests (docs/benchmarks.md).
  static constexpr size_t kMaxBatchBytes = 4u << 10;
  // Deliveries are held back (Writable() false) while this much output waits to be written.
  static constexpr uint64_t kMaxQueuedBytes = 8u << 20;
  // Frames before login are small (Hello, Authenticate): no one unauthenticated may make the
  // broker buffer a full-size frame.
  static constexpr size_t kMaxHandshakeFrameBytes = 64u << 10;
  // What a connection may buffer without the FrameBudget: a handshake frame, or a read.
  static constexpr size_t kFrameAllowanceBytes = kMaxHandshakeFrameBytes + net::kFrameHeaderBytes;

  // --- I/O thread -----------------------------------------------------------------------------
  bool Reading() const;  // in a state that reads requests
  void ReadLoop();
  static bool IsHeavy(const protocol::wire::Frame& frame);
  // Reading stops because this connection's own output is not being read (I/O thread).
  bool OwnOutputHoldsReading() const;
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
  // A non-OK result stops reading and closes the connection with that error.
  Status HandleFrame(std::string_view payload, std::vector<Request>* batch);
  Status HandleHello(const protocol::wire::Frame& frame);
  Status HandleAuthenticate(const protocol::wire::Frame& frame);
  // After the throttle's wait: looks the user up and hands the password to the LoginChecker.
  void CheckLogin(std::string password);
  // The check's answer (OK: logged in), back on the I/O thread.
  void FinishLogin(Status result);
  void PostBatch(std::vector<Request> batch);
  void OnOutbox(OutboxBatch outbox);
  void Encode(Outbound& item);
  void SendFrame(const protocol::wire::Frame& frame);
  void StartWrite();
  void OnWritten(const asio::error_code& ec);
  void ReleaseQueuedBytes(uint64_t bytes);
  // Stops reading; once the broker has run what was read, sends Error (when `status` is not
  // OK) and Close, then closes the socket when they are written.
  void BeginClose(const Status& status, std::string reason);
  void SendCloseFrames(const Status& status);
  void CloseSocket(std::string_view reason);
  bool ReadingAllowed() const;
  void SendBlockedNotice(bool blocked);

  // --- Broker thread --------------------------------------------------------------------------
  void Execute(std::vector<Request>& batch);
  void HandleRequest(Request& request);
  void HandleUserRequest(uint64_t rid, const protocol::wire::Frame& frame);
  // Admins only: the store's online backup (docs/operations.md, "Backup and restore").
  void HandleBackup(uint64_t rid, const std::string& directory);
  void Reply(uint64_t request_id, protocol::wire::Frame frame);
  void ReplyStatus(uint64_t request_id, const Status& status);
  // Replies with `frame` (an Ok frame when empty) once the topology change it answers is synced,
  // or with the write's error: a crash after the answer cannot undo the change.
  void ReplyWhenDurable(uint64_t request_id, protocol::wire::Frame frame = {});

  // Set at construction, then immutable.
  const uint64_t id_;
  ServerContext* const context_;
  const std::string peer_;          // "127.0.0.1:41234"
  const std::string peer_address_;  // "127.0.0.1": what LoginThrottle counts by
  const bool peer_is_loopback_;
  const asio::any_io_executor executor_;  // the I/O thread's; the broker half posts here

  // Confined to the I/O thread.
  asio::ip::tcp::socket socket_;
  asio::steady_timer close_timer_;
  asio::steady_timer handshake_timer_;
  asio::steady_timer login_timer_;  // the LoginThrottle's wait
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
  State state_ = State::kAwaitHello;
  std::string user_;
  bool reading_ = false;
  bool writing_ = false;
  bool client_closed_ = false;  // the client sent Close
  // Flow control (I/O thread): a publish read while publishing is blocked, and everything
  // after it, waits; this connection published at least once; it was told it is blocked.
  std::optional<Request> held_;
  bool has_published_ = false;
  bool told_blocked_ = false;
  bool close_sent_ = false;  // Close is queued: write nothing more, then close the socket
  bool opened_in_broker_ = false;
  uint64_t close_request_id_ = 0;  // the Hello/Authenticate a handshake error answers
  uint32_t batches_in_flight_ = 0;
  std::string pending_write_;          // encoded, not yet handed to the socket
  std::string active_write_;           // being written by async_write
  uint64_t pending_queued_bytes_ = 0;  // queued_bytes_ share of pending_write_
  uint64_t active_queued_bytes_ = 0;   // queued_bytes_ share of active_write_
  std::string close_reason_;

  // Shared: added by the broker thread per delivery, released by the I/O thread once written.
  std::atomic<uint64_t> queued_bytes_{0};
  // Set by the I/O thread when closing begins; read by the broker thread (Writable).
  std::atomic<bool> closing_{false};

  // Confined to the broker thread.
  std::vector<Outbound> outbox_;
  uint32_t batches_done_ = 0;
  uint64_t outbox_queued_bytes_ = 0;
  // Publishes not confirmed (a failing store) are logged at most once a second per connection,
  // with how many were not logged since: a full disk fails every publish in flight.
  LogLimiter unconfirmed_log_{std::chrono::seconds(1)};
};

}  // namespace wharf::server
