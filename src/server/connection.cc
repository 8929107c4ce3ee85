#include "server/connection.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/log_safe.h"
#include "net/address.h"
#include "net/tls.h"

namespace wharf::server {
namespace {

std::string Endpoint(const asio::ip::tcp::socket& socket) {
  asio::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return "unknown";
  return endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
}

std::string Address(const asio::ip::tcp::socket& socket) {
  asio::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return "unknown";
  return endpoint.address().to_string();
}

bool IsLoopback(const asio::ip::tcp::socket& socket) {
  asio::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  return !ec && net::IsLoopback(endpoint.address());
}

}  // namespace

Connection::Connection(std::unique_ptr<net::Stream> stream, uint64_t id, ServerContext* context,
                       const CodecFactory& make_codec)
    : id_(id),
      context_(context),
      peer_(Endpoint(stream->socket())),
      executor_(stream->socket().get_executor()),
      core_(std::make_shared<SessionCore>(context)),
      stream_(std::move(stream)),
      close_timer_(executor_),
      handshake_timer_(executor_),
      login_(context, executor_, Address(stream_->socket()), IsLoopback(stream_->socket())),
      codec_(make_codec(*this)),
      decoder_(codec_->handshake_frame_bytes(), kFrameAllowanceBytes),
      frame_allowance_(kFrameAllowanceBytes),
      frame_timer_(executor_) {
  decoder_.set_framing(codec_->initial_framing());
}

Connection::~Connection() = default;

// --- Reading ------------------------------------------------------------------------------------

void Connection::Start() {
  asio::error_code ec;
  stream_->socket().set_option(asio::ip::tcp::no_delay(true), ec);
  spdlog::debug("conn={} peer={} accepted{}", id_, peer_, stream_->tls() ? " (TLS)" : "");
  handshake_timer_.expires_after(
      std::chrono::milliseconds(context_->options->handshake_timeout_ms));
  handshake_timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (ec || (self->state_ != State::kHandshake && self->state_ != State::kAuthChecking)) {
      return;
    }
    self->login_.Cancel();
    Status status(
        StatusCode::kHandshakeTimeout,
        "no login within " + std::to_string(self->context_->options->handshake_timeout_ms) + " ms");
    spdlog::warn("conn={} peer={} {}", self->id_, self->peer_, status.ToString());
    if (self->tls_handshaking_) return self->CloseSocket("TLS handshake timeout");
    self->BeginClose(status, "handshake timeout");
  });
  if (stream_->tls()) {
    tls_handshaking_ = true;
    stream_->AsyncHandshake(
        asio::ssl::stream_base::server,
        [self = shared_from_this()](const asio::error_code& ec) { self->OnTlsHandshake(ec); });
    return;
  }
  ReadLoop();
}

void Connection::OnTlsHandshake(const asio::error_code& ec) {
  tls_handshaking_ = false;
  if (state_ == State::kClosed) return;
  if (ec) {
    // OpenSSL's reason (e.g. "certificate verify failed", "wrong version number"), never
    // the peer's bytes.
    spdlog::info("conn={} peer={} TLS handshake failed: {}", id_, peer_, ec.message());
    return CloseSocket("TLS handshake failed");
  }
  spdlog::debug("conn={} peer={} TLS: {}", id_, peer_, stream_->TlsDescription());
  // Only a certificate the handshake verified is there (verify = optional or required).
  SSL* ssl = stream_->tls_stream()->native_handle();
  switch (context_->options->tls.cert_login) {
    case TlsOptions::CertLogin::kOff:
      break;
    case TlsOptions::CertLogin::kCommonName:
      certificate_user_ = net::PeerCommonName(ssl);
      break;
    case TlsOptions::CertLogin::kDistinguishedName:
      certificate_user_ = net::PeerSubject(ssl);
      break;
  }
  if (!certificate_user_.empty()) {
    spdlog::debug("conn={} peer={} client certificate names {}", id_, peer_,
                  LogSafe(certificate_user_));
  }
  StartWrite();  // a refusal queued while the handshake ran
  ReadLoop();
}

