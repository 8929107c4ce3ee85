#include "server/native_codec.h"

#include <spdlog/spdlog.h>

#include "common/log_safe.h"
#include "protocol/protobuf_log.h"
#include "server/login.h"
#include "wharf/version.h"

namespace wharf::server {
namespace wire = protocol::wire;

NativeCodec::NativeCodec(Connection& connection)
    : connection_(connection), context_(connection.context()) {}

size_t NativeCodec::handshake_frame_bytes() const {
  return std::min<size_t>(kMaxHandshakeFrameBytes, context_->options->max_frame_bytes());
}

bool NativeCodec::IsHeavy(const wire::Frame& frame) {
  switch (frame.body_case()) {
    case wire::Frame::kListQueues:
    case wire::Frame::kListExchanges:
    case wire::Frame::kListConnections:
    case wire::Frame::kListConsumers:
    case wire::Frame::kListBindings:
    case wire::Frame::kReceive:
    case wire::Frame::kPeek:
    case wire::Frame::kExportDefinitions:
      return true;
    default:
      return false;
  }
}

Status NativeCodec::OnFrame(std::string_view payload, bool* ends_batch) {
  NativeRequest request;
  if (stage_ == Stage::kOpen) {
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
      batch_.push_back(std::move(request));
      return Status::Ok();
    }
  }
  if (!request.frame.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    const std::string why = protocol::TakeParseError();
    return Status(StatusCode::kMalformedFrame, "frame payload of " +
                                                   std::to_string(payload.size()) +
                                                   " bytes is not a valid wharf.wire.v1.Frame" +
                                                   (why.empty() ? "" : ": " + CutForDisplay(why)));
  }
  request.request_id = request.frame.request_id();
  switch (stage_) {
    case Stage::kAwaitHello:
      return HandleHello(request.frame);
    case Stage::kAwaitAuth:
      return HandleAuthenticate(request.frame);
    default:
      break;
  }
  switch (request.frame.body_case()) {
    case wire::Frame::kClose:
      spdlog::debug("conn={} client sent Close: {}", connection_.id(),
                    LogSafe(request.frame.close().reason()));
      connection_.NoteClientClosed();
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
    case wire::Frame::kSetUserLimits:
    case wire::Frame::kSetUserTags:
    case wire::Frame::kSetPermissions:
    case wire::Frame::kClearPermissions:
    case wire::Frame::kAddVhost:
    case wire::Frame::kDeleteVhost:
    case wire::Frame::kSetVhostLimits:
    case wire::Frame::kListVhosts:
    case wire::Frame::kSetPolicy:
    case wire::Frame::kClearPolicy:
    case wire::Frame::kListPolicies:
    case wire::Frame::kExportDefinitions:
    case wire::Frame::kImportDefinitions:
      break;
    default:
      return Status(StatusCode::kUnexpectedFrame, "frame kind " +
                                                      std::to_string(request.frame.body_case()) +
                                                      " is sent by the broker, never by a client");
  }
  if (request.frame.body_case() == wire::Frame::kPublish && connection_.HoldPublish()) {
    held_ = std::move(request);
    return Status::Ok();
  }
  // A request whose answer can be large (a listing, a pull) ends its batch.
  *ends_batch = IsHeavy(request.frame);
  batch_.push_back(std::move(request));
  return Status::Ok();
}

Status NativeCodec::HandleHello(const wire::Frame& frame) {
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
  if (!connection_.certificate_user().empty()) ok->add_auth_mechanisms("EXTERNAL");
  Send(reply);
  stage_ = Stage::kAwaitAuth;
  client_name_ = CutForDisplay(frame.hello().client_name());
  spdlog::debug("conn={} peer={} hello from {}", connection_.id(), connection_.peer(),
                LogSafe(frame.hello().client_name()));
  return Status::Ok();
}

Status NativeCodec::HandleAuthenticate(const wire::Frame& frame) {
  if (frame.body_case() != wire::Frame::kAuthenticate) {
    return Status(StatusCode::kUnexpectedFrame, "the second frame must be Authenticate");
  }
  const auto& auth = frame.authenticate();
  close_request_id_ = frame.request_id();
  vhost_ = auth.vhost().empty() ? std::string(broker::kDefaultVhost) : auth.vhost();
  // EXTERNAL: the user the verified client certificate names; `user` may repeat it.
  if (auth.mechanism() == "EXTERNAL") return connection_.StartExternalLogin(auth.user());
  if (!auth.mechanism().empty() && auth.mechanism() != "PLAIN") {
    return Status(StatusCode::kAuthenticationFailed,
                  "unsupported mechanism '" + CutForDisplay(auth.mechanism()) +
                      "'; use PLAIN (or EXTERNAL with a client certificate)");
  }
  // A refusal here is logged by the connection, as every handshake error.
  return connection_.StartLogin(auth.user(), auth.password());
}

