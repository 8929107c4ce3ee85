#include "protocol/codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstdint>

#include "common/log_safe.h"
#include "net/frame.h"

namespace wharf::protocol {

void AppendFrame(const wire::Frame& frame, std::string* out) {
  size_t size = frame.ByteSizeLong();
  net::AppendFrameHeader(static_cast<uint32_t>(size), out);
  size_t offset = out->size();
  out->resize(offset + size);
  frame.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out->data() + offset));
}

void ToWire(const Headers& headers, google::protobuf::Map<std::string, wire::HeaderValue>* out) {
  for (const auto& [key, value] : headers) {
    wire::HeaderValue& v = (*out)[key];
    std::visit(
        [&v](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, bool>) v.set_bool_value(x);
          if constexpr (std::is_same_v<T, int64_t>) v.set_int_value(x);
          if constexpr (std::is_same_v<T, double>) v.set_double_value(x);
          if constexpr (std::is_same_v<T, std::string>) v.set_string_value(x);
          if constexpr (std::is_same_v<T, Bytes>) v.set_bytes_value(x.data);
        },
        value);
  }
}

namespace {

std::optional<HeaderValue> ValueFromWire(const wire::HeaderValue& v) {
  switch (v.kind_case()) {
    case wire::HeaderValue::kBoolValue:
      return HeaderValue(v.bool_value());
    case wire::HeaderValue::kIntValue:
      return HeaderValue(int64_t{v.int_value()});
    case wire::HeaderValue::kDoubleValue:
      return HeaderValue(v.double_value());
    case wire::HeaderValue::kStringValue:
      return HeaderValue(v.string_value());
    case wire::HeaderValue::kBytesValue:
      return HeaderValue(Bytes{v.bytes_value()});
    case wire::HeaderValue::KIND_NOT_SET:
      break;
  }
  return std::nullopt;
}

}  // namespace

Status CheckHeaderValues(const google::protobuf::Map<std::string, wire::HeaderValue>& in) {
  for (const auto& [key, v] : in) {
    if (v.kind_case() == wire::HeaderValue::KIND_NOT_SET) {
      return Status(StatusCode::kInvalidArgument,
                    "header '" + CutForDisplay(key) + "' has no value set");
    }
  }
  return Status::Ok();
}

namespace {

using google::protobuf::internal::WireFormatLite;

// Calls `field(number, input)` for each length-delimited field of the message that `input`
// holds up to its current limit, and skips every other field. `field` reads (or skips) the
// field's bytes itself. False when the bytes cannot be read.
template <typename Field>
bool ForEachDelimited(google::protobuf::io::CodedInputStream* input, Field field) {
  while (uint32_t tag = input->ReadTag()) {
    if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!field(WireFormatLite::GetTagFieldNumber(tag), input)) return false;
    } else if (!WireFormatLite::SkipField(input, tag)) {
      return false;
    }
  }
  return input->BytesUntilLimit() == 0;  // else a stray tag or unreadable bytes
}

// Reads the length of a length-delimited field and runs `inner` with the input limited to it.
template <typename Inner>
bool WithinField(google::protobuf::io::CodedInputStream* input, Inner inner) {
  uint32_t length = 0;
  if (!input->ReadVarint32(&length) || length > static_cast<uint32_t>(INT32_MAX)) return false;
  auto limit = input->PushLimit(static_cast<int>(length));
  bool ok = inner(input);
  input->PopLimit(limit);
  return ok;
}

bool SkipDelimited(google::protobuf::io::CodedInputStream* input) {
  uint32_t length = 0;
  return input->ReadVarint32(&length) && length <= static_cast<uint32_t>(INT32_MAX) &&
         input->Skip(static_cast<int>(length));
}

}  // namespace

