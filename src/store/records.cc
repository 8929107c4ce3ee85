#include "store/records.h"

#include <algorithm>

#include "store/keys.h"

namespace wharf::store {
namespace {

void ToRecord(const Headers& headers, google::protobuf::RepeatedPtrField<pb::Header>* out) {
  for (const auto& [key, value] : headers) {
    pb::Header* header = out->Add();
    header->set_key(key);
    pb::HeaderValue* v = header->mutable_value();
    std::visit(
        [v](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, bool>) {
            v->set_bool_value(x);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            v->set_int_value(x);
          } else if constexpr (std::is_same_v<T, double>) {
            v->set_double_value(x);
          } else if constexpr (std::is_same_v<T, std::string>) {
            v->set_string_value(x);
          } else {
            v->set_bytes_value(x.data);
          }
        },
        value);
  }
}

Status FromRecord(const google::protobuf::RepeatedPtrField<pb::Header>& in, Headers* out) {
  for (const pb::Header& header : in) {
    const pb::HeaderValue& v = header.value();
    switch (v.kind_case()) {
      case pb::HeaderValue::kBoolValue:
        (*out)[header.key()] = v.bool_value();
        break;
      case pb::HeaderValue::kIntValue:
        (*out)[header.key()] = static_cast<int64_t>(v.int_value());
        break;
      case pb::HeaderValue::kDoubleValue:
        (*out)[header.key()] = v.double_value();
        break;
      case pb::HeaderValue::kStringValue:
        (*out)[header.key()] = v.string_value();
        break;
      case pb::HeaderValue::kBytesValue:
        (*out)[header.key()] = Bytes{v.bytes_value()};
        break;
      default:
        return Status(StatusCode::kInternal,
                      "stored header '" + header.key() + "' has no value (corrupt record?)");
    }
  }
  return Status::Ok();
}

}  // namespace

