// json/redrive.cc: a redrive as every Wharf document shows it (json/redrive.h).
#include "json/redrive.h"

#include "json/message.h"

namespace wharf::json {

Json RedriveJson(const RedriveInfo& r) {
  Json targets = Json::object();
  for (const RedriveTargetCount& t : r.targets) targets[t.queue] = t.messages;
  return Json{{"queue", r.spec.queue},
              {"to", OrNull(r.spec.to)},
              {"reason", OrNull(r.spec.reason)},
              {"limit", OrNull(r.spec.limit)},
              {"rate", r.spec.rate},
              {"dry_run", r.spec.dry_run},
              {"message_id", r.spec.message_id ? Json(HexId(r.spec.message_id)) : Json()},
              {"state", std::string(RedriveStateName(r.state))},
              {"detail", OrNull(r.detail)},
              {"started_at_ms", OrNull(r.started_at_ms)},
              {"finished_at_ms", OrNull(r.finished_at_ms)},
              {"total", r.total},
              {"moved", r.moved},
              {"remaining", r.remaining},
              {"skipped_not_matching", r.skipped_not_matching},
              {"skipped_no_target", r.skipped_no_target},
              {"skipped_target_full", r.skipped_target_full},
              {"rate_per_second", r.rate_per_second},
              {"targets", targets}};
}

}  // namespace wharf::json
