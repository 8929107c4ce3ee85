// amqp/properties.h
//
// The basic class's content properties (the content header frame, spec 4.2.6.1), lossless,
// and the content header frame's fixed part.
//
// A header frame's payload: class-id (short, 60 for basic), weight (short, must be 0),
// body-size (longlong), then the raw properties: a property-flags word (short) and the
// present properties in flag order. Flag bits, from the high bit: 15 content-type,
// 14 content-encoding, 13 headers, 12 delivery-mode, 11 priority, 10 correlation-id,
// 9 reply-to, 8 expiration, 7 message-id, 6 timestamp, 5 type, 4 user-id, 3 app-id,
// 2 cluster-id. Bit 1 is unused and ignored, as RabbitMQ ignores it. Bit 0 says another flags
// word follows.
//
// DecodeProperties: another flags word is read whenever bit 0 is set; the basic class has no
// properties beyond the 14, so a continuation word with any property bit set (15..1) is an
// error, one with none is accepted. (RabbitMQ ignores bit 0 and then fails on the extra
// bytes; no client sends continuation words.) Truncated properties, and bytes after the last
// present property, are errors. The headers table is decoded as field_table.h says. Errors are
// StatusCode::kMalformedFrame. Property shortstrs are not checked for UTF-8 (RabbitMQ does not).
//
// EncodeProperties writes one flags word and the present properties; a shortstr longer than
// 255 bytes is cut (wire.h).
//
// Thread safety: value types, not synchronised; the functions are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "amqp/field_table.h"
#include "wharf/status.h"

namespace wharf::amqp {

inline constexpr uint16_t kBasicClassId = 60;

struct BasicProperties {
  std::optional<std::string> content_type, content_encoding;
  std::optional<FieldTable> headers;
  std::optional<uint8_t> delivery_mode, priority;
  std::optional<std::string> correlation_id, reply_to, expiration, message_id;
  std::optional<uint64_t> timestamp;  // seconds
  std::optional<std::string> type, user_id, app_id, cluster_id;
  friend bool operator==(const BasicProperties&, const BasicProperties&) = default;
};

// `raw` = from the property-flags word to the end of the header frame's payload. On error,
// *out is unchanged.
Status DecodeProperties(std::string_view raw, BasicProperties* out);

// Appends the flags word and the present properties.
void EncodeProperties(const BasicProperties& p, std::string* raw);

struct ContentHeader {
  uint16_t class_id = 0;
  uint64_t body_size = 0;
  std::string_view raw_properties;  // a view into the payload given to DecodeContentHeader
};

// The payload of a header frame: class-id, weight (must be 0), body-size, then the raw
// properties (not decoded here). Fewer than 12 bytes, or a weight other than 0, is
// StatusCode::kMalformedFrame. The class id is returned, not checked (the caller compares it
// with its method's class: RabbitMQ's 505 UNEXPECTED_FRAME).
Status DecodeContentHeader(std::string_view payload, ContentHeader* out);

// Appends a header frame's payload (class 60, weight 0).
void AppendContentHeaderPayload(uint64_t body_size, std::string_view raw_properties,
                                std::string* out);

}  // namespace wharf::amqp
