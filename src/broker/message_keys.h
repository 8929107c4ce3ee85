// broker/message_keys.h
//
// Keys a queue reads from a message's headers: the deduplication key under which a queue with
// a deduplication window (QueuePolicy::dedup_window_ms) records a publish (the publisher's id
// from the x-deduplication-header header, unless the publish carries its own deduplication_id,
// which the broker checks with CheckDedupId; or the SHA-256 of the body when the queue says
// x-deduplication-source "body"; docs/lifecycle.md, "Deduplication"), and the group of a
// message in a queue with message groups (the x-group-id header; docs/lifecycle.md, "Message
// groups").
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "wharf/message.h"
#include "wharf/result.h"

namespace wharf::broker {

// The deduplication key, or "" when the message carries none (no header: the queue takes it
// unchecked): the body's SHA-256 `by_body`; else the publish's own `publish_id` when set
// (CheckDedupId'd), else the header. The header may be a string, bytes or an integer (its
// decimal text), of 1 to store::kMaxDedupKeyBytes bytes; anything else is INVALID_ARGUMENT.
Result<std::string> DedupKeyOf(const Message& message, bool by_body,
                               std::string_view publish_id = {});
// A publish's own deduplication id (native Publish.deduplication_id), which a queue checks
// instead of the header: "" (none) or 1 to store::kMaxDedupKeyBytes bytes of anything, else
// INVALID_ARGUMENT. Checked on every publish that sets one, window or not.
Status CheckDedupId(std::string_view id);

// The message header naming a message's group, and the longest group id (SQS's limit on its
// message group ids).
inline constexpr std::string_view kGroupHeader = "x-group-id";
inline constexpr size_t kMaxGroupKeyBytes = 128;

// The group key, or "" when the message has none (it belongs to no group). The same forms
// and errors as the deduplication header, up to kMaxGroupKeyBytes.
Result<std::string> GroupKeyOf(const Message& message);
// The same without checks or copies, for a message whose header GroupKeyOf accepted: a view
// of the header's bytes, or of `scratch` holding an integer's decimal text; "" when none.
std::string_view GroupKeyView(const Message& message, std::string& scratch);

}  // namespace wharf::broker
