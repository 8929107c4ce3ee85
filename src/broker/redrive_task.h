// broker/redrive_task.h
//
// RedriveTask is one dead-letter queue's redrive as the broker runs it (docs/lifecycle.md,
// "Redrive"): the stored state (what was asked, what was done, where the walk is) plus what
// only this run needs (the rate's token bucket, messages read ahead from the store, the
// measured rate).
//
// The walk goes through the queue's ready messages in sequence order, from `cursor_seq` up to
// `end_seq` (the queue's next sequence number when the task started). Those in RAM are
// looked at where they are; those paged to disk are read from the store in batches and kept
// in `read_ahead` until their turn. A message read ahead is used only after checking that the
// queue still has it paged: a load of the queue may have brought it to RAM since (then the RAM
// copy is used) or a consumer may have taken it (then it is passed over).
//
// Thread safety: owned by the broker thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "broker/queue.h"
#include "common/clock.h"
#include "store/message_store.h"
#include "wharf/types.h"

namespace wharf::broker {

struct RedriveTask {
  store::StoredRedrive stored;  // queue_id 0: the queue is not durable (nothing is stored)
  std::weak_ptr<Queue> queue;
  uint64_t serial = 0;  // tells this task from a later one of the same queue (store reads)

  bool persisted() const { return stored.queue_id != 0 && !stored.info.spec.dry_run; }
  bool running() const { return stored.info.state == RedriveInfo::State::kRunning; }
  RedriveInfo& info() { return stored.info; }
  const RedriveInfo& info() const { return stored.info; }
  uint64_t examined() const {
    const RedriveInfo& i = stored.info;
    return i.moved + i.skipped_not_matching + i.skipped_no_target + i.skipped_target_full;
  }

  // The rate's token bucket: one token per message moved.
  double tokens = 0;
  SteadyTime refilled_at{};
  bool started = false;  // refilled_at is set
  // Its start is on disk (or need not be): only then does it move anything.
  bool confirmed = true;
  SteadyTime next_step_at{};  // when RunRedrives looks at it next (unless reading)

  // Paged messages read from the store, in sequence order, not yet looked at.
  std::deque<store::LoadedMessage> read_ahead;
  bool reading = false;          // a store read is in flight
  bool read_to_end = false;      // the store has no entry of the walk past read_ahead
  uint64_t read_generation = 0;  // the queue's load_generation when read_ahead was read

  // (when, moved) at each step that moved messages, for the measured rate.
  std::deque<std::pair<SteadyTime, uint64_t>> samples;

  void CountTarget(const std::string& name) {
    auto& targets = stored.info.targets;
    auto it = std::find_if(targets.begin(), targets.end(),
                           [&](const RedriveTargetCount& t) { return t.queue == name; });
    if (it != targets.end()) {
      ++it->messages;
    } else {
      targets.push_back(RedriveTargetCount{name, 1});
    }
  }
};

}  // namespace wharf::broker