void NativeCodec::OnLoggedIn() {
  stage_ = Stage::kOpen;
  connection_.SetMaxFrameBytes(context_->options->max_frame_bytes());
  session_ = std::make_shared<NativeSession>(connection_.id(), connection_.user(), context_,
                                             connection_.core());
  // The broker thread admits it into the vhost (which must exist, under its max-connections)
  // before it is answered. Requests sent meanwhile are decoded and posted after the open, and
  // run only if it succeeded (NativeSession::Execute).
  connection_.OpenInBroker(
      [session = session_, context = context_, user = connection_.user(), peer = connection_.peer(),
       vhost = vhost_, client = client_name_] {
        WHARF_RETURN_IF_ERROR(
            CheckVhostAccess(*context, user, vhost, /*operators_need_no_permissions=*/true));
        return session->Open(peer, vhost, client);
      },
      [this](const Status& opened) {
        if (!opened.ok()) {
          spdlog::warn("conn={} user={} peer={} refused: {}", connection_.id(),
                       LogSafe(connection_.user()), connection_.peer(),
                       LogSafe(opened.ToString(), kLogSafeStatusBytes));
          connection_.Refuse(opened);
          return;
        }
        connection_.set_vhost(vhost_);
        wire::Frame reply;
        reply.set_request_id(close_request_id_);
        reply.mutable_authenticate_ok()->set_connection_id(connection_.id());
        reply.mutable_authenticate_ok()->set_vhost(vhost_);
        Send(reply);
        close_request_id_ = 0;  // later errors answer no request
      });
}

void NativeCodec::ReleaseHeld() {
  batch_.insert(batch_.begin(), std::move(*held_));
  held_.reset();
}

bool NativeCodec::PostBatch() {
  if (batch_.empty()) return false;
  connection_.NoteBatchPosted();
  asio::post(*context_->broker_context, [session = session_, batch = std::move(batch_)]() mutable {
    session->Execute(batch);
  });
  batch_.clear();
  return true;
}

void NativeCodec::Send(const wire::Frame& frame) {
  protocol::AppendFrame(frame, &connection_.output());
  connection_.StartWrite();
}

void NativeCodec::Encode(Outbound& outbound, std::string* out) {
  auto& item = outbound.item;
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
  } else if (auto* reply = std::get_if<wire::Frame>(&item)) {
    protocol::AppendFrame(*reply, out);
    return;
  } else if (auto* bytes = std::get_if<std::string>(&item)) {
    out->append(*bytes);
    return;
  } else {
    return;  // CodecNotice: the native protocol has none
  }
  protocol::AppendFrame(frame, out);
}

void NativeCodec::EncodeClose(const Status& status, std::string_view reason, std::string* out) {
  if (!status.ok()) protocol::AppendFrame(protocol::ErrorFrame(close_request_id_, status), out);
  wire::Frame close;
  close.mutable_close()->set_code(static_cast<uint32_t>(status.code()));
  close.mutable_close()->set_reason(status.ok() ? std::string(reason) : status.ToString());
  protocol::AppendFrame(close, out);
}

void NativeCodec::EncodeBlocked(bool blocked, std::string_view reason, std::string* out) {
  wire::Frame notice;
  notice.mutable_publishing_blocked()->set_blocked(blocked);
  if (blocked) notice.mutable_publishing_blocked()->set_reason(std::string(reason));
  protocol::AppendFrame(notice, out);
}

void NativeCodec::PostResume() {
  asio::post(*context_->broker_context, [context = context_, id = connection_.id()] {
    context->broker->ResumeSession(id);
    context->after_broker_work();
  });
}

void NativeCodec::CloseSessions() {
  asio::post(*context_->broker_context,
             [context = context_, id = connection_.id(), core = connection_.core()] {
               context->broker->CloseSession(id);
               context->after_broker_work();
               core->Detach();
             });
}

}  // namespace wharf::server
