// The broker's side of the delivery lifecycle (docs/lifecycle.md): settling deliveries (ack,
// nack, reject, the retry policy), leases (expiry, extension), dead-lettering, length limits
// and TTL expiry. Part of class Broker (broker.h); split from broker.cc by concern.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "broker/broker.h"
#include "common/log_safe.h"

namespace wharf::broker {
namespace {

// Adds (or updates) the death record for `reason` in `queue`: most recent first, bounded.
void RecordDeath(Message* message, std::string_view reason, const std::string& queue,
                 const Envelope& original, int64_t now_ms, const QueuedMessage& attempts) {
  auto& deaths = message->deaths;
  auto same = std::find_if(deaths.begin(), deaths.end(),
                           [&](const Death& d) { return d.reason == reason && d.queue == queue; });
  Death death;
  if (same != deaths.end()) {
    death = std::move(*same);
    deaths.erase(same);
  } else {
    death.reason = std::string(reason);
    death.queue = queue;
    death.exchange = original.exchange;
    death.routing_key = original.routing_key;
    death.first_at_ms = now_ms;
  }
  ++death.count;
  death.last_at_ms = now_ms;
  death.receive_count = attempts.receive_count;
  death.failure_count = attempts.failures ? attempts.failures->count : 0;
  death.last_error = attempts.failures ? attempts.failures->last_error : std::string();
  deaths.insert(deaths.begin(), std::move(death));
  if (deaths.size() > kMaxDeaths) deaths.resize(kMaxDeaths);
}

}  // namespace

// --- Settling and leases ----------------------------------------------------------------------

Status Broker::Ack(uint64_t session_id, uint64_t delivery_tag, bool multiple, bool exact) {
  thread_checker_.Check();
  return SettleTags(session_id, delivery_tag, multiple, Settle::kAck, {}, exact);
}

Status Broker::RequeueAll(uint64_t session_id) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
  if (!session) return Status(StatusCode::kInternal, "no session");
  const size_t before = session->unacked.size();
  auto unacked = std::exchange(session->unacked, {});
  // Not a failure, as a closed connection's deliveries: each goes back to its position
  // (Queue::Requeue), whatever the order here, and its next delivery is redelivered.
  for (auto& [tag, in_flight] : unacked) SettleOne(std::move(in_flight), Settle::kRequeue);
  NoteSettled(*session, before);
  return Status::Ok();
}

Status Broker::Nack(uint64_t session_id, uint64_t delivery_tag, bool multiple, NackOptions nack) {
  thread_checker_.Check();
  SettleOptions options;
  options.failed = true;
  options.nack = true;
  options.error = Utf8Prefix(nack.error, kMaxLastErrorBytes);
  if (!nack.requeue) {
    if (nack.delay_ms > 0) {
      return Status(StatusCode::kInvalidArgument, "a nack with delay_ms must also requeue");
    }
    return SettleTags(session_id, delivery_tag, multiple, Settle::kDrop, options, nack.exact);
  }
  if (uint64_t delay_ms = nack.delay_ms; delay_ms > 0) {
    WHARF_RETURN_IF_ERROR(CheckDelay(delay_ms, 0, clock_->WallMillis()));
    options.delay_ms = delay_ms;
    return SettleTags(session_id, delivery_tag, multiple, Settle::kRequeueLater, options,
                      nack.exact);
  }
  return SettleTags(session_id, delivery_tag, multiple,
                    nack.immediate ? Settle::kRequeue : Settle::kRetry, options, nack.exact);
}

Status Broker::CheckDelay(uint64_t delay_ms, int64_t deliver_at_ms, int64_t now_ms) const {
  // Delays end by the last millisecond of year 9999: far enough for anyone, and every due
  // time then fits the scheduler's arithmetic (microseconds in 64 bits).
  constexpr int64_t kMaxDueMs = 253'402'300'799'999;
  if (delay_ms > static_cast<uint64_t>(std::max<int64_t>(kMaxDueMs - now_ms - 1, 0)) ||
      deliver_at_ms > kMaxDueMs) {
    return Status(StatusCode::kInvalidArgument,
                  "delivery time is after 9999-12-31T23:59:59.999Z, the latest accepted");
  }
  uint64_t wait = delay_ms != 0            ? delay_ms
                  : deliver_at_ms > now_ms ? static_cast<uint64_t>(deliver_at_ms - now_ms)
                                           : 0;
  if (options_.max_delay_ms != 0 && wait > options_.max_delay_ms) {
    return Status(StatusCode::kInvalidArgument, "delay of " + std::to_string(wait) +
                                                    " ms is beyond max_delay_ms " +
                                                    std::to_string(options_.max_delay_ms));
  }
  return Status::Ok();
}

