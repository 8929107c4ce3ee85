// amqp/message_map.h
//
// Between AMQP's basic properties and Wharf's message model (include/wharf/message.h).
//
// An AMQP message travels through the broker with its raw properties (Message::amqp_properties),
// so AMQP consumers get them back as sent. ToWharfMessage fills the lossy view of them that the
// broker and native consumers see:
//   properties: content_type, content_encoding, correlation_id, reply_to, message_id, type,
//     app_id as they are (absent -> empty); timestamp_ms = timestamp * 1000, saturating at
//     INT64_MAX; priority; expiration_ms from a valid expiration (ParseExpiration), else 0.
//     Note AMQP's expiration "0" (expire unless deliverable at once) becomes 0, which is
//     Wharf's "never": the broker handles that case itself.
//   persistent = delivery_mode == 2.
//   headers, from the AMQP headers table: t -> bool; every integer letter -> int64_t (a u64
//     above INT64_MAX -> double); f, d -> double; D -> double (value / 10^scale); S ->
//     std::string when valid UTF-8, else Bytes; x -> Bytes; T -> int64_t seconds (above
//     INT64_MAX -> double). F (tables), A (arrays) and V (void) have no Wharf form and are
//     left out of the view, and so are keys that are not valid UTF-8 (Wharf's header names
//     are text). With duplicate keys the first wins. user-id and cluster-id are not in the
//     view.
//
// FromWharfMessage is the reverse, what an AMQP consumer sees of a message published natively
// (no raw AMQP properties): each non-empty string property; delivery_mode 2 when persistent
// (absent otherwise); timestamp = timestamp_ms / 1000 when positive; priority when not 0
// (above 255 -> 255); expiration as the decimal of expiration_ms when not 0; headers, in key
// order, int64_t -> 'l', double -> 'd', bool -> 't', std::string -> 'S', Bytes -> 'x'; and
// the message's deaths as x-death (SetDeathHeaders). No headers at all -> no headers table.
//
// SetDeathHeaders renders Wharf's death records as RabbitMQ's (amqp.md 1.3.18), replacing any
// x-death and x-first-death-* the publisher sent: x-death is an array (A) of tables (F), one
// per death, newest first as Message::deaths already is, each holding in this order
//   queue S, reason S, count l, time T (last_at_ms / 1000), exchange S, routing-keys A of S
// (reasons as Wharf names them, except max_length -> "maxlen" and max_attempts ->
// "delivery_limit", RabbitMQ's words), and in the oldest death's table (the last one) the
// message's expiration as original-expiration S when given (the first dead-lettering took it
// off the message); and x-first-death-reason, -queue, -exchange (S) from the oldest death. No
// deaths: the headers are left as they are.
//
// ParseExpiration reads the expiration property as RabbitMQ does (rabbit_basic:
// parse_expiration, Erlang's string:to_integer): an optional sign and decimal digits, nothing
// else; a negative value is refused (-0 is 0), and so is one above kMaxExpirationMs
// (rabbit_misc:check_expiry). Errors are StatusCode::kPreconditionFailed with RabbitMQ's text,
// the reply being "PRECONDITION_FAILED - " + it: "invalid expiration 'abc': no_integer",
// "invalid expiration '5s': {leftover_string,\"s\"}", "invalid expiration '-5':
// {value_negative,-5}", "invalid expiration '4294967296': {value_too_large,4294967296}" (a
// reason that would pass column 80 broken over two lines, as Erlang's ~p prints it).
//
// SetReplyTo changes a message's reply-to, in its raw AMQP properties (decoded and encoded
// again; made from the native model when it has none) and in its view: direct reply-to's
// rewrite of "amq.rabbitmq.reply-to" into the publisher's reply address.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/field_table.h"
#include "amqp/properties.h"
#include "wharf/message.h"
#include "wharf/result.h"

namespace wharf::amqp {

void ToWharfMessage(const BasicProperties& p, Message* m);

BasicProperties FromWharfMessage(const Message& m);

void SetDeathHeaders(const std::vector<Death>& deaths, FieldTable* headers,
                     const std::optional<std::string>& original_expiration = std::nullopt);

inline constexpr uint64_t kMaxExpirationMs = 4'294'967'295;
Result<uint64_t> ParseExpiration(std::string_view text);

void SetReplyTo(std::string reply_to, Message* m);

// The headers view alone (as ToWharfMessage makes it).
Headers ToWharfHeaders(const FieldTable& table);

}  // namespace wharf::amqp
