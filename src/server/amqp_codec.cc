#include "server/amqp_codec.h"

#include <spdlog/spdlog.h>

#include "amqp/erlang_text.h"
#include "amqp/field_table.h"
#include "amqp/message_map.h"
#include "amqp/properties.h"
#include "amqp/reply.h"
#include "amqp/sasl.h"
#include "common/log_safe.h"
#include "common/utf8.h"
#include "server/amqp_content.h"
#include "server/login.h"
#include "server/user_directory.h"
#include "wharf/version.h"

namespace wharf::server {
namespace {

// A client property as the listings show it: native clients read it as a proto3 string, which
// must be UTF-8; anything else is shown escaped.
std::string ListingText(std::string_view text) {
  return IsValidUtf8(text) ? CutForDisplay(text) : EscapeForLog(text);
}

const std::string* FindString(const amqp::FieldTable& table, std::string_view key) {
  const amqp::FieldValue* value = table.Find(key);
  return value == nullptr ? nullptr : value->AsString();
}

bool Capability(const amqp::FieldTable& client_properties, std::string_view name) {
  const amqp::FieldValue* caps = client_properties.Find("capabilities");
  if (caps == nullptr) return false;
  const auto* table = std::get_if<amqp::FieldTable>(&caps->value);
  if (table == nullptr) return false;
  const amqp::FieldValue* flag = table->Find(name);
  return flag != nullptr && flag->AsBool().value_or(false);
}

// RabbitMQ's words for a frame rabbit_reader refuses: its type and first octets, and why.
std::string FrameErrorText(std::string_view whole) {
  const auto type = static_cast<uint8_t>(whole[0]);
  std::string_view payload =
      whole.substr(amqp::kFrameHeaderBytes, whole.size() - amqp::kFrameOverheadBytes);
  const auto end = static_cast<unsigned char>(whole.back());
  if (end != amqp::kFrameEnd) {
    return amqp::FrameSnippet(type, payload) + ": {invalid_frame_end_marker," +
           std::to_string(end) + "}";
  }
  return amqp::FrameSnippet(type, payload) + ": unknown_frame";  // a type, or a size, unknown
}

// What RabbitMQ says of a method it cannot decode (`cls`, `mth` known): its arguments' octets,
// or the shortstr that is not UTF-8.
std::string UndecodableText(const Status& decoded, std::string_view payload) {
  if (decoded.message().find("malformed UTF-8") != std::string_view::npos) {
    return "Malformed UTF-8 in shortstr";
  }
  return "cannot decode " + amqp::ErlangBinaryW(payload.substr(4));
}

std::pair<uint16_t, uint16_t> PayloadIds(std::string_view payload) {
  if (payload.size() < 4) return {0, 0};
  auto u16 = [&](size_t at) {
    return static_cast<uint16_t>((static_cast<unsigned char>(payload[at]) << 8) |
                                 static_cast<unsigned char>(payload[at + 1]));
  };
  return {u16(0), u16(2)};
}

}  // namespace

AmqpCodec::AmqpCodec(Connection& connection)
    : connection_(connection),
      context_(connection.context()),
      options_(connection.context()->options->amqp),
      heartbeat_timer_(connection.executor()),
      content_timer_(connection.executor()) {}

AmqpCodec::~AmqpCodec() = default;

Status AmqpCodec::Fail(uint16_t code, std::string text, uint16_t class_id, uint16_t method_id) {
  std::string full = std::string(amqp::ReplyName(code)) + " - " + text;
  hard_error_ = HardError{code, full, class_id, method_id};
  return Status(StatusCode::kUnexpectedFrame, "AMQP " + std::to_string(code) + " " + full);
}

void AmqpCodec::Send(uint16_t channel, const amqp::Method& method) {
  amqp::AppendMethodFrame(channel, method, &connection_.output());
  connection_.StartWrite();
}

Status AmqpCodec::OnFrame(std::string_view bytes, bool* ends_batch) {
  if (stage_ == Stage::kAwaitHeader) return OnHeader(bytes);
  amqp::Frame frame;
  if (Status parsed = amqp::ParseFrame(bytes, &frame); !parsed.ok()) {
    return Fail(amqp::kFrameError, FrameErrorText(bytes));
  }
  if (frame.type == amqp::kFrameMethod && frame.payload.size() < 4) {  // no class and method
    return Fail(amqp::kFrameError,
                amqp::FrameSnippet(frame.type, frame.payload) + ": unknown_frame");
  }
  if (frame.type == amqp::kFrameHeartbeat) {
    if (frame.channel != 0) {
      return Fail(amqp::kUnexpectedFrame, amqp::FrameSnippet(frame.type, frame.payload));
    }
    return Status::Ok();
  }
  switch (stage_) {
    case Stage::kAwaitStartOk:
      return OnStartOk(frame);
    case Stage::kAwaitTuneOk:
      return OnTuneOk(frame);
    case Stage::kAwaitOpen:
      return OnOpen(frame);
    default:
      break;
  }
  if (frame.channel == 0 && frame.type != amqp::kFrameMethod) {
    return Fail(amqp::kUnexpectedFrame, amqp::FrameSnippet(frame.type, frame.payload));
  }
  switch (frame.type) {
    case amqp::kFrameMethod:
      return OnMethod(frame, ends_batch);
    case amqp::kFrameHeader:
      return OnContentHeader(frame);
    case amqp::kFrameBody:
      return OnContentBody(frame);
    default:
      return Fail(amqp::kFrameError, "unknown frame type " + std::to_string(frame.type));
  }
}

// --- Handshake ---------------------------------------------------------------------------------

Status AmqpCodec::OnHeader(std::string_view bytes) {
  // 0-9's header starts a 0-9-1 connection, as in RabbitMQ (0-8's are refused: docs/amqp.md).
  if (bytes != amqp::kProtocolHeader && bytes != std::string_view("AMQP\x01\x01\x00\x09", 8)) {
    bad_header_ = true;
    return Status(StatusCode::kUnsupportedVersion,
                  "not an AMQP 0-9-1 protocol header: " + CutForDisplay(bytes));
  }
  connection_.SetFraming(net::Framing::kAmqp);
  amqp::ConnectionStart start;
  start.version_major = 0;
  start.version_minor = 9;
  amqp::FieldTable caps;
  for (const char* cap : {"publisher_confirms", "exchange_exchange_bindings", "basic.nack",
                          "consumer_cancel_notify", "connection.blocked", "consumer_priorities",
                          "authentication_failure_close", "per_consumer_qos", "direct_reply_to"}) {
    caps.Set(cap, amqp::FieldValue::Bool(true));
  }
  start.server_properties.Set("capabilities", amqp::FieldValue::Table(std::move(caps)));
  start.server_properties.Set("cluster_name", amqp::FieldValue::LongStr("wharf"));
  start.server_properties.Set("copyright", amqp::FieldValue::LongStr("Wharf contributors"));
  start.server_properties.Set(
      "information",
      amqp::FieldValue::LongStr("Wharf " WHARF_VERSION ", AMQP 0-9-1 in RabbitMQ's dialect"));
  start.server_properties.Set("platform", amqp::FieldValue::LongStr("Wharf " WHARF_VERSION));
  start.server_properties.Set("product", amqp::FieldValue::LongStr(options_.server_product));
  start.server_properties.Set("version", amqp::FieldValue::LongStr(options_.server_version));
  // EXTERNAL only where it can work: a verified client certificate with [tls] cert_login.
  start.mechanisms =
      connection_.certificate_user().empty() ? "PLAIN AMQPLAIN" : "PLAIN AMQPLAIN EXTERNAL";
  start.locales = "en_US";
  Send(0, start);
  stage_ = Stage::kAwaitStartOk;
  return Status::Ok();
}

template <typename M>
Status AmqpCodec::Expect(const amqp::Frame& frame, M* out) {
  amqp::Method method;
  if (frame.type != amqp::kFrameMethod || frame.channel != 0 ||
      !amqp::DecodeMethod(frame.payload, &method).ok() || !std::holds_alternative<M>(method)) {
    return Fail(amqp::kCommandInvalid, "expected '" + std::string(M::kName) + "'");
  }
  *out = std::move(std::get<M>(method));
  return Status::Ok();
}

Status AmqpCodec::OnStartOk(const amqp::Frame& frame) {
  amqp::ConnectionStartOk msg;
  WHARF_RETURN_IF_ERROR(Expect(frame, &msg));
  auto& ok = msg;
  client_.consumer_cancel_notify = Capability(ok.client_properties, "consumer_cancel_notify");
  client_.connection_blocked = Capability(ok.client_properties, "connection.blocked");
  client_.authentication_failure_close =
      Capability(ok.client_properties, "authentication_failure_close");
  for (auto [key, field] :
       {std::pair{"product", &client_.product}, std::pair{"version", &client_.version},
        std::pair{"platform", &client_.platform}}) {
    if (const std::string* value = FindString(ok.client_properties, key)) {
      *field = CutForDisplay(*value);
    }
  }
  mechanism_ = ok.mechanism;
  if (ok.mechanism == "EXTERNAL") {
    // As RabbitMQ's rabbitmq_auth_mechanism_ssl: the response (an authorization id) is not
    // read; the certificate alone names the user.
    return connection_.StartExternalLogin("");
  }
  amqp::Credentials credentials;
  Status parsed;
  if (ok.mechanism == "PLAIN") {
    parsed = amqp::ParsePlain(ok.response, &credentials);
  } else if (ok.mechanism == "AMQPLAIN") {
    parsed = amqp::ParseAmqplain(ok.response, &credentials);
  } else {
    return Fail(amqp::kCommandInvalid,
                "unknown authentication mechanism '" + CutForDisplay(ok.mechanism) + "'",
                amqp::ConnectionStartOk::kClassId, amqp::ConnectionStartOk::kMethodId);
  }
  if (!parsed.ok()) {
    return Status(
        StatusCode::kAuthenticationFailed,
        "bad " + CutForDisplay(ok.mechanism) + " response: " + std::string(parsed.message()));
  }
  spdlog::debug("conn={} peer={} AMQP client {} {} ({})", connection_.id(), connection_.peer(),
                LogSafe(client_.product), LogSafe(client_.version), LogSafe(client_.platform));
  return connection_.StartLogin(std::move(credentials.user), std::move(credentials.password));
}

void AmqpCodec::OnLoggedIn() {
  amqp::ConnectionTune tune;
  tune.channel_max = options_.channel_max;
  tune.frame_max = options_.frame_max;
  tune.heartbeat = options_.heartbeat_s;
  Send(0, tune);
  stage_ = Stage::kAwaitTuneOk;
}

Status AmqpCodec::OnTuneOk(const amqp::Frame& frame) {
  amqp::ConnectionTuneOk msg;
  WHARF_RETURN_IF_ERROR(Expect(frame, &msg));
  const auto& ok = msg;
  const uint16_t cls = amqp::ConnectionTuneOk::kClassId;
  const uint16_t mth = amqp::ConnectionTuneOk::kMethodId;
  uint32_t frame_max = ok.frame_max == 0 ? options_.frame_max : ok.frame_max;
  if (frame_max < amqp::kMinFrameMax) {
    return Fail(amqp::kNotAllowed,
                "frame_max=" + std::to_string(frame_max) + " < " +
                    std::to_string(amqp::kMinFrameMax) + " min size",
                cls, mth);
  }
  if (frame_max > options_.frame_max) {
    return Fail(amqp::kNotAllowed,
                "frame_max=" + std::to_string(frame_max) + " > " +
                    std::to_string(options_.frame_max) + " max size",
                cls, mth);
  }
  if (ok.channel_max > options_.channel_max) {
    return Fail(amqp::kNotAllowed,
                "channel_max=" + std::to_string(ok.channel_max) + " > " +
                    std::to_string(options_.channel_max) + " max",
                cls, mth);
  }
  frame_max_ = frame_max;
  channel_max_ = ok.channel_max == 0 ? options_.channel_max : ok.channel_max;
  // The client's value wins, larger or smaller (pika sends its own; RabbitMQ takes it).
  heartbeat_s_ = ok.heartbeat;
  // RabbitMQ takes a payload of up to frame-max (the 8 octets of a frame's header and end
  // fudged in): so does Wharf, for clients that cut bodies at frame-max.
  connection_.SetMaxFrameBytes(frame_max_ + amqp::kFrameOverheadBytes);
  // A frame is never more than frame-max: its memory is the connection's own, and only whole
  // contents are reserved from the budget (no frame waits behind its own content's share).
  connection_.SetFrameAllowance(frame_max_ + amqp::kFrameOverheadBytes);
  stage_ = Stage::kAwaitOpen;
  StartHeartbeats();
  return Status::Ok();
}

Status AmqpCodec::OnOpen(const amqp::Frame& frame) {
  // RabbitMQ's answers while it waits for connection.open (its "opening" state).
  if (frame.type != amqp::kFrameMethod || frame.channel != 0) {
    return Fail(amqp::kUnexpectedFrame, amqp::FrameSnippet(frame.type, frame.payload));
  }
  const auto [cls, mth] = PayloadIds(frame.payload);
  amqp::Method method;
  if (Status decoded = amqp::DecodeMethod(frame.payload, &method); !decoded.ok()) {
    if (amqp::MethodName(cls, mth) == "unknown") {
      return Fail(amqp::kCommandInvalid, std::string(decoded.message()), cls, mth);
    }
    return Fail(amqp::kFrameError, UndecodableText(decoded, frame.payload), cls, mth);
  }
  if (!std::holds_alternative<amqp::ConnectionOpen>(method)) {
    return Fail(amqp::kChannelError, "unexpected method in connection state opening", cls, mth);
  }
  const auto& open = std::get<amqp::ConnectionOpen>(method);
  // The user's max-connections is checked here, where RabbitMQ checks it.
  if (Status slot = connection_.TakeUserSlot(); !slot.ok()) {
    return Fail(amqp::kNotAllowed, std::string(slot.message()), amqp::ConnectionOpen::kClassId,
                amqp::ConnectionOpen::kMethodId);
  }
  session_ = std::make_shared<AmqpSession>(connection_.id(), connection_.user(), open.virtual_host,
                                           connection_.peer(), context_, connection_.core(),
                                           client_, frame_max_);
  // The broker thread admits it into the vhost (which must exist, under its max-connections);
  // listed from then on, channels or not (until CloseSessions' CloseOwner). Nothing more is
  // read until the answer.
  stage_ = Stage::kOpening;
  connection_.OpenInBroker(
      [context = context_, id = connection_.id(), user = connection_.user(),
       peer = connection_.peer(),
       meta = broker::ConnectionMeta{"amqp", ListingText(client_.product),
                                     ListingText(client_.version), open.virtual_host}]() mutable {
        WHARF_RETURN_IF_ERROR(CheckVhostAccess(*context, user, meta.vhost));
        return context->broker->OpenConnection(id, std::move(user), std::move(peer),
                                               std::move(meta));
      },
      [this, vhost = open.virtual_host](const Status& opened) { OnOpened(vhost, opened); });
  return Status::Ok();
}

void AmqpCodec::OnOpened(const std::string& vhost, const Status& opened) {
  if (!opened.ok()) {
    // RabbitMQ's texts: "vhost v not found", "access to vhost 'v' refused for user 'u'" and
    // "access to vhost 'v' refused for user 'u': connection limit (N) is reached".
    std::string text = opened.code() == StatusCode::kVhostNotFound
                           ? "vhost " + CutForDisplay(vhost) + " not found"
                           : std::string(opened.message());
    spdlog::warn("conn={} user={} peer={} refused: {}", connection_.id(),
                 LogSafe(connection_.user()), connection_.peer(), LogSafe(text));
    stage_ = Stage::kAwaitOpen;  // as before the open: the close that follows is a hard error
    Status failed = Fail(amqp::kNotAllowed, text, amqp::ConnectionOpen::kClassId,
                         amqp::ConnectionOpen::kMethodId);
    connection_.Refuse(failed);
    return;
  }
  connection_.set_vhost(vhost);
  Send(0, amqp::ConnectionOpenOk{});
  stage_ = Stage::kOpen;
  connection_.ResumeReading();
}

// --- Content memory ----------------------------------------------------------------------------

bool AmqpCodec::TakeContentMemory(uint16_t channel, ChannelState& state, uint64_t bytes) {
  ArmContentTimer();
  if (content_own_ + bytes <= kContentAllowanceBytes) {
    content_own_ += bytes;
    state.content_own = bytes;
    return true;
  }
  state.content_reserved = true;
  return connection_.ReserveContent(channel, bytes);
}

void AmqpCodec::ReleaseContentMemory(uint16_t channel, ChannelState& state) {
  content_own_ -= state.content_own;
  state.content_own = 0;
  if (state.content_reserved) connection_.ReleaseContent(channel);
  state.content_reserved = false;
  state.content_age = {};
}

void AmqpCodec::ArmContentTimer() {
  if (content_timer_armed_) return;
  content_timer_armed_ = true;
  content_timer_.expires_after(kContentTick);
  content_timer_.async_wait(
      [this, alive = connection_.shared_from_this()](const asio::error_code& ec) {
        content_timer_armed_ = false;
        if (!ec) OnContentTimer();
      });
}

void AmqpCodec::OnContentTimer() {
  if (!connection_.open()) return;
  // Not the client's doing: the broker holds its reading back (flow control, its batches in
  // flight). Waiting for the FrameBudget while holding memory is counted: it could be what
  // keeps others waiting.
  const bool counts = !connection_.ReadHeldBack() || connection_.OwnOutputHoldsReading();
  const auto timeout = std::chrono::milliseconds(context_->options->frame_timeout_ms);
  bool pending = false;
  for (auto& [number, state] : channels_) {
    if (!state.publish || !state.header_seen || state.body_size == 0) continue;
    if (state.content_own == 0 && !state.content_reserved) continue;  // refused: no memory
    pending = true;
    if (!counts || connection_.ContentWaiting(number)) continue;  // waiting in line: no memory yet
    state.content_age += kContentTick;
    if (state.content_age < timeout) continue;
    Status status(StatusCode::kFrameTimeout,
                  "the content of a publish on channel " + std::to_string(number) +
                      " was not complete within " + std::to_string(timeout.count()) +
                      " ms ([limits] frame_timeout_ms): " +
                      std::to_string(state.content_total - state.body_size) + " of its " +
                      std::to_string(state.content_total) + " bytes came");
    uint64_t unlogged = 0;
    if (context_->frame_budget->CountTimeout(std::chrono::steady_clock::now(), &unlogged)) {
      spdlog::warn("conn={} peer={} user={} closed, a slow sender: {}{}", connection_.id(),
                   connection_.peer(), LogSafe(connection_.user()), status.ToString(),
                   unlogged == 0 ? std::string()
                                 : " (and " + std::to_string(unlogged) +
                                       " more connections since the last such line)");
    }
    connection_.Fail(status, "content timeout");
    return;
  }
  if (pending) ArmContentTimer();
}

// --- Heartbeats --------------------------------------------------------------------------------

void AmqpCodec::StartHeartbeats() {
  if (heartbeat_s_ == 0 || heartbeat_armed_) return;
  heartbeat_armed_ = true;
  // Half the interval, and a tick at least every second for short intervals.
  heartbeat_timer_.expires_after(std::chrono::milliseconds(heartbeat_s_ * 1000 / 2));
  heartbeat_timer_.async_wait(
      [self = connection_.shared_from_this(), this](const asio::error_code& ec) {
        heartbeat_armed_ = false;
        if (!ec) OnHeartbeatTimer();
      });
}

void AmqpCodec::OnHeartbeatTimer() {
  if (!connection_.CanWrite()) return;
  const auto now = std::chrono::steady_clock::now();
  const auto interval = std::chrono::seconds(heartbeat_s_);
  // Not the peer's fault while the broker does not read it (RabbitMQ pauses its monitor).
  if (!connection_.ReadHeldBack() && now - connection_.last_read_at() > 2 * interval) {
    spdlog::warn("conn={} peer={} user={} missed heartbeats from client, timeout: {}s",
                 connection_.id(), connection_.peer(), LogSafe(connection_.user()), heartbeat_s_);
    heartbeat_timeout_ = true;
    connection_.Fail(
        Status(StatusCode::kDeadlineExceeded,
               "missed heartbeats from client, timeout: " + std::to_string(heartbeat_s_) + "s"),
        "missed heartbeats");
    return;
  }
  if (now - connection_.last_write_at() >= interval / 2) {
    amqp::AppendHeartbeat(&connection_.output());
    connection_.StartWrite();
  }
  StartHeartbeats();
}

// --- Methods and content -----------------------------------------------------------------------

void AmqpCodec::Queue(AmqpRequest request) { batch_.push_back(std::move(request)); }

Status AmqpCodec::OnMethod(const amqp::Frame& frame, bool* ends_batch) {
  AmqpRequest request;
  request.channel = frame.channel;
  const auto [cls, mth] = PayloadIds(frame.payload);
  if (Status decoded = amqp::DecodeMethod(frame.payload, &request.method); !decoded.ok()) {
    // RabbitMQ has no answer for an unknown method (its reader stops): Wharf says 503.
    if (amqp::MethodName(cls, mth) == "unknown") {
      return Fail(amqp::kCommandInvalid, std::string(decoded.message()), cls, mth);
    }
    std::string text = UndecodableText(decoded, frame.payload);
    const bool utf8 = text.starts_with("Malformed");  // RabbitMQ names no method for it
    return Fail(amqp::kFrameError, std::move(text), utf8 ? 0 : cls, utf8 ? 0 : mth);
  }
  if (frame.channel == 0) return OnChannelZero(request.method);
  const bool is_open = std::holds_alternative<amqp::ChannelOpen>(request.method);
  auto it = channels_.find(frame.channel);
  if (it == channels_.end()) {
    if (!is_open) return Fail(amqp::kChannelError, "expected 'channel.open'", cls, mth);
    // channel_max bounds how many are open, not their numbers (RabbitMQ 3.10).
    if (channel_max_ != 0 && channels_.size() >= channel_max_) {
      return Fail(amqp::kNotAllowed, "number of channels opened (" +
                                         std::to_string(channels_.size()) +
                                         ") has reached the negotiated channel_max (" +
                                         std::to_string(channel_max_) + ")");
    }
    // The user's max-channels, across its connections: a connection error, as in RabbitMQ.
    auto known = context_->users->Find(connection_.user());
    auto slot = context_->user_usage->Take(UserUsage::Kind::kChannel, connection_.user(),
                                           known ? known->limits.max_channels : -1);
    if (!slot.ok()) return Fail(amqp::kNotAllowed, std::string(slot.status().message()));
    ChannelState opened;
    opened.user_slot = std::move(*slot);
    channels_.emplace(frame.channel, std::move(opened));
    Queue(std::move(request));
    return Status::Ok();
  }
  ChannelState& state = it->second;
  switch (state.state) {
    case ChannelState::State::kClosingByServer:
      // Frames the client sent before it saw the close are dropped; its close-ok frees the
      // number. Its own close crossing ours counts as the close-ok.
      if (std::holds_alternative<amqp::ChannelCloseOk>(request.method)) {
        channels_.erase(it);
      } else if (std::holds_alternative<amqp::ChannelClose>(request.method)) {
        Send(frame.channel, amqp::ChannelCloseOk{});
        channels_.erase(it);
      }
      return Status::Ok();
    case ChannelState::State::kClosingByClient:
      return Status::Ok();  // nothing more until the broker's close-ok
    default:
      break;
  }
  if (state.publish) return ContentExpected(state);
  if (is_open) return Fail(amqp::kChannelError, "second 'channel.open' seen", cls, mth);
  if (std::holds_alternative<amqp::ChannelClose>(request.method)) {
    state.state = ChannelState::State::kClosingByClient;
  }
  if (std::holds_alternative<amqp::BasicPublish>(request.method)) {
    state.publish = std::move(request);
    state.header_seen = false;
    state.body_size = 0;
    return Status::Ok();
  }
  // A get's answer carries a message: it ends its batch, as a native pull does.
  *ends_batch = std::holds_alternative<amqp::BasicGet>(request.method);
  Queue(std::move(request));
  return Status::Ok();
}

Status AmqpCodec::OnChannelZero(amqp::Method& method) {
  if (std::holds_alternative<amqp::ConnectionClose>(method)) {
    const auto& close = std::get<amqp::ConnectionClose>(method);
    spdlog::debug("conn={} client sent connection.close {} {}", connection_.id(), close.reply_code,
                  LogSafe(close.reply_text));
    // Every channel closes (its deliveries requeued) before the close-ok goes: a client that
    // reconnects at once finds its unacknowledged messages back in their queues.
    if (session_) {
      AmqpRequest request;
      request.kind = AmqpRequest::Kind::kCloseAll;
      Queue(std::move(request));
    }
    connection_.NoteClientClosed();
    return Status(StatusCode::kUnavailable, "client closed");
  }
  if (std::holds_alternative<amqp::ConnectionUpdateSecret>(method)) {
    Send(0, amqp::ConnectionUpdateSecretOk{});
    return Status::Ok();
  }
  const auto [cls, mth] = amqp::MethodId(method);
  return Fail(amqp::kChannelError, "unexpected method in connection state running", cls, mth);
}

Status AmqpCodec::OnContentHeader(const amqp::Frame& frame) {
  auto it = channels_.find(frame.channel);
  if (it != channels_.end() && it->second.state != ChannelState::State::kOpen) {
    return Status::Ok();  // the rest of a publish on a closing channel
  }
  if (it == channels_.end() || !it->second.publish) {
    return Fail(amqp::kUnexpectedFrame, "expected method frame, got non method frame instead");
  }
  ChannelState& state = it->second;
  if (state.header_seen) return ContentExpected(state);  // a body was due
  amqp::ContentHeader header;
  if (Status decoded = amqp::DecodeContentHeader(frame.payload, &header); !decoded.ok()) {
    return Fail(amqp::kFrameError, std::string(decoded.message()));
  }
  if (header.class_id != amqp::BasicPublish::kClassId) {
    return Fail(amqp::kUnexpectedFrame,
                "expected content header for class 60, got one for class " +
                    std::to_string(header.class_id) + " instead",
                amqp::BasicPublish::kClassId, amqp::BasicPublish::kMethodId);
  }
  state.header_seen = true;
  state.body_size = header.body_size;
  state.content_total = header.body_size;
  state.raw_properties.assign(header.raw_properties);
  AmqpRequest& publish = *state.publish;
  const uint64_t max = context_->options->max_message_bytes;
  if (header.body_size > max) {
    // Refused (the channel closes, in order); the body frames that follow are dropped.
    publish.error_code = amqp::kPreconditionFailed;
    publish.error_text = "message size " + std::to_string(header.body_size) +
                         " is larger than configured max size " + std::to_string(max);
  }
  if (header.body_size == 0) return FinishPublish(frame.channel, state);
  // Its memory, before any of its body is read (the body frames wait for it, unread).
  if (publish.error_code == 0) TakeContentMemory(frame.channel, state, header.body_size);
  return Status::Ok();
}

Status AmqpCodec::OnContentBody(const amqp::Frame& frame) {
  auto it = channels_.find(frame.channel);
  if (it != channels_.end() && it->second.state != ChannelState::State::kOpen) {
    return Status::Ok();
  }
  if (it == channels_.end() || !it->second.publish) {
    return Fail(amqp::kUnexpectedFrame, "expected method frame, got non method frame instead");
  }
  ChannelState& state = it->second;
  if (!state.header_seen) return ContentExpected(state);  // the header was due
  AmqpRequest& publish = *state.publish;
  if (state.overflowed || frame.payload.size() > state.body_size) {
    // RabbitMQ takes more body than the header said without a word and waits for the rest
    // for ever: the next frame that is not a body is the error (ContentExpected). Its bytes
    // are dropped here.
    if (!state.overflowed) ReleaseContentMemory(frame.channel, state);
    state.overflowed = true;
    publish.message.body.clear();
    publish.message.body.shrink_to_fit();
    return Status::Ok();
  }
  state.body_size -= frame.payload.size();
  if (publish.error_code == 0) {
    std::string& body = publish.message.body;
    if (body.empty()) body.reserve(state.content_total);  // what its memory was taken for
    body.append(frame.payload);
  }
  if (state.body_size == 0) return FinishPublish(frame.channel, state);
  return Status::Ok();
}

Status AmqpCodec::ContentExpected(const ChannelState& state) {
  return Fail(amqp::kUnexpectedFrame,
              state.header_seen
                  ? "expected content body, got non content body frame instead"
                  : "expected content header for class 60, got non content header frame instead",
              amqp::BasicPublish::kClassId, amqp::BasicPublish::kMethodId);
}

Status AmqpCodec::FinishPublish(uint16_t channel, ChannelState& state) {
  // The body moves on to the broker thread, bounded there by the batches in flight.
  ReleaseContentMemory(channel, state);
  AmqpRequest request = std::move(*state.publish);
  state.publish.reset();
  state.header_seen = false;
  if (request.error_code == 0) {
    amqp::BasicProperties properties;
    if (Status decoded = amqp::DecodeProperties(state.raw_properties, &properties); !decoded.ok()) {
      return Fail(amqp::kSyntaxError, "bad content header: " + std::string(decoded.message()),
                  amqp::BasicPublish::kClassId, amqp::BasicPublish::kMethodId);
    }
    Message& message = request.message;
    amqp::ToWharfMessage(properties, &message);
    message.amqp_properties = std::move(state.raw_properties);
    if (properties.expiration) {
      auto ttl = amqp::ParseExpiration(*properties.expiration);
      if (!ttl.ok()) {
        request.error_code = amqp::kPreconditionFailed;
        request.error_text = std::string(ttl.status().message());  // RabbitMQ's words
      } else if (*ttl == 0) {
        request.expire_undelivered = true;  // "0": delivered at once, or never
      }
    }
    // The impersonator tag may publish as another user (RabbitMQ).
    if (properties.user_id && *properties.user_id != connection_.user() &&
        !context_->users->AccessOf(connection_.user())->HasTag(broker::kTagImpersonator)) {
      request.error_code = amqp::kPreconditionFailed;
      request.error_text = "user_id property set to '" + CutForDisplay(*properties.user_id) +
                           "' but authenticated user was '" + CutForDisplay(connection_.user()) +
                           "'";
    }
  }
  state.raw_properties.clear();
  request.channel = channel;
  if (connection_.HoldPublish()) {
    held_ = std::move(request);
    return Status::Ok();
  }
  Queue(std::move(request));
  return Status::Ok();
}

void AmqpCodec::ReleaseHeld() {
  batch_.insert(batch_.begin(), std::move(*held_));
  held_.reset();
}

bool AmqpCodec::PostBatch() {
  if (batch_.empty() || !session_) {
    batch_.clear();
    return false;
  }
  connection_.NoteBatchPosted();
  asio::post(*context_->broker_context, [session = session_, batch = std::move(batch_)]() mutable {
    session->Execute(batch);
  });
  batch_.clear();
  return true;
}

// --- Output ------------------------------------------------------------------------------------

void AmqpCodec::EncodeDelivery(uint16_t channel, const broker::Delivery& d, std::string* out) {
  amqp::BasicDeliver deliver;
  deliver.consumer_tag = d.consumer_tag;
  deliver.delivery_tag = d.delivery_tag;
  deliver.redelivered = d.redelivered;
  deliver.exchange = d.envelope->exchange;
  deliver.routing_key = d.envelope->routing_key;
  amqp::AppendMethodFrame(channel, deliver, out);
  AppendMessageContent(channel, d.envelope->message, frame_max_, out, DeliveryCount(d));
}

void AmqpCodec::Encode(Outbound& outbound, std::string* out) {
  auto& item = outbound.item;
  if (auto* delivery = std::get_if<broker::Delivery>(&item)) {
    EncodeDelivery(outbound.channel, *delivery, out);
  } else if (auto* bytes = std::get_if<std::string>(&item)) {
    out->append(*bytes);
  } else if (auto* notice = std::get_if<CodecNotice>(&item)) {
    switch (notice->kind) {
      case kAmqpChannelClosedByServer:
        if (auto it = channels_.find(outbound.channel); it != channels_.end()) {
          ReleaseContentMemory(outbound.channel, it->second);
          it->second = ChannelState{};
          it->second.state = ChannelState::State::kClosingByServer;
        }
        break;
      case kAmqpChannelCloseOk:
        channels_.erase(outbound.channel);
        break;
      case kAmqpConnectionError:
        if (!hard_error_) {
          hard_error_ = HardError{notice->code, notice->text, notice->class_id, notice->method_id};
        }
        spdlog::warn("conn={} peer={} user={} AMQP connection error {}: {}", connection_.id(),
                     connection_.peer(), LogSafe(connection_.user()), notice->code,
                     LogSafe(notice->text));
        connection_.Fail(Status(StatusCode::kUnexpectedFrame, notice->text), "AMQP error");
        break;
      default:
        break;
    }
  }
  // ReceiveDone, CancelNotice and native frames are never produced for AMQP.
}

void AmqpCodec::EncodeClose(const Status& status, std::string_view reason, std::string* out) {
  if (bad_header_) {
    out->append(amqp::kProtocolHeader);  // a client of another protocol learns which one this is
    return;
  }
  if (stage_ == Stage::kAwaitHeader || heartbeat_timeout_) return;
  if (hard_error_) {
    amqp::AppendMethodFrame(0,
                            amqp::ConnectionClose{hard_error_->code, hard_error_->text,
                                                  hard_error_->class_id, hard_error_->method_id},
                            out);
    return;
  }
  if (status.ok()) {  // the client asked: every channel is closed
    amqp::AppendMethodFrame(0, amqp::ConnectionCloseOk{}, out);
    return;
  }
  switch (status.code()) {
    case StatusCode::kAuthenticationFailed:
    case StatusCode::kAccessRefused:
    case StatusCode::kResourceExhausted:
      if (stage_ == Stage::kAwaitStartOk) {
        // RabbitMQ tells only clients that asked for it; the others see the socket close.
        if (client_.authentication_failure_close) {
          amqp::AppendMethodFrame(
              0,
              amqp::ConnectionClose{amqp::kAccessRefused,
                                    "ACCESS_REFUSED - Login was refused using authentication "
                                    "mechanism " +
                                        CutForDisplay(mechanism_) +
                                        ". For details see the broker logfile.",
                                    0, 0},
              out);
        }
        return;
      }
      if (stage_ == Stage::kOpen && status.code() == StatusCode::kAccessRefused) {
        // The broker closes a logged-in connection so when its user is deleted (RabbitMQ:
        // "CONNECTION_FORCED - user 'u' is deleted").
        amqp::AppendMethodFrame(
            0,
            amqp::ConnectionClose{amqp::kConnectionForced,
                                  "CONNECTION_FORCED - " + std::string(status.message()), 0, 0},
            out);
        return;
      }
      break;
    case StatusCode::kHandshakeTimeout:
      return;
    case StatusCode::kShuttingDown:
      amqp::AppendMethodFrame(
          0,
          amqp::ConnectionClose{amqp::kConnectionForced,
                                "CONNECTION_FORCED - broker forced connection closure with "
                                "reason 'shutdown'",
                                0, 0},
          out);
      return;
    case StatusCode::kFrameTooLarge:
    case StatusCode::kFrameTruncated:
    case StatusCode::kFrameTimeout:
      amqp::AppendMethodFrame(
          0,
          amqp::ConnectionClose{amqp::kFrameError, "FRAME_ERROR - " + std::string(status.message()),
                                0, 0},
          out);
      return;
    default:
      break;
  }
  (void)reason;
  amqp::AppendMethodFrame(
      0,
      amqp::ConnectionClose{amqp::kInternalError,
                            "INTERNAL_ERROR - " + std::string(status.message()), 0, 0},
      out);
}

void AmqpCodec::EncodeBlocked(bool blocked, std::string_view reason, std::string* out) {
  if (!client_.connection_blocked || stage_ != Stage::kOpen) return;
  if (blocked) {
    amqp::AppendMethodFrame(0, amqp::ConnectionBlocked{std::string(reason)}, out);
  } else {
    amqp::AppendMethodFrame(0, amqp::ConnectionUnblocked{}, out);
  }
}

void AmqpCodec::PostResume() {
  if (!session_) return;
  asio::post(*context_->broker_context, [session = session_, context = context_] {
    session->Resume();
    context->after_broker_work();
  });
}

void AmqpCodec::CloseSessions() {
  heartbeat_timer_.cancel();
  content_timer_.cancel();
  // The socket is closed: the user may open these channels elsewhere at once.
  for (auto& [number, channel] : channels_) channel.user_slot.Release();
  asio::post(*context_->broker_context,
             [session = session_, context = context_, core = connection_.core()] {
               if (session) session->CloseAll();
               context->after_broker_work();
               core->Detach();
             });
}

}  // namespace wharf::server
