// json/message.cc: a message as every Wharf document shows it (json/message.h).
#include "json/message.h"

#include <charconv>
#include <cstdio>

namespace wharf::json {

std::string HexId(uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

std::optional<uint64_t> ParseMessageId(std::string text) {
  if (text.starts_with("0x")) text = text.substr(2);
  if (text.empty() || text.size() > 16) return std::nullopt;
  uint64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id, 16);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return id;
}

Json DeathJson(const Death& d) {
  return Json{{"reason", d.reason},
              {"queue", d.queue},
              {"exchange", d.exchange},
              {"routing_key", d.routing_key},
              {"count", d.count},
              {"first_at_ms", OrNull(d.first_at_ms)},
              {"last_at_ms", OrNull(d.last_at_ms)},
              {"receive_count", d.receive_count},
              {"failure_count", d.failure_count},
              {"last_error", OrNull(d.last_error)}};
}

Json PropertiesJson(const Message& m) {
  const Properties& p = m.properties;
  return Json{{"content_type", OrNull(p.content_type)},
              {"content_encoding", OrNull(p.content_encoding)},
              {"message_id", OrNull(p.message_id)},
              {"correlation_id", OrNull(p.correlation_id)},
              {"reply_to", OrNull(p.reply_to)},
              {"type", OrNull(p.type)},
              {"app_id", OrNull(p.app_id)},
              {"timestamp_ms", OrNull(p.timestamp_ms)},
              {"priority", OrNull(p.priority)},
              {"expiration_ms", OrNull(p.expiration_ms)},
              {"headers", HeadersJson(m.headers)}};
}

namespace {

// The keys every message object has, in one order (ctl/json.h).
struct MessageFields {
  const Message& message;
  const std::string& queue;
  const std::string& exchange;
  const std::string& routing_key;
  Json position;
  Json redelivered;
  uint32_t receive_count;
  int64_t first_received_at_ms;
  uint32_t failure_count;
  int64_t last_failed_at_ms;
  const std::string& last_error;
  uint64_t body_bytes;
  bool with_body;
};

Json MessageJson(const MessageFields& f) {
  Json out{{"message_id", HexId(f.message.id)},
           {"queue", f.queue},
           {"position", f.position},
           {"exchange", f.exchange},
           {"routing_key", f.routing_key},
           {"published_at_ms", OrNull(f.message.published_at_ms)},
           {"persistent", f.message.persistent},
           {"redelivered", f.redelivered},
           {"receive_count", f.receive_count},
           {"first_received_at_ms", OrNull(f.first_received_at_ms)},
           {"failure_count", f.failure_count},
           {"last_failed_at_ms", OrNull(f.last_failed_at_ms)},
           {"last_error", OrNull(f.last_error)},
           {"properties", PropertiesJson(f.message)},
           {"deaths", Json::array()}};
  for (const Death& d : f.message.deaths) out["deaths"].push_back(DeathJson(d));
  if (f.with_body) {
    AddPayload(f.message.body, &out);
  } else {
    out["payload_bytes"] = f.body_bytes;
    out["payload"] = nullptr;
    out["payload_encoding"] = nullptr;
  }
  return out;
}

}  // namespace

Json DeliveryJson(const Delivery& d) {
  return MessageJson({d.message, d.queue, d.exchange, d.routing_key, nullptr, d.redelivered,
                      d.receive_count, d.first_received_at_ms, d.failure_count, d.last_failed_at_ms,
                      d.last_error, d.message.body.size(), true});
}

Json PeekedJson(const std::string& queue, const PeekedMessage& m, bool with_body) {
  return MessageJson({m.message, queue, m.exchange, m.routing_key, m.position, nullptr,
                      m.receive_count, m.first_received_at_ms, m.failure_count, m.last_failed_at_ms,
                      m.last_error, m.body_bytes, with_body});
}

Json DelayedJson(const DelayedInfo& m) {
  return Json{{"message_id", HexId(m.message.id)},
              {"deliver_at_ms", m.deliver_at_ms},
              {"published_at_ms", OrNull(m.message.published_at_ms)},
              {"exchange", m.exchange},
              {"routing_key", m.routing_key},
              {"persistent", m.message.persistent},
              {"receive_count", m.receive_count},
              {"properties", PropertiesJson(m.message)},
              {"payload_bytes", m.body_bytes}};
}

}  // namespace wharf::json
