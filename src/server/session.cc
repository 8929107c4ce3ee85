#include "server/session.h"

#include <spdlog/spdlog.h>

#include "common/log_safe.h"
#include "common/password.h"
#include "wharf/version.h"

namespace wharf::server {
namespace wire = protocol::wire;
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
  auto address = socket.remote_endpoint(ec).address();
  if (ec) return false;
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).is_loopback();
  }
  return address.is_loopback();
}

constexpr std::string_view kGuestUser = "guest";
constexpr std::string_view kGuestPassword = "guest";

}  // namespace

Session::Session(asio::ip::tcp::socket socket, uint64_t id, ServerContext* context)
    : id_(id),
      context_(context),
      peer_(Endpoint(socket)),
      peer_address_(Address(socket)),
      peer_is_loopback_(IsLoopback(socket)),
      executor_(socket.get_executor()),
      socket_(std::move(socket)),
      close_timer_(socket_.get_executor()),
      handshake_timer_(socket_.get_executor()),
      login_timer_(socket_.get_executor()),
      decoder_(std::min<size_t>(kMaxHandshakeFrameBytes, context->options->max_frame_bytes()),
               kFrameAllowanceBytes),
      frame_timer_(socket_.get_executor()) {}

// --- I/O thread: reading ------------------------------------------------------------------------

void Session::Start() {
  asio::error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  spdlog::debug("conn={} peer={} accepted", id_, peer_);
  handshake_timer_.expires_after(
      std::chrono::milliseconds(context_->options->handshake_timeout_ms));
  handshake_timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (ec || (self->state_ != State::kAwaitHello && self->state_ != State::kAwaitAuth &&
               self->state_ != State::kAuthChecking)) {
      return;
    }
    self->login_timer_.cancel();
    Status status(
        StatusCode::kHandshakeTimeout,
        "no login within " + std::to_string(self->context_->options->handshake_timeout_ms) + " ms");
    spdlog::warn("conn={} peer={} {}", self->id_, self->peer_, status.ToString());
    self->BeginClose(status, "handshake timeout");
  });
  ReadLoop();
}

bool Session::ReadingAllowed() const {
  return Reading() && !held_ && batches_in_flight_ < kMaxBatchesInFlight &&
         pending_write_.size() + active_write_.size() < kMaxPendingWriteBytes &&
         queued_bytes_.load(std::memory_order_acquire) < kMaxQueuedBytes;
}

bool Session::OwnOutputHoldsReading() const {
  return Reading() && (pending_write_.size() + active_write_.size() >= kMaxPendingWriteBytes ||
                       queued_bytes_.load(std::memory_order_acquire) >= kMaxQueuedBytes);
}

bool Session::IsHeavy(const wire::Frame& frame) {
  switch (frame.body_case()) {
    case wire::Frame::kListQueues:
    case wire::Frame::kListExchanges:
    case wire::Frame::kListConnections:
    case wire::Frame::kListConsumers:
    case wire::Frame::kListBindings:
    case wire::Frame::kReceive:
    case wire::Frame::kPeek:
      return true;
    default:
      return false;
  }
}

void Session::ReadLoop() {
  // A publish held by flow control goes first once publishing is allowed and there is room.
  if (held_ && !context_->flow->blocked() && Reading() &&
      batches_in_flight_ < kMaxBatchesInFlight) {
    return DecodeBuffered();
  }
  if (reading_ || awaiting_grant_) return;
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
  socket_.async_read_some(
      asio::buffer(space.data(), space.size()),
      [self = shared_from_this()](const asio::error_code& ec, size_t n) { self->OnRead(ec, n); });
}

void Session::OnRead(const asio::error_code& ec, size_t bytes) {
  reading_ = false;
  StopFrameClock();
  if (state_ == State::kClosed) return;
  if (ec) {
    if (ec == asio::error::operation_aborted) return;
    Status truncated = decoder_.Finish();
    if (ec == asio::error::eof && !truncated.ok()) {
      // The peer may only have shut down its sending side: it can still read the error.
      spdlog::warn("conn={} peer={} user={} {}", id_, peer_, LogSafe(user_), truncated.ToString());
      BeginClose(truncated, "truncated frame");
    } else {
      CloseSocket(ec == asio::error::eof ? "peer closed the connection"
                                         : "read error: " + ec.message());
    }
    return;
  }
  // A read that was already pending when closing began: its bytes are not executed.
  if (state_ == State::kClosing) return;
  decoder_.CommitWrite(bytes);
  DecodeBuffered();
}

bool Session::ReserveFrameMemory() {
  const size_t wanted = decoder_.WantedGrant();
  if (wanted == 0) return true;
  FrameBudget* budget = context_->frame_budget;
  // Called on the thread that releases budget: hands the grant to this session's I/O thread,
  // or straight back when the session is gone.
  auto granted = [weak = weak_from_this(), budget, wanted] {
    if (auto self = weak.lock()) {
      asio::post(self->executor_, [self, wanted] { self->OnFrameGrant(wanted); });
    } else {
      budget->Release(wanted);
    }
  };
  if (budget->Reserve(id_, wanted, std::move(granted))) {
    decoder_.AddGrant(wanted);
    return true;
  }
  // Not read meanwhile: the socket's buffers fill and TCP holds the sender back.
  awaiting_grant_ = true;
  return false;
}

void Session::OnFrameGrant(size_t bytes) {
  awaiting_grant_ = false;
  if (!Reading()) {  // closing: the frame will never be read
    context_->frame_budget->Release(bytes);
    return;
  }
  decoder_.AddGrant(bytes);
  ReadLoop();
}

void Session::TrimFrameBuffer() {
  if (size_t unneeded = decoder_.Trim()) context_->frame_budget->Release(unneeded);
  NoteFrameMemory();
}