void ToRecord(const Envelope& envelope, pb::MessageRecord* out) {
  const Message& m = envelope.message;
  const Properties& p = m.properties;
  out->set_id(m.id);
  out->set_body(m.body);
  ToRecord(m.headers, out->mutable_headers());
  out->set_message_id(p.message_id);
  out->set_correlation_id(p.correlation_id);
  out->set_reply_to(p.reply_to);
  out->set_content_type(p.content_type);
  out->set_content_encoding(p.content_encoding);
  out->set_timestamp_ms(p.timestamp_ms);
  out->set_priority(p.priority);
  out->set_expiration_ms(p.expiration_ms);
  out->set_type(p.type);
  out->set_app_id(p.app_id);
  out->set_persistent(m.persistent);
  out->set_published_at_ms(m.published_at_ms);
  out->set_exchange(envelope.exchange);
  out->set_routing_key(envelope.routing_key);
  for (const Death& d : m.deaths) {
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
  out->set_amqp_properties(m.amqp_properties);
}

Result<Envelope> FromRecord(pb::MessageRecord&& record) {
  Envelope envelope;
  Message& m = envelope.message;
  Properties& p = m.properties;
  m.id = record.id();
  m.body = std::move(*record.mutable_body());
  WHARF_RETURN_IF_ERROR(FromRecord(record.headers(), &m.headers));
  p.message_id = std::move(*record.mutable_message_id());
  p.correlation_id = std::move(*record.mutable_correlation_id());
  p.reply_to = std::move(*record.mutable_reply_to());
  p.content_type = std::move(*record.mutable_content_type());
  p.content_encoding = std::move(*record.mutable_content_encoding());
  p.timestamp_ms = record.timestamp_ms();
  p.priority = record.priority();
  p.expiration_ms = record.expiration_ms();
  p.type = std::move(*record.mutable_type());
  p.app_id = std::move(*record.mutable_app_id());
  m.persistent = record.persistent();
  m.published_at_ms = record.published_at_ms();
  envelope.exchange = std::move(*record.mutable_exchange());
  envelope.routing_key = std::move(*record.mutable_routing_key());
  for (auto& in_death : *record.mutable_deaths()) {
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
  m.amqp_properties = std::move(*record.mutable_amqp_properties());
  return envelope;
}

pb::ExchangeRecord ToRecord(const ExchangeSpec& spec) {
  pb::ExchangeRecord record;
  record.set_name(spec.name);
  record.set_type(static_cast<pb::ExchangeType>(spec.type));
  record.set_auto_delete(spec.auto_delete);
  record.set_alternate_exchange(spec.alternate_exchange);
  record.set_internal(spec.internal);
  ToRecord(spec.arguments, record.mutable_arguments());
  record.set_delayed(spec.delayed);
  if (!IsDefaultVhost(spec.vhost)) record.set_vhost(spec.vhost);
  return record;
}

Result<ExchangeSpec> FromRecord(const pb::ExchangeRecord& record) {
  ExchangeSpec spec;
  spec.name = record.name();
  switch (record.type()) {
    case pb::DIRECT:
    case pb::FANOUT:
    case pb::TOPIC:
    case pb::HEADERS:
      spec.type = static_cast<ExchangeType>(record.type());
      break;
    default:
      return Status(StatusCode::kInternal, "stored exchange '" + record.name() +
                                               "' has unknown type " +
                                               std::to_string(record.type()));
  }
  spec.durable = true;
  spec.auto_delete = record.auto_delete();
  spec.alternate_exchange = record.alternate_exchange();
  spec.internal = record.internal();
  WHARF_RETURN_IF_ERROR(FromRecord(record.arguments(), &spec.arguments));
  spec.delayed = record.delayed();
  spec.vhost = RecordVhost(record.vhost());
  return spec;
}

pb::QueueRecord ToRecord(const QueueSpec& spec, uint64_t queue_id) {
  pb::QueueRecord record;
  record.set_name(spec.name);
  record.set_queue_id(queue_id);
  record.set_auto_delete(spec.auto_delete);
  ToRecord(spec.arguments, record.mutable_arguments());
  if (!IsDefaultVhost(spec.vhost)) record.set_vhost(spec.vhost);
  return record;
}

Result<QueueSpec> FromRecord(const pb::QueueRecord& record) {
  QueueSpec spec;
  spec.name = record.name();
  spec.durable = true;
  spec.auto_delete = record.auto_delete();
  WHARF_RETURN_IF_ERROR(FromRecord(record.arguments(), &spec.arguments));
  spec.vhost = RecordVhost(record.vhost());
  return spec;
}

pb::BindingRecord ToRecord(const BindingSpec& binding) {
  pb::BindingRecord record;
  record.set_exchange(binding.exchange);
  record.set_queue(binding.queue);
  record.set_destination_exchange(binding.destination_exchange);
  record.set_routing_key(binding.routing_key);
  ToRecord(binding.arguments, record.mutable_arguments());
  if (!IsDefaultVhost(binding.vhost)) record.set_vhost(binding.vhost);
  return record;
}

Result<BindingSpec> FromRecord(const pb::BindingRecord& record) {
  BindingSpec binding;
  binding.exchange = record.exchange();
  binding.queue = record.queue();
  binding.destination_exchange = record.destination_exchange();
  binding.routing_key = record.routing_key();
  WHARF_RETURN_IF_ERROR(FromRecord(record.arguments(), &binding.arguments));
  binding.vhost = RecordVhost(record.vhost());
  return binding;
}

bool IsDefaultVhost(std::string_view vhost) { return vhost.empty() || vhost == "/"; }

std::string RecordVhost(const std::string& vhost) { return vhost.empty() ? "/" : vhost; }

namespace {

// "/": the prefix and the name, as before vhosts; another vhost: the upper-case prefix, the
// vhost, NUL, the name (vhost names hold no NUL).
std::string TopologyKey(char prefix, std::string_view vhost, std::string_view name) {
  std::string key;
  if (IsDefaultVhost(vhost)) {
    key.push_back(prefix);
  } else {
    key.push_back(static_cast<char>(prefix - 'a' + 'A'));
    key.append(vhost);
    key.push_back('\0');
  }
  key.append(name);
  return key;
}

}  // namespace

std::string ExchangeKey(std::string_view vhost, std::string_view name) {
  return TopologyKey(kExchangePrefix, vhost, name);
}

std::string QueueKey(std::string_view vhost, std::string_view name) {
  return TopologyKey(kQueuePrefix, vhost, name);
}

std::string VhostKey(std::string_view name) {
  std::string key(1, kVhostPrefix);
  key.append(name);
  return key;
}

pb::VhostRecord ToRecord(const StoredVhost& vhost) {
  pb::VhostRecord record;
  record.set_name(vhost.name);
  record.set_description(vhost.description);
  if (vhost.limits.max_connections >= 0) record.set_max_connections(vhost.limits.max_connections);
  if (vhost.limits.max_queues >= 0) record.set_max_queues(vhost.limits.max_queues);
  return record;
}

StoredVhost FromRecord(const pb::VhostRecord& record) {
  StoredVhost vhost;
  vhost.name = record.name();
  vhost.description = record.description();
  // Any negative limit is none (-1): ToRecord writes none, so a record read back is alike.
  if (record.has_max_connections()) {
    vhost.limits.max_connections = std::max<int64_t>(record.max_connections(), -1);
  }
  if (record.has_max_queues()) vhost.limits.max_queues = std::max<int64_t>(record.max_queues(), -1);
  return vhost;
}

std::string PolicyKey(std::string_view vhost, std::string_view name) {
  std::string key(1, kPolicyPrefix);
  key.append(vhost);
  key.push_back('\0');
  key.append(name);
  return key;
}

pb::PolicyRecord ToRecord(const PolicyInfo& policy) {
  pb::PolicyRecord record;
  record.set_vhost(policy.vhost);
  record.set_name(policy.name);
  record.set_pattern(policy.pattern);
  record.set_apply_to(policy.apply_to);
  record.set_priority(policy.priority);
  ToRecord(policy.definition, record.mutable_definition());
  return record;
}

Result<PolicyInfo> FromRecord(const pb::PolicyRecord& record) {
  PolicyInfo policy;
  policy.vhost = record.vhost();
  policy.name = record.name();
  policy.pattern = record.pattern();
  policy.apply_to = record.apply_to();
  policy.priority = record.priority();
  WHARF_RETURN_IF_ERROR(FromRecord(record.definition(), &policy.definition));
  return policy;
}

std::string BindingKey(const BindingSpec& binding) {
  std::string key(1, kBindingPrefix);
  ToRecord(binding).AppendToString(&key);
  return key;
}

std::string AttemptsBytes(const EntryRef& entry) {
  if (entry.first_received_at_ms == 0 && !entry.failures) return {};
  pb::AttemptsRecord record;
  record.set_first_received_at_ms(entry.first_received_at_ms);
  if (entry.failures) {
    record.set_failure_count(entry.failures->count);
    record.set_last_failed_at_ms(entry.failures->last_failed_at_ms);
    record.set_last_error(entry.failures->last_error);
  }
  return record.SerializeAsString();
}

bool ReadAttempts(std::string_view bytes, LoadedMessage* out) {
  if (bytes.empty()) return true;
  pb::AttemptsRecord record;
  if (!record.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return false;
  out->first_received_at_ms = record.first_received_at_ms();
  if (record.failure_count() > 0 || !record.last_error().empty()) {
    auto failures = std::make_shared<Failures>();
    failures->count = record.failure_count();
    failures->last_failed_at_ms = record.last_failed_at_ms();
    failures->last_error = std::move(*record.mutable_last_error());
    out->failures = std::move(failures);
  }
  return true;
}

pb::RedriveRecord ToRecord(const StoredRedrive& redrive) {
  const RedriveInfo& info = redrive.info;
  pb::RedriveRecord record;
  record.set_queue(info.spec.queue);
  record.set_to(info.spec.to);
  record.set_reason(info.spec.reason);
  record.set_limit(info.spec.limit);
  record.set_rate(info.spec.rate);
  record.set_state(static_cast<pb::RedriveRecord::State>(info.state));
  record.set_detail(info.detail);
  record.set_started_at_ms(info.started_at_ms);
  record.set_finished_at_ms(info.finished_at_ms);
  record.set_total(info.total);
  record.set_moved(info.moved);
  record.set_skipped_not_matching(info.skipped_not_matching);
  record.set_skipped_no_target(info.skipped_no_target);
  record.set_skipped_target_full(info.skipped_target_full);
  for (const RedriveTargetCount& target : info.targets) {
    auto* out = record.add_targets();
    out->set_queue(target.queue);
    out->set_messages(target.messages);
  }
  record.set_message_id(info.spec.message_id);
  record.set_cursor_seq(redrive.cursor_seq);
  record.set_end_seq(redrive.end_seq);
  return record;
}

Result<StoredRedrive> FromRecord(const pb::RedriveRecord& record) {
  if (record.state() < pb::RedriveRecord::RUNNING || record.state() > pb::RedriveRecord::FAILED) {
    return Status(StatusCode::kStoreUnavailable, "redrive record of queue '" + record.queue() +
                                                     "' has an unknown state " +
                                                     std::to_string(record.state()));
  }
  StoredRedrive redrive;
  RedriveInfo& info = redrive.info;
  info.spec.queue = record.queue();
  info.spec.to = record.to();
  info.spec.reason = record.reason();
  info.spec.limit = record.limit();
  info.spec.rate = record.rate();
  info.spec.message_id = record.message_id();
  info.state = static_cast<RedriveInfo::State>(record.state());
  info.detail = record.detail();
  info.started_at_ms = record.started_at_ms();
  info.finished_at_ms = record.finished_at_ms();
  info.total = record.total();
  info.moved = record.moved();
  info.skipped_not_matching = record.skipped_not_matching();
  info.skipped_no_target = record.skipped_no_target();
  info.skipped_target_full = record.skipped_target_full();
  for (const auto& target : record.targets()) {
    info.targets.push_back(RedriveTargetCount{target.queue(), target.messages()});
  }
  redrive.cursor_seq = record.cursor_seq();
  redrive.end_seq = record.end_seq();
  return redrive;
}

}  // namespace wharf::store
