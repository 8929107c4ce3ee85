// include/wharf/message.h
//
// The message model shared by the broker and the client: a body, typed headers and the usual
// AMQP-style properties. The broker adds an id and a receive time when it accepts a message.
//
// Thread safety: value types; not synchronised. The broker shares accepted messages as
// std::shared_ptr<const Message> across threads, which is safe because they are never mutated.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace wharf {

// Raw bytes, kept apart from std::string so that a header can tell text from binary.
struct Bytes {
  std::string data;
  friend bool operator==(const Bytes&, const Bytes&) = default;
};

// A typed header value: bool, integer, double, string or bytes.
using HeaderValue = std::variant<bool, int64_t, double, std::string, Bytes>;
using Headers = std::map<std::string, HeaderValue, std::less<>>;

// Renders a value for logs and the CLI: true, 42, 1.5, "text", 0x0a0b.
std::string HeaderValueToString(const HeaderValue& value);

struct Properties {
  std::string message_id;  // the application's id; the broker's own is Message::id
  std::string correlation_id;
  std::string reply_to;
  std::string content_type;
  std::string content_encoding;
  int64_t timestamp_ms = 0;    // application timestamp, Unix milliseconds
  uint32_t priority = 0;       // a queue with x-max-priority delivers higher ones first
  uint64_t expiration_ms = 0;  // per-message TTL from publish; 0 = never expires
  std::string type;
  std::string app_id;
  friend bool operator==(const Properties&, const Properties&) = default;
};

// One way a message died (docs/lifecycle.md, "Dead-lettering"): set by the broker when it
// moves a message to a dead-letter target. Repeated deaths of the same reason in the same
// queue update one record (count, last_at_ms); a message keeps at most kMaxDeaths records,
// the most recent first.
struct Death {
  std::string reason;  // "rejected", "max_attempts", "expired" or "max_length"
  std::string queue;   // where it died
  // The exchange and routing key it had in that queue: as published, or those of the
  // dead-letter exchange that brought it there (RabbitMQ's x-death exchange, routing-keys).
  std::string exchange;
  std::string routing_key;
  uint32_t count = 0;       // deaths of this reason in this queue
  int64_t first_at_ms = 0;  // Unix ms
  int64_t last_at_ms = 0;
  uint32_t receive_count = 0;  // in that queue, at the last death
  uint32_t failure_count = 0;
  std::string last_error;
  friend bool operator==(const Death&, const Death&) = default;
};
inline constexpr size_t kMaxDeaths = 16;

struct Message {
  uint64_t id = 0;  // broker-assigned on publish; unique
  std::string body;
  Headers headers;
  Properties properties;
  bool persistent = false;
  int64_t published_at_ms = 0;  // broker receive time, Unix milliseconds
  std::vector<Death> deaths;    // set by the broker: empty unless it was dead-lettered
  // A message published over AMQP 0-9-1: the raw property bytes of its basic content header,
  // from the property-flags word on, exactly as the publisher sent them (binary, NULs
  // included); empty for a message published over the native protocol. AMQP consumers get
  // these bytes back unchanged: AMQP's property types (field tables of any value type, integer
  // widths) do not all fit `headers` and `properties`, which hold what the broker decoded from
  // them. The broker re-encodes them only when it must change a property (dead-lettering,
  // BCC, direct reply-to). Stored with the message (storage format 6).
  std::string amqp_properties;
};

}  // namespace wharf
