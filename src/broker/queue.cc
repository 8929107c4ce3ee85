#include "broker/queue.h"

namespace wharf::broker {
namespace {

bool Expired(const QueuedMessage& m, int64_t now_wall_ms) {
  const Message& msg = m.envelope->message;
  return msg.properties.expiration_ms != 0 &&
         now_wall_ms - msg.published_at_ms >= static_cast<int64_t>(msg.properties.expiration_ms);
}

}  // namespace

void Queue::Enqueue(EnvelopePtr envelope) {
  ready_.push_back(QueuedMessage{std::move(envelope), next_seq_++, 0});
  ++published_total;
}

void Queue::Requeue(QueuedMessage message) {
  uint64_t seq = message.seq;
  returned_.emplace(seq, std::move(message));
}

std::optional<QueuedMessage> Queue::Pop(int64_t now_wall_ms) {
  while (true) {
    QueuedMessage next;
    if (!returned_.empty()) {
      auto it = returned_.begin();
      next = std::move(it->second);
      returned_.erase(it);
    } else if (!ready_.empty()) {
      next = std::move(ready_.front());
      ready_.pop_front();
    } else {
      return std::nullopt;
    }
    if (!Expired(next, now_wall_ms)) return next;
    ++expired_total;
  }
}

uint64_t Queue::Purge() {
  uint64_t n = ready();
  ready_.clear();
  returned_.clear();
  return n;
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
  return info;
}

}  // namespace wharf::broker