FramePeek PeekFrame(std::string_view payload) {
  FramePeek peek;
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(payload.data()),
                                               static_cast<int>(payload.size()));
  auto count_headers = [&peek](int number, google::protobuf::io::CodedInputStream* in) {
    if (number == wire::Message::kHeadersFieldNumber) ++peek.publish_headers;
    if (number == wire::Message::kDeathsFieldNumber) ++peek.publish_deaths;
    return SkipDelimited(in);
  };
  auto in_message = [&](int number, google::protobuf::io::CodedInputStream* in) {
    if (number != wire::Publish::kMessageFieldNumber) return SkipDelimited(in);
    return WithinField(in, [&](auto* m) { return ForEachDelimited(m, count_headers); });
  };
  auto in_publish = [&](int number, google::protobuf::io::CodedInputStream* in) {
    if (number != wire::Frame::kPublishFieldNumber) return SkipDelimited(in);
    return WithinField(in, [&](auto* p) { return ForEachDelimited(p, in_message); });
  };
  // The request id is a varint at the top level: read it on the way.
  while (uint32_t tag = input.ReadTag()) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    const auto type = WireFormatLite::GetTagWireType(tag);
    if (number == wire::Frame::kRequestIdFieldNumber && type == WireFormatLite::WIRETYPE_VARINT) {
      if (!input.ReadVarint64(&peek.request_id)) break;
    } else if (type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!in_publish(number, &input)) break;
    } else if (!WireFormatLite::SkipField(&input, tag)) {
      break;
    }
  }
  return peek;
}

Status FromWire(const google::protobuf::Map<std::string, wire::HeaderValue>& in, Headers* out) {
  for (const auto& [key, v] : in) {
    auto value = ValueFromWire(v);
    if (!value) {
      return Status(StatusCode::kInvalidArgument,
                    "header '" + CutForDisplay(key) + "' has no value set");
    }
    out->emplace(key, std::move(*value));
  }
  return Status::Ok();
}

void ToWire(const Message& message, wire::Message* out) {
  out->set_id(message.id);
  out->set_body(message.body);
  ToWire(message.headers, out->mutable_headers());
  const Properties& p = message.properties;
  wire::Properties* wp = out->mutable_properties();
  wp->set_message_id(p.message_id);
  wp->set_correlation_id(p.correlation_id);
  wp->set_reply_to(p.reply_to);
  wp->set_content_type(p.content_type);
  wp->set_content_encoding(p.content_encoding);
  wp->set_timestamp_ms(p.timestamp_ms);
  wp->set_priority(p.priority);
  wp->set_expiration_ms(p.expiration_ms);
  wp->set_type(p.type);
  wp->set_app_id(p.app_id);
  out->set_persistent(message.persistent);
  out->set_published_at_ms(message.published_at_ms);
  for (const Death& d : message.deaths) {
    auto* out_death = out->add_deaths();
    out_death->set_reason(d.reason);
    out_death->set_queue(d.queue);
    out_death->set_exchange(d.exchange);
    out_death->set_routing_key(d.routing_key);
    out_death->set_count(d.count);
    out_death->set_first_at_ms(d.first_at_ms);
    out_death->set_last_at_ms(d.last_at_ms);
    out_death->set_receive_count(d.receive_count);
    out_death->set_failure_count(d.failure_count);
    out_death->set_last_error(d.last_error);
  }
}