bool Connection::ReadingAllowed() const {
  return Reading() && !codec_->holding() && !codec_->paused() &&
         batches_in_flight_ < kMaxBatchesInFlight &&
         pending_write_.size() + active_write_.size() < kMaxPendingWriteBytes &&
         core_->queued_bytes.load(std::memory_order_acquire) < SessionCore::kMaxQueuedBytes;
}

bool Connection::OwnOutputHoldsReading() const {
  return Reading() &&
         (pending_write_.size() + active_write_.size() >= kMaxPendingWriteBytes ||
          core_->queued_bytes.load(std::memory_order_acquire) >= SessionCore::kMaxQueuedBytes);
}

void Connection::ReadLoop() {
  // A publish held by flow control goes first once publishing is allowed and there is room.
  if (codec_->holding() && !context_->flow->blocked() && Reading() && !awaiting_grant_ &&
      batches_in_flight_ < kMaxBatchesInFlight && !codec_->paused()) {
    return DecodeBuffered();
  }
  if (reading_ || awaiting_grant_ || tls_handshaking_) return;
  if (!ReadingAllowed()) {
    // Held by its own output (it does not read what it is sent) in the middle of a frame: the
    // frame's clock keeps running, or one client could keep its share of the partial-frame
    // budget for ever. Holds of the whole broker (flow control, the broker's batches) stop it.
    if (OwnOutputHoldsReading()) StartFrameClock();
    return;
  }
  // Decode what is already buffered before reading more, so the buffer stays bounded.
  if (decoder_.FrameReady()) return DecodeBuffered();
  // A frame larger than the allowance reads on only once the FrameBudget holds it.
  if (!ReserveFrameMemory()) return;
  std::span<char> space = decoder_.PrepareWrite(kReadChunk);
  NoteFrameMemory();
  if (space.empty()) return;  // not reached: the grant covers the whole frame
  reading_ = true;
  StartFrameClock();
  stream_->AsyncReadSome(
      asio::buffer(space.data(), space.size()),
      [self = shared_from_this()](const asio::error_code& ec, size_t n) { self->OnRead(ec, n); });
}

void Connection::OnRead(const asio::error_code& ec, size_t bytes) {
  reading_ = false;
  StopFrameClock();
  if (state_ == State::kClosed) return;
  if (draining_) return OnDrained(ec);
  last_read_at_ = std::chrono::steady_clock::now();
  if (ec) {
    if (ec == asio::error::operation_aborted) return;
    Status truncated = decoder_.Finish();
    // A TLS peer that closed TCP without close_notify has closed all the same.
    const bool eof = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
    if (eof && !truncated.ok()) {
      // The peer may only have shut down its sending side: it can still read the error.
      spdlog::warn("conn={} peer={} user={} {}", id_, peer_, LogSafe(user_), truncated.ToString());
      BeginClose(truncated, "truncated frame");
    } else {
      CloseSocket(eof ? "peer closed the connection" : "read error: " + ec.message());
    }
    return;
  }
  // A read that was already pending when closing began: its bytes are not executed.
  if (state_ == State::kClosing) return;
  decoder_.CommitWrite(bytes);
  DecodeBuffered();
}

bool Connection::ReserveFrameMemory() {
  const size_t wanted = decoder_.WantedGrant();
  if (wanted == 0) return true;
  FrameBudget* budget = context_->frame_budget;
  if (budget->Reserve(id_, wanted, GrantHandler(wanted, &Connection::OnFrameGrant))) {
    decoder_.AddGrant(wanted);
    return true;
  }
  // Not read meanwhile: the socket's buffers fill and TCP holds the sender back.
  awaiting_grant_ = true;
  return false;
}

