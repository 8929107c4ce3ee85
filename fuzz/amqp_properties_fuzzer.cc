// fuzz/amqp_properties_fuzzer.cc
//
// A content header's properties as basic.publish brings them: amqp::DecodeProperties, then
// what the broker makes of them (ToWharfMessage: delivery mode, priority, expiration, headers,
// user-id), what it sends a consumer back (FromWharfMessage), what it stores (the store's
// MessageRecord) and what a native consumer gets. Checked besides "no crash": decoded
// properties encode to bytes that decode and encode to the same bytes again; a message's
// properties survive the way through Wharf's model and back to AMQP twice alike; the store
// record and the native message parse back (regression: properties that were not UTF-8 made
// records protobuf refused to parse, so confirmed messages were lost at the next load).
#include <cstdint>
#include <string>
#include <string_view>

#include "amqp/message_map.h"
#include "amqp/properties.h"
#include "amqp_checks.h"
#include "common/envelope.h"
#include "fuzz_check.h"
#include "protocol/codec.h"
#include "quiet_protobuf.h"
#include "store/records.h"
#include "wharf/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using wharf::fuzz::Check;
  namespace amqp = wharf::amqp;
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  amqp::BasicProperties properties;
  if (!amqp::DecodeProperties(raw, &properties).ok()) return 0;
  wharf::fuzz::CheckPropertiesEncoding(properties);

  if (properties.expiration) (void)amqp::ParseExpiration(*properties.expiration);
  wharf::Message message;
  amqp::ToWharfMessage(properties, &message);
  const amqp::BasicProperties out = amqp::FromWharfMessage(message);
  std::string out_bytes;
  amqp::EncodeProperties(out, &out_bytes);
  wharf::Message message2;
  amqp::ToWharfMessage(out, &message2);
  std::string out_bytes2;
  amqp::EncodeProperties(amqp::FromWharfMessage(message2), &out_bytes2);
  Check(out_bytes == out_bytes2, "properties through Wharf's model and back are stable");

  // The message as the broker keeps and hands it on: a store record, and a native delivery.
  // Each must parse back, whatever bytes the publisher put in its properties (a record that
  // does not parse is a confirmed message lost at the next load).
  wharf::Envelope envelope;
  envelope.message = message;
  envelope.message.amqp_properties = std::string(raw);
  envelope.routing_key = properties.message_id.value_or("");
  wharf::storage::v1::MessageRecord record;
  wharf::store::ToRecord(envelope, &record);
  wharf::storage::v1::MessageRecord record_again;
  Check(record_again.ParseFromString(record.SerializeAsString()),
        "a message's store record parses back");
  Check(wharf::store::FromRecord(std::move(record_again)).ok(), "a stored message reads back");
  wharf::wire::v1::Message wire;
  wharf::protocol::ToWire(message, &wire);
  wharf::wire::v1::Message wire_again;
  Check(wire_again.ParseFromString(wire.SerializeAsString()),
        "a message sent to a native consumer parses");
  return 0;
}
