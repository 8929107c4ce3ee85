// server/native_session.h
//
// NativeSession is the native protocol's side of a connection on the broker thread: it runs each
// request (a parsed wharf.wire.v1.Frame) against the Broker, builds its reply frame, and is the
// broker::SessionPeer of the connection's one broker session, turning the broker's later answers
// (deferred confirms, pulls, peeks, purges...) into frames. Replies and deliveries go to the
// connection's SessionCore, which hands them to the I/O thread, where NativeCodec serializes
// them.
//
// Thread safety: confined to the broker thread (created on the I/O thread at login, before the
// broker sees it).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "broker/session_peer.h"
#include "common/log_limiter.h"
#include "protocol/codec.h"
#include "server/server_context.h"
#include "server/session_core.h"
#include "server/user_admin.h"

namespace wharf::server {

// A decoded request on its way to the broker thread.
struct NativeRequest {
  uint64_t request_id = 0;
  protocol::wire::Frame frame;
  Message message;     // Publish only: converted on the I/O thread
  Status early_error;  // found while decoding; answered in order by the broker thread
};

class NativeSession final : public broker::SessionPeer,
                            public std::enable_shared_from_this<NativeSession> {
 public:
  NativeSession(uint64_t id, std::string user, ServerContext* context,
                std::shared_ptr<SessionCore> core)
      : id_(id), user_(std::move(user)), context_(context), core_(std::move(core)) {}

  // Opens the connection's broker session in `vhost` (broker thread). Until it succeeded,
  // Execute runs nothing: requests a client sent right after Authenticate must not run
  // outside a session (as the broker's own work) when the open is refused.
  Status Open(std::string peer, std::string vhost, std::string client_name);
  // Runs a batch of the connection's requests, in order, then ends the batch.
  void Execute(std::vector<NativeRequest>& batch);

  // SessionPeer.
  void Deliver(broker::Delivery delivery) override;
  void CompleteReceive(uint64_t request_id, std::vector<broker::Delivery> deliveries) override;
  void PublishDone(uint64_t request_id, const PublishResult& result, const Status& status) override;
  void CancelDelayedDone(uint64_t request_id, const Result<bool>& result) override;
  void ListDelayedDone(uint64_t request_id, const Result<DelayedPage>& result) override;
  void RedriveDone(uint64_t request_id, const Result<RedriveInfo>& result) override;
  void PeekDone(uint64_t request_id, const Result<PeekPage>& result) override;
  void PurgeDone(uint64_t request_id, const Result<uint64_t>& result) override;
  void DeleteQueueDone(uint64_t request_id, const Result<uint64_t>& result) override;
  void ConsumerCancelled(const std::string& consumer_tag, std::string_view reason) override;
  // Native sessions have leases, not an ack timeout (never opened with one).
  void AckTimedOut(uint64_t, const std::string&, uint32_t) override {}
  void Flush() override { core_->Flush(); }
  bool Writable() const override { return core_->Writable(); }

 private:
  void HandleRequest(NativeRequest& request);
  void HandleUserRequest(uint64_t rid, const protocol::wire::Frame& frame);
  // AddVhost, DeleteVhost, SetVhostLimits, ListVhosts: administrators only.
  void HandleVhostRequest(uint64_t rid, const protocol::wire::Frame& frame);
  // Policies of the session's vhost (docs/policies.md): the policymaker or administrator tag.
  void HandlePolicyRequest(uint64_t rid, const protocol::wire::Frame& frame);
  // Definitions export and import (server/definitions.h): the administrator tag.
  void HandleDefinitionsRequest(uint64_t rid, const protocol::wire::Frame& frame);
  // Admins only: the store's online backup (docs/operations.md, "Backup and restore").
  void HandleBackup(uint64_t rid, const std::string& directory);
  // The user change `frame` asks for (server/user_admin.h), or why not.
  Result<UserChange> UserChangeOf(const protocol::wire::Frame& frame) const;
  // Replies to `rid` with the status, then flushes (an answer that comes after the request's
  // batch).
  void ReplyLater(uint64_t rid, const Status& status);
  // "conn=7 user=alice", who asks, for user_admin's log.
  std::string Actor() const;
  // kVhostNotFound unless the vhost exists (broker thread).
  Status CheckVhost(const std::string& vhost) const;
  void Reply(uint64_t request_id, protocol::wire::Frame frame);
  void ReplyStatus(uint64_t request_id, const Status& status);
  // Replies with `frame` (an Ok frame when empty) once the topology change it answers is synced,
  // or with the write's error: a crash after the answer cannot undo the change.
  void ReplyWhenDurable(uint64_t request_id, protocol::wire::Frame frame = {});

  const uint64_t id_;
  const std::string user_;
  ServerContext* const context_;
  const std::shared_ptr<SessionCore> core_;
  bool opened_ = false;  // Open succeeded
  std::string vhost_;    // its listings are of this vhost's resources
  // Publishes not confirmed (a failing store) are logged at most once a second per connection,
  // with how many were not logged since: a full disk fails every publish in flight.
  LogLimiter unconfirmed_log_{std::chrono::seconds(1)};
};

}  // namespace wharf::server
