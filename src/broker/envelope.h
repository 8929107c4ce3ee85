// broker/envelope.h
//
// Envelope (common/envelope.h) is an accepted message plus how it arrived.
// Delivery is one hand-over of a queued message to a client.
//
// Thread safety: an Envelope is immutable once published and shared as
// std::shared_ptr<const Envelope>, so it may be read from any thread. Delivery is a value type.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/envelope.h"

namespace wharf::broker {

using wharf::Envelope;  // common/envelope.h: the store shares it
using wharf::EnvelopePtr;

// A copy of `m` without its body (listings), made without copying the body first.
inline Message MessageWithoutBody(const Message& m) {
  Message out;
  out.id = m.id;
  out.headers = m.headers;
  out.properties = m.properties;
  out.persistent = m.persistent;
  out.published_at_ms = m.published_at_ms;
  out.deaths = m.deaths;
  out.amqp_properties = m.amqp_properties;
  return out;
}

struct Delivery {
  std::string consumer_tag;  // "" for pull deliveries
  uint64_t delivery_tag = 0;
  EnvelopePtr envelope;
  uint32_t receive_count = 0;  // 1 on the first delivery
  bool redelivered = false;
  std::string queue;
  // Attempt accounting (docs/lifecycle.md).
  int64_t first_received_at_ms = 0;
  FailuresPtr failures;   // null: none
  uint32_t lease_ms = 0;  // settle within this, or it is redelivered
  // From a quorum queue (QueuePolicy::delivery_count_header): an AMQP consumer sees the
  // returns before this delivery (receive_count - 1) as x-delivery-count.
  bool delivery_count_header = false;
};

// Bytes a delivery adds to a connection's output, for its cap (server/session_core.h): the whole
// message (Envelope::whole_bytes: headers and properties too, never less than their encoding)
// plus the delivery's own fields.
inline uint64_t OutputBytes(const Delivery& d) {
  return d.envelope->whole_bytes() + d.consumer_tag.size() + d.queue.size() +
         (d.failures ? d.failures->last_error.size() : 0) + 64;
}

}  // namespace wharf::broker
