// server/internal_session.h
//
// The broker sessions the server opens for itself, not for a client: a definitions import's
// (server/definitions.h) and the wait for a sync of user_admin (server/user_admin.h). They are
// internal (neither listed nor counted) and trusted (no permission checks), never consume nor
// publish, so nothing reaches their peer but AnswerWhenDurable's answer.
//
// Threads: broker thread, but NextInternalSessionId (any).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "broker/session_peer.h"
#include "server/server_context.h"

namespace wharf::server {

class InternalPeer final : public broker::SessionPeer {
 public:
  void Deliver(broker::Delivery) override {}
  void CompleteReceive(uint64_t, std::vector<broker::Delivery>) override {}
  void PublishDone(uint64_t, const PublishResult&, const Status&) override {}
  void CancelDelayedDone(uint64_t, const Result<bool>&) override {}
  void ListDelayedDone(uint64_t, const Result<DelayedPage>&) override {}
  void PeekDone(uint64_t, const Result<PeekPage>&) override {}
  void RedriveDone(uint64_t, const Result<RedriveInfo>&) override {}
  void PurgeDone(uint64_t, const Result<uint64_t>&) override {}
  void DeleteQueueDone(uint64_t, const Result<uint64_t>&) override {}
  void ConsumerCancelled(const std::string&, std::string_view) override {}
  void AckTimedOut(uint64_t, const std::string&, uint32_t) override {}
  void Flush() override {}
  bool Writable() const override { return true; }
};

// A fresh id for an internal session: bit 61 set, never a connection's (small counters), an
// AMQP channel's (bit 63) nor an HTTP API request's (bit 62).
uint64_t NextInternalSessionId();

// Opens an internal, trusted session in `vhost` as `user` (for the log), with RabbitMQ's rules
// for names and arguments; its id, or why not (the vhost does not exist).
Result<uint64_t> OpenInternalSession(const ServerContext& context, const std::string& vhost,
                                     const std::string& user);

// Calls `answer` on the broker thread once every change the broker has made so far is synced
// (through an internal session of "/" that closes after it), and flushes the broker's work so
// that the sync starts. The answer to a change made outside any client's session that must
// survive a crash once given (a vhost's).
void WhenSynced(const ServerContext& context, std::function<void(const Status&)> answer);

}  // namespace wharf::server