void Session::NoteFrameMemory() {
  const size_t held =
      decoder_.capacity() > kFrameAllowanceBytes ? decoder_.capacity() - kFrameAllowanceBytes : 0;
  if (held == noted_frame_memory_) return;
  context_->frame_budget->AddHeld(static_cast<int64_t>(held) -
                                  static_cast<int64_t>(noted_frame_memory_));
  noted_frame_memory_ = held;
}

void Session::LeaveFrameBudget(bool drop_buffer) {
  FrameBudget* budget = context_->frame_budget;
  // A grant already on its way is given back by OnFrameGrant.
  if (awaiting_grant_ && budget->CancelWait(id_)) awaiting_grant_ = false;
  if (!drop_buffer) return;
  budget->Release(decoder_.Clear());
  NoteFrameMemory();
}

void Session::StartFrameClock() {
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

void Session::StopFrameClock() {
  if (!read_timed_) return;
  read_timed_ = false;
  frame_read_time_ += std::chrono::steady_clock::now() - read_started_;
}

void Session::ArmFrameTimer(std::chrono::steady_clock::duration after) {
  frame_timer_armed_ = true;
  frame_timer_.expires_after(after);
  frame_timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    self->frame_timer_armed_ = false;
    if (!ec) self->OnFrameTimer();
  });
}

