// broker/session_peer.h
//
// SessionPeer is the broker's view of one client connection: where it sends what the client
// did not directly ask for at that moment (pushed deliveries, completed long polls, cancelled
// consumers). The server implements it; tests implement it with a recorder.
//
// Thread safety: every method is called on the broker thread and must not block. Calls only
// buffer; the broker calls Flush() once after each batch of work so that one batch costs one
// hand-over to the connection's I/O thread, however many deliveries it produced.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "broker/envelope.h"
#include "wharf/result.h"
#include "wharf/status.h"
#include "wharf/types.h"

namespace wharf::broker {

class SessionPeer {
 public:
  virtual ~SessionPeer() = default;
  virtual void Deliver(Delivery delivery) = 0;
  // A Receive (pull) request is complete: deliveries may be empty when its wait ran out.
  virtual void CompleteReceive(uint64_t request_id, std::vector<Delivery> deliveries) = 0;
  // The answer to a publish that waited for the store (PublishOutcome::deferred): OK once the
  // message is on disk, or the store's error (the message is then not confirmed).
  virtual void PublishDone(uint64_t request_id, const PublishResult& result,
                           const Status& status) = 0;
  // Answers to CancelDelayed (true: it was pending and is cancelled) and ListDelayed.
  virtual void CancelDelayedDone(uint64_t request_id, const Result<bool>& result) = 0;
  virtual void ListDelayedDone(uint64_t request_id, const Result<DelayedPage>& result) = 0;
  virtual void PeekDone(uint64_t request_id, const Result<PeekPage>& result) = 0;
  // Answers to StartRedrive and CancelRedrive, once the task's new state is on disk.
  virtual void RedriveDone(uint64_t request_id, const Result<RedriveInfo>& result) = 0;
  // Answers to PurgeQueue and DeleteQueue (the messages purged, or dropped with the queue),
  // once that is durable.
  virtual void PurgeDone(uint64_t request_id, const Result<uint64_t>& result) = 0;
  virtual void DeleteQueueDone(uint64_t request_id, const Result<uint64_t>& result) = 0;
  virtual void ConsumerCancelled(const std::string& consumer_tag, std::string_view reason) = 0;
  // The session's oldest unsettled delivery (`delivery_tag`, of consumer `consumer_tag`, "" for
  // a pull) has been out for `timeout_ms`, the session's SessionOptions::ack_timeout_ms (AMQP's
  // consumer timeout). The peer is expected to close the session; the broker tells it once.
  virtual void AckTimedOut(uint64_t delivery_tag, const std::string& consumer_tag,
                           uint32_t timeout_ms) = 0;
  virtual void Flush() = 0;
  // False while the connection has too much output waiting: the broker then holds push
  // deliveries back. The peer calls Broker::ResumeSession() when it drains.
  virtual bool Writable() const = 0;
};

}  // namespace wharf::broker
