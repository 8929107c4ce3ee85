// Redrive: moving a dead-letter queue's messages back to the queues they died in, as a task
// that runs inside the broker within a rate and survives restarts (docs/lifecycle.md,
// "Redrive"). Part of class Broker (broker.h); broker/redrive_task.h describes the walk.
//
// Exactly once: each move removes the message's entry from the dead-letter queue, writes it
// into the target and records the task's new position, all in the flush's one store batch.
// After a crash the task resumes from the position of its last committed batch, and what that
// batch moved is no longer in the dead-letter queue.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>

#include "broker/broker.h"
#include "common/log_safe.h"

namespace wharf::broker {
namespace {

constexpr uint32_t kMaxRedriveRate = 1'000'000;
constexpr uint32_t kRedriveExaminePerStep = 10'000;  // messages looked at per step, at most
constexpr uint32_t kRedriveReadBatch = 1'000;        // paged messages read from the store at once
constexpr double kRedriveSlice = 64;                 // moves a step waits for (at most)
constexpr auto kRateWindow = std::chrono::seconds(5);
constexpr auto kLoadWait = std::chrono::milliseconds(10);  // the queue is loading: look again
constexpr auto kStoreWait = std::chrono::seconds(1);       // the store cannot write
constexpr std::array<std::string_view, 4> kDeathReasons = {"rejected", "max_attempts", "expired",
                                                           "max_length"};

// The token bucket holds a tenth of a second of moves (at least one).
double Burst(uint32_t rate) { return std::max(1.0, rate / 10.0); }
// A step waits until it can move this many (or the bucket is full).
double StepTokens(uint32_t rate) { return std::min(kRedriveSlice, Burst(rate)); }

}  // namespace

Status Broker::StartRedrive(uint64_t session_id, uint64_t request_id, RedriveSpec spec) {
  thread_checker_.Check();
  WHARF_RETURN_IF_ERROR(AuthorizeOperator(session_id, spec.queue, "redrive messages"));
  if (!spec.to.empty()) {
    WHARF_RETURN_IF_ERROR(Authorize(session_id, Permission::kWrite, ResourceKind::kQueue, spec.to));
  } else if (!spec.dry_run) {
    // Each message goes back to the queue it died in, known only message by message.
    WHARF_RETURN_IF_ERROR(AuthorizeTag(session_id, kTagAdministrator,
                                       "redrive messages to the queues they died in (name a "
                                       "target queue you may write to instead)"));
  }
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, spec.queue));
  if (!spec.reason.empty() &&
      std::find(kDeathReasons.begin(), kDeathReasons.end(), spec.reason) == kDeathReasons.end()) {
    return Status(StatusCode::kInvalidArgument,
                  "redrive reason " + Quote(spec.reason) +
                      " is not one of rejected, max_attempts, expired, max_length");
  }
  if (spec.rate == 0) spec.rate = options_.redrive_rate;
  if (spec.rate > kMaxRedriveRate) {
    return Status(StatusCode::kInvalidArgument,
                  "redrive rate " + std::to_string(spec.rate) + " is above the maximum of " +
                      std::to_string(kMaxRedriveRate) + " messages per second");
  }
  if (!spec.to.empty()) {
    WHARF_ASSIGN_OR_RETURN(auto target, FindQueue(session_id, spec.to));
    if (target == queue) {
      return Status(StatusCode::kInvalidArgument,
                    "queue " + Quote(spec.queue) + " cannot be redriven into itself");
    }
    if (target->spec().exclusive) {
      return Status(
          StatusCode::kInvalidArgument,
          "queue " + Quote(spec.to) + " is exclusive to a connection, so it cannot take a redrive");
    }
    if (queue->store_id() != 0 && target->store_id() == 0 && store_) {
      return Status(StatusCode::kInvalidArgument,
                    "queue " + Quote(spec.to) + " is not durable: persistent messages of " +
                        Quote(spec.queue) + " would not survive a restart there");
    }
  }
  if (auto it = redrives_.find(queue->key()); it != redrives_.end() && it->second.running()) {
    const RedriveInfo& running = it->second.info();
    return Status(StatusCode::kPreconditionFailed,
                  "queue " + Quote(spec.queue) + " already has a redrive running (" +
                      std::to_string(running.moved) + " moved so far); cancel it first");
  }
  RedriveTask task;
  task.stored.queue_id = queue->store_id();
  task.queue = queue;
  task.serial = next_redrive_serial_++;
  RedriveInfo& info = task.info();
  info.spec = std::move(spec);
  info.state = RedriveInfo::State::kRunning;
  info.started_at_ms = clock_->WallMillis();
  info.total = queue->ready();
  task.stored.end_seq = queue->next_seq();
  WHARF_RETURN_IF_ERROR(TopologyWritable(task.persisted()));
  RedriveTask& slot = redrives_.insert_or_assign(queue->key(), std::move(task)).first->second;
  const RedriveSpec& s = slot.info().spec;
  spdlog::info(
      "queue={} redrive{} started: to={} reason={} limit={} rate={}/s; {} ready", LogSafe(s.queue),
      s.dry_run ? " (dry run)" : "", s.to.empty() ? "(where each died)" : EscapeForLog(s.to),
      s.reason.empty() ? "(any)" : EscapeForLog(s.reason), s.limit, s.rate, slot.info().total);
  if (slot.persisted()) Persist(store::StoreBatch::PutRedrive{slot.stored});
  // It moves nothing before its record is on disk; if that write fails, it never started.
  slot.confirmed = !slot.persisted() || !store_;
  AnswerRedrive(session_id, request_id, slot,
                [this, serial = slot.serial, key = queue->key()](bool written) {
                  auto it = redrives_.find(key);
                  if (it == redrives_.end() || it->second.serial != serial) return;
                  if (written) {
                    it->second.confirmed = true;
                  } else {
                    redrives_.erase(it);
                  }
                });
  return Status::Ok();
}