std::function<void()> Connection::GrantHandler(uint64_t bytes,
                                               void (Connection::*on_grant)(uint64_t)) {
  // Called on the thread that releases budget: hands the grant to this connection's I/O
  // thread, or straight back when the connection is gone.
  return [weak = weak_from_this(), budget = context_->frame_budget, bytes, on_grant] {
    if (auto self = weak.lock()) {
      asio::post(self->executor_, [self, bytes, on_grant] { ((*self).*on_grant)(bytes); });
    } else {
      budget->Release(bytes);
    }
  };
}

void Connection::SetFrameAllowance(size_t bytes) {
  frame_allowance_ = std::max(frame_allowance_, bytes);
  decoder_.set_free_bytes(frame_allowance_);
  NoteFrameMemory();
}

bool Connection::ReserveContent(uint16_t key, uint64_t bytes) {
  ReleaseContent(key);
  FrameBudget* budget = context_->frame_budget;
  // One connection holds at most a quarter of the budget (or one largest message): past that
  // it is not read (so its other contents cannot finish either, and the content clock ends
  // it), and the rest of the budget stays for everyone else.
  uint64_t held = 0;
  for (const auto& [other, reserved] : content_reserved_) held += reserved;
  const uint64_t cap =
      std::max<uint64_t>(context_->options->max_message_bytes + (64u << 10), budget->limit() / 4);
  if (held > 0 && held + bytes > cap) {
    awaiting_grant_ = true;
    content_waiting_ = key;
    content_waiting_own_ = true;
    content_waiting_bytes_ = bytes;
    return false;
  }
  if (budget->Reserve(id_, bytes, GrantHandler(bytes, &Connection::OnContentGrant))) {
    content_reserved_[key] = bytes;
    return true;
  }
  awaiting_grant_ = true;
  content_waiting_ = key;
  return false;
}

void Connection::OnContentGrant(uint64_t bytes) {
  awaiting_grant_ = false;
  // Closing, or the content that waited was given up meanwhile (its channel closed).
  if (!Reading() || !content_waiting_) {
    content_waiting_.reset();
    context_->frame_budget->Release(bytes);
    if (Reading()) ReadLoop();
    return;
  }
  content_reserved_[*content_waiting_] = bytes;
  content_waiting_.reset();
  ReadLoop();
}

void Connection::ReleaseContent(uint16_t key) {
  if (content_waiting_ == key && content_waiting_own_) {  // over its own cap: not queued
    content_waiting_.reset();
    content_waiting_own_ = false;
    awaiting_grant_ = false;
    asio::post(executor_, [self = shared_from_this()] { self->ReadLoop(); });
    return;
  }
  if (content_waiting_ == key) {
    content_waiting_.reset();
    // Still queued: out of the queue, and reading resumes. Else its grant is on its way and
    // OnContentGrant gives it back.
    if (context_->frame_budget->CancelWait(id_)) {
      awaiting_grant_ = false;
      asio::post(executor_, [self = shared_from_this()] { self->ReadLoop(); });
    }
    return;
  }
  auto it = content_reserved_.find(key);
  if (it == content_reserved_.end()) return;
  context_->frame_budget->Release(it->second);
  content_reserved_.erase(it);
  if (content_waiting_own_) {
    // The connection's own contents shrank (one finished, or its channel was closed): the
    // one waiting over the cap may fit now, or go into the budget's queue.
    const uint16_t waiting = *content_waiting_;
    content_waiting_.reset();
    content_waiting_own_ = false;
    awaiting_grant_ = false;
    if (ReserveContent(waiting, content_waiting_bytes_)) {
      asio::post(executor_, [self = shared_from_this()] { self->ReadLoop(); });
    }
  }
}

void Connection::OnFrameGrant(uint64_t bytes) {
  awaiting_grant_ = false;
  if (!Reading()) {  // closing: the frame will never be read
    context_->frame_budget->Release(bytes);
    return;
  }
  decoder_.AddGrant(bytes);
  ReadLoop();
}

void Connection::TrimFrameBuffer() {
  if (size_t unneeded = decoder_.Trim()) context_->frame_budget->Release(unneeded);
  NoteFrameMemory();
}

