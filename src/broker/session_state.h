// broker/session_state.h
//
// SessionState is what the broker keeps for one client connection: its outstanding deliveries
// (by delivery tag), its consumers and the exclusive queues it owns.
//
// Thread safety: confined to the broker thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "broker/queue.h"
#include "broker/session_peer.h"

namespace wharf::broker {

// A delivery that has not been settled yet.
struct InFlight {
  std::shared_ptr<Queue> queue;
  QueuedMessage message;
  std::shared_ptr<Consumer> consumer;  // null for pull deliveries
  SteadyTime lease_deadline;           // in Broker::leases_ under this deadline
  uint32_t lease_ms = 0;
};

class SessionState {
 public:
  SessionState(uint64_t id, std::string user, std::shared_ptr<SessionPeer> peer)
      : id_(id), user_(std::move(user)), peer_(std::move(peer)) {}

  uint64_t id() const { return id_; }
  const std::string& user() const { return user_; }
  // Where the client connects from, and since when (listings).
  std::string address;
  int64_t connected_at_ms = 0;
  SessionPeer& peer() { return *peer_; }
  const std::shared_ptr<SessionPeer>& peer_ptr() const { return peer_; }

  uint64_t next_delivery_tag = 1;
  std::map<uint64_t, InFlight> unacked;  // ordered, for "multiple" acks
  std::map<std::string, std::shared_ptr<Consumer>, std::less<>> consumers;
  std::vector<std::string> exclusive_queues;
  uint64_t next_consumer_number = 1;
  uint32_t outstanding_receives = 0;  // long polls not yet answered
  // Tags whose lease expired, so a late ack gets LEASE_EXPIRED rather than "unknown"; the
  // latest kRememberedExpiries, oldest first.
  std::deque<uint64_t> expired_order;
  std::unordered_set<uint64_t> expired_tags;
  static constexpr size_t kRememberedExpiries = 65'536;
  void RememberExpired(uint64_t tag) {
    if (expired_order.size() == kRememberedExpiries) {
      expired_tags.erase(expired_order.front());
      expired_order.pop_front();
    }
    expired_order.push_back(tag);
    expired_tags.insert(tag);
  }
  bool dirty = false;  // has buffered output; in Broker::dirty_

 private:
  uint64_t id_;
  std::string user_;
  std::shared_ptr<SessionPeer> peer_;
};

}  // namespace wharf::broker
