// The broker's side of the delivery lifecycle that is not settle-and-dispatch itself:
// dead-lettering (docs/lifecycle.md). Part of class Broker (broker.h); split from broker.cc
// by concern.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "broker/broker.h"

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

void Broker::DeadLetter(const std::shared_ptr<Queue>& source, QueuedMessage message,
                        std::string_view reason) {
  const QueuePolicy& policy = source->policy();
  const uint64_t id = message.envelope->message.id;
  ++source->dead_lettered_total;
  // Removed from the source in this flush's batch; the target's entry goes in the same one,
  // so the move is atomic on disk: never in both queues, never in neither.
  Unstore(*source, message);
  if (!policy.has_dead_letter_target()) {
    spdlog::debug("queue={} message={} dropped ({}; no dead-letter target)", source->name(), id,
                  reason);
    return;
  }
  auto envelope = std::make_shared<Envelope>(*message.envelope);
  // As RabbitMQ does: the copy loses its own expiration, or an expired message would expire
  // again in its dead-letter queue at once. The target queue's TTL still applies.
  envelope->message.properties.expiration_ms = 0;
  RecordDeath(&envelope->message, reason, source->name(), *message.envelope, clock_->WallMillis(),
              message);
  std::vector<Queue*> targets;
  std::string target_name;
  if (!policy.dead_letter_queue.empty()) {
    target_name = "queue " + Quote(policy.dead_letter_queue);
    if (auto it = queues_.find(policy.dead_letter_queue); it != queues_.end()) {
      targets.push_back(it->second.get());
    }
  } else {
    const std::string& key = policy.dead_letter_routing_key.value_or(envelope->routing_key);
    target_name = "exchange " + Quote(*policy.dead_letter_exchange) + " key " + Quote(key);
    if (policy.dead_letter_exchange->empty()) {
      if (auto it = queues_.find(key); it != queues_.end()) targets.push_back(it->second.get());
    } else if (Exchange* exchange = FindExchange(*policy.dead_letter_exchange)) {
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
                 source->name(), id, reason, target_name);
    return;
  }
  const bool persistent = envelope->message.persistent;
  const uint8_t flags =
      static_cast<uint8_t>(store::kEntryInline | (persistent ? 0 : store::kEntryTransient));
  for (Queue* target : targets) {
    // A target's own length limit applies to what is dead-lettered into it: a full
    // reject-publish target takes nothing (there is no publisher to tell), a drop-head one
    // makes room below.
    if (target->policy().overflow != QueuePolicy::Overflow::kDropHead &&
        WouldOverflow(*target, envelope->message.body.size())) {
      spdlog::warn("queue={} message={} dead-lettered ({}) but queue={} is full: dropped",
                   source->name(), id, reason, target->name());
      continue;
    }
    const bool page = target->ShouldPage(options_.page_limits);
    const bool stored = store_ && target->store_id() != 0 && (persistent || page);
    // A new life in the target: its own receive count and failures; the death record keeps
    // the old ones.
    uint64_t seq = target->Enqueue(envelope, stored, flags, page);
    if (stored) {
      Persist(store::StoreBatch::PutEntry{
          store::EntryRef{target->store_id(), seq, id, 0, flags, envelope}});
    }
    spdlog::debug("queue={} message={} dead-lettered ({}) to queue={}", source->name(), id, reason,
                  target->name());
    if (auto it = queues_.find(target->name()); it != queues_.end()) {
      // Not from inside another DropHeads: two full queues dead-lettering into each other
      // would pass one message back and forth forever. Such a target stays over its limit
      // until its next publish.
      if (target->policy().has_length_limit() &&
          target->policy().overflow == QueuePolicy::Overflow::kDropHead && !dropping_heads_) {
        DropHeads(it->second);
      }
      ScheduleDispatch(it->second);
    }
  }
}

bool Broker::WouldOverflow(const Queue& queue, uint64_t bytes) const {
  const QueuePolicy& policy = queue.policy();
  // Right after a restart the depth is an upper bound until counted: no refusal on a guess.
  if (queue.count_estimated()) return false;
  return (policy.max_length != 0 && queue.ready() + 1 > policy.max_length) ||
         (policy.max_length_bytes != 0 && queue.ready_bytes() + bytes > policy.max_length_bytes);
}

void Broker::DropHeads(const std::shared_ptr<Queue>& queue) {
  const QueuePolicy& policy = queue->policy();
  auto over = [&] {
    return (policy.max_length != 0 && queue->ready() > policy.max_length) ||
           (policy.max_length_bytes != 0 && queue->ready_bytes() > policy.max_length_bytes);
  };
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
    auto head = queue->Pop(now_ms, &expired);
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
