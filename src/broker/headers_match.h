// broker/headers_match.h
//
// Matching for headers exchanges, with RabbitMQ's semantics. A binding's arguments are a match
// table plus an optional "x-match" of "all" (the default: every entry must be present with an
// equal value) or "any" (at least one must); keys starting with "x-" are not matched, except
// with "all-with-x" and "any-with-x" (RabbitMQ 3.10), which match them too (x-match itself
// never). Values compare by kind and value: integers of every width are one kind, text as a
// string or as bytes is one kind (RabbitMQ compares the binaries), so the integer 1 does not
// equal the string "1". With an empty table, "all" matches every message and "any" none.
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include "wharf/message.h"
#include "wharf/status.h"

namespace wharf::broker {

enum class HeadersMatchMode { kAll, kAny, kAllWithX, kAnyWithX };

// Reads "x-match" from binding arguments. kInvalidArgument for any other value.
Status ParseHeadersMatchMode(const Headers& binding_arguments, HeadersMatchMode* mode);

// RabbitMQ's equality of two argument or header values: text (a string or bytes; AMQP's S
// and x) equals text of the same bytes; anything else by type and value (integers of every
// width are one kind already). Headers matching and queue-argument equivalence use it.
bool SameValue(const HeaderValue& a, const HeaderValue& b);

bool HeadersMatch(const Headers& binding_arguments, HeadersMatchMode mode,
                  const Headers& message_headers);

}  // namespace wharf::broker