void Connection::NoteFrameMemory() {
  const size_t held =
      decoder_.capacity() > frame_allowance_ ? decoder_.capacity() - frame_allowance_ : 0;
  if (held == noted_frame_memory_) return;
  context_->frame_budget->AddHeld(static_cast<int64_t>(held) -
                                  static_cast<int64_t>(noted_frame_memory_));
  noted_frame_memory_ = held;
}

void Connection::LeaveFrameBudget(bool drop_buffer) {
  FrameBudget* budget = context_->frame_budget;
  // A grant already on its way is given back by OnFrameGrant.
  if (awaiting_grant_ && (content_waiting_own_ || budget->CancelWait(id_))) {
    awaiting_grant_ = false;
    content_waiting_.reset();
    content_waiting_own_ = false;
  }
  if (!drop_buffer) return;
  budget->Release(decoder_.Clear());
  for (const auto& [key, bytes] : content_reserved_) budget->Release(bytes);
  content_reserved_.clear();
  NoteFrameMemory();
}

void Connection::StartFrameClock() {
  // Only a read of an incomplete frame counts, and only after login (before it, the handshake
  // timeout covers everything).
  if (state_ != State::kOpen || decoder_.buffered() == 0 || read_timed_) return;
  if (timed_frame_ != decoder_.consumed()) {  // a new frame
    timed_frame_ = decoder_.consumed();
    frame_read_time_ = {};
  }
  read_timed_ = true;
  read_started_ = std::chrono::steady_clock::now();
  if (!frame_timer_armed_) {
    ArmFrameTimer(std::chrono::milliseconds(context_->options->frame_timeout_ms) -
                  frame_read_time_);
  }
}

void Connection::StopFrameClock() {
  if (!read_timed_) return;
  read_timed_ = false;
  frame_read_time_ += std::chrono::steady_clock::now() - read_started_;
}

void Connection::ArmFrameTimer(std::chrono::steady_clock::duration after) {
  frame_timer_armed_ = true;
  frame_timer_.expires_after(after);
  frame_timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    self->frame_timer_armed_ = false;
    if (!ec) self->OnFrameTimer();
  });
}

void Connection::OnFrameTimer() {
  // Not reading now (back-pressure, the budget, flow control): the clock stands still, and
  // the next read of the frame arms the timer again.
  if (!read_timed_ || state_ != State::kOpen) return;
  const auto timeout = std::chrono::milliseconds(context_->options->frame_timeout_ms);
  const auto now = std::chrono::steady_clock::now();
  const auto elapsed = frame_read_time_ + (now - read_started_);
  if (elapsed < timeout) return ArmFrameTimer(timeout - elapsed);
  const size_t frame = decoder_.frame_bytes();
  Status status(StatusCode::kFrameTimeout,
                "frame not complete within " + std::to_string(timeout.count()) +
                    " ms ([limits] frame_timeout_ms): " + std::to_string(decoder_.buffered()) +
                    " of its " + (frame == 0 ? std::string("?") : std::to_string(frame)) +
                    " bytes came");
  uint64_t unlogged = 0;
  if (context_->frame_budget->CountTimeout(now, &unlogged)) {
    spdlog::warn("conn={} peer={} user={} closed, a slow sender: {}{}", id_, peer_, LogSafe(user_),
                 status.ToString(),
                 unlogged == 0 ? std::string()
                               : " (and " + std::to_string(unlogged) +
                                     " more connections since the last such line)");
  }
  BeginClose(status, "frame timeout");
}

bool Connection::Reading() const { return state_ == State::kHandshake || state_ == State::kOpen; }