void Session::OnFrameTimer() {
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

bool Session::Reading() const {
  return state_ == State::kAwaitHello || state_ == State::kAwaitAuth || state_ == State::kOpen;
}

void Session::DecodeBuffered() {
  while (Reading() && batches_in_flight_ < kMaxBatchesInFlight) {
    std::vector<Request> batch;
    if (held_) {
      if (context_->flow->blocked()) return;  // OnFlowChanged resumes
      batch.push_back(std::move(*held_));
      held_.reset();
    }
    size_t batch_bytes = 0;
    Status stop;
    // Reading() ends the batch when Authenticate starts the password check.
    while (stop.ok() && Reading() && batch_bytes < kMaxBatchBytes && !held_) {
      auto next = decoder_.Next();
      if (!next.ok()) {
        stop = next.status();
        break;
      }
      if (!next->has_value()) break;
      batch_bytes += (*next)->size() + net::kFrameHeaderBytes;
      size_t before = batch.size();
      stop = HandleFrame(**next, &batch);
      // A request whose answer can be large (a listing, a pull) ends its batch, so that a
      // client cannot ask for more output at once than back-pressure can hold back.
      if (batch.size() > before && IsHeavy(batch.back().frame)) batch_bytes = kMaxBatchBytes;
    }
    // The payloads are parsed (and a publish's body moved out): their buffer may go.
    TrimFrameBuffer();
    // Requests read before a bad frame still run, and their replies precede the Error.
    if (!batch.empty()) PostBatch(std::move(batch));
    if (held_ && stop.ok()) return;  // blocked: read nothing more (OnFlowChanged resumes)
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

Status Session::HandleFrame(std::string_view payload, std::vector<Request>* batch) {
  Request request;
  if (state_ == State::kOpen) {
    // A map costs far more RAM parsed than on the wire: too many headers are refused before
    // the frame is parsed (docs/protocol.md, "Limits"). The connection stays.
    protocol::FramePeek peek = protocol::PeekFrame(payload);
    const uint32_t max_headers = context_->options->max_headers;
    if (peek.publish_headers > max_headers) {
      request.early_error = broker::TooManyHeaders(peek.publish_headers, max_headers);
    } else if (peek.publish_deaths > kMaxDeaths) {
      // The broker sets a message's deaths and ignores those of a publish; a client passing a
      // dead-lettered message on carries at most kMaxDeaths.
      request.early_error =
          Status(StatusCode::kInvalidArgument,
                 "a publish carries at most " + std::to_string(kMaxDeaths) +
                     " death records, not " + std::to_string(peek.publish_deaths));
    }
    if (!request.early_error.ok()) {
      request.request_id = peek.request_id;
      batch->push_back(std::move(request));
      return Status::Ok();
    }
  }
  if (!request.frame.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return Status(StatusCode::kMalformedFrame, "frame payload of " +
                                                   std::to_string(payload.size()) +
                                                   " bytes is not a valid wharf.wire.v1.Frame");
  }
  request.request_id = request.frame.request_id();
  switch (state_) {
    case State::kAwaitHello:
      return HandleHello(request.frame);
    case State::kAwaitAuth:
      return HandleAuthenticate(request.frame);
    default:
      break;
  }
  switch (request.frame.body_case()) {
    case wire::Frame::kClose:
      spdlog::debug("conn={} client sent Close: {}", id_, LogSafe(request.frame.close().reason()));
      client_closed_ = true;
      return Status(StatusCode::kUnavailable, "client closed");
    case wire::Frame::kHello:
    case wire::Frame::kAuthenticate:
      return Status(StatusCode::kUnexpectedFrame,
                    "Hello and Authenticate are only allowed at the start of a connection");
    case wire::Frame::BODY_NOT_SET:
      // Possibly a request kind from a newer client: answer in order, keep the connection.
      request.early_error =
          Status(StatusCode::kEmptyRequest, "frame has no request body this broker knows");
      break;
    case wire::Frame::kPublish: {
      request.early_error =
          protocol::CheckHeaderValues(request.frame.publish().message().headers());
      if (request.early_error.ok()) {
        request.message =
            protocol::MoveFromWire(request.frame.mutable_publish()->mutable_message());
      }
      // Only the message's own copy stays: the parsed one (its header map above all) goes now,
      // not when the broker has run the request.
      request.frame.mutable_publish()->clear_message();
      break;
    }
    case wire::Frame::kPing:
    case wire::Frame::kDeclareExchange:
    case wire::Frame::kDeleteExchange:
    case wire::Frame::kDeclareQueue:
    case wire::Frame::kDeleteQueue:
    case wire::Frame::kPurgeQueue:
    case wire::Frame::kBind:
    case wire::Frame::kUnbind:
    case wire::Frame::kListQueues:
    case wire::Frame::kListExchanges:
    case wire::Frame::kSubscribe:
    case wire::Frame::kCancel:
    case wire::Frame::kReceive:
    case wire::Frame::kAck:
    case wire::Frame::kNack:
    case wire::Frame::kReject:
    case wire::Frame::kListDelayed:
    case wire::Frame::kCancelDelayed:
    case wire::Frame::kExtendLease:
    case wire::Frame::kStartRedrive:
    case wire::Frame::kCancelRedrive:
    case wire::Frame::kRedriveStatus:
    case wire::Frame::kPeek:
    case wire::Frame::kListConnections:
    case wire::Frame::kListConsumers:
    case wire::Frame::kListBindings:
    case wire::Frame::kPutUser:
    case wire::Frame::kDeleteUser:
    case wire::Frame::kListUsers:
    case wire::Frame::kBackup:
      break;
    default:
      return Status(StatusCode::kUnexpectedFrame, "frame kind " +
                                                      std::to_string(request.frame.body_case()) +
                                                      " is sent by the broker, never by a client");
  }
  if (request.frame.body_case() == wire::Frame::kPublish) {
    has_published_ = true;
    if (context_->flow->blocked()) {
      // Flow control: this publish, and everything after it on this connection, waits until
      // the broker takes publishes again (OnFlowChanged). The socket is not read meanwhile.
      if (!told_blocked_) SendBlockedNotice(true);
      held_ = std::move(request);
      return Status::Ok();
    }
  }
  batch->push_back(std::move(request));
  return Status::Ok();
}

void Session::SendBlockedNotice(bool blocked) {
  wire::Frame notice;
  notice.mutable_publishing_blocked()->set_blocked(blocked);
  if (blocked) notice.mutable_publishing_blocked()->set_reason(context_->flow->reason());
  SendFrame(notice);
  told_blocked_ = blocked;
  spdlog::info("conn={} user={} publishing {}", id_, LogSafe(user_),
               blocked ? "blocked" : "unblocked");
}

void Session::OnFlowChanged() {
  if (state_ != State::kOpen) return;
  if (context_->flow->blocked()) {
    if (has_published_ && !told_blocked_) SendBlockedNotice(true);
    return;
  }
  if (told_blocked_) SendBlockedNotice(false);
  if (held_) DecodeBuffered();
}

Status Session::HandleHello(const wire::Frame& frame) {
  if (frame.body_case() != wire::Frame::kHello) {
    return Status(StatusCode::kUnexpectedFrame, "the first frame must be Hello");
  }
  if (frame.hello().protocol_version() != protocol::kProtocolVersion) {
    close_request_id_ = frame.request_id();
    return Status(StatusCode::kUnsupportedVersion,
                  "protocol version " + std::to_string(frame.hello().protocol_version()) +
                      " is not supported; this broker speaks version " +
                      std::to_string(protocol::kProtocolVersion));
  }
  wire::Frame reply;
  reply.set_request_id(frame.request_id());
  auto* ok = reply.mutable_hello_ok();
  ok->set_protocol_version(protocol::kProtocolVersion);
  ok->set_server_name("wharfd " WHARF_VERSION);
  ok->set_max_frame_bytes(context_->options->max_frame_bytes());
  ok->set_max_message_bytes(context_->options->max_message_bytes);
  ok->add_auth_mechanisms("PLAIN");
  SendFrame(reply);
  state_ = State::kAwaitAuth;
  spdlog::debug("conn={} peer={} hello from {}", id_, peer_, LogSafe(frame.hello().client_name()));
  return Status::Ok();
}

Status Session::HandleAuthenticate(const wire::Frame& frame) {
  if (frame.body_case() != wire::Frame::kAuthenticate) {
    return Status(StatusCode::kUnexpectedFrame, "the second frame must be Authenticate");
  }
  const auto& auth = frame.authenticate();
  user_ = auth.user();
  close_request_id_ = frame.request_id();
  if (!auth.mechanism().empty() && auth.mechanism() != "PLAIN") {
    return Status(StatusCode::kAuthenticationFailed,
                  "unsupported mechanism '" + CutForDisplay(auth.mechanism()) + "'; use PLAIN");
  }
  // Every login, right or wrong, known user or not, waits its turn behind this address's
  // recent failures (server/login_throttle.h), then is checked off the I/O thread.
  state_ = State::kAuthChecking;
  const auto now = std::chrono::steady_clock::now();
  const auto max_wait =
      std::chrono::duration_cast<std::chrono::milliseconds>(handshake_timer_.expiry() - now);
  auto wait = context_->login_throttle->Admit(peer_address_, now, max_wait);
  if (!wait) {
    // Logged by DecodeBuffered, as every handshake error.
    return Status(StatusCode::kResourceExhausted, "login refused: too many failed logins from " +
                                                      peer_address_ + "; try again later");
  }
  if (wait->count() == 0) {
    CheckLogin(auth.password());
    return Status::Ok();
  }
  spdlog::debug("conn={} peer={} login waits {} ms after failed logins from this address", id_,
                peer_, wait->count());
  login_timer_.expires_after(*wait);
  login_timer_.async_wait(
      [self = shared_from_this(), password = auth.password()](const asio::error_code& ec) {
        if (ec || self->state_ != State::kAuthChecking) return;
        self->CheckLogin(password);
      });
  return Status::Ok();
}

void Session::CheckLogin(std::string password) {
  auto user = context_->users->Find(user_);
  if (user && user->source == "builtin") {
    // The built-in guest has no hash: its password is known to everyone and only loopback
    // peers may use it, so there is nothing to hide by hashing.
    Status result;
    if (user_ != kGuestUser || password != kGuestPassword) {
      result = Status(StatusCode::kAuthenticationFailed, "wrong user name or password");
    } else if (!peer_is_loopback_) {
      result = Status(StatusCode::kAccessRefused,
                      "user 'guest' may only connect from a loopback address");
    }
    // Answered from the queue, as a hashed check is: FinishLogin resumes reading, which must
    // not happen inside the decoding loop that is running now.
    asio::post(executor_, [self = shared_from_this(), result] { self->FinishLogin(result); });
    return;
  }
  // An unknown user is checked against the dummy hash: the same time, the same answer.
  std::string hash = user ? user->password_hash : std::string();
  auto done = [self = shared_from_this()](bool matches) {
    asio::post(self->executor_, [self, matches] {
      self->FinishLogin(
          matches ? Status::Ok()
                  : Status(StatusCode::kAuthenticationFailed, "wrong user name or password"));
    });
  };
  if (!context_->login_checker->Submit(std::move(password), std::move(hash), std::move(done))) {
    Status status(StatusCode::kResourceExhausted,
                  "the broker is busy checking other logins ([auth] hash_queue = " +
                      std::to_string(context_->options->login_queue) + "); try again later");
    spdlog::warn("conn={} peer={} user={} login refused: {}", id_, peer_, LogSafe(user_),
                 status.ToString());
    BeginClose(status, "login refused");
  }
}

void Session::FinishLogin(Status result) {
  if (state_ != State::kAuthChecking) return;  // closed meanwhile (handshake timeout, shutdown)
  if (!result.ok()) {
    context_->login_throttle->Failed(peer_address_, std::chrono::steady_clock::now());
    spdlog::warn("conn={} peer={} user={} login refused: {}", id_, peer_, LogSafe(user_),
                 LogSafe(result.ToString(), kLogSafeStatusBytes));
    BeginClose(result, "login refused");
    return;
  }
  context_->login_throttle->Succeeded(peer_address_);
  state_ = State::kOpen;
  handshake_timer_.cancel();
  opened_in_broker_ = true;
  decoder_.set_max_frame_bytes(context_->options->max_frame_bytes());
  asio::post(*context_->broker_context, [self = shared_from_this(), user = user_] {
    self->context_->broker->OpenSession(self->id_, user, self, self->peer_);
  });
  wire::Frame reply;
  reply.set_request_id(close_request_id_);
  reply.mutable_authenticate_ok()->set_connection_id(id_);
  SendFrame(reply);
  close_request_id_ = 0;  // later errors answer no request
  spdlog::info("conn={} peer={} user={} connection opened", id_, peer_, LogSafe(user_));
  // Requests the client sent right after Authenticate wait in the decoder.
  ReadLoop();
}

void Session::PostBatch(std::vector<Request> batch) {
  ++batches_in_flight_;
  asio::post(
      *context_->broker_context,
      [self = shared_from_this(), batch = std::move(batch)]() mutable { self->Execute(batch); });
}

// --- I/O thread: writing ------------------------------------------------------------------------

void Session::SendFrame(const wire::Frame& frame) {
  protocol::AppendFrame(frame, &pending_write_);
  StartWrite();
}

void Session::OnOutbox(OutboxBatch outbox) {
  batches_in_flight_ -= outbox.batches_done;
  if (close_sent_ || state_ == State::kClosed) {
    // Too late to write: whatever was delivered here is requeued when the broker closes
    // the session.
    ReleaseQueuedBytes(outbox.queued_bytes);
    return;
  }
  for (auto& item : outbox.items) Encode(item);
  pending_queued_bytes_ += outbox.queued_bytes;
  StartWrite();
  ReadLoop();
}

void Session::Encode(Outbound& item) {
  wire::Frame frame;
  auto fill = [](const broker::Delivery& d, wire::Delivery* out) {
    out->set_consumer_tag(d.consumer_tag);
    out->set_delivery_tag(d.delivery_tag);
    protocol::ToWire(d.envelope->message, out->mutable_message());
    out->set_receive_count(d.receive_count);
    out->set_redelivered(d.redelivered);
    out->set_exchange(d.envelope->exchange);
    out->set_routing_key(d.envelope->routing_key);
    out->set_queue(d.queue);
    out->set_lease_ms(d.lease_ms);
    out->set_first_received_at_ms(d.first_received_at_ms);
    if (d.failures) {
      out->set_failure_count(d.failures->count);
      out->set_last_failed_at_ms(d.failures->last_failed_at_ms);
      out->set_last_error(d.failures->last_error);
    }
  };
  if (auto* delivery = std::get_if<broker::Delivery>(&item)) {
    fill(*delivery, frame.mutable_delivery());
  } else if (auto* done = std::get_if<ReceiveDone>(&item)) {
    frame.set_request_id(done->request_id);
    auto* ok = frame.mutable_receive_ok();
    for (const auto& d : done->deliveries) fill(d, ok->add_deliveries());
  } else if (auto* cancel = std::get_if<CancelNotice>(&item)) {
    frame.mutable_consumer_cancelled()->set_consumer_tag(cancel->consumer_tag);
    frame.mutable_consumer_cancelled()->set_reason(cancel->reason);
  } else {
    protocol::AppendFrame(std::get<wire::Frame>(item), &pending_write_);
    return;
  }
  protocol::AppendFrame(frame, &pending_write_);
}

void Session::StartWrite() {
  if (writing_ || pending_write_.empty() || state_ == State::kClosed) return;
  writing_ = true;
  active_write_.swap(pending_write_);
  active_queued_bytes_ = pending_queued_bytes_;
  pending_queued_bytes_ = 0;
  asio::async_write(
      socket_, asio::buffer(active_write_),
      [self = shared_from_this()](const asio::error_code& ec, size_t) { self->OnWritten(ec); });
}

void Session::OnWritten(const asio::error_code& ec) {
  writing_ = false;
  active_write_.clear();
  ReleaseQueuedBytes(active_queued_bytes_);
  active_queued_bytes_ = 0;
  if (ec) {
    if (ec != asio::error::operation_aborted) CloseSocket("write error: " + ec.message());
    return;
  }
  if (pending_write_.empty() && close_sent_) {
    CloseSocket(close_reason_);
    return;
  }
  StartWrite();
  ReadLoop();
}

void Session::ReleaseQueuedBytes(uint64_t bytes) {
  if (bytes == 0) return;
  uint64_t before = queued_bytes_.fetch_sub(bytes, std::memory_order_acq_rel);
  if (before >= kMaxQueuedBytes && before - bytes < kMaxQueuedBytes && opened_in_broker_ &&
      state_ != State::kClosed) {
    // The broker may have held deliveries back while this connection was behind: wake it.
    asio::post(*context_->broker_context, [self = shared_from_this()] {
      self->context_->broker->ResumeSession(self->id_);
      self->context_->after_broker_work();
    });
  }
}

// --- I/O thread: closing ------------------------------------------------------------------------

void Session::BeginClose(const Status& status, std::string reason) {
  if (state_ == State::kClosing || state_ == State::kClosed) return;
  state_ = State::kClosing;
  closing_.store(true, std::memory_order_release);
  close_reason_ = std::move(reason);
  LeaveFrameBudget(/*drop_buffer=*/false);  // nothing more is read: let others have its turn
  if (!opened_in_broker_) {
    SendCloseFrames(status);
    return;
  }
  // Let the broker run everything already read (its replies come back first), then say why.
  asio::post(*context_->broker_context, [self = shared_from_this(), status] {
    self->context_->after_broker_work();
    asio::post(self->executor_, [self, status] {
      if (self->state_ != State::kClosed) self->SendCloseFrames(status);
    });
  });
}

void Session::SendCloseFrames(const Status& status) {
  if (!status.ok()) SendFrame(protocol::ErrorFrame(close_request_id_, status));
  wire::Frame close;
  close.mutable_close()->set_code(static_cast<uint32_t>(status.code()));
  close.mutable_close()->set_reason(status.ok() ? close_reason_ : status.ToString());
  SendFrame(close);
  close_sent_ = true;
  // A peer that does not read must not hold the connection open forever.
  close_timer_.expires_after(std::chrono::seconds(5));
  close_timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (!ec) self->CloseSocket(self->close_reason_ + " (close timed out)");
  });
}

void Session::Shutdown(std::string reason) {
  BeginClose(Status(StatusCode::kShuttingDown, reason), reason);
}

void Session::CloseSocket(std::string_view reason) {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  close_timer_.cancel();
  handshake_timer_.cancel();
  login_timer_.cancel();
  frame_timer_.cancel();
  asio::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  // No read is pending any more (the socket is closed): the buffer can go.
  LeaveFrameBudget(/*drop_buffer=*/true);
  if (opened_in_broker_) {
    asio::post(*context_->broker_context, [self = shared_from_this()] {
      self->context_->broker->CloseSession(self->id_);
      self->context_->after_broker_work();
    });
  }
  // `reason` is the broker's own text, never a client's.
  spdlog::info("conn={} peer={} user={} connection closed: {}", id_, peer_, LogSafe(user_), reason);
  context_->on_session_closed(id_);
}

// --- Broker thread ------------------------------------------------------------------------------

void Session::Execute(std::vector<Request>& batch) {
  for (Request& request : batch) HandleRequest(request);
  ++batches_done_;
  context_->after_broker_work();
  Flush();
}

void Session::Reply(uint64_t request_id, wire::Frame frame) {
  if (request_id == 0) return;
  frame.set_request_id(request_id);
  outbox_.emplace_back(std::move(frame));
}

void Session::ReplyWhenDurable(uint64_t request_id, wire::Frame frame) {
  if (frame.body_case() == wire::Frame::BODY_NOT_SET) frame.mutable_ok();
  context_->broker->AnswerWhenDurable(
      id_, [request_id, frame = std::move(frame)](broker::SessionPeer& peer,
                                                  const Status& status) mutable {
        auto& session = static_cast<Session&>(peer);
        if (!status.ok()) return session.ReplyStatus(request_id, status);
        session.Reply(request_id, std::move(frame));
      });
}

void Session::ReplyStatus(uint64_t request_id, const Status& status) {
  if (!status.ok()) {
    spdlog::debug("conn={} user={} request {} failed: {}", id_, LogSafe(user_), request_id,
                  LogSafe(status.ToString(), kLogSafeStatusBytes));
    outbox_.emplace_back(protocol::ErrorFrame(request_id, status));
    return;
  }
  wire::Frame frame;
  frame.mutable_ok();
  Reply(request_id, std::move(frame));
}

void Session::HandleRequest(Request& request) {
  broker::Broker& broker = *context_->broker;
  const uint64_t rid = request.request_id;
  if (!request.early_error.ok()) return ReplyStatus(rid, request.early_error);
  wire::Frame& frame = request.frame;
  wire::Frame reply;
  switch (frame.body_case()) {
    case wire::Frame::kPing:
      // Answered here, in order, so a Pong means every earlier request has run.
      reply.mutable_pong()->set_nonce(frame.ping().nonce());
      reply.set_request_id(rid);
      outbox_.emplace_back(std::move(reply));
      return;
    case wire::Frame::kPublish: {
      const auto& publish = frame.publish();
      auto outcome =
          broker.Publish(id_, publish.exchange(), publish.routing_key(), std::move(request.message),
                         rid, broker::PublishTiming{publish.delay_ms(), publish.deliver_at_ms()});
      if (!outcome.ok()) return ReplyStatus(rid, outcome.status());
      if (outcome->deferred) return;  // PublishDone answers once it is on disk
      if (publish.mandatory() && outcome->result.routed_queues == 0) {
        wire::Frame returned;
        auto* r = returned.mutable_returned();
        r->set_publish_request_id(rid);
        r->set_reason_code(wire::NO_ROUTE);
        r->set_reason("message reached no queue");
        r->set_exchange(publish.exchange());
        r->set_routing_key(publish.routing_key());
        protocol::ToWire(outcome->envelope->message, r->mutable_message());
        outbox_.emplace_back(std::move(returned));
      }
      reply.mutable_publish_ok()->set_message_id(outcome->result.message_id);
      reply.mutable_publish_ok()->set_routed_queues(outcome->result.routed_queues);
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kAck: {
      Status s = broker.Ack(id_, frame.ack().delivery_tag(), frame.ack().multiple());
      return ReplyStatus(rid, s);
    }
    case wire::Frame::kNack: {
      const auto& nack = frame.nack();
      broker::Broker::NackOptions options;
      options.requeue = nack.requeue();
      options.delay_ms = nack.delay_ms();
      options.immediate = nack.immediate();
      options.error = nack.error();
      return ReplyStatus(rid, broker.Nack(id_, nack.delivery_tag(), nack.multiple(), options));
    }
    case wire::Frame::kReject: {
      const auto& reject = frame.reject();
      broker::Broker::NackOptions options;
      options.requeue = reject.requeue();
      options.error = reject.error();
      return ReplyStatus(rid, broker.Nack(id_, reject.delivery_tag(), false, options));
    }
    case wire::Frame::kExtendLease: {
      const auto& extend = frame.extend_lease();
      return ReplyStatus(rid, broker.ExtendLease(id_, extend.delivery_tag(), extend.lease_ms()));
    }
    case wire::Frame::kListDelayed: {
      const auto& list = frame.list_delayed();
      // The answer comes through ListDelayedDone.
      Status s = broker.ListDelayed(id_, rid, list.queue(), list.after_deliver_at_ms(),
                                    list.after_message_id(), list.limit());
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kCancelDelayed: {
      const auto& cancel = frame.cancel_delayed();
      Status s = broker.CancelDelayed(id_, rid, cancel.queue(), cancel.message_id());
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kPeek: {
      const auto& peek = frame.peek();
      // The answer comes through PeekDone.
      Status s = broker.Peek(id_, rid, peek.queue(), peek.after_position(), peek.limit(),
                             peek.with_body());
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kStartRedrive: {
      const auto& start = frame.start_redrive();
      RedriveSpec spec{start.queue(), start.to(),      start.reason(),    start.limit(),
                       start.rate(),  start.dry_run(), start.message_id()};
      // The answer comes through RedriveDone.
      Status s = broker.StartRedrive(id_, rid, std::move(spec));
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kCancelRedrive: {
      Status s = broker.CancelRedrive(id_, rid, frame.cancel_redrive().queue());
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kRedriveStatus: {
      auto tasks = broker.RedriveStatus(id_, frame.redrive_status().queue());
      if (!tasks.ok()) return ReplyStatus(rid, tasks.status());
      auto* ok = reply.mutable_redrive_status_ok();
      for (const RedriveInfo& info : *tasks) protocol::ToWire(info, ok->add_tasks());
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kSubscribe: {
      const auto& sub = frame.subscribe();
      auto tag = broker.Subscribe(id_, sub.queue(), sub.consumer_tag(), sub.prefetch(),
                                  sub.exclusive(), sub.lease_ms());
      if (!tag.ok()) return ReplyStatus(rid, tag.status());
      reply.mutable_subscribe_ok()->set_consumer_tag(*tag);
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kCancel:
      return ReplyStatus(rid, broker.Cancel(id_, frame.cancel().consumer_tag()));
    case wire::Frame::kReceive: {
      const auto& receive = frame.receive();
      Status s = broker.Receive(id_, rid, receive.queue(), receive.max_messages(),
                                receive.wait_ms(), receive.lease_ms());
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kDeclareExchange: {
      const auto& d = frame.declare_exchange();
      ExchangeSpec spec;
      spec.name = d.name();
      auto type = protocol::FromWire(d.type());
      if (!type && !d.passive()) {
        return ReplyStatus(rid, Status(StatusCode::kInvalidArgument,
                                       "exchange type must be direct, fanout, topic or headers"));
      }
      spec.type = type.value_or(ExchangeType::kDirect);
      spec.durable = d.durable();
      spec.auto_delete = d.auto_delete();
      spec.alternate_exchange = d.alternate_exchange();
      spec.passive = d.passive();
      Status declared = broker.DeclareExchange(spec);
      if (!declared.ok() || spec.passive || !spec.durable) return ReplyStatus(rid, declared);
      return ReplyWhenDurable(rid);
    }
    case wire::Frame::kDeleteExchange: {
      broker.TakeDurableTopologyChange();
      Status deleted = broker.DeleteExchange(frame.delete_exchange().name(),
                                             frame.delete_exchange().if_unused());
      if (!deleted.ok() || !broker.TakeDurableTopologyChange()) return ReplyStatus(rid, deleted);
      return ReplyWhenDurable(rid);
    }
    case wire::Frame::kDeclareQueue: {
      const auto& d = frame.declare_queue();
      QueueSpec spec;
      spec.name = d.name();
      spec.durable = d.durable();
      spec.exclusive = d.exclusive();
      spec.auto_delete = d.auto_delete();
      spec.passive = d.passive();
      Status s = protocol::FromWire(d.arguments(), &spec.arguments);
      if (!s.ok()) return ReplyStatus(rid, s);
      const bool stored = spec.durable && !spec.exclusive && !spec.passive;
      auto info = broker.DeclareQueue(id_, std::move(spec));
      if (!info.ok()) return ReplyStatus(rid, info.status());
      auto* ok = reply.mutable_declare_queue_ok();
      ok->set_name(info->name);
      ok->set_ready(info->ready);
      ok->set_in_flight(info->in_flight);
      ok->set_consumers(info->consumers);
      if (stored) return ReplyWhenDurable(rid, std::move(reply));
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kDeleteQueue: {
      const auto& d = frame.delete_queue();
      // On OK the answer comes through DeleteQueueDone, once the deletion is on disk.
      auto n = broker.DeleteQueue(id_, d.name(), d.if_unused(), d.if_empty(), rid);
      if (!n.ok()) return ReplyStatus(rid, n.status());
      return;
    }
    case wire::Frame::kPurgeQueue: {
      // On OK the answer comes through PurgeDone, once the purge is on disk.
      auto n = broker.PurgeQueue(id_, frame.purge_queue().name(), rid);
      if (!n.ok()) return ReplyStatus(rid, n.status());
      return;
    }
    case wire::Frame::kBind:
    case wire::Frame::kUnbind: {
      bool bind = frame.body_case() == wire::Frame::kBind;
      BindingSpec spec;
      const auto& args = bind ? frame.bind().arguments() : frame.unbind().arguments();
      spec.queue = bind ? frame.bind().queue() : frame.unbind().queue();
      spec.exchange = bind ? frame.bind().exchange() : frame.unbind().exchange();
      spec.routing_key = bind ? frame.bind().routing_key() : frame.unbind().routing_key();
      spec.destination_exchange =
          bind ? frame.bind().destination_exchange() : frame.unbind().destination_exchange();
      Status s = protocol::FromWire(args, &spec.arguments);
      if (!s.ok()) return ReplyStatus(rid, s);
      broker.TakeDurableTopologyChange();
      Status changed = bind ? broker.Bind(id_, spec) : broker.Unbind(id_, spec);
      if (!changed.ok() || !broker.TakeDurableTopologyChange()) return ReplyStatus(rid, changed);
      return ReplyWhenDurable(rid);
    }
    case wire::Frame::kListQueues: {
      auto* ok = reply.mutable_list_queues_ok();
      for (const auto& info : broker.ListQueues(frame.list_queues().prefix())) {
        protocol::ToWire(info, ok->add_queues());
      }
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kListConnections: {
      auto* ok = reply.mutable_list_connections_ok();
      for (const ConnectionInfo& c : broker.ListConnections()) {
        auto* out = ok->add_connections();
        out->set_id(c.id);
        out->set_user(c.user);
        out->set_address(c.address);
        out->set_connected_at_ms(c.connected_at_ms);
        out->set_consumers(c.consumers);
        out->set_unacked(c.unacked);
        out->set_pending_receives(c.pending_receives);
      }
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kListConsumers: {
      auto* ok = reply.mutable_list_consumers_ok();
      for (const ConsumerInfo& c : broker.ListConsumers(frame.list_consumers().queue())) {
        auto* out = ok->add_consumers();
        out->set_queue(c.queue);
        out->set_consumer_tag(c.consumer_tag);
        out->set_connection_id(c.connection_id);
        out->set_user(c.user);
        out->set_prefetch(c.prefetch);
        out->set_unacked(c.unacked);
        out->set_lease_ms(c.lease_ms);
        out->set_exclusive(c.exclusive);
      }
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kListBindings: {
      auto* ok = reply.mutable_list_bindings_ok();
      const auto& list = frame.list_bindings();
      for (const BindingSpec& b : broker.ListBindings(list.exchange(), list.queue())) {
        auto* out = ok->add_bindings();
        out->set_queue(b.queue);
        out->set_exchange(b.exchange);
        out->set_routing_key(b.routing_key);
        protocol::ToWire(b.arguments, out->mutable_arguments());
        out->set_destination_exchange(b.destination_exchange);
      }
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kListExchanges: {
      auto* ok = reply.mutable_list_exchanges_ok();
      for (const auto& info : broker.ListExchanges()) protocol::ToWire(info, ok->add_exchanges());
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kPutUser:
    case wire::Frame::kDeleteUser:
    case wire::Frame::kListUsers:
      return HandleUserRequest(rid, frame);
    case wire::Frame::kBackup:
      return HandleBackup(rid, frame.backup().directory());
    default:
      return ReplyStatus(rid, Status(StatusCode::kInternal, "unhandled request kind"));
  }
}

void Session::HandleUserRequest(uint64_t rid, const wire::Frame& frame) {
  UserDirectory& users = *context_->users;
  if (!users.IsAdmin(user_)) {
    return ReplyStatus(
        rid, Status(StatusCode::kAccessRefused, "user '" + CutForDisplay(user_) +
                                                    "' is not an admin: managing users needs one"));
  }
  if (frame.body_case() == wire::Frame::kListUsers) {
    wire::Frame reply;
    for (const UserInfo& info : users.List()) {
      auto* out = reply.mutable_list_users_ok()->add_users();
      out->set_name(info.name);
      out->set_admin(info.admin);
      out->set_source(info.source);
    }
    return Reply(rid, std::move(reply));
  }
  store::StoreBatch batch;
  std::function<void()> apply;
  if (frame.body_case() == wire::Frame::kPutUser) {
    const auto& put = frame.put_user();
    Status s = users.CheckChange(put.name(), &put.password_hash());
    if (!s.ok()) return ReplyStatus(rid, s);
    store::StoredUser user{put.name(), put.password_hash(), put.admin()};
    batch.Add(store::StoreBatch::PutUser{user});
    apply = [&users, user] { users.Put(user); };
  } else {
    const std::string& name = frame.delete_user().name();
    Status s = users.CheckChange(name, nullptr);
    if (s.ok() && !users.Find(name)) {
      s = Status(StatusCode::kPreconditionFailed,
                 "user '" + CutForDisplay(name) + "' does not exist");
    }
    if (!s.ok()) return ReplyStatus(rid, s);
    batch.Add(store::StoreBatch::RemoveUser{name});
    apply = [&users, name] { users.Remove(name); };
  }
  // Answered once it is on disk; the change takes effect for logins from then on.
  context_->store->Commit(
      std::move(batch), /*sync=*/true, [self = shared_from_this(), rid, apply](Status status) {
        if (status.ok()) apply();
        spdlog::info("conn={} user={} user change {}: {}", self->id_, LogSafe(self->user_), rid,
                     LogSafe(status.ToString(), kLogSafeStatusBytes));
        self->ReplyStatus(rid, status);
        self->Flush();
      });
}

void Session::HandleBackup(uint64_t rid, const std::string& directory) {
  if (!context_->users->IsAdmin(user_)) {
    spdlog::warn("conn={} user={} backup to {} refused: not an admin", id_, LogSafe(user_),
                 LogSafe(directory));
    return ReplyStatus(
        rid, Status(StatusCode::kAccessRefused,
                    "user '" + CutForDisplay(user_) + "' is not an admin: a backup needs one"));
  }
  spdlog::info("conn={} user={} asks for a backup to {}", id_, LogSafe(user_), LogSafe(directory));
  // The store answers once the copy is complete (or failed), through the broker thread; its
  // writer and this thread go on meanwhile.
  context_->store->Backup(directory, [self = shared_from_this(), rid](Result<BackupInfo> result) {
    if (!result.ok()) {
      self->ReplyStatus(rid, result.status());
    } else {
      wire::Frame reply;
      protocol::ToWire(*result, reply.mutable_backup_ok());
      self->Reply(rid, std::move(reply));
    }
    self->Flush();
  });
}

void Session::Deliver(broker::Delivery delivery) {
  uint64_t size = broker::OutputBytes(delivery);
  outbox_queued_bytes_ += size;
  queued_bytes_.fetch_add(size, std::memory_order_acq_rel);
  outbox_.emplace_back(std::move(delivery));
}

bool Session::Writable() const {
  // A closing connection takes nothing more: what it got would only come back redelivered.
  return !closing_.load(std::memory_order_acquire) &&
         queued_bytes_.load(std::memory_order_acquire) < kMaxQueuedBytes;
}

void Session::CompleteReceive(uint64_t request_id, std::vector<broker::Delivery> deliveries) {
  uint64_t size = 0;
  for (const auto& d : deliveries) size += broker::OutputBytes(d);
  outbox_queued_bytes_ += size;
  queued_bytes_.fetch_add(size, std::memory_order_acq_rel);
  outbox_.emplace_back(ReceiveDone{request_id, std::move(deliveries)});
}

void Session::PublishDone(uint64_t request_id, const PublishResult& result, const Status& status) {
  if (!status.ok()) {
    if (uint64_t held = 0; unconfirmed_log_.Allow(std::chrono::steady_clock::now(), &held)) {
      spdlog::warn(
          "conn={} user={} publish {} (message {}) not confirmed{}: {}", id_, LogSafe(user_),
          request_id, result.message_id,
          held == 0 ? std::string() : fmt::format(" ({} more since the last such line)", held),
          LogSafe(status.ToString(), kLogSafeStatusBytes));
    }
    return ReplyStatus(request_id, status);
  }
  wire::Frame reply;
  reply.mutable_publish_ok()->set_message_id(result.message_id);
  reply.mutable_publish_ok()->set_routed_queues(result.routed_queues);
  Reply(request_id, std::move(reply));
}

void Session::CancelDelayedDone(uint64_t request_id, const Result<bool>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  reply.mutable_cancel_delayed_ok()->set_cancelled(*result);
  Reply(request_id, std::move(reply));
}

void Session::ListDelayedDone(uint64_t request_id, const Result<DelayedPage>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  auto* ok = reply.mutable_list_delayed_ok();
  for (const DelayedInfo& info : result->messages) protocol::ToWire(info, ok->add_messages());
  ok->set_more(result->more);
  ok->set_next_after_deliver_at_ms(result->next_after_deliver_at_ms);
  ok->set_next_after_message_id(result->next_after_message_id);
  Reply(request_id, std::move(reply));
}

void Session::PeekDone(uint64_t request_id, const Result<PeekPage>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  auto* ok = reply.mutable_peek_ok();
  for (const PeekedMessage& m : result->messages) protocol::ToWire(m, ok->add_messages());
  ok->set_more(result->more);
  ok->set_next_after_position(result->next_after);
  Reply(request_id, std::move(reply));
}

void Session::RedriveDone(uint64_t request_id, const Result<RedriveInfo>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  protocol::ToWire(*result, reply.mutable_redrive_ok()->mutable_task());
  Reply(request_id, std::move(reply));
}

void Session::PurgeDone(uint64_t request_id, const Result<uint64_t>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  reply.mutable_purge_queue_ok()->set_messages_purged(*result);
  Reply(request_id, std::move(reply));
}

void Session::DeleteQueueDone(uint64_t request_id, const Result<uint64_t>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  reply.mutable_delete_queue_ok()->set_messages_deleted(*result);
  Reply(request_id, std::move(reply));
}

void Session::ConsumerCancelled(const std::string& consumer_tag, std::string_view reason) {
  outbox_.emplace_back(CancelNotice{consumer_tag, std::string(reason)});
}

void Session::Flush() {
  if (outbox_.empty() && batches_done_ == 0) return;
  OutboxBatch outbox{std::move(outbox_), batches_done_, outbox_queued_bytes_};
  outbox_.clear();
  batches_done_ = 0;
  outbox_queued_bytes_ = 0;
  asio::post(executor_, [self = shared_from_this(), outbox = std::move(outbox)]() mutable {
    self->OnOutbox(std::move(outbox));
  });
}

}  // namespace wharf::server