Status Broker::CancelRedrive(uint64_t session_id, uint64_t request_id, const std::string& queue) {
  thread_checker_.Check();
  WHARF_RETURN_IF_ERROR(AuthorizeOperator(session_id, queue, "cancel a redrive"));
  WHARF_ASSIGN_OR_RETURN(auto found, FindQueue(session_id, queue));
  const std::string key = found->key();
  auto it = redrives_.find(key);
  if (it == redrives_.end() || !it->second.running()) {
    return Status(StatusCode::kPreconditionFailed,
                  "queue " + Quote(queue) + " has no redrive running");
  }
  RedriveTask& task = it->second;
  WHARF_RETURN_IF_ERROR(TopologyWritable(task.persisted()));
  std::string by = "cancelled";
  if (SessionState* session = FindSession(session_id)) by += " by user " + session->user();
  FinishRedrive(task, RedriveInfo::State::kCancelled, std::move(by));
  AnswerRedrive(session_id, request_id, task, [this, serial = task.serial, key](bool written) {
    auto it = redrives_.find(key);
    if (written || it == redrives_.end() || it->second.serial != serial) return;
    // Not cancelled on disk: not cancelled at all (a restart would resume it). It goes on;
    // the client got the error and may cancel again.
    RedriveInfo& info = it->second.info();
    info.state = RedriveInfo::State::kRunning;
    info.detail.clear();
    info.finished_at_ms = 0;
    it->second.next_step_at = clock_->Now();
  });
  return Status::Ok();
}

Result<std::vector<RedriveInfo>> Broker::RedriveStatus(uint64_t session_id,
                                                       std::string_view queue) {
  WHARF_RETURN_IF_ERROR(AuthorizeTag(session_id, kAnyManagementTag, "see redrives"));
  std::vector<RedriveInfo> out;
  if (!queue.empty()) {
    WHARF_RETURN_IF_ERROR(Authorize(session_id, Permission::kRead, ResourceKind::kQueue, queue));
    WHARF_ASSIGN_OR_RETURN(auto found, FindQueue(session_id, queue));
    if (auto it = redrives_.find(found->key()); it != redrives_.end()) {
      out.push_back(RedriveView(it->second));
    }
    return out;
  }
  const std::string& vhost = VhostOf(session_id);
  for (const auto& [key, task] : redrives_) {
    // The session's vhost only, and not another connection's exclusive queue (named, it
    // would be refused).
    if (VhostOfKey(key) == vhost && FindQueue(session_id, NameOfKey(key)).ok()) {
      out.push_back(RedriveView(task));
    }
  }
  return out;
}

