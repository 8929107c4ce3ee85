// The broker's side of durability: recovery from the store, the commit of each flush's
// StoreBatch and its confirms, loading paged messages, and the store's failure state
// (docs/storage.md). Part of class Broker (broker.h); split from broker.cc by concern.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "broker/broker.h"
#include "common/log_safe.h"

namespace wharf::broker {

std::shared_ptr<Queue> Broker::FindQueueByStoreId(uint64_t store_id) const {
  for (const auto& [name, queue] : queues_) {
    if (queue->store_id() == store_id) return queue;
  }
  return nullptr;
}

Status Broker::Recover(const store::RecoveredState& state) {
  thread_checker_.Check();
  replaying_ = true;
  next_queue_id_ = std::max(next_queue_id_, state.next_queue_id);
  next_message_id_ = std::max(next_message_id_, state.max_message_id + 1);
  for (const store::StoredVhost& vhost : state.vhosts) {
    if (auto it = vhosts_.find(vhost.name); it != vhosts_.end()) {  // "/" with limits
      it->second.description = vhost.description;
      it->second.limits = vhost.limits;
      continue;
    }
    vhosts_.emplace(vhost.name, VhostState{vhost.description, vhost.limits, 0});
    AddBuiltinExchanges(vhost.name);
  }
  // Whatever is stored is kept: a resource of a vhost without a record (not expected: a
  // vhost's deletion removes its resources in the same write) brings its vhost back.
  auto ensure_vhost = [&](const std::string& name) {
    if (HasVhost(name)) return;
    spdlog::warn("recovery: vhost {} has resources but no record; made again", LogSafe(name));
    vhosts_.emplace(name, VhostState{});
    AddBuiltinExchanges(name);
  };
  for (const PolicyInfo& policy : state.policies) {
    // Checked when set; a build that knows fewer keys keeps the policy as it is and applies
    // what it knows.
    if (Status s = ValidatePolicy(policy); !s.ok()) {
      spdlog::warn("recovery: vhost={} policy={}: {}", LogSafe(policy.vhost), LogSafe(policy.name),
                   LogSafe(s.message(), kLogSafeStatusBytes));
    }
    ensure_vhost(policy.vhost);
    if (!policies_.Put(policy)) {
      spdlog::error(
          "recovery: vhost={} policy={} has a pattern that does not compile; "
          "it does not apply",
          LogSafe(policy.vhost), LogSafe(policy.name));
    }
  }
  for (const ExchangeSpec& spec : state.exchanges) {
    auto exchange = std::make_unique<Exchange>(spec);
    ensure_vhost(exchange->vhost());
    std::string key = ResourceKey(exchange->vhost(), spec.name);
    if (!exchanges_.contains(key)) exchanges_.emplace(std::move(key), std::move(exchange));
  }
  uint64_t messages = 0;
  for (const store::StoredQueue& stored : state.queues) {
    // Lenient rules take everything either protocol's rules accepted (an AMQP session's queue
    // may hold arguments Wharf does not know, or limits of 0); unknown arguments are ignored.
    auto policy = ParseQueuePolicy(stored.spec.arguments, QueueRules::kLenient);
    if (!policy.ok() && stored.spec.arguments.contains("x-expires")) {
      // Builds before x-expires kept any value of it for AMQP sessions, unread: such a value
      // (0, a string) costs the queue its expiry only, not its other arguments.
      Headers without = stored.spec.arguments;
      without.erase("x-expires");
      if (auto retry = ParseQueuePolicy(without, QueueRules::kLenient); retry.ok()) {
        spdlog::warn("recovery: queue={} arguments: {}; the queue does not expire",
                     LogSafe(stored.spec.name),
                     LogSafe(policy.status().ToString(), kLogSafeStatusBytes));
        policy = std::move(retry);
      }
    }
    if (!policy.ok()) {
      // Written by a build that took other values: keep the queue with default policy.
      spdlog::warn("recovery: queue={} arguments: {}; using the defaults",
                   LogSafe(stored.spec.name),
                   LogSafe(policy.status().ToString(), kLogSafeStatusBytes));
      policy = QueuePolicy{};
    }
    auto queue =
        std::make_shared<Queue>(stored.spec, 0, stored.queue_id, options_.delay_limits, *policy);
    for (const store::StoredLane& lane : stored.lanes) {
      queue->Restore(lane.lane, lane.first_seq, lane.next_seq, lane.estimated_messages());
      if (lane.delivered_through != 0) {
        queue->NoteDelivered(lane.delivered_through);
        // New messages must come after the delivery mark, or they would count as delivered.
        queue->EnsureNextSeqAbove(lane.delivered_through);
      }
      if (lane.first_seq != 0) ++counts_in_flight_;  // one count per lane with entries
    }
    queue->TakeDeliveredMarks();  // as they are on disk
    messages += stored.estimated_messages();
    ensure_vhost(queue->vhost());
    ++vhosts_[queue->vhost()].queues;
    queues_.emplace(queue->key(), queue);
    ApplyPolicy(queue);
    TouchQueue(*queue);  // x-expires counts from the recovery, as in RabbitMQ
    if (queue->paged() > 0) ScheduleDispatch(queue);  // loads the head
    if (stored.has_delayed) {
      queue->delayed().RestoreFromDisk();
      UpdateDelayHead(queue);  // loads the timeline's head
      ++counts_in_flight_;
    }
  }
  if (policies_.size() > 0) {
    for (auto& [key, exchange] : exchanges_) ApplyPolicy(*exchange);
  }
  uint64_t skipped = 0;
  for (const BindingSpec& binding : state.bindings) {
    Status s = BindIn(0, binding.vhost.empty() ? std::string(kDefaultVhost) : binding.vhost,
                      binding, /*bind=*/true);
    if (!s.ok()) {
      ++skipped;
      spdlog::warn("recovery: skipped binding {} -> {}{} ({}): {}", LogSafe(binding.exchange),
                   LogSafe(binding.queue), LogSafe(binding.destination_exchange),
                   LogSafe(binding.routing_key), LogSafe(s.ToString(), kLogSafeStatusBytes));
    }
  }
  for (const store::StoredRedrive& stored : state.redrives) {
    std::shared_ptr<Queue> queue = FindQueueByStoreId(stored.queue_id);
    if (!queue) continue;
    RedriveTask& task = redrives_[queue->key()];
    task.stored = stored;
    task.stored.info.spec.queue = queue->name();
    task.queue = queue;
    task.serial = next_redrive_serial_++;
    if (!task.running()) continue;
    if (task.info().spec.rate == 0) task.info().spec.rate = options_.redrive_rate;
    // Messages dead-lettered from now on come after the walk's end, as they did before.
    if (stored.end_seq > 0) queue->EnsureNextSeqAbove(stored.end_seq - 1);
    spdlog::info("recovery: queue={} resumes its redrive: {} moved and {} left behind so far",
                 LogSafe(queue->name()), task.info().moved, task.examined() - task.info().moved);
  }
  for (const store::StoredPurge& purge : state.purges) {
    std::shared_ptr<Queue> queue = FindQueueByStoreId(purge.queue_id);
    if (!queue) continue;
    queue->purge_reclaiming += purge.messages - std::min(purge.messages, purge.removed);
    ++queue->purge_ranges;
    spdlog::info("recovery: queue={} resumes removing a purge from the disk ({} removed so far)",
                 LogSafe(queue->name()), purge.removed);
  }
  if (store_) {
    store_->SetReclaimCallback([this](uint64_t queue_id, uint64_t removed, bool finished) {
      OnReclaimed(queue_id, removed, finished);
    });
  }
  replaying_ = false;
  for (uint64_t orphan : state.orphaned_queue_ids) {
    // The store removes its entries in the background; its timeline goes here.
    spdlog::warn("recovery: removing what deleted queue id {} left", orphan);
    Persist(store::StoreBatch::RemoveAllDelayed{orphan});
  }
  spdlog::info(
      "recovered {} vhosts, {} exchanges, {} queues holding at most {} messages, {} bindings",
      vhosts_.size(), state.exchanges.size(), state.queues.size(), messages,
      state.bindings.size() - skipped);
  // Messages with lower ids were published before this start: a non-persistent one among
  // them was on disk only because its queue paged, and is dropped when loaded.
  run_start_id_ = next_message_id_;
  if (store_ && !state.queues.empty()) {
    store_->CountRecoveredQueues([this](uint64_t queue_id, store::CountKind kind, uint64_t count,
                                        uint8_t lane) { OnCounted(queue_id, kind, count, lane); });
  }
  // From here on the broker belongs to the thread that serves.
  thread_checker_.Detach();
  return Status::Ok();
}

Status Broker::CheckStore(const std::vector<Queue*>& targets, bool persistent) const {
  // A disk below the store's reserve refuses new messages before they reach it, so the disk
  // never fills because of them (store/disk_guard.h); a failed write refuses them until the
  // store has recovered.
  Status refusal = store_error_;
  if (refusal.ok() && store_) refusal = store_->AcceptingMessages();
  if (refusal.ok()) return Status::Ok();
  for (const Queue* queue : targets) {
    if (queue->store_id() != 0 && (persistent || queue->ShouldPage(options_.page_limits))) {
      return Status(refusal.code(), "the message store cannot take messages for durable queue " +
                                        Quote(queue->name()) +
                                        " now: " + std::string(refusal.message()));
    }
  }
  return Status::Ok();
}

Status Broker::TopologyWritable(bool persisted) const {
  durable_topology_change_ |= persisted;
  if (!persisted || store_error_.ok()) return Status::Ok();
  return Status(store_error_.code(),
                "the message store cannot write, so durable exchanges, queues and bindings "
                "cannot change until it recovers: " +
                    std::string(store_error_.message()));
}

void Broker::Unstore(const Queue& queue, const QueuedMessage& message) {
  if (!message.stored) return;
  Persist(store::StoreBatch::RemoveEntry{
      store::EntryRef{queue.store_id(), message.seq, message.envelope->message.id,
                      message.receive_count, message.store_flags}});
}

void Broker::CommitPending(bool probe) {
  // One slice of purged entries at a time: the next goes once this one is written, so the
  // writer never merges them into one long write (each is a few milliseconds) and other
  // commits go in between. At shutdown all of them go: the store writes what it was given
  // before it closes. A purge waiting for its last entry is answered once that slice is synced.
  if (!purge_removals_.empty() && (!purge_removal_in_flight_ || shutting_down_)) {
    const size_t removals = shutting_down_ ? purge_removals_.size() : 1024;
    std::vector<std::function<void(const Status&)>> answers;
    std::vector<std::shared_ptr<Status>> outcomes;  // of the purges this slice is part of
    for (size_t n = 0; n < removals && !purge_removals_.empty(); ++n) {
      PurgeRemoval& removal = purge_removals_.front();
      Persist(store::StoreBatch::RemoveEntry{removal.entry});
      if (outcomes.empty() || outcomes.back() != removal.outcome) {
        outcomes.push_back(removal.outcome);
      }
      if (removal.answer) answers.push_back(std::move(removal.answer));
      purge_removals_.pop_front();
    }
    purge_removal_in_flight_ = true;
    after_commit_.push_back([this, outcomes = std::move(outcomes)](const Status& status) {
      purge_removal_in_flight_ = false;
      if (status.ok()) return;
      for (const auto& outcome : outcomes) {
        if (outcome && outcome->ok()) *outcome = status;
      }
    });
    for (auto& answer : answers) AnswerWhenDurable(std::move(answer));
  }
  for (auto& queue : std::exchange(delivered_marks_, {})) {
    queue->delivered_mark_pending = false;
    if (!queue->deleted) {
      for (uint64_t mark : queue->TakeDeliveredMarks()) {
        Persist(store::StoreBatch::MarkDelivered{queue->store_id(), mark});
      }
    }
  }
  if (!store_ || (!probe && batch_.empty() && pending_confirms_.empty() && after_commit_.empty())) {
    return;
  }
  ++commits_in_flight_;
  // Read before the batch is moved into the call (argument order is unspecified).
  std::shared_ptr<store::DedupOutcomes> outcomes = batch_.dedup_outcomes();
  // The next batch is likely this one's size: room for it up front (capped, so one large
  // batch does not leave every later one holding its memory).
  constexpr size_t kReserveCap = 4096;
  const size_t ops_hint = std::min(batch_.size(), kReserveCap);
  const size_t dedup_hint = std::min(outcomes ? outcomes->size() : 0, kReserveCap);
  const size_t held_hint = std::min(held_.queued.size(), kReserveCap);
  const size_t paged_hint = std::min(held_.paged.size(), kReserveCap);
  store_->Commit(
      std::move(batch_), batch_sync_ || probe,
      [this, confirms = std::move(pending_confirms_), held = std::move(held_),
       outcomes = std::move(outcomes), after = std::move(after_commit_)](Status status) mutable {
        if (!held.empty()) ResolveDedup(held, outcomes.get(), status);
        OnCommitted(std::move(confirms), outcomes.get(), status);
        for (auto& fn : after) fn(status);
      });
  batch_ = store::StoreBatch();
  batch_.Reserve(ops_hint, dedup_hint);
  batch_sync_ = false;
  pending_confirms_.clear();
  held_ = HeldPublishes();
  held_.queued.reserve(held_hint);
  held_.paged.reserve(paged_hint);
  after_commit_.clear();
}

std::optional<uint32_t> Broker::PersistDedup(store::StoreBatch::PutDedup op) {
  if (!store_ || replaying_) return std::nullopt;
  return batch_.AddDedup(std::move(op));
}

uint32_t Broker::ResolutionQueue(const std::shared_ptr<Queue>& queue) {
  // Same control block as the last one: the same queue (a deleted queue's block outlives it
  // while a weak_ptr to it is here, so a new queue never shares it).
  std::vector<std::weak_ptr<Queue>>& queues = held_.queues;
  if (queues.empty() || queues.back().owner_before(queue) || queue.owner_before(queues.back())) {
    queues.push_back(queue);
  }
  return static_cast<uint32_t>(queues.size() - 1);
}

void Broker::ResolveDedup(HeldPublishes& held, const store::DedupOutcomes* outcomes,
                          const Status& status) {
  thread_checker_.Check();
  std::shared_ptr<Queue> queue;
  size_t locked = held.queues.size();  // which of held.queues `queue` is
  // Locks `queue` to the resolution's (false when it is gone) and decides whether it takes
  // the publish.
  auto resolve = [&](uint32_t queue_index, uint32_t outcome, bool* keep) {
    if (queue_index != locked) {
      queue = queue_index < held.queues.size() ? held.queues[queue_index].lock() : nullptr;
      locked = queue_index;
    }
    if (!queue || queue->deleted) return false;
    // A failed commit wrote neither the key nor the message: the publisher got the error.
    const uint64_t duplicate_of =
        outcomes && outcome < outcomes->size() ? (*outcomes)[outcome].duplicate_of : 0;
    *keep = status.ok() && duplicate_of == 0;
    if (status.ok() && !*keep) {
      ++queue->duplicates_total;
      spdlog::debug("queue={} dropped a duplicate publish of message {}", LogSafe(queue->name()),
                    duplicate_of);
    }
    return true;
  };
  for (const DedupResolution& r : held.queued) {
    bool keep = false;
    if (resolve(r.queue, r.outcome, &keep) && queue->Resolve(r.seq, keep)) ScheduleDispatch(queue);
  }
  for (const PagedDedupResolution& r : held.paged) {
    bool keep = false;
    // One that leaves the count may free the lanes below its own.
    if (resolve(r.queue, r.outcome, &keep) && queue->SettleUndecided(r.seq, r.bytes, keep)) {
      ScheduleDispatch(queue);
    }
  }
  for (DelayedDedupResolution& r : held.delayed) {
    bool keep = false;
    if (resolve(r.queue, r.outcome, &keep) && keep) {
      queue->delayed().Add(r.key, std::move(r.message));
      UpdateDelayHead(queue);
    }
  }
}

void Broker::OnCommitted(std::vector<PendingConfirm> confirms, const store::DedupOutcomes* outcomes,
                         const Status& status) {
  thread_checker_.Check();
  --commits_in_flight_;
  if (status.ok()) {
    if (!store_error_.ok()) spdlog::warn("store: writing again; publishing resumes");
    store_error_ = Status::Ok();
    store_probe_at_.reset();
  } else if (status.code() != StatusCode::kShuttingDown) {
    if (store_error_.ok()) {
      spdlog::error("store: commit failed, {} publishes not confirmed: {}", confirms.size(),
                    LogSafe(status.ToString(), kLogSafeStatusBytes));
    }
    store_error_ = status;
    store_probe_at_ = clock_->Now() + options_.store_probe_interval;
  }
  const SteadyTime now = clock_->Now();
  for (const PendingConfirm& confirm : confirms) {
    if (status.ok()) {
      confirm_ms_.Observe(std::chrono::duration<double, std::milli>(now - confirm.at).count());
    }
    SessionState* session = FindSession(confirm.session_id);
    if (!session) continue;  // the publisher left; it never saw a confirm, so it may resend
    PublishResult result = confirm.result;
    for (uint32_t i = 0; outcomes && i < confirm.dedup_count; ++i) {
      const size_t at = size_t{confirm.dedup_first} + i;
      if (at < outcomes->size() && (*outcomes)[at].duplicate_of != 0) {
        result.duplicate_of = (*outcomes)[at].duplicate_of;
        break;
      }
    }
    session->peer().PublishDone(confirm.request_id, result, status);
    MarkDirty(*session);
  }
}

void Broker::RequestLoad(const std::shared_ptr<Queue>& queue) {
  if (!queue->loading()) return;  // purged since the load was decided
  ++loads_in_flight_;
  std::weak_ptr<Queue> weak = queue;
  uint64_t generation = queue->load_generation;
  auto [from, to] = queue->BeginLoad();
  store_->Load(queue->store_id(), from, to, options_.load_batch, LoadBytes(),
               [this, weak, generation](Result<std::vector<store::LoadedMessage>> loaded) {
                 OnLoaded(weak, generation, std::move(loaded));
               });
}

void Broker::OnCounted(uint64_t queue_id, store::CountKind kind, uint64_t count, uint8_t lane) {
  thread_checker_.Check();
  if (counts_in_flight_ > 0) --counts_in_flight_;
  std::shared_ptr<Queue> queue = FindQueueByStoreId(queue_id);
  if (!queue) return;
  const std::string& name = queue->name();
  if (kind == store::CountKind::kDelayed) {
    if (count == store::kCountUnknown) {
      spdlog::warn("queue={} delayed messages could not be counted; shown as loaded",
                   LogSafe(name));
    } else if (queue->delayed().count_estimated()) {
      queue->delayed().SetRecoveredCount(count);
      spdlog::info("queue={} counted {} delayed messages at recovery", LogSafe(name), count);
    }
    return;
  }
  if (count == store::kCountUnknown) {
    spdlog::warn("queue={} could not be counted; its depth stays an upper bound until drained",
                 LogSafe(name));
  } else if (queue->count_estimated()) {
    queue->SetRecoveredCount(lane, count);
    if (queue->policy().max_priority == 0) {
      spdlog::info("queue={} counted {} stored messages at recovery", LogSafe(name), count);
    } else {
      spdlog::info("queue={} counted {} stored messages of priority {} at recovery", LogSafe(name),
                   count, queue->policy().max_priority - lane);
    }
  }
}

void Broker::OnReclaimed(uint64_t queue_id, uint64_t removed, bool finished) {
  thread_checker_.Check();
  std::shared_ptr<Queue> queue = FindQueueByStoreId(queue_id);
  if (!queue) return;  // a deleted queue's entries
  queue->purge_reclaiming -= std::min(queue->purge_reclaiming, removed);
  if (finished && queue->purge_ranges > 0 && --queue->purge_ranges == 0) {
    queue->purge_reclaiming = 0;  // the count was an estimate, or acks left gaps
    spdlog::info("queue={} purge removed from the disk", LogSafe(queue->name()));
  }
}

void Broker::OnLoaded(const std::weak_ptr<Queue>& weak, uint64_t generation,
                      Result<std::vector<store::LoadedMessage>> loaded) {
  thread_checker_.Check();
  --loads_in_flight_;
  std::shared_ptr<Queue> queue = weak.lock();
  if (!queue || queue->deleted || queue->load_generation != generation) return;
  if (!loaded.ok()) {
    queue->LoadFailed();
    spdlog::error("queue={} cannot load paged messages (retrying in 1 s): {}",
                  LogSafe(queue->name()), LogSafe(loaded.status().ToString(), kLogSafeStatusBytes));
    load_retries_.push_back(queue);
    if (!load_retry_at_) load_retry_at_ = clock_->Now() + std::chrono::seconds(1);
    return;
  }
  std::vector<QueuedMessage> kept;
  kept.reserve(loaded->size());
  uint64_t bytes = 0, last_seq = 0, dropped = 0;
  for (store::LoadedMessage& m : *loaded) {
    last_seq = m.seq;
    bool unreadable = m.envelope == nullptr;
    if (!unreadable) bytes += m.envelope->whole_bytes();  // as the store counts
    // Delivered before the restart (MarkDelivered) but never since: it counts as received once.
    if (m.receive_count == 0 && queue->DeliveredBefore(m.seq)) m.receive_count = 1;
    if (unreadable || ((m.flags & store::kEntryTransient) && m.message_id < run_start_id_)) {
      // No body to deliver, or a non-persistent message from before the restart.
      Persist(store::StoreBatch::RemoveEntry{
          store::EntryRef{queue->store_id(), m.seq, m.message_id, m.receive_count, m.flags}});
      ++dropped;
      continue;
    }
    kept.push_back(QueuedMessage{std::move(m.envelope), m.seq, m.receive_count, true, m.flags,
                                 m.first_received_at_ms, std::move(m.failures)});
  }
  uint64_t consumed = loaded->size();
  bool reached_end = consumed < options_.load_batch && bytes < LoadBytes();
  uint64_t expected = queue->paged();
  if (!queue->AddLoaded(std::move(kept), consumed, last_seq, reached_end)) {
    spdlog::error(
        "queue={} store returned {} paged messages up to seq {}, expected {}; the "
        "queue's count is corrected",
        LogSafe(queue->name()), consumed, last_seq, expected);
  }
  if (dropped > 0) {
    spdlog::info(
        "queue={} dropped {} stored entries on load (non-persistent from before the "
        "restart, or without a body)",
        LogSafe(queue->name()), dropped);
  }
  ScheduleDispatch(queue);
}

}  // namespace wharf::broker