Message MoveFromWire(wire::Message* in) {
  Message m;
  m.id = in->id();
  m.body = std::move(*in->mutable_body());
  // Callers that must refuse a valueless header check with CheckHeaderValues first. String
  // and bytes values are moved, not copied: headers can be most of a message.
  for (auto& [key, v] : *in->mutable_headers()) {
    switch (v.kind_case()) {
      case wire::HeaderValue::kStringValue:
        m.headers.emplace(key, HeaderValue(std::move(*v.mutable_string_value())));
        break;
      case wire::HeaderValue::kBytesValue:
        m.headers.emplace(key, HeaderValue(Bytes{std::move(*v.mutable_bytes_value())}));
        break;
      default:
        if (auto value = ValueFromWire(v)) m.headers.emplace(key, std::move(*value));
    }
  }
  wire::Properties* wp = in->mutable_properties();
  Properties& p = m.properties;
  p.message_id = std::move(*wp->mutable_message_id());
  p.correlation_id = std::move(*wp->mutable_correlation_id());
  p.reply_to = std::move(*wp->mutable_reply_to());
  p.content_type = std::move(*wp->mutable_content_type());
  p.content_encoding = std::move(*wp->mutable_content_encoding());
  p.timestamp_ms = wp->timestamp_ms();
  p.priority = wp->priority();
  p.expiration_ms = wp->expiration_ms();
  p.type = std::move(*wp->mutable_type());
  p.app_id = std::move(*wp->mutable_app_id());
  m.persistent = in->persistent();
  m.published_at_ms = in->published_at_ms();
  for (auto& in_death : *in->mutable_deaths()) {
    Death& d = m.deaths.emplace_back();
    d.reason = std::move(*in_death.mutable_reason());
    d.queue = std::move(*in_death.mutable_queue());
    d.exchange = std::move(*in_death.mutable_exchange());
    d.routing_key = std::move(*in_death.mutable_routing_key());
    d.count = in_death.count();
    d.first_at_ms = in_death.first_at_ms();
    d.last_at_ms = in_death.last_at_ms();
    d.receive_count = in_death.receive_count();
    d.failure_count = in_death.failure_count();
    d.last_error = std::move(*in_death.mutable_last_error());
  }
  return m;
}

void ToWire(const Status& status, wire::Error* out) {
  out->set_code(static_cast<wire::ErrorCode>(status.code()));
  out->set_message(std::string(status.message()));
}

Status FromWire(const wire::Error& error) {
  auto code = static_cast<StatusCode>(error.code());
  if (code == StatusCode::kOk) code = StatusCode::kInternal;  // an Error always means failure
  return Status(code, error.message());
}

wire::ExchangeType ToWire(ExchangeType type) {
  return static_cast<wire::ExchangeType>(static_cast<int>(type));
}

std::optional<ExchangeType> FromWire(wire::ExchangeType type) {
  switch (type) {
    case wire::DIRECT:
      return ExchangeType::kDirect;
    case wire::FANOUT:
      return ExchangeType::kFanout;
    case wire::TOPIC:
      return ExchangeType::kTopic;
    case wire::HEADERS:
      return ExchangeType::kHeaders;
    default:
      return std::nullopt;
  }
}

void ToWire(const QueueInfo& info, wire::QueueInfo* out) {
  out->set_name(info.name);
  out->set_durable(info.durable);
  out->set_exclusive(info.exclusive);
  out->set_auto_delete(info.auto_delete);
  out->set_ready(info.ready);
  out->set_in_flight(info.in_flight);
  out->set_consumers(info.consumers);
  out->set_published_total(info.published_total);
  out->set_delivered_total(info.delivered_total);
  out->set_acked_total(info.acked_total);
  out->set_delayed(info.delayed);
  out->set_next_delayed_at_ms(info.next_delayed_at_ms);
  ToWire(info.arguments, out->mutable_arguments());
  out->set_dead_letter_target(info.dead_letter_target);
  out->set_head_published_at_ms(info.head_published_at_ms);
  out->set_publish_rate(info.publish_rate);
  out->set_deliver_rate(info.deliver_rate);
  out->set_ack_rate(info.ack_rate);
  out->set_purge_reclaiming(info.purge_reclaiming);
  out->set_groups(info.groups);
  out->set_groups_held(info.groups_held);
  out->set_vhost(info.vhost);
  out->set_policy(info.policy);
  ToWire(info.policy_definition, out->mutable_policy_definition());
  ToWire(info.effective_arguments, out->mutable_effective_arguments());
}