void Broker::AnswerRedrive(uint64_t session_id, uint64_t request_id, const RedriveTask& task,
                           std::function<void(bool written)> settled) {
  auto answer = [this, session_id, request_id, info = RedriveView(task),
                 settled = std::move(settled)](const Status& status) {
    settled(status.ok());
    SessionState* session = FindSession(session_id);
    if (!session) return;
    if (status.ok()) {
      session->peer().RedriveDone(request_id, info);
    } else {
      session->peer().RedriveDone(request_id, status);
    }
    MarkDirty(*session);
  };
  if (!store_ || !task.persisted()) {
    answer(Status::Ok());
    return;
  }
  // Answered once the task's record is written: a crash must not forget a started redrive,
  // nor resume a cancelled one.
  batch_sync_ = true;
  after_commit_.push_back(std::move(answer));
}

RedriveInfo Broker::RedriveView(const RedriveTask& task) const {
  RedriveInfo info = task.info();
  if (!task.running()) return info;
  const uint64_t examined = task.examined();
  uint64_t left = info.total > examined ? info.total - examined : 0;
  // Consumers of the dead-letter queue may have taken some meanwhile.
  if (auto queue = task.queue.lock()) left = std::min(left, queue->ready());
  if (info.spec.limit != 0) left = std::min(left, info.spec.limit - info.moved);
  info.remaining = left;
  if (!task.samples.empty()) {
    auto [since, moved] = task.samples.front();
    double seconds = std::chrono::duration<double>(clock_->Now() - since).count();
    if (seconds > 0) info.rate_per_second = static_cast<double>(info.moved - moved) / seconds;
  }
  return info;
}

std::optional<SteadyTime> Broker::NextRedriveDeadline() const {
  std::optional<SteadyTime> next;
  for (const auto& [name, task] : redrives_) {
    if (!task.running() || task.reading || !task.confirmed) continue;
    if (!next || task.next_step_at < *next) next = task.next_step_at;
  }
  return next;
}

void Broker::RunRedrives() {
  if (redrives_.empty()) return;
  const SteadyTime now = clock_->Now();
  for (auto& [name, task] : redrives_) {
    if (!task.running() || task.reading || !task.confirmed || task.next_step_at > now) continue;
    auto queue = task.queue.lock();
    if (!queue || queue->deleted) {  // not expected: DropQueue removes the task
      FinishRedrive(task, RedriveInfo::State::kFailed, "its queue is gone");
      continue;
    }
    if (task.persisted() && !store_error_.ok()) {
      // Moves could not be written; the walk waits for the store to recover.
      task.next_step_at = now + kStoreWait;
      continue;
    }
    RedriveStep(task, *queue);
  }
}

