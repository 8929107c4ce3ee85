// json/message.h: a message as every Wharf document shows it, wharfctl's (consume, get, peek)
// and the HTTP API's (peek) alike: the same keys in each, null where a value is not known there
// (a peeked message has no delivery, a consumed one no position); the body as "payload" in its
// "payload_encoding" (json/values.h).
//
// Thread safety: plain functions on values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "json/values.h"
#include "wharf/client.h"
#include "wharf/message.h"
#include "wharf/types.h"

namespace wharf::json {

Json DeathJson(const Death& death);
Json PropertiesJson(const Message& message);

Json DeliveryJson(const Delivery& d);
Json PeekedJson(const std::string& queue, const PeekedMessage& m, bool with_body);

// A delayed message, waiting for its time (docs/scheduler.md).
Json DelayedJson(const DelayedInfo& m);

// A message id as Wharf prints it: 16 hex digits.
std::string HexId(uint64_t id);
// And back: up to 16 hex digits, with or without 0x; nullopt for anything else.
std::optional<uint64_t> ParseMessageId(std::string text);

}  // namespace wharf::json