void Connection::DecodeBuffered() {
  while (Reading() && !awaiting_grant_ && batches_in_flight_ < kMaxBatchesInFlight &&
         !codec_->paused()) {
    if (codec_->holding()) {
      if (context_->flow->blocked()) return;  // OnFlowChanged resumes
      codec_->ReleaseHeld();
    }
    size_t batch_bytes = waiting_batch_bytes_;  // requests read earlier, not posted yet
    waiting_batch_bytes_ = 0;
    Status stop;
    // Reading() ends the batch when a login starts the password check.
    // A content that waits for its memory (ReserveContent) stops the decoding too.
    while (stop.ok() && Reading() && !awaiting_grant_ && batch_bytes < kMaxBatchBytes &&
           !codec_->holding() && !codec_->paused()) {
      auto next = decoder_.Next();
      if (!next.ok()) {
        stop = next.status();
        break;
      }
      if (!next->has_value()) break;
      batch_bytes += (*next)->size() + net::kFrameHeaderBytes;  // about, for every framing
      bool ends_batch = false;
      stop = codec_->OnFrame(**next, &ends_batch);
      if (ends_batch) batch_bytes = kMaxBatchBytes;
    }
    // The payloads are parsed (and a publish's body moved out): their buffer may go.
    TrimFrameBuffer();
    // While a batch of this connection is at the broker, a small one waits here and grows
    // with the next reads: it goes when that batch is done (OnOutbox) or when it is full. So
    // a client that sends each request in its own segment (AMQP clients write a publish per
    // send) costs the broker a post per round trip, not one per read.
    if (stop.ok() && state_ == State::kOpen && batches_in_flight_ > 0 && batch_bytes > 0 &&
        batch_bytes < kMaxBatchBytes && !codec_->holding()) {
      waiting_batch_bytes_ = batch_bytes;
      if (!decoder_.FrameReady()) break;
      continue;
    }
    // Requests read before a bad frame still run, and their replies precede the error.
    codec_->PostBatch();
    if (codec_->holding() && stop.ok()) return;  // blocked: OnFlowChanged resumes
    if (!stop.ok()) {
      if (client_closed_) {
        BeginClose(Status::Ok(), "client closed");
      } else {
        spdlog::warn("conn={} peer={} user={} {}", id_, peer_, LogSafe(user_),
                     LogSafe(stop.ToString(), kLogSafeStatusBytes));
        BeginClose(stop, std::string(StatusCodeName(stop.code())));
      }
      return;
    }
    if (!decoder_.FrameReady()) break;
  }
  ReadLoop();
}

bool Connection::HoldPublish() {
  has_published_ = true;
  if (!context_->flow->blocked()) return false;
  // Flow control: this publish, and everything after it on this connection, waits until the
  // broker takes publishes again (OnFlowChanged). The socket is not read meanwhile.
  if (!told_blocked_) SendBlockedNotice(true);
  return true;
}

void Connection::SendBlockedNotice(bool blocked) {
  codec_->EncodeBlocked(blocked, blocked ? context_->flow->reason() : std::string(),
                        &pending_write_);
  StartWrite();
  told_blocked_ = blocked;
  spdlog::info("conn={} user={} publishing {}", id_, LogSafe(user_),
               blocked ? "blocked" : "unblocked");
}

void Connection::OnFlowChanged() {
  if (state_ != State::kOpen) return;
  if (context_->flow->blocked()) {
    if (has_published_ && !told_blocked_) SendBlockedNotice(true);
    return;
  }
  if (told_blocked_) SendBlockedNotice(false);
  if (codec_->holding()) DecodeBuffered();
}

// --- Login --------------------------------------------------------------------------------------

Status Connection::StartLogin(std::string user, std::string password) {
  user_ = std::move(user);
  state_ = State::kAuthChecking;
  return login_.Start(user_, std::move(password), handshake_timer_.expiry(), shared_from_this(),
                      [this](Status result) { FinishLogin(std::move(result)); });
}

Status Connection::StartExternalLogin(const std::string& requested) {
  if (certificate_user_.empty()) {
    return Status(StatusCode::kAuthenticationFailed,
                  "EXTERNAL needs a client certificate the broker verified, on a TLS listener "
                  "with [tls] cert_login on");
  }
  if (!requested.empty() && requested != certificate_user_) {
    return Status(StatusCode::kAuthenticationFailed,
                  "the client certificate names '" + CutForDisplay(certificate_user_) + "', not '" +
                      CutForDisplay(requested) + "'");
  }
  user_ = certificate_user_;
  state_ = State::kAuthChecking;
  login_.StartExternal(user_, shared_from_this(),
                       [this](Status result) { FinishLogin(std::move(result)); });
  return Status::Ok();
}

