// server/amqp_content.h
//
// A message's AMQP content (the content header and body frames) as an AMQP consumer gets it:
// the properties exactly as an AMQP publisher sent them (Message::amqp_properties), re-encoded
// only where the broker changed them (dead-lettering: x-death and the x-first-death-* headers
// set, the per-message expiration dropped, as RabbitMQ does), or made from the native model for
// a message published over the native protocol; the body split at the connection's frame-max.
// A `delivery_count` (a quorum queue's message: the times it was returned before) is set as
// the x-delivery-count header (`l`), as RabbitMQ 3.x's quorum queues do, 0 included.
//
// Thread safety: a pure function; called on I/O threads (deliveries) and on the broker thread
// (basic.get-ok, basic.return).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "broker/envelope.h"
#include "wharf/message.h"

namespace wharf::server {

void AppendMessageContent(uint16_t channel, const Message& message, uint32_t frame_max,
                          std::string* out, std::optional<uint32_t> delivery_count = {});

// The x-delivery-count `delivery` carries, if any.
inline std::optional<uint32_t> DeliveryCount(const broker::Delivery& delivery) {
  if (!delivery.delivery_count_header) return std::nullopt;
  return delivery.receive_count > 0 ? delivery.receive_count - 1 : 0;
}

}  // namespace wharf::server
