#include "common/envelope.h"

#include <variant>

namespace wharf {
namespace {

uint64_t ValueBytes(const HeaderValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return s->size();
  if (const auto* b = std::get_if<Bytes>(&value)) return b->data.size();
  return std::holds_alternative<bool>(value) ? 1 : 8;
}

// A std::map node: the tree's links and colour, the key and value, and the allocator's own
// header, rounded up.
constexpr uint64_t kHeaderNodeBytes = sizeof(Headers::value_type) + 48;
// The Envelope and the control block of its shared_ptr (make_shared: one allocation).
constexpr uint64_t kEnvelopeFixedBytes = sizeof(Envelope) + 32;

}  // namespace

uint64_t HeaderBytes(const Headers& headers) {
  uint64_t bytes = 0;
  for (const auto& [name, value] : headers) bytes += name.size() + ValueBytes(value);
  return bytes;
}

uint64_t MessageMemoryBytes(const Message& m) {
  uint64_t bytes = m.body.size() + HeaderBytes(m.headers) + m.headers.size() * kHeaderNodeBytes;
  const Properties& p = m.properties;
  bytes += p.message_id.size() + p.correlation_id.size() + p.reply_to.size() +
           p.content_type.size() + p.content_encoding.size() + p.type.size() + p.app_id.size();
  bytes += m.amqp_properties.size();
  for (const Death& d : m.deaths) {
    bytes += sizeof(Death) + d.reason.size() + d.queue.size() + d.exchange.size() +
             d.routing_key.size() + d.last_error.size();
  }
  return bytes;
}

uint64_t Envelope::ComputeBytes() const {
  return kEnvelopeFixedBytes + MessageMemoryBytes(message) + exchange.size() + routing_key.size();
}

EnvelopePtr MakeEnvelope(Envelope envelope) {
  envelope.cached_bytes = envelope.ComputeBytes();
  return std::make_shared<const Envelope>(std::move(envelope));
}

}  // namespace wharf
