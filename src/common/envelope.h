// common/envelope.h
//
// Envelope is an accepted message plus how it arrived (exchange and routing key). One Envelope
// is shared by every queue the message was routed to, by every delivery of it and by the store
// writing it, so it lives here rather than in broker/ or store/.
//
// Thread safety: immutable once published and shared as std::shared_ptr<const Envelope>, so it
// may be read from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "wharf/message.h"

namespace wharf {

struct Envelope {
  Message message;
  std::string exchange;
  std::string routing_key;
};
using EnvelopePtr = std::shared_ptr<const Envelope>;

// A message's failures in one queue (docs/lifecycle.md has what counts): kept per queue entry,
// shared by the broker and the store, replaced (never changed) at each new failure.
struct Failures {
  uint32_t count = 0;             // nacks, rejects and lease expiries
  int64_t last_failed_at_ms = 0;  // Unix ms
  std::string last_error;         // as the consumer gave it (at most 1 KiB), or the broker's
};
using FailuresPtr = std::shared_ptr<const Failures>;

}  // namespace wharf
