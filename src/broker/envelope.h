// broker/envelope.h
//
// Envelope is an accepted message plus how it arrived (exchange and routing key). One Envelope
// is shared by every queue the message was routed to and by every delivery of it.
// Delivery is one hand-over of a queued message to a client.
//
// Thread safety: an Envelope is immutable once published and shared as
// std::shared_ptr<const Envelope>, so it may be read from any thread. Delivery is a value type.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "wharf/message.h"

namespace wharf::broker {

struct Envelope {
  Message message;
  std::string exchange;
  std::string routing_key;
};
using EnvelopePtr = std::shared_ptr<const Envelope>;

struct Delivery {
  std::string consumer_tag;  // "" for pull deliveries
  uint64_t delivery_tag = 0;
  EnvelopePtr envelope;
  uint32_t receive_count = 0;  // 1 on the first delivery
  bool redelivered = false;
  std::string queue;
};

}  // namespace wharf::broker
