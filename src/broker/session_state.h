// broker/session_state.h
//
// SessionState is what the broker keeps for one session: its outstanding deliveries (by delivery
// tag), its consumers, its delivery-tag counter and its channel-wide prefetch. A native
// connection is one session; an AMQP connection opens one per channel, all with the
// connection as their owner (SessionOptions::owner_id). Exclusive queues belong to the owner,
// not to a session: the broker keeps them per owner (Broker::CloseOwner).
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

#include "broker/access.h"
#include "broker/queue.h"
#include "broker/session_peer.h"

namespace wharf::broker {

// What operators see of a connection (Broker::ListConnections).
struct ConnectionMeta {
  std::string protocol = "wharf";  // "wharf" (native) or "amqp"
  std::string client;              // the client's name for itself
  std::string client_version;
  std::string vhost = {};  // the virtual host it opened ("" = "/")
};

// How a session is opened (Broker::OpenSession).
struct SessionOptions {
  // Who owns the exclusive queues the session declares, and may use them: 0 = the session is
  // its own owner (native: one session per connection). An AMQP connection opens one session
  // per channel, all with owner_id = the connection's id, a number no session has.
  uint64_t owner_id = 0;
  // RabbitMQ's rules (AMQP 0-9-1): names, generated names, queue arguments and their
  // equivalence, and no-lease deliveries (Broker::kNoLease).
  bool amqp = false;
  // The AMQP channel number (listings); 0 for a native session.
  uint16_t channel = 0;
  // RabbitMQ's consumer timeout: when the session's oldest unsettled delivery has been out
  // this long, the broker tells its peer (SessionPeer::AckTimedOut), which closes it. 0 = never.
  uint32_t ack_timeout_ms = 0;
  // A session that is its own owner is a connection: what the listings say of it. (An AMQP
  // connection tells the broker through Broker::OpenConnection.)
  ConnectionMeta connection{};
  // The virtual host whose exchanges and queues it uses ("" = "/"); every name it gives is
  // looked up there. It must exist (Broker::HasVhost).
  std::string vhost = {};
  // A session of the broker's own, for one HTTP API request (server/api_session.h): not a
  // connection, so neither listed nor counted against a vhost's max-connections.
  bool internal = false;
  // The broker's own work on an operator's behalf (a definitions import, server/definitions.h):
  // its operations are not checked against any user's permissions or tags. Internal only.
  bool trusted = false;
};

// A delivery that has not been settled yet.
struct InFlight {
  std::shared_ptr<Queue> queue;
  QueuedMessage message;
  std::shared_ptr<Consumer> consumer;  // null for pull deliveries (Receive, Get)
  // In Broker::leases_ under this deadline; SteadyTime::max() for a delivery without a lease
  // (lease_ms == kNoLease), which is in no lease timer.
  SteadyTime lease_deadline;
  uint32_t lease_ms = 0;
  SteadyTime delivered_at;  // the ack timeout's start (SessionOptions::ack_timeout_ms)
};

class SessionState {
 public:
  SessionState(uint64_t id, std::string user, std::shared_ptr<SessionPeer> peer,
               SessionOptions options = {})
      : id_(id),
        owner_id_(options.owner_id != 0 ? options.owner_id : id),
        amqp_(options.amqp),
        trusted_(options.internal && options.trusted),
        channel_(options.channel),
        ack_timeout_ms_(options.ack_timeout_ms),
        vhost_(options.vhost.empty() ? std::string(kDefaultVhost) : std::move(options.vhost)),
        user_(std::move(user)),
        peer_(std::move(peer)) {}

  uint64_t id() const { return id_; }
  // The owner of the exclusive queues it declares: its own id unless opened with one.
  uint64_t owner_id() const { return owner_id_; }
  bool own_owner() const { return owner_id_ == id_; }
  bool amqp() const { return amqp_; }
  bool trusted() const { return trusted_; }
  uint16_t channel() const { return channel_; }
  uint32_t ack_timeout_ms() const { return ack_timeout_ms_; }
  const std::string& vhost() const { return vhost_; }
  // Told apart from an earlier session that had the same id (a channel number reused).
  uint64_t serial = 0;
  bool ack_deadline_armed = false;  // in Broker::ack_deadlines_, under ack_deadline
  SteadyTime ack_deadline{};
  const std::string& user() const { return user_; }
  // Where the client connects from, and since when (listings).
  std::string address;
  int64_t connected_at_ms = 0;
  SessionPeer& peer() { return *peer_; }
  const std::shared_ptr<SessionPeer>& peer_ptr() const { return peer_; }

  uint64_t next_delivery_tag = 1;
  std::map<uint64_t, InFlight> unacked;  // ordered, for "multiple" acks
  std::map<std::string, std::shared_ptr<Consumer>, std::less<>> consumers;
  uint64_t next_consumer_number = 1;
  // Channel-wide prefetch (AMQP basic.qos global): while non-zero, the session's consumers
  // get no more deliveries while it holds this many unacked, pull deliveries included
  // (Broker::SetSessionPrefetch). Auto-ack consumers are not limited by it.
  uint32_t prefetch_limit = 0;
  bool HasSessionCredit() const { return prefetch_limit == 0 || unacked.size() < prefetch_limit; }
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
  // Direct reply-to (broker_reply_to.cc): the session's reply consumer's tag and the random
  // part of its address; both empty without one.
  std::string reply_tag;
  std::string reply_suffix;
  // The user's Access (Broker::Authorize), current while the AccessSource's generation is
  // `access_generation`; the last allowed checks, so a publisher's stream of publishes to one
  // exchange costs one pattern match (RabbitMQ's channel keeps such a cache too).
  std::shared_ptr<const Access> access;
  uint64_t access_generation = 0;
  struct AllowedCheck {
    Permission permission;
    ResourceKind kind;
    std::string name;
  };
  std::vector<AllowedCheck> allowed;  // at most kAllowedChecks, newest last
  static constexpr size_t kAllowedChecks = 8;

 private:
  uint64_t id_;
  uint64_t owner_id_;
  bool amqp_;
  bool trusted_;
  uint16_t channel_;
  uint32_t ack_timeout_ms_;
  std::string vhost_;
  std::string user_;
  std::shared_ptr<SessionPeer> peer_;
};

}  // namespace wharf::broker
