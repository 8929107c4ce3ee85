#include "server/amqp_channel.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

#include "amqp/erlang_text.h"
#include "amqp/frame.h"
#include "amqp/message_map.h"
#include "amqp/reply.h"
#include "broker/broker.h"
#include "broker/rabbitmq_texts.h"
#include "common/log_safe.h"
#include "common/utf8.h"
#include "server/amqp_content.h"

namespace wharf::server {
namespace {

constexpr uint16_t kExchange = 40, kQueue = 50, kBasic = 60;

// Queue, exchange and binding arguments as the broker reads them, into `out`: integers of
// every width as int64, longstr as text (bytes when not UTF-8), booleans; nested tables,
// arrays and the rest are kept out (no argument the broker knows takes one). A name that is
// not UTF-8 is refused (the text returned; "" when all is well): names are text everywhere
// else in Wharf (listings, the native protocol, definitions), and dropping one would widen
// what a headers binding matches. RabbitMQ takes any bytes there (docs/amqp.md).
std::string ArgumentsToHeaders(const amqp::FieldTable& table, Headers* out) {
  for (const auto& [key, value] : table.entries) {
    if (!IsValidUtf8(key)) {
      return "argument name " + EscapeForLog(key) + " is not valid UTF-8";
    }
  }
  for (const auto& [key, value] : table.entries) {
    if (auto i = value.AsInt()) {
      (*out)[key] = *i;
    } else if (auto b = value.AsBool()) {
      (*out)[key] = *b;
    } else if (const std::string* s = value.AsString()) {
      (*out)[key] = *s;
    } else if (const auto* d = std::get_if<double>(&value.value)) {
      (*out)[key] = *d;
    } else if (const auto* f = std::get_if<float>(&value.value)) {
      (*out)[key] = static_cast<double>(*f);
    }
  }
  return "";
}

// A binding argument a headers exchange could not match as RabbitMQ does: a void, table or
// array value (Wharf's headers hold scalars only; dropping it would widen what the binding
// matches). "" when there is none.
std::string UnmatchableArgument(const amqp::FieldTable& arguments) {
  for (const auto& [key, value] : arguments.entries) {
    if (key.starts_with("x-")) continue;
    if (value.type == 'V' || value.type == 'F' || value.type == 'A') {
      return "binding argument '" + CutForDisplay(key) + "' has a " +
             std::string(amqp::ErlangTypeName(value)) +
             " value: headers bindings match scalar values only in this broker";
    }
  }
  return "";
}

}  // namespace

AmqpChannel::AmqpChannel(std::shared_ptr<AmqpSession> session, uint16_t number)
    : session_(std::move(session)),
      number_(number),
      session_id_(AmqpChannelSessionId(session_->id(), number)) {}

void AmqpChannel::Open() {
  broker::SessionOptions options;
  options.owner_id = session_->id();
  options.amqp = true;
  options.channel = number_;
  options.ack_timeout_ms = session_->context()->options->amqp.consumer_timeout_ms;
  options.vhost = session_->vhost();
  // A channel is never refused: its connection was admitted into the vhost (OpenConnection).
  Status opened = session_->context()->broker->OpenSession(
      session_id_, session_->user(), shared_from_this(), session_->peer(), options);
  if (!opened.ok()) return Fail(opened, amqp::ChannelOpen::kClassId, amqp::ChannelOpen::kMethodId);
  Reply(amqp::ChannelOpenOk{});
}

void AmqpChannel::Close() {
  if (closed_) return;
  closed_ = true;
  slots_.clear();
  session_->context()->broker->CloseSession(session_id_);
}

bool AmqpChannel::Writable() const { return !closed_ && session_->core().Writable(); }

void AmqpChannel::Flush() {
  FlushConfirms();
  session_->core().Flush();
}

// --- Replies -----------------------------------------------------------------------------------

void AmqpChannel::Reply(const amqp::Method& method) {
  std::string bytes;
  amqp::AppendMethodFrame(number_, method, &bytes);
  ReplyBytes(std::move(bytes));
}

void AmqpChannel::ReplyBytes(std::string bytes) {
  if (slots_.empty()) {
    session_->core().AddBytes(number_, std::move(bytes));
    return;
  }
  slots_.push_back(Slot{next_slot_++, std::move(bytes)});
}

uint64_t AmqpChannel::Reserve() {
  slots_.push_back(Slot{next_slot_, std::nullopt});
  return next_slot_++;
}

void AmqpChannel::Fill(uint64_t slot, std::string bytes) {
  for (Slot& s : slots_) {
    if (s.id == slot) {
      s.bytes = std::move(bytes);
      break;
    }
  }
  EmitReady();
}

void AmqpChannel::Drop(uint64_t slot) { Fill(slot, std::string()); }

void AmqpChannel::EmitReady() {
  while (!slots_.empty() && slots_.front().bytes) {
    if (!slots_.front().bytes->empty()) {
      session_->core().AddBytes(number_, std::move(*slots_.front().bytes));
    }
    slots_.pop_front();
  }
}

void AmqpChannel::ReplyWhenDurable(amqp::Method method) {
  const uint64_t slot = Reserve();
  session_->context()->broker->AnswerWhenDurable(
      session_id_,
      [slot, method = std::move(method)](broker::SessionPeer& peer, const Status& status) {
        auto& channel = static_cast<AmqpChannel&>(peer);
        if (channel.closed_) return;
        if (!status.ok()) {
          // The change may not be on disk: the client must not take it as made.
          const auto [cls, mth] = amqp::MethodId(method);
          return channel.HardError(amqp::kResourceError, std::string(status.message()), cls, mth);
        }
        std::string bytes;
        amqp::AppendMethodFrame(channel.number_, method, &bytes);
        channel.Fill(slot, std::move(bytes));
      });
}

void AmqpChannel::SoftError(uint16_t code, std::string text, uint16_t class_id,
                            uint16_t method_id) {
  if (closed_) return;
  spdlog::debug("conn={} channel={} user={} channel error {}: {}", session_->id(), number_,
                LogSafe(session_->user()), code, LogSafe(text));
  std::string full = std::string(amqp::ReplyName(code)) + " - " + text;
  Close();
  std::string bytes;
  amqp::AppendMethodFrame(number_, amqp::ChannelClose{code, full, class_id, method_id}, &bytes);
  session_->core().AddBytes(number_, std::move(bytes));
  session_->core().AddNotice(number_, CodecNotice{kAmqpChannelClosedByServer, 0, {}, 0, 0});
  session_->ForgetChannel(number_);
}

void AmqpChannel::HardError(uint16_t code, std::string text, uint16_t class_id,
                            uint16_t method_id) {
  session_->ConnectionError(code, std::string(amqp::ReplyName(code)) + " - " + text, class_id,
                            method_id);
}

void AmqpChannel::Fail(const Status& status, uint16_t cls, uint16_t mth) {
  const std::string message(status.message());
  switch (status.code()) {
    case StatusCode::kQueueNotFound:
    case StatusCode::kExchangeNotFound:
      return SoftError(amqp::kNotFound, message, cls, mth);
    case StatusCode::kResourceLocked:  // another connection's exclusive queue
      return SoftError(amqp::kResourceLocked, message, cls, mth);
    case StatusCode::kAccessRefused:
    case StatusCode::kReservedName:
      return SoftError(amqp::kAccessRefused, message, cls, mth);
    case StatusCode::kPreconditionFailed:
    case StatusCode::kInvalidArgument:
    case StatusCode::kMessageTooLarge:
    case StatusCode::kQueueFull:
    case StatusCode::kUnknownDeliveryTag:
    case StatusCode::kLeaseExpired:
    case StatusCode::kConsumerNotFound:
      return SoftError(amqp::kPreconditionFailed, message, cls, mth);
    case StatusCode::kConsumerTagInUse:
    case StatusCode::kVhostNotFound:  // the channel's vhost was deleted under it
      return HardError(amqp::kNotAllowed, message, cls, mth);
    case StatusCode::kStoreUnavailable:
    case StatusCode::kStoreFull:
    case StatusCode::kResourceExhausted:
      return HardError(amqp::kResourceError, message, cls, mth);
    case StatusCode::kShuttingDown:
      return HardError(amqp::kConnectionForced, message, cls, mth);
    default:
      return HardError(amqp::kInternalError, message, cls, mth);
  }
}

bool AmqpChannel::ExpandQueue(std::string* name, uint16_t cls, uint16_t mth) {
  if (!name->empty()) return true;
  if (last_queue_.empty()) {
    SoftError(amqp::kNotFound, "no previously declared queue", cls, mth);
    return false;
  }
  *name = last_queue_;
  return true;
}

// --- Methods -----------------------------------------------------------------------------------

void AmqpChannel::Handle(AmqpRequest& request) {
  if (closed_) return;
  if (tx_ && (std::holds_alternative<amqp::BasicPublish>(request.method) ||
              std::holds_alternative<amqp::BasicAck>(request.method) ||
              std::holds_alternative<amqp::BasicNack>(request.method) ||
              std::holds_alternative<amqp::BasicReject>(request.method))) {
    // A transaction: publishes and settles wait for tx.commit (refusals still close at once).
    if (request.error_code != 0) {
      return SoftError(request.error_code, request.error_text, kBasic,
                       amqp::BasicPublish::kMethodId);
    }
    tx_buffer_.push_back(std::move(request));
    return;
  }
  Dispatch(request);
}

void AmqpChannel::Dispatch(AmqpRequest& request) {
  broker::Broker& broker = *session_->context()->broker;
  std::visit(
      [&](auto& m) {
        using M = std::decay_t<decltype(m)>;
        constexpr uint16_t cls = M::kClassId, mth = M::kMethodId;
        if constexpr (std::is_same_v<M, amqp::BasicPublish>) {
          HandlePublish(request);
        } else if constexpr (std::is_same_v<M, amqp::ChannelFlow>) {
          if (!m.active) return HardError(amqp::kNotImplemented, "active=false", cls, mth);
          Reply(amqp::ChannelFlowOk{true});
        } else if constexpr (std::is_same_v<M, amqp::AccessRequest>) {
          Reply(amqp::AccessRequestOk{});
        } else if constexpr (std::is_same_v<M, amqp::ExchangeDeclare>) {
          HandleExchangeDeclare(m);
        } else if constexpr (std::is_same_v<M, amqp::ExchangeDelete>) {
          HandleExchangeDelete(m);
        } else if constexpr (std::is_same_v<M, amqp::ExchangeBind>) {
          HandleExchangeBind(m.destination, m.source, m.routing_key, m.arguments, true, m.no_wait);
        } else if constexpr (std::is_same_v<M, amqp::ExchangeUnbind>) {
          HandleExchangeBind(m.destination, m.source, m.routing_key, m.arguments, false, m.no_wait);
        } else if constexpr (std::is_same_v<M, amqp::QueueDeclare>) {
          HandleQueueDeclare(m);
        } else if constexpr (std::is_same_v<M, amqp::QueueBind>) {
          HandleQueueBind(m.queue, m.exchange, m.routing_key, m.arguments, true, m.no_wait);
        } else if constexpr (std::is_same_v<M, amqp::QueueUnbind>) {
          HandleQueueBind(m.queue, m.exchange, m.routing_key, m.arguments, false, false);
        } else if constexpr (std::is_same_v<M, amqp::QueuePurge>) {
          std::string name = m.queue;
          if (!ExpandQueue(&name, cls, mth)) return;
          const uint64_t slot = m.no_wait ? 0 : Reserve();
          auto purged = broker.PurgeQueue(session_id_, name, slot);
          if (!purged.ok()) {
            if (slot != 0) Drop(slot);
            return Fail(purged.status(), cls, mth);
          }
        } else if constexpr (std::is_same_v<M, amqp::QueueDelete>) {
          std::string name = m.queue;
          if (!ExpandQueue(&name, cls, mth)) return;
          const uint64_t slot = m.no_wait ? 0 : Reserve();
          auto deleted = broker.DeleteQueue(session_id_, name, m.if_unused, m.if_empty, slot);
          if (!deleted.ok()) {
            if (deleted.status().code() == StatusCode::kQueueNotFound) {
              // RabbitMQ: deleting what is not there succeeds (Spring and others rely on it).
              if (slot != 0) {
                std::string bytes;
                amqp::AppendMethodFrame(number_, amqp::QueueDeleteOk{0}, &bytes);
                Fill(slot, std::move(bytes));
              }
              return;
            }
            if (slot != 0) Drop(slot);
            return Fail(deleted.status(), cls, mth);
          }
        } else if constexpr (std::is_same_v<M, amqp::BasicQos>) {
          if (m.prefetch_size != 0) {
            return HardError(amqp::kNotImplemented,
                             "prefetch_size!=0 (" + std::to_string(m.prefetch_size) + ")", cls,
                             mth);
          }
          if (m.global) {
            Status s = broker.SetSessionPrefetch(session_id_, m.prefetch_count);
            if (!s.ok()) return Fail(s, cls, mth);
          } else {
            consumer_prefetch_ = m.prefetch_count;
          }
          Reply(amqp::BasicQosOk{});
        } else if constexpr (std::is_same_v<M, amqp::BasicConsume>) {
          HandleConsume(m);
        } else if constexpr (std::is_same_v<M, amqp::BasicCancel>) {
          // An unknown tag is not an error ("the spec requires we ignore this", RabbitMQ).
          (void)broker.Cancel(session_id_, m.consumer_tag);
          if (!m.no_wait) Reply(amqp::BasicCancelOk{m.consumer_tag});
        } else if constexpr (std::is_same_v<M, amqp::BasicGet>) {
          HandleGet(m);
        } else if constexpr (std::is_same_v<M, amqp::BasicAck> ||
                             std::is_same_v<M, amqp::BasicNack> ||
                             std::is_same_v<M, amqp::BasicReject>) {
          HandleSettle(request);
        } else if constexpr (std::is_same_v<M, amqp::BasicRecover> ||
                             std::is_same_v<M, amqp::BasicRecoverAsync>) {
          if (!m.requeue) return HardError(amqp::kNotImplemented, "requeue=false", cls, mth);
          Status s = broker.RequeueAll(session_id_);
          if (!s.ok()) return Fail(s, cls, mth);
          if constexpr (std::is_same_v<M, amqp::BasicRecover>) Reply(amqp::BasicRecoverOk{});
        } else if constexpr (std::is_same_v<M, amqp::ConfirmSelect>) {
          if (tx_) {
            return SoftError(amqp::kPreconditionFailed, "cannot switch from tx to confirm mode",
                             cls, mth);
          }
          confirming_ = true;
          if (!m.nowait) Reply(amqp::ConfirmSelectOk{});
        } else if constexpr (std::is_same_v<M, amqp::TxSelect>) {
          if (confirming_) {
            return SoftError(amqp::kPreconditionFailed, "cannot switch from confirm to tx mode",
                             cls, mth);
          }
          tx_ = true;
          Reply(amqp::TxSelectOk{});
        } else if constexpr (std::is_same_v<M, amqp::TxCommit>) {
          if (!tx_) {
            return SoftError(amqp::kPreconditionFailed, "channel is not transactional", cls, mth);
          }
          HandleCommit();
        } else if constexpr (std::is_same_v<M, amqp::TxRollback>) {
          if (!tx_) {
            return SoftError(amqp::kPreconditionFailed, "channel is not transactional", cls, mth);
          }
          tx_buffer_.clear();
          Reply(amqp::TxRollbackOk{});
        } else if constexpr (std::is_same_v<M, amqp::BasicCancelOk> ||
                             std::is_same_v<M, amqp::ChannelFlowOk>) {
          // Answers to what the broker sent (a consumer cancelled by the broker): nothing to do.
        } else {
          HardError(amqp::kCommandInvalid, "unimplemented method", cls, mth);  // RabbitMQ's words
        }
      },
      request.method);
}

void AmqpChannel::HandleCommit() {
  auto buffered = std::move(tx_buffer_);
  tx_buffer_.clear();
  // Run in order as if sent now; the commit is answered once what it wrote is on disk.
  tx_ = false;
  for (AmqpRequest& request : buffered) {
    Dispatch(request);
    if (closed_) return;
  }
  tx_ = true;
  ReplyWhenDurable(amqp::TxCommitOk{});
}

void AmqpChannel::HandlePublish(AmqpRequest& request) {
  const auto& m = std::get<amqp::BasicPublish>(request.method);
  constexpr uint16_t cls = amqp::BasicPublish::kClassId, mth = amqp::BasicPublish::kMethodId;
  if (request.error_code != 0) {
    if (confirming_) confirms_.Next();  // the seq is taken, as RabbitMQ counts it
    // RabbitMQ checks the write permission first (403), then the properties (406).
    Status allowed = session_->context()->broker->Authorize(
        session_id_, broker::Permission::kWrite, broker::ResourceKind::kExchange, m.exchange);
    if (!allowed.ok()) return Fail(allowed, cls, mth);
    return SoftError(request.error_code, request.error_text, cls, mth);
  }
  if (m.immediate) return HardError(amqp::kNotImplemented, "immediate=true", cls, mth);
  Publish(request);
}

void AmqpChannel::Publish(AmqpRequest& request) {
  const auto& m = std::get<amqp::BasicPublish>(request.method);
  constexpr uint16_t cls = amqp::BasicPublish::kClassId, mth = amqp::BasicPublish::kMethodId;
  broker::Broker& broker = *session_->context()->broker;
  if (request.message.properties.reply_to == broker::Broker::kReplyTo) {
    // Direct reply-to: the reply address of this channel's reply consumer goes in its place.
    auto address = broker.ReplyToAddress(session_id_);
    if (!address.ok()) {
      return SoftError(amqp::kPreconditionFailed, std::string(address.status().message()), cls,
                       mth);
    }
    amqp::SetReplyTo(std::move(*address), &request.message);
  }
  const uint64_t seq = confirming_ ? confirms_.Next() : 0;
  broker::PublishTiming timing;
  timing.expire_undelivered = request.expire_undelivered;
  auto outcome = broker.Publish(session_id_, m.exchange, m.routing_key, std::move(request.message),
                                seq, timing);
  if (!outcome.ok()) {
    switch (outcome.status().code()) {
      case StatusCode::kQueueFull:
      case StatusCode::kStoreFull:
      case StatusCode::kStoreUnavailable:
        // Not taken: a confirming publisher gets basic.nack; the others lose it, as with
        // RabbitMQ's reject-publish.
        if (seq != 0) confirms_.Nack(seq);
        return;
      case StatusCode::kExchangeNotFound:
        if (seq != 0) confirms_.Nack(seq);
        return SoftError(amqp::kNotFound,
                         broker::rabbitmq::NotFound("exchange", m.exchange, session_->vhost()), cls,
                         mth);
      default:
        if (seq != 0) confirms_.Nack(seq);
        return Fail(outcome.status(), cls, mth);
    }
  }
  if (m.mandatory && outcome->result.routed_queues == 0) {
    // Before the confirm, as RabbitMQ sends them.
    std::string bytes;
    amqp::AppendMethodFrame(
        number_, amqp::BasicReturn{amqp::kNoRoute, "NO_ROUTE", m.exchange, m.routing_key}, &bytes);
    AppendMessageContent(number_, outcome->envelope->message, session_->frame_max(), &bytes);
    session_->core().AddBytes(number_, std::move(bytes));
  }
  if (seq != 0 && !outcome->deferred) confirms_.Ack(seq);
}

void AmqpChannel::PublishDone(uint64_t request_id, const PublishResult& result,
                              const Status& status) {
  if (closed_) return;
  if (status.ok()) {
    confirms_.Ack(request_id);
  } else {
    spdlog::warn("conn={} channel={} user={} publish {} (message {}) not confirmed: {}",
                 session_->id(), number_, LogSafe(session_->user()), request_id, result.message_id,
                 LogSafe(status.ToString(), kLogSafeStatusBytes));
    confirms_.Nack(request_id);
  }
}

void AmqpChannel::FlushConfirms() {
  if (closed_ || !confirms_.has_pending()) return;
  std::string bytes;
  for (const ConfirmTracker::Settle& s : confirms_.Take()) {
    if (s.ack) {
      amqp::AppendMethodFrame(number_, amqp::BasicAck{s.seq, s.multiple}, &bytes);
    } else {
      amqp::AppendMethodFrame(number_, amqp::BasicNack{s.seq, s.multiple, false}, &bytes);
    }
  }
  session_->core().AddBytes(number_, std::move(bytes));
}

void AmqpChannel::HandleExchangeDeclare(const amqp::ExchangeDeclare& m) {
  constexpr uint16_t cls = amqp::ExchangeDeclare::kClassId;
  constexpr uint16_t mth = amqp::ExchangeDeclare::kMethodId;
  broker::Broker& broker = *session_->context()->broker;
  if (m.exchange.empty()) {
    return SoftError(amqp::kAccessRefused, "operation not permitted on the default exchange", cls,
                     mth);
  }
  ExchangeSpec spec;
  spec.name = m.exchange;
  if (m.passive) {
    spec.passive = true;
    Status s = broker.DeclareExchange(session_id_, spec);
    if (s.code() == StatusCode::kExchangeNotFound) {
      return SoftError(amqp::kNotFound,
                       broker::rabbitmq::NotFound("exchange", m.exchange, session_->vhost()), cls,
                       mth);
    }
    if (!s.ok()) return Fail(s, cls, mth);
    if (!m.no_wait) Reply(amqp::ExchangeDeclareOk{});
    return;
  }
  spec.durable = m.durable;
  spec.auto_delete = m.auto_delete;
  spec.internal = m.internal;
  if (std::string bad = ArgumentsToHeaders(m.arguments, &spec.arguments); !bad.empty()) {
    return SoftError(amqp::kPreconditionFailed, bad, cls, mth);
  }
  // The type, x-delayed-type and alternate-exchange, as the HTTP API reads them too.
  if (Status typed = broker::ApplyDeclaredType(m.type, &spec); !typed.ok()) {
    if (typed.code() == StatusCode::kInvalidArgument) {
      return HardError(amqp::kCommandInvalid, std::string(typed.message()), cls, mth);
    }
    return SoftError(amqp::kPreconditionFailed, std::string(typed.message()), cls, mth);
  }
  Status s = broker.DeclareExchange(session_id_, spec);
  if (!s.ok()) return Fail(s, cls, mth);
  if (m.no_wait) return;
  if (spec.durable) return ReplyWhenDurable(amqp::ExchangeDeclareOk{});
  Reply(amqp::ExchangeDeclareOk{});
}

void AmqpChannel::HandleExchangeDelete(const amqp::ExchangeDelete& m) {
  constexpr uint16_t cls = amqp::ExchangeDelete::kClassId;
  constexpr uint16_t mth = amqp::ExchangeDelete::kMethodId;
  broker::Broker& broker = *session_->context()->broker;
  if (m.exchange.empty() || m.exchange.starts_with("amq.")) {
    return SoftError(amqp::kAccessRefused,
                     m.exchange.empty() ? std::string("operation not permitted on the default "
                                                      "exchange")
                                        : "deletion of system " +
                                              broker::rabbitmq::Resource("exchange", m.exchange,
                                                                         session_->vhost()) +
                                              " not allowed",
                     cls, mth);
  }
  broker.TakeDurableTopologyChange();
  Status s = broker.DeleteExchange(session_id_, m.exchange, m.if_unused);
  if (s.code() == StatusCode::kExchangeNotFound) s = Status::Ok();  // RabbitMQ: delete-ok
  if (!s.ok()) {
    if (s.code() == StatusCode::kPreconditionFailed) {
      return SoftError(
          amqp::kPreconditionFailed,
          broker::rabbitmq::Resource("exchange", m.exchange, session_->vhost()) + " in use", cls,
          mth);
    }
    return Fail(s, cls, mth);
  }
  if (m.no_wait) return;
  if (broker.TakeDurableTopologyChange()) return ReplyWhenDurable(amqp::ExchangeDeleteOk{});
  Reply(amqp::ExchangeDeleteOk{});
}

void AmqpChannel::HandleExchangeBind(const std::string& destination, const std::string& source,
                                     const std::string& routing_key,
                                     const amqp::FieldTable& arguments, bool bind, bool no_wait) {
  const uint16_t cls = kExchange;
  const uint16_t mth = bind ? amqp::ExchangeBind::kMethodId : amqp::ExchangeUnbind::kMethodId;
  if (destination.empty() || source.empty()) {
    return SoftError(amqp::kAccessRefused, "operation not permitted on the default exchange", cls,
                     mth);
  }
  BindingSpec spec;
  spec.exchange = source;
  spec.destination_exchange = destination;
  spec.routing_key = routing_key;
  if (std::string bad = UnmatchableArgument(arguments); !bad.empty()) {
    return SoftError(amqp::kPreconditionFailed, bad, cls, mth);
  }
  if (std::string bad = ArgumentsToHeaders(arguments, &spec.arguments); !bad.empty()) {
    return SoftError(amqp::kPreconditionFailed, bad, cls, mth);
  }
  ChangeBinding(
      spec, bind, no_wait,
      bind ? amqp::Method(amqp::ExchangeBindOk{}) : amqp::Method(amqp::ExchangeUnbindOk{}), cls,
      mth);
}

void AmqpChannel::ChangeBinding(const BindingSpec& spec, bool bind, bool no_wait, amqp::Method ok,
                                uint16_t cls, uint16_t mth) {
  broker::Broker& broker = *session_->context()->broker;
  broker.TakeDurableTopologyChange();
  Status s = bind ? broker.Bind(session_id_, spec) : broker.Unbind(session_id_, spec);
  if (!bind &&
      (s.code() == StatusCode::kQueueNotFound || s.code() == StatusCode::kExchangeNotFound)) {
    s = Status::Ok();  // RabbitMQ: unbinding from what is not there succeeds
  }
  if (!s.ok()) return Fail(s, cls, mth);
  if (no_wait) return;
  if (broker.TakeDurableTopologyChange()) return ReplyWhenDurable(std::move(ok));
  Reply(ok);
}

void AmqpChannel::HandleQueueDeclare(const amqp::QueueDeclare& m) {
  constexpr uint16_t cls = amqp::QueueDeclare::kClassId, mth = amqp::QueueDeclare::kMethodId;
  broker::Broker& broker = *session_->context()->broker;
  if (m.queue.starts_with(broker::Broker::kReplyTo)) {
    // Direct reply-to's pseudo-queue (RabbitMQ: any declare of it is answered as a passive one):
    // no messages, one consumer; an address whose consumer is gone is not found.
    if (!broker.ReplyToExists(m.queue)) {
      return SoftError(amqp::kNotFound,
                       broker::rabbitmq::NotFound("queue", m.queue, session_->vhost()), cls, mth);
    }
    if (!m.no_wait) Reply(amqp::QueueDeclareOk{m.queue, 0, 1});
    return;
  }
  QueueSpec spec;
  spec.name = m.queue;
  spec.passive = m.passive;  // a passive "" is not the last queue: RabbitMQ's 404
  spec.durable = m.durable;
  spec.exclusive = m.exclusive;
  spec.auto_delete = m.auto_delete;
  if (std::string bad = ArgumentsToHeaders(m.arguments, &spec.arguments); !bad.empty()) {
    return SoftError(amqp::kPreconditionFailed, bad, cls, mth);
  }
  // (The type itself is checked by the broker, on creation, as RabbitMQ does.)
  if (!m.passive) broker::AddQuorumDeliveryLimit(&spec.arguments);
  const bool stored = spec.durable && !spec.exclusive && !spec.passive;
  auto info = broker.DeclareQueue(session_id_, std::move(spec));
  if (!info.ok()) return Fail(info.status(), cls, mth);  // in RabbitMQ's words
  last_queue_ = info->name;
  if (m.no_wait) return;
  amqp::QueueDeclareOk ok{info->name, static_cast<uint32_t>(info->ready), info->consumers};
  if (stored) return ReplyWhenDurable(ok);
  Reply(ok);
}

void AmqpChannel::HandleQueueBind(std::string queue, const std::string& exchange,
                                  std::string routing_key, const amqp::FieldTable& arguments,
                                  bool bind, bool no_wait) {
  const uint16_t cls = kQueue;
  const uint16_t mth = bind ? amqp::QueueBind::kMethodId : amqp::QueueUnbind::kMethodId;
  if (queue.empty()) {
    if (!ExpandQueue(&queue, cls, mth)) return;
    if (routing_key.empty()) routing_key = queue;  // RabbitMQ's shortcut
  }
  if (exchange.empty()) {
    return SoftError(amqp::kAccessRefused, "operation not permitted on the default exchange", cls,
                     mth);
  }
  BindingSpec spec;
  spec.queue = queue;
  spec.exchange = exchange;
  spec.routing_key = routing_key;
  if (std::string bad = UnmatchableArgument(arguments); !bad.empty()) {
    return SoftError(amqp::kPreconditionFailed, bad, cls, mth);
  }
  if (std::string bad = ArgumentsToHeaders(arguments, &spec.arguments); !bad.empty()) {
    return SoftError(amqp::kPreconditionFailed, bad, cls, mth);
  }
  ChangeBinding(spec, bind, no_wait,
                bind ? amqp::Method(amqp::QueueBindOk{}) : amqp::Method(amqp::QueueUnbindOk{}), cls,
                mth);
}

void AmqpChannel::HandleConsume(const amqp::BasicConsume& m) {
  constexpr uint16_t cls = amqp::BasicConsume::kClassId, mth = amqp::BasicConsume::kMethodId;
  broker::Broker& broker = *session_->context()->broker;
  std::string queue = m.queue;
  if (!ExpandQueue(&queue, cls, mth)) return;
  // RabbitMQ's consume arguments (rabbit_amqqueue:consume_args), checked once the queue is
  // known to be there; any other argument is accepted and ignored, as RabbitMQ does.
  int32_t priority = 0;
  std::string bad;
  if (const amqp::FieldValue* v = m.arguments.Find("x-priority")) {
    if (auto n = v->AsInt()) {  // any integer letter (AsInt refuses the rest)
      priority = static_cast<int32_t>(std::clamp<int64_t>(*n, std::numeric_limits<int32_t>::min(),
                                                          std::numeric_limits<int32_t>::max()));
    } else {
      bad = broker::rabbitmq::InvalidArg(
          "x-priority", queue, session_->vhost(),
          "\"expected integer, got " + std::string(amqp::ErlangTypeName(*v)) + "\"");
    }
  }
  if (const amqp::FieldValue* v = m.arguments.Find("x-cancel-on-ha-failover");
      bad.empty() && v != nullptr && v->type != 't') {
    bad = broker::rabbitmq::InvalidArg(
        "x-cancel-on-ha-failover", queue, session_->vhost(),
        "{unacceptable_type," + std::string(amqp::ErlangTypeName(*v)) + "}");
  }
  if (!bad.empty() && queue != broker::Broker::kReplyTo) {
    if (Status s = broker.CheckQueue(session_id_, queue); !s.ok()) return Fail(s, cls, mth);
    return SoftError(amqp::kPreconditionFailed, bad, cls, mth);
  }
  auto tag =
      queue == broker::Broker::kReplyTo
          ? broker.SubscribeReplyTo(session_id_, m.consumer_tag, m.no_ack)
          : broker.Subscribe(session_id_, queue, m.consumer_tag, m.no_ack ? 0 : consumer_prefetch_,
                             m.exclusive, broker::kNoLease, m.no_ack, priority);
  if (!tag.ok()) {
    if (tag.status().code() == StatusCode::kConsumerTagInUse) {
      return HardError(amqp::kNotAllowed,
                       "attempt to reuse consumer tag '" + CutForDisplay(m.consumer_tag) + "'", cls,
                       mth);
    }
    // The channel's consumer limit (the broker's only RESOURCE_EXHAUSTED here): RabbitMQ's
    // consumer_max_per_channel closes the connection with NOT_ALLOWED.
    if (tag.status().code() == StatusCode::kResourceExhausted) {
      return HardError(amqp::kNotAllowed, std::string(tag.status().message()), cls, mth);
    }
    return Fail(tag.status(), cls, mth);
  }
  if (!m.no_wait) Reply(amqp::BasicConsumeOk{*tag});
}

void AmqpChannel::HandleGet(const amqp::BasicGet& m) {
  constexpr uint16_t cls = amqp::BasicGet::kClassId, mth = amqp::BasicGet::kMethodId;
  broker::Broker& broker = *session_->context()->broker;
  std::string queue = m.queue;
  if (!ExpandQueue(&queue, cls, mth)) return;
  auto got = broker.Get(session_id_, queue, m.no_ack);
  if (!got.ok()) return Fail(got.status(), cls, mth);
  if (!got->delivery) return Reply(amqp::BasicGetEmpty{});
  const broker::Delivery& d = *got->delivery;
  std::string bytes;
  amqp::AppendMethodFrame(
      number_,
      amqp::BasicGetOk{d.delivery_tag, d.redelivered, d.envelope->exchange, d.envelope->routing_key,
                       static_cast<uint32_t>(got->message_count)},
      &bytes);
  AppendMessageContent(number_, d.envelope->message, session_->frame_max(), &bytes,
                       DeliveryCount(d));
  ReplyBytes(std::move(bytes));
}

void AmqpChannel::HandleSettle(AmqpRequest& request) {
  broker::Broker& broker = *session_->context()->broker;
  Status s;
  uint64_t tag = 0;
  uint16_t mth = 0;
  if (auto* ack = std::get_if<amqp::BasicAck>(&request.method)) {
    tag = ack->delivery_tag;
    mth = amqp::BasicAck::kMethodId;
    s = broker.Ack(session_id_, tag, ack->multiple, /*exact=*/true);
  } else if (auto* nack = std::get_if<amqp::BasicNack>(&request.method)) {
    tag = nack->delivery_tag;
    mth = amqp::BasicNack::kMethodId;
    broker::Broker::NackOptions options;
    options.requeue = nack->requeue;
    options.immediate = true;  // an AMQP requeue is at once unless the queue asks for backoff
    options.exact = true;
    s = broker.Nack(session_id_, tag, nack->multiple, options);
  } else {
    const auto& reject = std::get<amqp::BasicReject>(request.method);
    tag = reject.delivery_tag;
    mth = amqp::BasicReject::kMethodId;
    broker::Broker::NackOptions options;
    options.requeue = reject.requeue;
    options.immediate = true;
    options.exact = true;
    s = broker.Nack(session_id_, tag, false, options);
  }
  if (s.code() == StatusCode::kUnknownDeliveryTag || s.code() == StatusCode::kLeaseExpired) {
    return SoftError(amqp::kPreconditionFailed, "unknown delivery tag " + std::to_string(tag),
                     kBasic, mth);
  }
  if (!s.ok()) Fail(s, kBasic, mth);
}

// --- The broker's answers ----------------------------------------------------------------------

void AmqpChannel::Deliver(broker::Delivery delivery) {
  if (closed_) return;
  session_->core().AddDelivery(number_, std::move(delivery));
}

void AmqpChannel::PurgeDone(uint64_t request_id, const Result<uint64_t>& result) {
  FinishCount(request_id, result, amqp::QueuePurge::kMethodId);
}

void AmqpChannel::DeleteQueueDone(uint64_t request_id, const Result<uint64_t>& result) {
  FinishCount(request_id, result, amqp::QueueDelete::kMethodId);
}

void AmqpChannel::FinishCount(uint64_t slot, const Result<uint64_t>& result, uint16_t mth) {
  if (closed_ || slot == 0) return;
  if (!result.ok()) {
    Drop(slot);
    return Fail(result.status(), kQueue, mth);
  }
  const auto count = static_cast<uint32_t>(*result);
  std::string bytes;
  if (mth == amqp::QueuePurge::kMethodId) {
    amqp::AppendMethodFrame(number_, amqp::QueuePurgeOk{count}, &bytes);
  } else {
    amqp::AppendMethodFrame(number_, amqp::QueueDeleteOk{count}, &bytes);
  }
  Fill(slot, std::move(bytes));
}

void AmqpChannel::AckTimedOut(uint64_t delivery_tag, const std::string& consumer_tag,
                              uint32_t timeout_ms) {
  if (closed_) return;
  spdlog::warn(
      "conn={} channel={} user={} consumer {} (delivery tag {}) timed out waiting for "
      "acknowledgement after {} ms: the channel closes and its deliveries are requeued",
      session_->id(), number_, LogSafe(session_->user()), LogSafe(consumer_tag), delivery_tag,
      timeout_ms);
  // RabbitMQ's words, and no method to blame (class and method 0).
  SoftError(amqp::kPreconditionFailed,
            "delivery acknowledgement on channel " + std::to_string(number_) +
                " timed out. Timeout value used: " + std::to_string(timeout_ms) +
                " ms. This timeout value can be configured, see consumers doc guide to learn more",
            0, 0);
}

void AmqpChannel::ConsumerCancelled(const std::string& consumer_tag, std::string_view reason) {
  if (closed_) return;
  spdlog::debug("conn={} channel={} consumer {} cancelled by the broker: {}", session_->id(),
                number_, LogSafe(consumer_tag), reason);
  // Only clients that said they understand it get basic.cancel (rabbitmq-c's tools do not).
  if (!session_->client().consumer_cancel_notify) return;
  std::string bytes;
  amqp::AppendMethodFrame(number_, amqp::BasicCancel{consumer_tag, true}, &bytes);
  session_->core().AddBytes(number_, std::move(bytes));
}

}  // namespace wharf::server