QueueInfo FromWire(const wire::QueueInfo& in) {
  QueueInfo info;
  info.name = in.name();
  info.durable = in.durable();
  info.exclusive = in.exclusive();
  info.auto_delete = in.auto_delete();
  info.ready = in.ready();
  info.in_flight = in.in_flight();
  info.consumers = in.consumers();
  info.published_total = in.published_total();
  info.delivered_total = in.delivered_total();
  info.acked_total = in.acked_total();
  info.delayed = in.delayed();
  info.next_delayed_at_ms = in.next_delayed_at_ms();
  // Arguments the client cannot read (a newer broker's kinds) are left out, not fatal.
  if (!FromWire(in.arguments(), &info.arguments).ok()) info.arguments.clear();
  info.dead_letter_target = in.dead_letter_target();
  info.head_published_at_ms = in.head_published_at_ms();
  info.publish_rate = in.publish_rate();
  info.deliver_rate = in.deliver_rate();
  info.ack_rate = in.ack_rate();
  info.purge_reclaiming = in.purge_reclaiming();
  info.groups = in.groups();
  info.groups_held = in.groups_held();
  info.vhost = in.vhost();
  info.policy = in.policy();
  if (!FromWire(in.policy_definition(), &info.policy_definition).ok()) {
    info.policy_definition.clear();
  }
  if (!FromWire(in.effective_arguments(), &info.effective_arguments).ok()) {
    info.effective_arguments.clear();
  }
  return info;
}

void ToWire(const DelayedInfo& info, wire::DelayedMessage* out) {
  ToWire(info.message, out->mutable_message());
  out->set_body_bytes(info.body_bytes);
  out->set_deliver_at_ms(info.deliver_at_ms);
  out->set_receive_count(info.receive_count);
  out->set_exchange(info.exchange);
  out->set_routing_key(info.routing_key);
}

Result<DelayedInfo> FromWire(const wire::DelayedMessage& in) {
  DelayedInfo info;
  Headers headers;
  WHARF_RETURN_IF_ERROR(FromWire(in.message().headers(), &headers));
  wire::Message message = in.message();
  info.message = MoveFromWire(&message);
  info.body_bytes = in.body_bytes();
  info.deliver_at_ms = in.deliver_at_ms();
  info.receive_count = in.receive_count();
  info.exchange = in.exchange();
  info.routing_key = in.routing_key();
  return info;
}

void ToWire(const ExchangeInfo& info, wire::ExchangeInfo* out) {
  out->set_name(info.name);
  out->set_type(ToWire(info.type));
  out->set_durable(info.durable);
  out->set_auto_delete(info.auto_delete);
  out->set_alternate_exchange(info.alternate_exchange);
  out->set_bindings(info.bindings);
  out->set_internal(info.internal);
  ToWire(info.arguments, out->mutable_arguments());
  out->set_delayed(info.delayed);
  out->set_policy(info.policy);
  ToWire(info.policy_definition, out->mutable_policy_definition());
}

ExchangeInfo FromWire(const wire::ExchangeInfo& in) {
  ExchangeInfo info;
  info.name = in.name();
  info.type = FromWire(in.type()).value_or(ExchangeType::kDirect);
  info.durable = in.durable();
  info.auto_delete = in.auto_delete();
  info.alternate_exchange = in.alternate_exchange();
  info.bindings = in.bindings();
  info.internal = in.internal();
  if (!FromWire(in.arguments(), &info.arguments).ok()) info.arguments.clear();
  info.delayed = in.delayed();
  info.policy = in.policy();
  if (!FromWire(in.policy_definition(), &info.policy_definition).ok()) {
    info.policy_definition.clear();
  }
  return info;
}

void ToWire(const BackupInfo& info, wire::BackupOk* out) {
  out->set_directory(info.directory);
  out->set_files(info.files);
  out->set_bytes(info.bytes);
  out->set_linked_bytes(info.linked_bytes);
  out->set_duration_ms(info.duration_ms);
  out->set_max_message_id(info.max_message_id);
}

BackupInfo FromWire(const wire::BackupOk& in) {
  return BackupInfo{in.directory(),    in.files(),       in.bytes(),
                    in.linked_bytes(), in.duration_ms(), in.max_message_id()};
}