void Connection::OpenInBroker(std::function<Status()> open,
                              std::function<void(const Status&)> then) {
  asio::post(*context_->broker_context,
             [self = shared_from_this(), open = std::move(open), then = std::move(then)]() mutable {
               Status status = open();
               asio::post(self->executor_, [self, status, then = std::move(then)] {
                 if (self->state_ == State::kOpen) then(status);
               });
             });
}

Status Connection::TakeUserSlot() {
  auto known = context_->users->Find(user_);
  auto slot = context_->user_usage->Take(UserUsage::Kind::kConnection, user_,
                                         known ? known->limits.max_connections : -1);
  if (!slot.ok()) return slot.status();
  user_slot_ = std::move(*slot);
  return Status::Ok();
}

void Connection::FinishLogin(Status result) {
  if (state_ != State::kAuthChecking) return;  // closed meanwhile (handshake timeout, shutdown)
  login_.Record(result);
  if (!result.ok()) {
    spdlog::warn("conn={} peer={} user={} login refused: {}", id_, peer_, LogSafe(user_),
                 LogSafe(result.ToString(), kLogSafeStatusBytes));
    BeginClose(result, "login refused");
    return;
  }
  if (codec_->counts_user_at_login()) {
    if (Status slot = TakeUserSlot(); !slot.ok()) {
      spdlog::warn("conn={} peer={} user={} connection refused: {}", id_, peer_, LogSafe(user_),
                   LogSafe(std::string(slot.message())));
      BeginClose(slot, "user connection limit");
      return;
    }
  }
  state_ = State::kOpen;
  handshake_timer_.cancel();
  opened_in_broker_ = true;
  core_->Attach(shared_from_this());
  codec_->OnLoggedIn();
  spdlog::info("conn={} peer={} user={} connection opened", id_, peer_, LogSafe(user_));
  // Requests the client sent right after its login wait in the decoder.
  ReadLoop();
}

// --- Writing ------------------------------------------------------------------------------------

void Connection::PostWaitingBatch() {
  if (waiting_batch_bytes_ == 0) return;
  waiting_batch_bytes_ = 0;
  codec_->PostBatch();
}

void Connection::OnOutbox(OutboxBatch outbox) {
  batches_in_flight_ -= outbox.batches_done;
  if (batches_in_flight_ == 0) PostWaitingBatch();
  if (close_sent_ || state_ == State::kClosed) {
    // Too late to write: whatever was delivered here is requeued when the broker closes
    // the session.
    ReleaseQueuedBytes(outbox.queued_bytes);
    return;
  }
  for (auto& item : outbox.items) codec_->Encode(item, &pending_write_);
  pending_queued_bytes_ += outbox.queued_bytes;
  StartWrite();
  ReadLoop();
}

void Connection::StartWrite() {
  if (writing_ || pending_write_.empty() || state_ == State::kClosed || tls_handshaking_) return;
  writing_ = true;
  active_write_.swap(pending_write_);
  last_write_at_ = std::chrono::steady_clock::now();
  active_queued_bytes_ = pending_queued_bytes_;
  pending_queued_bytes_ = 0;
  stream_->AsyncWrite(
      asio::buffer(active_write_),
      [self = shared_from_this()](const asio::error_code& ec, size_t) { self->OnWritten(ec); });
}

void Connection::OnWritten(const asio::error_code& ec) {
  writing_ = false;
  active_write_.clear();
  ReleaseQueuedBytes(active_queued_bytes_);
  active_queued_bytes_ = 0;
  if (ec) {
    if (ec != asio::error::operation_aborted) CloseSocket("write error: " + ec.message());
    return;
  }
  if (pending_write_.empty() && close_sent_) {
    if (codec_->drains_after_close()) return Drain();
    CloseSocket(close_reason_);
    return;
  }
  StartWrite();
  ReadLoop();
}

