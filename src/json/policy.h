// json/policy.h: policies (docs/policies.md) as JSON in RabbitMQ's shape, the one its HTTP API
// and definitions files use: {"vhost", "name", "pattern", "apply-to", "definition",
// "priority"}. For wharfctl, wharfd's HTTP API and definitions alike.
//
// Thread safety: plain functions on values.
#pragma once

#include "json/values.h"
#include "wharf/status.h"
#include "wharf/types.h"

namespace wharf::json {

Json PolicyJson(const PolicyInfo& policy);
// A definition's values as plain JSON (numbers, strings, booleans).
Json DefinitionJson(const Headers& definition);

// Reads a policy as RabbitMQ's HTTP API (PUT /api/policies/vhost/name) and definitions files
// give it: "pattern" and "definition" (an object) required; "apply-to" ("all" when absent) and
// "priority" (0) optional; "vhost" and "name" read when present (a definitions file), else left
// as they are in `out`. kInvalidArgument naming what is wrong; what the values mean is the
// broker's to check (broker::ValidatePolicy).
Status PolicyFromJson(const Json& object, PolicyInfo* out);
// A definition object: numbers, strings and booleans; an array or object (ha-params' list of
// nodes) is kept as its JSON text in a Bytes value, which DefinitionJson writes back as JSON and
// which no key Wharf applies takes.
Result<Headers> DefinitionFromJson(const Json& object);

}  // namespace wharf::json
