// broker/headers_match.h
//
// Matching for headers exchanges, with AMQP semantics. A binding's arguments are a match table
// plus an optional "x-match" of "all" (the default: every entry must be present with an equal
// value) or "any" (at least one must). Keys starting with "x-" are not matched. Values compare
// by type and value, so the integer 1 does not equal the string "1". With an empty table, "all"
// matches every message and "any" matches none.
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include "wharf/message.h"
#include "wharf/status.h"

namespace wharf::broker {

enum class HeadersMatchMode { kAll, kAny };

// Reads "x-match" from binding arguments. kInvalidArgument for any value but "all" or "any".
Status ParseHeadersMatchMode(const Headers& binding_arguments, HeadersMatchMode* mode);

bool HeadersMatch(const Headers& binding_arguments, HeadersMatchMode mode,
                  const Headers& message_headers);

}  // namespace wharf::broker
