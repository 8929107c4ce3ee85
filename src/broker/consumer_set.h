// broker/consumer_set.h
//
// ConsumerSet is a queue's subscriptions and the order in which the broker offers them
// messages (docs/lifecycle.md, "Consumers"), RabbitMQ's rules:
//
//  - Consumer priorities (x-priority): a message goes to a consumer of the highest priority
//    that can take it (the broker says which can: credit, channel prefetch, a writable
//    connection); a lower priority gets only what every higher one cannot take. Consumers of
//    one priority share round-robin, in subscription order.
//  - Single active consumer (a queue declared with x-single-active-consumer): only one
//    consumer is offered anything. The first to subscribe becomes active; a later one waits
//    even with a higher priority. When the active one goes (cancelled, its channel or
//    connection closed), the highest-priority waiting consumer, the earliest of them,
//    becomes active.
//
// Next() is O(1) while the consumers it tries can take messages, and at worst O(consumers)
// when none can, as a plain round-robin over one list is. Add and Remove are O(consumers).
//
// Thread safety: confined to the broker thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace wharf::broker {

class SessionState;

struct Consumer {
  std::string tag;
  SessionState* session = nullptr;
  std::string queue;
  uint32_t prefetch = 0;  // 0 = unlimited
  // Each delivery's lease; 0 = the queue's default; Broker::kNoLease = none.
  uint32_t lease_ms = 0;
  uint32_t unacked = 0;
  bool active = true;  // false once cancelled; in-flight deliveries may still point here
  bool exclusive = false;
  // No-ack (AMQP): each delivery is settled as acked when it is dispatched; it takes no
  // credit (prefetch does not apply), only the connection's output bounds it.
  bool auto_ack = false;
  int32_t priority = 0;  // x-priority: higher is offered messages first

  // Its own credit; the session's channel-wide prefetch is the broker's to check.
  bool HasCredit() const { return active && (auto_ack || prefetch == 0 || unacked < prefetch); }
};

class ConsumerSet {
 public:
  using List = std::vector<std::shared_ptr<Consumer>>;

  explicit ConsumerSet(bool single_active = false) : single_active_mode_(single_active) {}

  // In offer order: highest priority first, subscription order within one priority.
  const List& list() const { return list_; }
  List::const_iterator begin() const { return list_.begin(); }
  List::const_iterator end() const { return list_.end(); }
  size_t size() const { return list_.size(); }
  bool empty() const { return list_.empty(); }

  void Add(std::shared_ptr<Consumer> consumer);
  void Remove(const std::shared_ptr<Consumer>& consumer);

  bool single_active_mode() const { return single_active_mode_; }
  // The one consumer offered messages on a single-active-consumer queue; null otherwise, or
  // when there is no consumer.
  const std::shared_ptr<Consumer>& single_active() const { return single_active_; }
  // Whether `consumer` is offered messages at all (false: waiting behind the single active
  // one).
  bool IsOffered(const Consumer& consumer) const {
    return !single_active_mode_ || single_active_.get() == &consumer;
  }

  // The next consumer, in the order above, that `can_take` accepts; null when none does.
  template <class CanTake>
  std::shared_ptr<Consumer> Next(CanTake&& can_take);

 private:
  // A run of consumers of one priority in list_: [begin, end), and where its round-robin
  // resumes (an offset within the run).
  struct Group {
    int32_t priority = 0;
    size_t begin = 0;
    size_t end = 0;
    size_t cursor = 0;
  };
  void Regroup();

  bool single_active_mode_;
  List list_;
  std::vector<Group> groups_;  // highest priority first
  std::shared_ptr<Consumer> single_active_;
};

template <class CanTake>
std::shared_ptr<Consumer> ConsumerSet::Next(CanTake&& can_take) {
  if (single_active_mode_) {
    return single_active_ && can_take(*single_active_) ? single_active_ : nullptr;
  }
  for (Group& group : groups_) {
    const size_t n = group.end - group.begin;
    for (size_t i = 0; i < n; ++i) {
      const size_t offset = (group.cursor + i) % n;
      const std::shared_ptr<Consumer>& candidate = list_[group.begin + offset];
      if (can_take(*candidate)) {
        group.cursor = (offset + 1) % n;
        return candidate;
      }
    }
  }
  return nullptr;
}

}  // namespace wharf::broker