Status Broker::CheckLease(const Queue& queue, uint32_t lease_ms, bool no_lease_allowed) const {
  if (lease_ms <= queue.policy().max_lease_ms) return Status::Ok();
  if (lease_ms == kNoLease && no_lease_allowed) return Status::Ok();
  return Status(StatusCode::kInvalidArgument,
                "lease_ms " + std::to_string(lease_ms) + " exceeds queue " + Quote(queue.name()) +
                    "'s maximum lease of " + std::to_string(queue.policy().max_lease_ms) +
                    " ms (x-max-lease-ms)");
}

Status Broker::UnknownTag(const SessionState& session, uint64_t delivery_tag) const {
  if (session.expired_tags.contains(delivery_tag)) {
    return Status(StatusCode::kLeaseExpired,
                  "delivery tag " + std::to_string(delivery_tag) +
                      ": its lease expired and the message was put back for redelivery; this "
                      "settles nothing");
  }
  return Status(StatusCode::kUnknownDeliveryTag,
                "delivery tag " + std::to_string(delivery_tag) +
                    " is unknown or already settled on this connection");
}

Status Broker::ExtendLease(uint64_t session_id, uint64_t delivery_tag, uint32_t lease_ms) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
  if (!session) return Status(StatusCode::kInternal, "no session");
  auto it = session->unacked.find(delivery_tag);
  if (it == session->unacked.end()) return UnknownTag(*session, delivery_tag);
  InFlight& in_flight = it->second;
  if (in_flight.lease_ms == kNoLease) {
    return Status(StatusCode::kInvalidArgument,
                  "delivery tag " + std::to_string(delivery_tag) + " holds no lease to extend");
  }
  if (lease_ms == 0) lease_ms = in_flight.lease_ms;
  WHARF_RETURN_IF_ERROR(CheckLease(*in_flight.queue, lease_ms));
  in_flight.lease_ms = lease_ms;
  in_flight.lease_deadline = clock_->Now() + std::chrono::milliseconds(lease_ms);
  leases_.Add(LeaseRef{session_id, delivery_tag, in_flight.lease_deadline});
  return Status::Ok();
}

Status Broker::SettleTags(uint64_t session_id, uint64_t delivery_tag, bool multiple, Settle action,
                          const SettleOptions& options, bool exact) {
  SessionState* session = FindSession(session_id);
  if (!session) return Status(StatusCode::kInternal, "no session");
  auto& unacked = session->unacked;
  const size_t before = unacked.size();
  // Whatever settles below may free room under the session's channel-wide prefetch.
  struct Noted {
    Broker* broker;
    const SessionState& session;
    size_t before;
    ~Noted() { broker->NoteSettled(session, before); }
  } noted{this, *session, before};
  if (exact) {
    // RabbitMQ's collect_acks: the tag itself must be outstanding (tag 0 with `multiple`:
    // everything, possibly nothing), or nothing is settled.
    if (multiple && delivery_tag == 0) {
      if (unacked.empty()) return Status::Ok();
    } else if (!unacked.contains(delivery_tag)) {
      return UnknownTag(*session, delivery_tag);
    }
  }
  if (multiple) {
    // As in AMQP, tag 0 with multiple settles everything outstanding.
    auto end = delivery_tag == 0 ? unacked.end() : unacked.upper_bound(delivery_tag);
    if (end == unacked.begin()) {
      return Status(StatusCode::kUnknownDeliveryTag,
                    "no outstanding deliveries up to tag " + std::to_string(delivery_tag));
    }
    std::vector<InFlight> settled;
    for (auto it = unacked.begin(); it != end; ++it) settled.push_back(std::move(it->second));
    unacked.erase(unacked.begin(), end);
    for (auto& in_flight : settled) SettleOne(std::move(in_flight), action, options);
    return Status::Ok();
  }
  auto it = unacked.find(delivery_tag);
  if (it == unacked.end()) return UnknownTag(*session, delivery_tag);
  InFlight in_flight = std::move(it->second);
  unacked.erase(it);
  SettleOne(std::move(in_flight), action, options);
  return Status::Ok();
}

