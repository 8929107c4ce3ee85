#include "broker/queue.h"

#include <algorithm>

namespace wharf::broker {
namespace {

const QueuedMessage* FindBySeq(const std::deque<QueuedMessage>& ready, uint64_t seq) {
  // ready_ is in sequence order (enqueued, then loaded, in rising seq).
  auto it = std::lower_bound(ready.begin(), ready.end(), seq,
                             [](const QueuedMessage& m, uint64_t s) { return m.seq < s; });
  return it != ready.end() && it->seq == seq ? &*it : nullptr;
}

}  // namespace

int64_t Queue::ExpiresAt(const Envelope& envelope) const {
  const Message& m = envelope.message;
  int64_t at = 0;
  if (m.properties.expiration_ms != 0) {
    at = m.published_at_ms + static_cast<int64_t>(m.properties.expiration_ms);
  }
  if (policy_.message_ttl_ms != 0) {
    int64_t by_queue = m.published_at_ms + static_cast<int64_t>(policy_.message_ttl_ms);
    at = at == 0 ? by_queue : std::min(at, by_queue);
  }
  return at;
}

bool Queue::Expired(const QueuedMessage& m, int64_t now_wall_ms) const {
  int64_t at = ExpiresAt(*m.envelope);
  return at != 0 && now_wall_ms >= at;
}

std::optional<QueuedMessage> Queue::TakeExpired(uint64_t seq, int64_t now_wall_ms) {
  const QueuedMessage* found = nullptr;
  if (auto it = returned_.find(seq); it != returned_.end()) {
    found = &it->second;
  } else {
    found = FindBySeq(ready_, seq);
  }
  if (!found || !found->envelope || !Expired(*found, now_wall_ms)) return std::nullopt;
  ++expired_total;
  return Take(seq);
}

const QueuedMessage* Queue::NextReadyInRam(uint64_t seq) const {
  // Every returned message came from the head, so returned_ sorts before ready_.
  if (auto it = returned_.lower_bound(seq); it != returned_.end()) return &it->second;
  auto it = std::lower_bound(ready_.begin(), ready_.end(), seq,
                             [](const QueuedMessage& m, uint64_t s) { return m.seq < s; });
  while (it != ready_.end() && !it->envelope) ++it;  // tombstones
  return it == ready_.end() ? nullptr : &*it;
}

std::optional<QueuedMessage> Queue::Take(uint64_t seq) {
  if (auto it = returned_.find(seq); it != returned_.end()) {
    QueuedMessage m = std::move(it->second);
    returned_.erase(it);
    returned_bytes_ -= m.envelope->message.body.size();
    return m;
  }
  auto* found = const_cast<QueuedMessage*>(FindBySeq(ready_, seq));
  if (!found || !found->envelope) return std::nullopt;
  QueuedMessage m = std::move(*found);
  found->envelope = nullptr;
  ram_bytes_ -= m.envelope->message.body.size();
  ram_memory_ -= m.envelope->whole_bytes();
  if (found == &ready_.front()) {
    ready_.pop_front();
    TrimFront();
  } else {
    // Out of the middle of the deque: left as a tombstone (no envelope) that Pop skips.
    ++tombstones_;
  }
  return m;
}

void Queue::TakePaged(uint64_t bytes) {
  if (paged_ > 0) --paged_;
  paged_bytes_ = paged_ == 0 ? 0 : paged_bytes_ - std::min(paged_bytes_, bytes);
}

void Queue::TrimFront() {
  while (!ready_.empty() && !ready_.front().envelope) {
    ready_.pop_front();
    --tombstones_;
  }
}

void Queue::NoteExpiry(const QueuedMessage& m) {
  if (int64_t at = ExpiresAt(*m.envelope); at != 0) new_expiries_.emplace_back(m.seq, at);
}

uint64_t Queue::Enqueue(EnvelopePtr envelope, bool stored, uint8_t store_flags, bool page,
                        uint32_t receive_count, int64_t first_received_at_ms,
                        FailuresPtr failures) {
  uint64_t seq = next_seq_++;
  QueuedMessage message{
      std::move(envelope), seq, receive_count, stored, store_flags, first_received_at_ms,
      std::move(failures)};
  if (!held_.empty()) {
    // Behind a held message: ready in its turn.
    held_paged_ += page ? 1 : 0;
    held_.push_back(Held{std::move(message), page, /*resolved=*/true, /*keep=*/true});
    return seq;
  }
  Place(std::move(message), page);
  return seq;
}

uint64_t Queue::EnqueueHeld(EnvelopePtr envelope, bool stored, uint8_t store_flags, bool page) {
  uint64_t seq = next_seq_++;
  held_paged_ += page ? 1 : 0;
  held_.push_back(Held{QueuedMessage{std::move(envelope), seq, 0, stored, store_flags, 0, nullptr},
                       page, /*resolved=*/false, /*keep=*/false});
  return seq;
}

bool Queue::Resolve(uint64_t seq, bool keep) {
  // Held messages are few (those of the commits in flight): a walk is enough.
  auto it = std::find_if(held_.begin(), held_.end(),
                         [&](const Held& h) { return h.message.seq == seq && !h.resolved; });
  if (it == held_.end()) return false;
  it->resolved = true;
  it->keep = keep;
  bool released = false;
  while (!held_.empty() && held_.front().resolved) {
    Held front = std::move(held_.front());
    held_.pop_front();
    held_paged_ -= front.page ? 1 : 0;
    if (!front.keep) continue;
    Place(std::move(front.message), front.page);
    released = true;
  }
  return released;
}

void Queue::Place(QueuedMessage message, bool page) {
  const uint64_t seq = message.seq;
  ++published_total;
  const uint64_t body = message.envelope->message.body.size();
  if (page) {
    if (paged_ == 0) load_from_seq_ = seq;
    ++paged_;
    paged_bytes_ += body;
    if (seq >= load_to_seq_) {
      ++paged_beyond_load_;
      paged_beyond_load_bytes_ += body;
    }
    return;
  }
  ram_bytes_ += body;
  ram_memory_ += message.envelope->whole_bytes();
  ready_.push_back(std::move(message));
  NoteExpiry(ready_.back());
}

void Queue::Requeue(QueuedMessage message) {
  uint64_t seq = message.seq;
  returned_bytes_ += message.envelope->message.body.size();
  NoteExpiry(message);
  returned_.emplace(seq, std::move(message));
}

std::optional<QueuedMessage> Queue::Pop(int64_t now_wall_ms, std::vector<QueuedMessage>* expired) {
  while (true) {
    QueuedMessage next;
    if (!returned_.empty()) {
      auto it = returned_.begin();
      next = std::move(it->second);
      returned_.erase(it);
      returned_bytes_ -= next.envelope->message.body.size();
    } else if (!ready_.empty()) {
      next = std::move(ready_.front());
      ready_.pop_front();
      if (!next.envelope) {  // expired earlier (TakeExpired)
        --tombstones_;
        continue;
      }
      ram_bytes_ -= next.envelope->message.body.size();
      ram_memory_ -= next.envelope->whole_bytes();
      TrimFront();
    } else {
      return std::nullopt;
    }
    if (!Expired(next, now_wall_ms)) return next;
    ++expired_total;
    if (expired) expired->push_back(std::move(next));
  }
}

PurgeResult Queue::Purge(uint64_t floor) {
  PurgeResult result;
  // Held messages go too: the store may yet accept them, and the range hides their entries.
  result.count = ready() + held_.size();
  // Ready messages come after every delivered one (deliveries take the head), returned ones
  // interleave with those still in flight: the range starts at the first ready message at or
  // above `floor`, and whatever is stored below it is removed entry by entry.
  uint64_t from = paged_ > 0 ? load_from_seq_ : next_seq_;
  auto consider = [&](QueuedMessage& m) {
    if (!m.envelope || !m.stored) return;
    if (m.seq < floor) {
      result.stored.push_back(std::move(m));
    } else {
      from = std::min(from, m.seq);
      ++result.range_messages;
    }
  };
  for (auto& [seq, m] : returned_) consider(m);
  for (auto& m : ready_) consider(m);
  for (auto& h : held_) consider(h.message);
  result.paged = paged_;
  result.range_messages += paged_;
  if (result.range_messages > 0) {
    result.range_from = std::max(from, floor);
    // One past the last sequence number, which stays unused: a later purge's range never
    // ends where this one does (the store tells ranges apart by their end).
    result.range_to = next_seq_ + 1;
    next_seq_ = result.range_to;
  }
  ready_.clear();
  returned_.clear();
  held_.clear();
  held_paged_ = 0;
  ram_bytes_ = 0;
  ram_memory_ = 0;
  returned_bytes_ = 0;
  paged_bytes_ = 0;
  tombstones_ = 0;
  new_expiries_.clear();
  paged_ = 0;
  estimate_ = 0;
  loading = false;
  load_to_seq_ = UINT64_MAX;
  paged_beyond_load_ = 0;
  paged_beyond_load_bytes_ = 0;
  ++load_generation;
  return result;
}

bool Queue::AddLoaded(std::vector<QueuedMessage> kept, uint64_t consumed, uint64_t last_seq,
                      bool reached_end) {
  bool consistent = consumed <= paged_ && (consumed > 0 || reached_end);
  uint64_t loaded_bytes = 0;
  for (auto& m : kept) {
    loaded_bytes += m.envelope->message.body.size();
    ram_memory_ += m.envelope->whole_bytes();
    ready_.push_back(std::move(m));
    NoteExpiry(ready_.back());
  }
  ram_bytes_ += loaded_bytes;
  // Messages recovered at start-up were never counted in paged_bytes_: never below zero.
  paged_bytes_ -= std::min(paged_bytes_, loaded_bytes);
  if (consumed > 0) load_from_seq_ = last_seq + 1;
  // Messages paged while the load was in flight lie past its end: the store did not look
  // for them, so they are still on disk whatever it found.
  const bool bounded = load_to_seq_ != UINT64_MAX;
  const uint64_t beyond = bounded ? paged_beyond_load_ : 0;
  if (reached_end || !consistent) {
    // Nothing is left on disk before the load's end: an estimated count becomes exact here.
    consistent = consistent && (estimate_ > 0 || consumed + beyond == paged_);
    paged_ = beyond;
    paged_bytes_ = bounded ? paged_beyond_load_bytes_ : 0;
    estimate_ = 0;
    if (paged_ > 0) load_from_seq_ = std::max(load_from_seq_, load_to_seq_);
  } else {
    paged_ -= consumed;
  }
  load_to_seq_ = UINT64_MAX;
  paged_beyond_load_ = 0;
  paged_beyond_load_bytes_ = 0;
  return consistent;
}

void Queue::Restore(uint64_t first_seq, uint64_t next_seq, uint64_t estimate) {
  next_seq_ = std::max<uint64_t>(next_seq, 1);
  if (first_seq == 0 || next_seq <= first_seq) return;
  paged_ = std::max<uint64_t>(estimate, 1);
  estimate_ = paged_;
  load_from_seq_ = first_seq;
}

void Queue::SetRecoveredCount(uint64_t count) {
  if (estimate_ == 0) return;
  // paged_ = estimate - (recovered entries loaded since) + (messages paged since): replacing
  // the estimate by the count keeps the rest.
  paged_ = paged_ + count >= estimate_ ? paged_ + count - estimate_ : 0;
  estimate_ = 0;
}

int64_t Queue::HeadPublishedAt() const {
  const QueuedMessage* head = NextReadyInRam(0);
  return head ? head->envelope->message.published_at_ms : 0;
}

QueueInfo Queue::Info() const {
  QueueInfo info;
  info.name = spec_.name;
  info.durable = spec_.durable;
  info.exclusive = spec_.exclusive;
  info.auto_delete = spec_.auto_delete;
  info.ready = ready();
  info.in_flight = in_flight;
  uint32_t active = 0;
  for (const auto& c : consumers_) active += c->active ? 1 : 0;
  info.consumers = active;
  info.published_total = published_total;
  info.delivered_total = delivered_total;
  info.acked_total = acked_total;
  info.delayed = delayed_.size();
  if (auto head = delayed_.head_due()) info.next_delayed_at_ms = *head;
  info.arguments = spec_.arguments;
  if (!policy_.dead_letter_queue.empty()) {
    info.dead_letter_target = policy_.dead_letter_queue;
  } else if (policy_.dead_letter_exchange) {
    info.dead_letter_target = "exchange '" + *policy_.dead_letter_exchange + "'";
  }
  info.head_published_at_ms = HeadPublishedAt();
  info.publish_rate = rates_.publish;
  info.deliver_rate = rates_.deliver;
  info.ack_rate = rates_.ack;
  info.purge_reclaiming = purge_ranges > 0 ? std::max<uint64_t>(purge_reclaiming, 1) : 0;
  return info;
}

void Queue::UpdateRates(double seconds) {
  if (seconds > 0) {
    rates_.publish = static_cast<double>(published_total - rates_.published) / seconds;
    rates_.deliver = static_cast<double>(delivered_total - rates_.delivered) / seconds;
    rates_.ack = static_cast<double>(acked_total - rates_.acked) / seconds;
  }
  rates_.published = published_total;
  rates_.delivered = delivered_total;
  rates_.acked = acked_total;
}

}  // namespace wharf::broker