void ToWire(const PeekedMessage& info, wire::PeekedMessage* out) {
  ToWire(info.message, out->mutable_message());
  out->set_position(info.position);
  out->set_body_bytes(info.body_bytes);
  out->set_receive_count(info.receive_count);
  out->set_first_received_at_ms(info.first_received_at_ms);
  out->set_failure_count(info.failure_count);
  out->set_last_failed_at_ms(info.last_failed_at_ms);
  out->set_last_error(info.last_error);
  out->set_exchange(info.exchange);
  out->set_routing_key(info.routing_key);
}

Result<PeekedMessage> FromWire(const wire::PeekedMessage& in) {
  PeekedMessage info;
  Headers headers;
  WHARF_RETURN_IF_ERROR(FromWire(in.message().headers(), &headers));
  wire::Message message = in.message();
  info.message = MoveFromWire(&message);
  info.position = in.position();
  info.body_bytes = in.body_bytes();
  info.receive_count = in.receive_count();
  info.first_received_at_ms = in.first_received_at_ms();
  info.failure_count = in.failure_count();
  info.last_failed_at_ms = in.last_failed_at_ms();
  info.last_error = in.last_error();
  info.exchange = in.exchange();
  info.routing_key = in.routing_key();
  return info;
}

void ToWire(const RedriveInfo& info, wire::RedriveTask* out) {
  auto* spec = out->mutable_spec();
  spec->set_queue(info.spec.queue);
  spec->set_to(info.spec.to);
  spec->set_reason(info.spec.reason);
  spec->set_limit(info.spec.limit);
  spec->set_rate(info.spec.rate);
  spec->set_dry_run(info.spec.dry_run);
  spec->set_message_id(info.spec.message_id);
  out->set_state(static_cast<wire::RedriveTask::State>(info.state));
  out->set_detail(info.detail);
  out->set_started_at_ms(info.started_at_ms);
  out->set_finished_at_ms(info.finished_at_ms);
  out->set_total(info.total);
  out->set_moved(info.moved);
  out->set_remaining(info.remaining);
  out->set_skipped_not_matching(info.skipped_not_matching);
  out->set_skipped_no_target(info.skipped_no_target);
  out->set_skipped_target_full(info.skipped_target_full);
  out->set_rate_per_second(info.rate_per_second);
  for (const RedriveTargetCount& target : info.targets) {
    auto* t = out->add_targets();
    t->set_queue(target.queue);
    t->set_messages(target.messages);
  }
}

RedriveInfo FromWire(const wire::RedriveTask& in) {
  RedriveInfo info;
  info.spec.queue = in.spec().queue();
  info.spec.to = in.spec().to();
  info.spec.reason = in.spec().reason();
  info.spec.limit = in.spec().limit();
  info.spec.rate = in.spec().rate();
  info.spec.dry_run = in.spec().dry_run();
  info.spec.message_id = in.spec().message_id();
  // An unknown state (a newer broker) reads as running: the task is not known to be over.
  info.state = in.state() >= wire::RedriveTask::FINISHED && in.state() <= wire::RedriveTask::FAILED
                   ? static_cast<RedriveInfo::State>(in.state())
                   : RedriveInfo::State::kRunning;
  info.detail = in.detail();
  info.started_at_ms = in.started_at_ms();
  info.finished_at_ms = in.finished_at_ms();
  info.total = in.total();
  info.moved = in.moved();
  info.remaining = in.remaining();
  info.skipped_not_matching = in.skipped_not_matching();
  info.skipped_no_target = in.skipped_no_target();
  info.skipped_target_full = in.skipped_target_full();
  info.rate_per_second = in.rate_per_second();
  for (const auto& t : in.targets()) info.targets.push_back({t.queue(), t.messages()});
  return info;
}

wire::Frame ErrorFrame(uint64_t request_id, const Status& status) {
  wire::Frame frame;
  frame.set_request_id(request_id);
  ToWire(status, frame.mutable_error());
  return frame;
}

// --- Requests and listings ----------------------------------------------------------------------