void Broker::RedriveStep(RedriveTask& task, Queue& queue) {
  const SteadyTime now = clock_->Now();
  const uint32_t rate = task.info().spec.rate;
  if (!task.started) {
    task.started = true;
    task.tokens = StepTokens(rate);  // the first moves go at once
  } else {
    double seconds = std::chrono::duration<double>(now - task.refilled_at).count();
    task.tokens = std::min(Burst(rate), task.tokens + seconds * rate);
  }
  task.refilled_at = now;
  const uint64_t cursor_before = task.stored.cursor_seq;
  const uint64_t end = task.stored.end_seq;
  std::optional<SteadyTime> next;  // nullopt: waiting for tokens
  for (uint32_t looked = 0;; ++looked) {
    if (!task.running()) break;  // the limit was reached
    if (looked == kRedriveExaminePerStep) {
      next = now;
      break;
    }
    // Lane by lane (one unless the queue has priorities). In each, the messages in RAM come
    // first: they all precede the paged ones.
    const uint64_t cursor = task.stored.cursor_seq;
    if (const QueuedMessage* m = queue.NextReadyInLane(cursor); m && m->seq < end) {
      if (!RedriveOne(task, queue, *m, /*paged=*/false)) break;
      continue;
    }
    // The lane is done: on to the next, or the walk is.
    auto next_lane = [&] {
      task.read_ahead.clear();
      task.read_to_end = false;
      std::optional<uint64_t> next = queue.NextLaneStart(cursor);
      if (!next || *next >= end) {
        task.stored.cursor_seq = std::max(cursor, end);
        FinishRedrive(task, RedriveInfo::State::kFinished, "");
        return false;
      }
      task.stored.cursor_seq = *next;
      return true;
    };
    if (queue.PagedInLane(cursor) == 0 || cursor >= end) {
      if (next_lane()) continue;
      break;
    }
    if (queue.loading()) {  // what it brings to RAM would be read twice
      next = now + kLoadWait;
      break;
    }
    if (task.read_generation != queue.load_generation) {  // purged since the read
      task.read_ahead.clear();
      task.read_to_end = false;
    }
    if (task.read_ahead.empty()) {
      if (task.read_to_end) {
        if (next_lane()) continue;
      } else {
        ReadRedrive(task, queue);
      }
      break;
    }
    store::LoadedMessage& front = task.read_ahead.front();
    const uint64_t seq = front.seq;
    const bool usable = front.envelope != nullptr && !((front.flags & store::kEntryTransient) &&
                                                       front.message_id < run_start_id_);
    if (seq < task.stored.cursor_seq || !queue.IsPaged(seq) || !usable) {
      // Looked at already; or no longer paged (a consumer has it: nothing in RAM precedes
      // it, or it would have come first); or one the next load drops (no body, or not
      // persistent from before the restart).
      task.stored.cursor_seq = std::max(task.stored.cursor_seq, seq + 1);
      task.read_ahead.pop_front();
      continue;
    }
    // Off the deque before it is looked at: reaching the limit finishes the task, which
    // clears read_ahead.
    store::LoadedMessage entry = std::move(front);
    task.read_ahead.pop_front();
    QueuedMessage message{entry.envelope, seq,         entry.receive_count,
                          true,           entry.flags, entry.first_received_at_ms,
                          entry.failures};
    if (!RedriveOne(task, queue, message, /*paged=*/true)) {
      task.read_ahead.push_front(std::move(entry));  // no token: its turn comes next step
      break;
    }
  }
  if (task.running() && !task.reading) {
    if (!next) {
      double missing = std::max(0.0, StepTokens(rate) - task.tokens);
      // Rounded up: a wait rounded down would wake to find the token not quite there.
      next = now +
             std::chrono::ceil<SteadyTime::duration>(std::chrono::duration<double>(missing / rate));
    }
    task.next_step_at = *next;
  }
  if (task.samples.empty() || task.samples.back().second != task.info().moved) {
    task.samples.emplace_back(now, task.info().moved);
  }
  while (task.samples.size() > 1 && now - task.samples.front().first > kRateWindow) {
    task.samples.pop_front();
  }
  if (task.running() && task.persisted() && task.stored.cursor_seq != cursor_before) {
    Persist(store::StoreBatch::PutRedrive{task.stored});
  }
}

bool Broker::RedriveOne(RedriveTask& task, Queue& queue, const QueuedMessage& message, bool paged) {
  RedriveInfo& info = task.info();
  const RedriveSpec& spec = info.spec;
  const Message& m = message.envelope->message;
  const uint64_t seq = message.seq;
  auto skip = [&](uint64_t* counter) {
    ++*counter;
    task.stored.cursor_seq = seq + 1;
    return true;
  };
  if (spec.message_id != 0 && m.id != spec.message_id) return skip(&info.skipped_not_matching);
  if (!spec.reason.empty() && (m.deaths.empty() || m.deaths[0].reason != spec.reason)) {
    return skip(&info.skipped_not_matching);
  }
  // deaths[0] is the latest: the queue the message last died in.
  const std::string& name = !spec.to.empty()   ? spec.to
                            : m.deaths.empty() ? std::string()
                                               : m.deaths[0].queue;
  if (name.empty()) return skip(&info.skipped_not_matching);  // never dead-lettered
  // In the dead-letter queue's vhost, where the message died.
  auto it = queues_.find(ResourceKey(queue.vhost(), name));
  if (it == queues_.end() || it->second.get() == &queue || it->second->spec().exclusive) {
    return skip(&info.skipped_no_target);
  }
  Queue& target = *it->second;
  // A persistent message on disk would live in RAM only there: a crash would lose it.
  if (message.stored && m.persistent && target.store_id() == 0 && store_) {
    return skip(&info.skipped_no_target);
  }
  if (target.policy().overflow != QueuePolicy::Overflow::kDropHead &&
      WouldOverflow(target, m.body.size())) {
    return skip(&info.skipped_target_full);
  }
  if (!spec.dry_run) {
    if (task.tokens < 1) return false;
    task.tokens -= 1;
    EnvelopePtr envelope = message.envelope;
    QueuedMessage taken;
    if (paged) {
      queue.TakePaged(seq, m.body.size());
      taken = message;
    } else {
      auto from_ram = queue.Take(seq);  // `message` points into the queue: copied first
      taken = std::move(*from_ram);
    }
    // Out of the dead-letter queue and into the target in this flush's batch, with the
    // task's position (RedriveStep): the move is atomic on disk.
    Unstore(queue, taken);
    // Counters start over in the target (EnqueueMoved); the death records stay.
    EnqueueMoved(target, envelope);
    spdlog::debug("queue={} message={} redriven to queue={}", LogSafe(queue.name()),
                  envelope->message.id, LogSafe(name));
  }
  ++info.moved;
  task.CountTarget(name);
  task.stored.cursor_seq = seq + 1;
  if (spec.limit != 0 && info.moved >= spec.limit) {
    FinishRedrive(task, RedriveInfo::State::kFinished, "limit reached");
  }
  return true;
}

