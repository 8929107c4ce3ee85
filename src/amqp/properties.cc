#include "amqp/properties.h"

#include "amqp/wire.h"

namespace wharf::amqp {
namespace {

constexpr uint16_t kContentType = 1u << 15;
constexpr uint16_t kContentEncoding = 1u << 14;
constexpr uint16_t kHeaders = 1u << 13;
constexpr uint16_t kDeliveryMode = 1u << 12;
constexpr uint16_t kPriority = 1u << 11;
constexpr uint16_t kCorrelationId = 1u << 10;
constexpr uint16_t kReplyTo = 1u << 9;
constexpr uint16_t kExpiration = 1u << 8;
constexpr uint16_t kMessageId = 1u << 7;
constexpr uint16_t kTimestamp = 1u << 6;
constexpr uint16_t kType = 1u << 5;
constexpr uint16_t kUserId = 1u << 4;
constexpr uint16_t kAppId = 1u << 3;
constexpr uint16_t kClusterId = 1u << 2;
constexpr uint16_t kContinuation = 1u << 0;

Status MalformedProperties(std::string what) {
  return Status(StatusCode::kMalformedFrame, "malformed content properties: " + what);
}

}  // namespace

Status DecodeProperties(std::string_view raw, BasicProperties* out) {
  Reader r(raw);
  uint16_t flags;
  if (!r.Short(&flags)) return MalformedProperties("no property flags");
  for (uint16_t more = flags; more & kContinuation;) {
    if (!r.Short(&more)) return MalformedProperties("a continued property flags word is missing");
    if ((more & ~kContinuation) != 0) {
      return MalformedProperties(
          "a continued property flags word sets properties the basic class lacks");
    }
  }
  BasicProperties p;
  Status status;
  auto fail = [&](const char* name) {
    if (status.ok()) status = MalformedProperties(std::string("truncated at ") + name);
  };
  auto shortstr = [&](uint16_t bit, const char* name, std::optional<std::string>& field) {
    if (!(flags & bit)) return;
    std::string_view v;
    if (r.ShortStr(&v)) {
      field.emplace(v);
    } else {
      fail(name);
    }
  };
  auto octet = [&](uint16_t bit, const char* name, std::optional<uint8_t>& field) {
    if (!(flags & bit)) return;
    uint8_t v;
    if (r.Octet(&v)) {
      field = v;
    } else {
      fail(name);
    }
  };
  shortstr(kContentType, "content-type", p.content_type);
  shortstr(kContentEncoding, "content-encoding", p.content_encoding);
  if (flags & kHeaders) {
    std::string_view v;
    if (!r.LongStr(&v)) {
      fail("headers");
    } else if (Status st = DecodeTable(v, &p.headers.emplace()); !st.ok()) {
      if (status.ok())
        status = Status(st.code(), "content property headers: " + std::string(st.message()));
    }
  }
  octet(kDeliveryMode, "delivery-mode", p.delivery_mode);
  octet(kPriority, "priority", p.priority);
  shortstr(kCorrelationId, "correlation-id", p.correlation_id);
  shortstr(kReplyTo, "reply-to", p.reply_to);
  shortstr(kExpiration, "expiration", p.expiration);
  shortstr(kMessageId, "message-id", p.message_id);
  if (flags & kTimestamp) {
    uint64_t v;
    if (r.LongLong(&v)) {
      p.timestamp = v;
    } else {
      fail("timestamp");
    }
  }
  shortstr(kType, "type", p.type);
  shortstr(kUserId, "user-id", p.user_id);
  shortstr(kAppId, "app-id", p.app_id);
  shortstr(kClusterId, "cluster-id", p.cluster_id);
  WHARF_RETURN_IF_ERROR(status);
  if (r.remaining() > 0) {
    return MalformedProperties(std::to_string(r.remaining()) + " bytes after the last property");
  }
  *out = std::move(p);
  return Status::Ok();
}

void EncodeProperties(const BasicProperties& p, std::string* raw) {
  uint16_t flags = 0;
  if (p.content_type) flags |= kContentType;
  if (p.content_encoding) flags |= kContentEncoding;
  if (p.headers) flags |= kHeaders;
  if (p.delivery_mode) flags |= kDeliveryMode;
  if (p.priority) flags |= kPriority;
  if (p.correlation_id) flags |= kCorrelationId;
  if (p.reply_to) flags |= kReplyTo;
  if (p.expiration) flags |= kExpiration;
  if (p.message_id) flags |= kMessageId;
  if (p.timestamp) flags |= kTimestamp;
  if (p.type) flags |= kType;
  if (p.user_id) flags |= kUserId;
  if (p.app_id) flags |= kAppId;
  if (p.cluster_id) flags |= kClusterId;
  Writer w(raw);
  w.Short(flags);
  if (p.content_type) w.ShortStr(*p.content_type);
  if (p.content_encoding) w.ShortStr(*p.content_encoding);
  if (p.headers) AppendTable(*p.headers, raw);
  if (p.delivery_mode) w.Octet(*p.delivery_mode);
  if (p.priority) w.Octet(*p.priority);
  if (p.correlation_id) w.ShortStr(*p.correlation_id);
  if (p.reply_to) w.ShortStr(*p.reply_to);
  if (p.expiration) w.ShortStr(*p.expiration);
  if (p.message_id) w.ShortStr(*p.message_id);
  if (p.timestamp) w.LongLong(*p.timestamp);
  if (p.type) w.ShortStr(*p.type);
  if (p.user_id) w.ShortStr(*p.user_id);
  if (p.app_id) w.ShortStr(*p.app_id);
  if (p.cluster_id) w.ShortStr(*p.cluster_id);
}

Status DecodeContentHeader(std::string_view payload, ContentHeader* out) {
  if (payload.size() < 12) {
    return Status(
        StatusCode::kMalformedFrame,
        "content header of " + std::to_string(payload.size()) + " bytes is shorter than 12");
  }
  const uint16_t weight = LoadU16(payload.data() + 2);
  if (weight != 0) {
    return Status(StatusCode::kMalformedFrame,
                  "content header weight " + std::to_string(weight) + " is not 0");
  }
  out->class_id = LoadU16(payload.data());
  out->body_size = LoadU64(payload.data() + 4);
  out->raw_properties = payload.substr(12);
  return Status::Ok();
}

void AppendContentHeaderPayload(uint64_t body_size, std::string_view raw_properties,
                                std::string* out) {
  Writer w(out);
  w.Short(kBasicClassId);
  w.Short(0);
  w.LongLong(body_size);
  w.Raw(raw_properties);
}

}  // namespace wharf::amqp