void Broker::SettleOne(InFlight in_flight, Settle action, const SettleOptions& options) {
  --deliveries_in_flight_;
  Queue& queue = *in_flight.queue;
  --queue.in_flight;
  if (in_flight.consumer) --in_flight.consumer->unacked;
  QueuedMessage& message = in_flight.message;
  // Its group (x-message-groups) goes on once this delivery is settled, whichever way.
  const EnvelopePtr envelope = message.envelope;
  auto release_group = [&] {
    if (queue.grouped() && !queue.deleted) queue.ReleaseGroup(*envelope);
  };
  if (options.nack) ++queue.nacked_total;
  if (options.failed) {
    auto failures = std::make_shared<Failures>();
    failures->count = (message.failures ? message.failures->count : 0) + 1;
    failures->last_failed_at_ms = clock_->WallMillis();
    failures->last_error = options.error;
    message.failures = std::move(failures);
  }
  // Out of attempts (counted in receives, so a consumer that crashes on the message counts
  // too), or rejected: it leaves the queue for its dead-letter target, or is dropped.
  if (!queue.deleted && action != Settle::kAck) {
    const uint32_t max_attempts = queue.policy().max_attempts;
    if (action == Settle::kDrop) {
      DeadLetter(in_flight.queue, std::move(message), "rejected");
      release_group();
      ScheduleDispatch(in_flight.queue);  // the consumer's credit is back
      return;
    }
    // A broker shutting down closes every connection: that is no attempt of the consumer's.
    const bool shutdown_requeue = shutting_down_ && !options.failed;
    if (max_attempts != 0 && message.receive_count >= max_attempts && !shutdown_requeue) {
      DeadLetter(in_flight.queue, std::move(message), "max_attempts");
      release_group();
      ScheduleDispatch(in_flight.queue);
      return;
    }
  }
  uint64_t delay_ms = options.delay_ms;
  if (action == Settle::kRetry) {
    delay_ms =
        queue.policy().RetryDelay(message.failures ? message.failures->count : 1, retry_rng_);
    action = delay_ms > 0 ? Settle::kRequeueLater : Settle::kRequeue;
  }
  if (action == Settle::kRequeueLater && queue.delayed().backed() && !store_error_.ok()) {
    // The timeline lives on disk, which cannot be written now: back at once rather than a
    // message held nowhere.
    spdlog::warn("queue={} message={} requeued at once, not delayed: the store cannot write",
                 LogSafe(queue.name()), message.envelope->message.id);
    action = Settle::kRequeue;
  }
  switch (action) {
    case Settle::kAck:
      ++queue.acked_total;
      if (!queue.deleted) Unstore(queue, in_flight.message);
      release_group();
      break;
    case Settle::kRequeue:
      if (!queue.deleted) queue.Requeue(std::move(in_flight.message));
      break;
    case Settle::kRequeueLater:
      if (queue.deleted) break;
      if (std::string group = queue.GroupOf(*envelope); !group.empty()) {
        // The backoff delays its group, not the queue: it waits at the head of its group,
        // which stays held until the retry is due (its entry stays where it is: after a crash
        // it comes back at once, in its place).
        queue.Requeue(std::move(in_flight.message));
        const uint64_t token = queue.HoldGroup(*envelope);
        group_wakes_.emplace(clock_->Now() + std::chrono::milliseconds(delay_ms),
                             GroupWake{in_flight.queue, std::move(group), token});
        break;
      }
      DelayDelivered(queue, std::move(in_flight.message), DueAfter(delay_ms));
      UpdateDelayHead(in_flight.queue);
      break;
    case Settle::kRetry:  // resolved above
      break;
    case Settle::kDrop:  // a deleted queue's message: nothing to keep
      break;
  }
  if (!queue.deleted) ScheduleDispatch(in_flight.queue);
}

void Broker::CompactLeases() {
  size_t before = leases_.size();
  leases_.RemoveIf([this](const LeaseRef& lease) {
    SessionState* session = FindSession(lease.session_id);
    if (!session) return true;
    auto it = session->unacked.find(lease.delivery_tag);
    return it == session->unacked.end() || it->second.lease_deadline != lease.deadline;
  });
  spdlog::debug("lease timer compacted: {} entries, {} live", before, leases_.size());
}

