// broker/queue.h
//
// Queue holds one queue's messages and subscriptions. Messages wait in `ready` in publish order.
// A message that comes back (nack with requeue, a connection closing) returns to its original
// position: every message out for delivery was taken from the head, so its sequence number is
// lower than any still waiting, and the returned set (ordered by sequence) is always served
// before the fresh tail.
//
// The queue is a data structure; the broker decides who gets what (broker.cc: Dispatch).
//
// Thread safety: confined to the broker thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/envelope.h"
#include "common/clock.h"
#include "wharf/types.h"

namespace wharf::broker {

class SessionState;

struct QueuedMessage {
  EnvelopePtr envelope;
  uint64_t seq = 0;            // position in the queue, assigned at enqueue
  uint32_t receive_count = 0;  // deliveries so far
};

struct Consumer {
  std::string tag;
  SessionState* session = nullptr;
  std::string queue;
  uint32_t prefetch = 0;  // 0 = unlimited
  uint32_t unacked = 0;
  bool active = true;  // false once cancelled; in-flight deliveries may still point here
  bool exclusive = false;

  bool HasCredit() const { return active && (prefetch == 0 || unacked < prefetch); }
};

// Long-poll deadlines: when -> (queue name, waiter id).
using ReceiveDeadlines = std::multimap<SteadyTime, std::pair<std::string, uint64_t>>;

// A long-polling Receive waiting for messages.
struct PullWaiter {
  uint64_t waiter_id = 0;
  uint64_t session_id = 0;
  uint64_t request_id = 0;
  uint32_t max_messages = 1;
  ReceiveDeadlines::iterator deadline;  // erased when the waiter completes
};

class Queue {
 public:
  Queue(QueueSpec spec, uint64_t owner_session_id)
      : spec_(std::move(spec)), owner_session_id_(owner_session_id) {}

  const std::string& name() const { return spec_.name; }
  const QueueSpec& spec() const { return spec_; }
  uint64_t owner_session_id() const { return owner_session_id_; }  // 0 unless exclusive

  void Enqueue(EnvelopePtr envelope);
  void Requeue(QueuedMessage message);
  // Takes the next message, skipping (and counting) expired ones. nullopt when empty.
  std::optional<QueuedMessage> Pop(int64_t now_wall_ms);
  // Drops every ready message; returns how many.
  uint64_t Purge();

  uint64_t ready() const { return ready_.size() + returned_.size(); }
  bool HasReady() const { return !ready_.empty() || !returned_.empty(); }

  // Subscriptions, served round-robin.
  std::vector<std::shared_ptr<Consumer>>& consumers() { return consumers_; }
  size_t& next_consumer() { return next_consumer_; }
  std::deque<PullWaiter>& waiters() { return waiters_; }

  // Counters.
  uint64_t in_flight = 0;
  uint64_t published_total = 0;
  uint64_t delivered_total = 0;
  uint64_t acked_total = 0;
  uint64_t expired_total = 0;
  bool deleted = false;
  bool dispatch_scheduled = false;  // in Broker::pending_dispatch_

  // Bindings that point at this queue, so deleting it can remove them: (exchange, key, args).
  std::vector<BindingSpec>& bindings() { return bindings_; }

  QueueInfo Info() const;

 private:
  QueueSpec spec_;
  uint64_t owner_session_id_;
  uint64_t next_seq_ = 1;
  std::deque<QueuedMessage> ready_;
  std::map<uint64_t, QueuedMessage> returned_;
  std::vector<std::shared_ptr<Consumer>> consumers_;
  size_t next_consumer_ = 0;
  std::deque<PullWaiter> waiters_;
  std::vector<BindingSpec> bindings_;
};

}  // namespace wharf::broker