void Broker::ReadRedrive(RedriveTask& task, const Queue& queue) {
  task.reading = true;
  const uint64_t cursor = task.stored.cursor_seq;
  const uint64_t from = std::max(cursor, queue.LoadFromSeq(cursor));
  const uint64_t to = std::min(task.stored.end_seq, store::LaneEndSeq(store::SeqLane(cursor)));
  const uint64_t store_id = queue.store_id();
  const uint64_t generation = queue.load_generation;
  // Issued after this flush's commit, so it sees the moves made so far.
  pending_reads_.push_back(
      [this, name = queue.key(), serial = task.serial, generation, store_id, from, to] {
        ++loads_in_flight_;
        store_->Load(
            store_id, from, to, kRedriveReadBatch, LoadBytes(),
            [this, name, serial, generation](Result<std::vector<store::LoadedMessage>> loaded) {
              --loads_in_flight_;
              OnRedriveRead(name, serial, generation, std::move(loaded));
            });
      });
}

void Broker::OnRedriveRead(const std::string& queue_key, uint64_t serial, uint64_t generation,
                           Result<std::vector<store::LoadedMessage>> loaded) {
  thread_checker_.Check();
  auto it = redrives_.find(queue_key);
  if (it == redrives_.end() || it->second.serial != serial) return;  // deleted, or replaced
  RedriveTask& task = it->second;
  task.reading = false;
  auto queue = task.queue.lock();
  if (!task.running() || !queue || queue->deleted) return;
  const SteadyTime now = clock_->Now();
  if (!loaded.ok()) {
    spdlog::error("queue={} redrive cannot read the queue (retrying in 1 s): {}",
                  LogSafe(queue->name()), LogSafe(loaded.status().ToString(), kLogSafeStatusBytes));
    task.next_step_at = now + kStoreWait;
    return;
  }
  task.next_step_at = now;
  if (queue->load_generation != generation) return;  // purged meanwhile: read again
  uint64_t bytes = 0;
  for (store::LoadedMessage& m : *loaded) {
    if (m.envelope) bytes += m.envelope->whole_bytes();  // as the store counts
    if (m.seq >= task.stored.cursor_seq) task.read_ahead.push_back(std::move(m));
  }
  task.read_to_end = loaded->size() < kRedriveReadBatch && bytes < LoadBytes();
  task.read_generation = generation;
}

void Broker::FinishRedrive(RedriveTask& task, RedriveInfo::State state, std::string detail) {
  RedriveInfo& info = task.info();
  info.state = state;
  info.detail = std::move(detail);
  info.finished_at_ms = clock_->WallMillis();
  task.read_ahead.clear();
  if (task.persisted()) Persist(store::StoreBatch::PutRedrive{task.stored});
  spdlog::info(
      "queue={} redrive{} {}{}{}: {} {}, left {} not matching, {} without a target queue, {} "
      "for full targets",
      LogSafe(info.spec.queue), info.spec.dry_run ? " (dry run)" : "", RedriveStateName(state),
      info.detail.empty() ? "" : ", ", LogSafe(info.detail, kLogSafeStatusBytes),
      info.spec.dry_run ? "would move" : "moved", info.moved, info.skipped_not_matching,
      info.skipped_no_target, info.skipped_target_full);
}

}  // namespace wharf::broker
