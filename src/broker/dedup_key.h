// broker/dedup_key.h
//
// The key under which a queue with a deduplication window (QueuePolicy::dedup_window_ms)
// records a publish: the publisher's id from the x-deduplication-header message header, or the
// SHA-256 of the body when the queue says x-deduplication-source "body" (docs/lifecycle.md,
// "Deduplication").
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "wharf/message.h"
#include "wharf/result.h"

namespace wharf::broker {

// The key, or "" when the message carries none (no header: the queue takes it unchecked). The
// header may be a string, bytes or an integer (its decimal text), of 1 to
// store::kMaxDedupKeyBytes bytes; anything else is INVALID_ARGUMENT.
Result<std::string> DedupKeyOf(const Message& message, bool by_body);

}  // namespace wharf::broker