void ToWire(const ExchangeSpec& spec, wire::DeclareExchange* out) {
  out->set_name(spec.name);
  out->set_type(ToWire(spec.type));
  out->set_durable(spec.durable);
  out->set_auto_delete(spec.auto_delete);
  out->set_alternate_exchange(spec.alternate_exchange);
  out->set_passive(spec.passive);
}

ExchangeSpec FromWire(const wire::DeclareExchange& in, std::optional<ExchangeType>* type) {
  ExchangeSpec spec;
  spec.name = in.name();
  *type = FromWire(in.type());
  spec.type = type->value_or(ExchangeType::kDirect);
  spec.durable = in.durable();
  spec.auto_delete = in.auto_delete();
  spec.alternate_exchange = in.alternate_exchange();
  spec.passive = in.passive();
  return spec;
}

void ToWire(const QueueSpec& spec, wire::DeclareQueue* out) {
  out->set_name(spec.name);
  out->set_durable(spec.durable);
  out->set_exclusive(spec.exclusive);
  out->set_auto_delete(spec.auto_delete);
  out->set_passive(spec.passive);
  ToWire(spec.arguments, out->mutable_arguments());
}

Result<QueueSpec> FromWire(const wire::DeclareQueue& in) {
  QueueSpec spec;
  spec.name = in.name();
  spec.durable = in.durable();
  spec.exclusive = in.exclusive();
  spec.auto_delete = in.auto_delete();
  spec.passive = in.passive();
  WHARF_RETURN_IF_ERROR(FromWire(in.arguments(), &spec.arguments));
  return spec;
}

namespace {

// Bind and Unbind carry the same fields.
template <typename WireBinding>
void BindingToWire(const BindingSpec& spec, WireBinding* out) {
  out->set_queue(spec.queue);
  out->set_exchange(spec.exchange);
  out->set_routing_key(spec.routing_key);
  ToWire(spec.arguments, out->mutable_arguments());
  out->set_destination_exchange(spec.destination_exchange);
}

template <typename WireBinding>
Result<BindingSpec> BindingFromWire(const WireBinding& in) {
  BindingSpec spec;
  spec.queue = in.queue();
  spec.exchange = in.exchange();
  spec.routing_key = in.routing_key();
  spec.destination_exchange = in.destination_exchange();
  WHARF_RETURN_IF_ERROR(FromWire(in.arguments(), &spec.arguments));
  return spec;
}

}  // namespace

void ToWire(const BindingSpec& spec, wire::Bind* out) { BindingToWire(spec, out); }
void ToWire(const BindingSpec& spec, wire::Unbind* out) { BindingToWire(spec, out); }
Result<BindingSpec> FromWire(const wire::Bind& in) { return BindingFromWire(in); }
Result<BindingSpec> FromWire(const wire::Unbind& in) { return BindingFromWire(in); }

void ToWire(const RedriveSpec& spec, wire::StartRedrive* out) {
  out->set_queue(spec.queue);
  out->set_to(spec.to);
  out->set_reason(spec.reason);
  out->set_limit(spec.limit);
  out->set_rate(spec.rate);
  out->set_dry_run(spec.dry_run);
  out->set_message_id(spec.message_id);
}

RedriveSpec FromWire(const wire::StartRedrive& in) {
  return RedriveSpec{in.queue(), in.to(),      in.reason(),    in.limit(),
                     in.rate(),  in.dry_run(), in.message_id()};
}

void ToWire(const ConnectionInfo& info, wire::ConnectionInfo* out) {
  out->set_id(info.id);
  out->set_user(info.user);
  out->set_address(info.address);
  out->set_connected_at_ms(info.connected_at_ms);
  out->set_consumers(info.consumers);
  out->set_unacked(info.unacked);
  out->set_pending_receives(info.pending_receives);
  out->set_protocol(info.protocol);
  out->set_client(info.client);
  out->set_client_version(info.client_version);
  out->set_channels(info.channels);
  out->set_vhost(info.vhost);
}

