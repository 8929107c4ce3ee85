#include "server/amqp_content.h"

#include "amqp/frame.h"
#include "amqp/message_map.h"
#include "amqp/properties.h"

namespace wharf::server {

void AppendMessageContent(uint16_t channel, const Message& message, uint32_t frame_max,
                          std::string* out, std::optional<uint32_t> delivery_count) {
  std::string patched;
  std::string_view raw = message.amqp_properties;
  if (raw.empty() || !message.deaths.empty() || delivery_count) {
    amqp::BasicProperties properties;
    if (raw.empty() || !amqp::DecodeProperties(raw, &properties).ok()) {
      properties = amqp::FromWharfMessage(message);
    }
    if (!message.deaths.empty() || delivery_count) {
      // Patched in place: no copy of the table.
      amqp::FieldTable& headers =
          properties.headers ? *properties.headers : properties.headers.emplace();
      if (!message.deaths.empty()) {
        amqp::SetDeathHeaders(message.deaths, &headers, properties.expiration);
        properties.expiration.reset();
      }
      if (delivery_count) {
        headers.Set("x-delivery-count", amqp::FieldValue::Int('l', *delivery_count));
      }
    }
    amqp::EncodeProperties(properties, &patched);
    raw = patched;
  }
  amqp::AppendContent(channel, raw, message.body, frame_max, out);
}

}  // namespace wharf::server