void Broker::ExpireLeases() {
  // Bounded per tick; what is left is due at once and runs at the next tick, after the
  // broker thread has served other work.
  constexpr size_t kExpiriesPerTick = 10'000;
  auto due = leases_.TakeDue(clock_->Now(), kExpiriesPerTick);
  uint64_t expired = 0;
  for (const LeaseRef& lease : due) {
    SessionState* session = FindSession(lease.session_id);
    if (!session) continue;
    auto it = session->unacked.find(lease.delivery_tag);
    // Settled since, or extended (a later entry stands for it).
    if (it == session->unacked.end() || it->second.lease_deadline != lease.deadline) continue;
    InFlight in_flight = std::move(it->second);
    const size_t before = session->unacked.size();
    session->unacked.erase(it);
    session->RememberExpired(lease.delivery_tag);
    ++expired;
    spdlog::debug("conn={} queue={} message={} tag={} lease of {} ms expired", lease.session_id,
                  LogSafe(in_flight.queue->name()), in_flight.message.envelope->message.id,
                  lease.delivery_tag, in_flight.lease_ms);
    std::string error = "lease of " + std::to_string(in_flight.lease_ms) + " ms expired";
    SettleOptions options;
    options.failed = true;
    options.error = error;
    ++in_flight.queue->lease_expired_total;
    // Never closes the connection: the message is simply redelivered (retry policy).
    SettleOne(std::move(in_flight), Settle::kRetry, options);
    NoteSettled(*session, before);
  }
  if (expired > 0)
    spdlog::info("{} delivery leases expired; their messages are redelivered", expired);
}

// --- Dead-lettering and length limits --------------------------------------------------------

void Broker::DeadLetter(const std::shared_ptr<Queue>& source, QueuedMessage message,
                        std::string_view reason) {
  const QueuePolicy& policy = source->policy();
  const uint64_t id = message.envelope->message.id;
  ++source->dead_lettered_total;
  // Removed from the source in this flush's batch; the target's entry goes in the same one,
  // so the move is atomic on disk: never in both queues, never in neither.
  Unstore(*source, message);
  if (!policy.has_dead_letter_target()) {
    spdlog::debug("queue={} message={} dropped ({}; no dead-letter target)",
                  LogSafe(source->name()), id, LogSafe(reason));
    return;
  }
  Envelope copy = *message.envelope;
  // As RabbitMQ does: the copy loses its own expiration, or an expired message would expire
  // again in its dead-letter queue at once. The target queue's TTL still applies.
  copy.message.properties.expiration_ms = 0;
  RecordDeath(&copy.message, reason, source->name(), *message.envelope, clock_->WallMillis(),
              message);
  // As RabbitMQ does, it is published anew by the dead-letter exchange with the dead-letter
  // routing key (its own when none is set): what its consumers see, and what its next death
  // records. A dead-letter queue is reached as through the default exchange.
  if (!policy.dead_letter_queue.empty()) {
    copy.exchange.clear();
    copy.routing_key = policy.dead_letter_queue;
  } else {
    copy.exchange = *policy.dead_letter_exchange;
    if (policy.dead_letter_routing_key) copy.routing_key = *policy.dead_letter_routing_key;
  }
  // Sized again: the death record is part of it.
  const EnvelopePtr envelope = MakeEnvelope(std::move(copy));
  std::vector<Queue*> targets;
  std::string target_name;
  if (!policy.dead_letter_queue.empty()) {
    target_name = "queue " + Quote(policy.dead_letter_queue);
    // The source's vhost: a dead-letter target is always in the vhost of its queue.
    if (auto target = QueueIn(source->vhost(), policy.dead_letter_queue)) {
      targets.push_back(target.get());
    }
  } else {
    const std::string& key = envelope->routing_key;
    target_name = "exchange " + Quote(*policy.dead_letter_exchange) + " key " + Quote(key);
    if (policy.dead_letter_exchange->empty()) {
      if (auto target = QueueIn(source->vhost(), key)) targets.push_back(target.get());
    } else if (Exchange* exchange = FindExchange(source->vhost(), *policy.dead_letter_exchange)) {
      std::vector<const Exchange*> visited;
      RouteThrough(exchange, key, envelope->message.headers, &targets, &visited);
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
    }
  }
  // A queue is never its own dead-letter target: that would loop.
  std::erase(targets, source.get());
  if (targets.empty()) {
    spdlog::warn("queue={} message={} dead-lettered ({}) but {} takes nothing: dropped",
                 LogSafe(source->name()), id, LogSafe(reason), LogSafe(target_name));
    return;
  }
  for (Queue* target : targets) {
    // A target's own length limit applies to what is dead-lettered into it: a full
    // reject-publish target takes nothing (there is no publisher to tell), a drop-head one
    // makes room below.
    if (target->policy().overflow != QueuePolicy::Overflow::kDropHead &&
        WouldOverflow(*target, envelope->message.body.size())) {
      spdlog::warn("queue={} message={} dead-lettered ({}) but queue={} is full: dropped",
                   LogSafe(source->name()), id, LogSafe(reason), LogSafe(target->name()));
      continue;
    }
    // A new life in the target: its own receive count and failures; the death record keeps
    // the old ones.
    EnqueueMoved(*target, envelope);
    spdlog::debug("queue={} message={} dead-lettered ({}) to queue={}", LogSafe(source->name()), id,
                  LogSafe(reason), LogSafe(target->name()));
  }
}