ConnectionInfo FromWire(const wire::ConnectionInfo& in) {
  return ConnectionInfo{
      in.id(),        in.user(),           in.address(),          in.connected_at_ms(),
      in.consumers(), in.unacked(),        in.pending_receives(), in.protocol(),
      in.client(),    in.client_version(), in.channels(),         in.vhost()};
}

void ToWire(const ConsumerInfo& info, wire::ConsumerInfo* out) {
  out->set_queue(info.queue);
  out->set_consumer_tag(info.consumer_tag);
  out->set_connection_id(info.connection_id);
  out->set_user(info.user);
  out->set_prefetch(info.prefetch);
  out->set_unacked(info.unacked);
  out->set_lease_ms(info.lease_ms);
  out->set_exclusive(info.exclusive);
  out->set_channel(info.channel);
  out->set_priority(info.priority);
  out->set_activity(info.activity);
}

ConsumerInfo FromWire(const wire::ConsumerInfo& in) {
  return ConsumerInfo{in.queue(),    in.consumer_tag(), in.connection_id(), in.user(),
                      in.prefetch(), in.unacked(),      in.lease_ms(),      in.exclusive(),
                      in.channel(),  in.priority(),     in.activity()};
}

void ToWire(const UserInfo& info, wire::UserInfo* out) {
  out->set_name(info.name);
  out->set_admin(info.admin);
  out->set_source(info.source);
  if (info.limits.max_connections >= 0) out->set_max_connections(info.limits.max_connections);
  if (info.limits.max_channels >= 0) out->set_max_channels(info.limits.max_channels);
  for (const std::string& tag : info.tags) out->add_tags(tag);
  for (const UserPermission& p : info.permissions) {
    auto* permission = out->add_permissions();
    permission->set_vhost(p.vhost);
    permission->set_configure(p.configure);
    permission->set_write(p.write);
    permission->set_read(p.read);
  }
}

void ToWire(const VhostInfo& info, wire::VhostInfo* out) {
  out->set_name(info.name);
  out->set_description(info.description);
  if (info.limits.max_connections >= 0) out->set_max_connections(info.limits.max_connections);
  if (info.limits.max_queues >= 0) out->set_max_queues(info.limits.max_queues);
  out->set_queues(info.queues);
  out->set_exchanges(info.exchanges);
  out->set_connections(info.connections);
}

VhostInfo FromWire(const wire::VhostInfo& in) {
  VhostInfo info;
  info.name = in.name();
  info.description = in.description();
  if (in.has_max_connections()) info.limits.max_connections = in.max_connections();
  if (in.has_max_queues()) info.limits.max_queues = in.max_queues();
  info.queues = in.queues();
  info.exchanges = in.exchanges();
  info.connections = in.connections();
  return info;
}

void ToWire(const PolicyInfo& info, wire::PolicyInfo* out) {
  out->set_vhost(info.vhost);
  out->set_name(info.name);
  out->set_pattern(info.pattern);
  out->set_apply_to(info.apply_to);
  out->set_priority(info.priority);
  ToWire(info.definition, out->mutable_definition());
}

Result<PolicyInfo> FromWire(const wire::PolicyInfo& in) {
  PolicyInfo info;
  info.vhost = in.vhost();
  info.name = in.name();
  info.pattern = in.pattern();
  info.apply_to = in.apply_to();
  info.priority = in.priority();
  WHARF_RETURN_IF_ERROR(FromWire(in.definition(), &info.definition));
  return info;
}

UserInfo FromWire(const wire::UserInfo& in) {
  UserInfo info{in.name(), in.admin(), in.source(), {}, {}, {}};
  if (in.has_max_connections()) info.limits.max_connections = in.max_connections();
  if (in.has_max_channels()) info.limits.max_channels = in.max_channels();
  info.tags.assign(in.tags().begin(), in.tags().end());
  for (const auto& p : in.permissions()) {
    info.permissions.push_back(UserPermission{p.vhost(), p.configure(), p.write(), p.read()});
  }
  return info;
}

}  // namespace wharf::protocol
