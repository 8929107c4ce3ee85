// json/redrive.h: a redrive (a dead-letter queue's messages moved back, docs/lifecycle.md) as
// every Wharf document shows it: `wharfctl redrive --json` and the HTTP API's redrive.
//
// Thread safety: plain functions on values.
#pragma once

#include "json/values.h"
#include "wharf/types.h"

namespace wharf::json {

Json RedriveJson(const RedriveInfo& r);

}  // namespace wharf::json