void Connection::ReleaseQueuedBytes(uint64_t bytes) {
  if (bytes == 0) return;
  uint64_t before = core_->queued_bytes.fetch_sub(bytes, std::memory_order_acq_rel);
  if (before >= SessionCore::kMaxQueuedBytes && before - bytes < SessionCore::kMaxQueuedBytes &&
      opened_in_broker_ && state_ != State::kClosed) {
    // The broker may have held deliveries back while this connection was behind: wake it.
    codec_->PostResume();
  }
}

// --- Closing ------------------------------------------------------------------------------------

void Connection::BeginClose(const Status& status, std::string reason) {
  if (state_ == State::kClosing || state_ == State::kClosed) return;
  state_ = State::kClosing;
  core_->closing.store(true, std::memory_order_release);
  close_reason_ = std::move(reason);
  PostWaitingBatch();                       // what was read runs before the close
  LeaveFrameBudget(/*drop_buffer=*/false);  // nothing more is read: let others have its turn
  if (!opened_in_broker_) {
    SendClose(status);
    return;
  }
  // Let the broker run everything already read (its replies come back first), then say why.
  asio::post(*context_->broker_context, [self = shared_from_this(), status] {
    self->context_->after_broker_work();
    asio::post(self->executor_, [self, status] {
      if (self->state_ != State::kClosed) self->SendClose(status);
    });
  });
}

void Connection::SendClose(const Status& status) {
  codec_->EncodeClose(status, close_reason_, &pending_write_);
  StartWrite();
  close_sent_ = true;
  if (!writing_) {  // the protocol had nothing to say (an AMQP login refused without notice)
    if (codec_->drains_after_close()) {
      Drain();
    } else {
      CloseSocket(close_reason_);
      return;
    }
  }
  // A peer that does not read must not hold the connection open forever.
  close_timer_.expires_after(std::chrono::seconds(5));
  close_timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (!ec) self->CloseSocket(self->close_reason_ + " (close timed out)");
  });
}

void Connection::Drain() {
  if (draining_ || state_ == State::kClosed) return;
  draining_ = true;
  if (!stream_->tls()) {
    asio::error_code ignored;
    stream_->socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  }
  if (reading_) return;  // the read already pending comes back to OnDrained
  DrainMore();
}

void Connection::OnDrained(const asio::error_code& ec) {
  if (ec) return CloseSocket(close_reason_);
  DrainMore();
}

void Connection::DrainMore() {
  reading_ = true;
  if (stream_->tls()) {
    // close_notify, then the peer's (or its close, or the close timer): TLS's own shutdown
    // reads and drops whatever the peer still sends.
    stream_->AsyncShutdown([self = shared_from_this()](const asio::error_code&) {
      self->reading_ = false;
      self->CloseSocket(self->close_reason_);
    });
    return;
  }
  stream_->AsyncReadSome(
      asio::buffer(drain_buffer_),
      [self = shared_from_this()](const asio::error_code& ec, size_t) { self->OnRead(ec, 0); });
}

void Connection::Shutdown(std::string reason) {
  BeginClose(Status(StatusCode::kShuttingDown, reason), reason);
}

void Connection::CloseSocket(std::string_view reason) {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  close_timer_.cancel();
  handshake_timer_.cancel();
  login_.Cancel();
  frame_timer_.cancel();
  stream_->Close();
  // No read is pending any more (the socket is closed): the buffer can go.
  LeaveFrameBudget(/*drop_buffer=*/true);
  if (opened_in_broker_) {
    PostWaitingBatch();  // an ack read just before the peer closed still counts
    codec_->CloseSessions();
  }
  user_slot_.Release();
  // `reason` is the broker's own text, never a client's.
  spdlog::info("conn={} peer={} user={} connection closed: {}", id_, peer_, LogSafe(user_), reason);
  context_->on_session_closed(id_);
}

}  // namespace wharf::server