void Broker::EnqueueMoved(Queue& target, const EnvelopePtr& envelope) {
  const bool persistent = envelope->message.persistent;
  const uint8_t flags =
      static_cast<uint8_t>(store::kEntryInline | (persistent ? 0 : store::kEntryTransient));
  const bool page = target.ShouldPage(options_.page_limits, *envelope);
  const bool stored = store_ && target.store_id() != 0 && (persistent || page);
  uint64_t seq = target.Enqueue(envelope, stored, flags, page);
  if (stored) {
    Persist(store::StoreBatch::PutEntry{
        store::EntryRef{target.store_id(), seq, envelope->message.id, 0, flags, envelope}});
  }
  if (auto it = queues_.find(target.key()); it != queues_.end()) {
    // Not from inside another DropHeads: two full queues dead-lettering into each other
    // would pass one message back and forth forever. Such a target stays over its limit
    // until its next publish.
    if (target.policy().has_length_limit() &&
        target.policy().overflow == QueuePolicy::Overflow::kDropHead && !dropping_heads_) {
      DropHeads(it->second);
    }
    ScheduleDispatch(it->second);
  }
}

bool Broker::WouldOverflow(const Queue& queue, uint64_t bytes) const {
  const QueuePolicy& policy = queue.policy();
  // Right after a restart the depth is an upper bound until counted: no refusal on a guess.
  if (queue.count_estimated()) return false;
  return policy.OverLimit(queue.ready() + 1, queue.ready_bytes() + bytes);
}

void Broker::DropHeads(const std::shared_ptr<Queue>& queue) {
  const QueuePolicy& policy = queue->policy();
  auto over = [&] { return policy.OverLimit(queue->ready(), queue->ready_bytes()); };
  if (queue->count_estimated()) return;  // no drops on a guessed depth (after a restart)
  struct Guard {
    bool& flag;
    explicit Guard(bool& f) : flag(f) { flag = true; }
    ~Guard() { flag = false; }
  } guard(dropping_heads_);
  const int64_t now_ms = clock_->WallMillis();
  std::vector<QueuedMessage> expired;
  // Only heads in RAM: a head still on disk is dropped once loaded (the queue is over its
  // limit until then).
  while (over()) {
    std::optional<QueuedMessage> head;
    if (queue->grouped()) {
      // The oldest ready message, held group or not (Pop would skip held groups).
      const QueuedMessage* oldest = queue->NextReadyInRam(0);
      if (oldest) head = queue->Take(oldest->seq);
      if (head && queue->Expired(*head, now_ms)) {
        ++queue->expired_total;
        expired.push_back(std::move(*head));
        continue;
      }
    } else {
      head = queue->Pop(now_ms, &expired);
    }
    if (!head) break;
    DeadLetter(queue, std::move(*head), "max_length");
  }
  for (QueuedMessage& m : expired) DeadLetter(queue, std::move(m), "expired");
}

void Broker::ArmExpiries(const std::shared_ptr<Queue>& queue) {
  auto& fresh = queue->new_expiries();
  if (fresh.empty()) return;
  const SteadyTime now = clock_->Now();
  const int64_t wall = clock_->WallMillis();
  for (const auto& [seq, at] : fresh) {
    auto wait = std::chrono::milliseconds(std::max<int64_t>(at - wall, 0));
    expiries_.Add(ExpiryRef{queue, seq, at, now + wait});
  }
  fresh.clear();
}

void Broker::ExpireMessages() {
  constexpr size_t kExpiriesPerTick = 10'000;
  auto due = expiries_.TakeDue(clock_->Now(), kExpiriesPerTick);
  if (due.empty()) return;
  const int64_t wall = clock_->WallMillis();
  for (ExpiryRef& ref : due) {
    std::shared_ptr<Queue> queue = ref.queue.lock();
    if (!queue || queue->deleted) continue;
    if (ref.expires_at_ms > wall) {
      // The wall clock was set back since it was armed: look again then.
      ref.deadline = clock_->Now() + std::chrono::milliseconds(ref.expires_at_ms - wall);
      expiries_.Add(ref);
      continue;
    }
    // Delivered, settled or expired at the head since: nothing to do.
    auto message = queue->TakeExpired(ref.seq, wall);
    if (!message) continue;
    DeadLetter(queue, std::move(*message), "expired");
    ScheduleDispatch(queue);
  }
}

}  // namespace wharf::broker
