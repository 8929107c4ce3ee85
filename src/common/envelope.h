// common/envelope.h
//
// Envelope is an accepted message plus how it arrived (exchange and routing key). One Envelope
// is shared by every queue the message was routed to, by every delivery of it and by the store
// writing it, so it lives here rather than in broker/ or store/.
//
// A message's size (docs/architecture.md, "Memory"): one figure, the whole message (body,
// headers, properties, AMQP property bytes, deaths, exchange and routing key) as it sits in RAM,
// worked out once when the envelope is made (MakeEnvelope) and used wherever memory is bounded:
// paging, loads from the store, the delay timeline, a connection's output cap.
// x-max-length-bytes alone counts bodies only, as RabbitMQ does.
//
// Thread safety: immutable once published and shared as std::shared_ptr<const Envelope>, so it
// may be read from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "wharf/message.h"

namespace wharf {

// Bytes of a message's header names and values (what max_message_bytes counts besides the
// body): a string or bytes value its length, a number 8, a bool 1. Message::amqp_properties
// is not counted there: an AMQP publisher's headers table is in those bytes and what the broker
// needs of it is decoded into `headers` too (counted here), and the property bytes as a whole
// are bounded by the connection's negotiated frame size (a content header is one frame).
uint64_t HeaderBytes(const Headers& headers);
// What `message` takes in RAM, about: its body, headers (each with the map node that holds it),
// properties, AMQP property bytes and deaths, plus the fixed part. Always more than its encoded
// size on the wire.
uint64_t MessageMemoryBytes(const Message& message);

struct Envelope {
  Message message;
  std::string exchange;
  std::string routing_key;
  // MessageMemoryBytes plus the exchange, routing key and the shared pointer's block: set by
  // MakeEnvelope; 0 in an envelope built by hand, where whole_bytes() works it out each time.
  uint64_t cached_bytes = 0;

  // The whole message's size in RAM: what every memory bound counts.
  uint64_t whole_bytes() const { return cached_bytes != 0 ? cached_bytes : ComputeBytes(); }
  uint64_t ComputeBytes() const;
};
using EnvelopePtr = std::shared_ptr<const Envelope>;

// Shares `envelope` with its size worked out once (Envelope::cached_bytes).
EnvelopePtr MakeEnvelope(Envelope envelope);

// A message's failures in one queue (docs/lifecycle.md has what counts): kept per queue entry,
// shared by the broker and the store, replaced (never changed) at each new failure.
struct Failures {
  uint32_t count = 0;             // nacks, rejects and lease expiries
  int64_t last_failed_at_ms = 0;  // Unix ms
  std::string last_error;         // as the consumer gave it (at most 1 KiB), or the broker's
};
using FailuresPtr = std::shared_ptr<const Failures>;

}  // namespace wharf
