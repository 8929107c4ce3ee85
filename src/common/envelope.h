// common/envelope.h
//
// Envelope is an accepted message plus how it arrived (exchange and routing key). One Envelope
// is shared by every queue the message was routed to, by every delivery of it and by the store
// writing it, so it lives here rather than in broker/ or store/.
//
// Thread safety: immutable once published and shared as std::shared_ptr<const Envelope>, so it
// may be read from any thread.
#pragma once

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

}  // namespace wharf
