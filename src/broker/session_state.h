// broker/session_state.h
//
// SessionState is what the broker keeps for one client connection: its outstanding deliveries
// (by delivery tag), its consumers and the exclusive queues it owns.
//
// Thread safety: confined to the broker thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "broker/queue.h"
#include "broker/session_peer.h"

namespace wharf::broker {

// A delivery that has not been settled yet.
struct InFlight {
  std::shared_ptr<Queue> queue;
  QueuedMessage message;
  std::shared_ptr<Consumer> consumer;  // null for pull deliveries
};

class SessionState {
 public:
  SessionState(uint64_t id, std::string user, std::shared_ptr<SessionPeer> peer)
      : id_(id), user_(std::move(user)), peer_(std::move(peer)) {}

  uint64_t id() const { return id_; }
  const std::string& user() const { return user_; }
  SessionPeer& peer() { return *peer_; }
  const std::shared_ptr<SessionPeer>& peer_ptr() const { return peer_; }

  uint64_t next_delivery_tag = 1;
  std::map<uint64_t, InFlight> unacked;  // ordered, for "multiple" acks
  std::map<std::string, std::shared_ptr<Consumer>, std::less<>> consumers;
  std::vector<std::string> exclusive_queues;
  uint64_t next_consumer_number = 1;
  uint32_t outstanding_receives = 0;  // long polls not yet answered
  bool dirty = false;                 // has buffered output; in Broker::dirty_

 private:
  uint64_t id_;
  std::string user_;
  std::shared_ptr<SessionPeer> peer_;
};

}  // namespace wharf::broker
