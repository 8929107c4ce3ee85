// server/api_session.h
//
// ApiSession is the broker session of one HTTP API request that changes something or reads
// messages (server/api_writes.h): opened on the broker thread as the request's user, in the
// vhost its path names, with RabbitMQ's rules (SessionOptions::amqp), as a session of the
// broker's own (SessionOptions::internal: not a connection, neither listed nor counted). So the
// broker checks the user's permissions for the API exactly as for a protocol's session.
//
// Start runs the request's operation on the broker thread; the operation answers with
// Answer(), at once or from one of the peer calls the broker makes later (a purge or deletion
// once it is synced, a peek once its messages are loaded, a publish once confirmed), which the
// operation hooks with the On* handlers. The session closes itself once answered.
//
// Threads: everything but Start's caller runs on the broker thread; the answer reaches the HTTP
// worker through a promise, which it waits for at most its own timeout (an answer after that is
// dropped).
#pragma once

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "broker/session_peer.h"
#include "server/api_json.h"

namespace wharf::server {

class ApiSession final : public broker::SessionPeer,
                         public std::enable_shared_from_this<ApiSession> {
 public:
  using Post = std::function<void(std::function<void()>)>;
  using Operation = std::function<void(ApiSession&, broker::Broker&)>;

  // Whether the operation started, shared between the HTTP worker and the broker thread: a
  // worker that gives up first (kAbandoned) is sure nothing was done; one that gives up after
  // kStarted is not.
  enum Progress : int { kWaiting = 0, kStarted = 1, kAbandoned = 2 };
  using SharedProgress = std::shared_ptr<std::atomic<int>>;

  // On the HTTP worker: posts the session's opening and `operation` to the broker thread.
  // The future has the answer; a vhost that does not exist is answered 404 without running
  // `operation`; an abandoned request is dropped without running it (`progress`).
  static std::future<api::Reply> Start(broker::Broker* broker, const Post& post,
                                       uint64_t session_id, std::string user, std::string vhost,
                                       std::string address, Operation operation,
                                       SharedProgress progress);

  uint64_t id() const { return id_; }
  // The answer (the first one counts); the session closes after it.
  void Answer(api::Reply reply);
  // Answer(ErrorOf(status)).
  void Fail(const Status& status) { Answer(api::ErrorOf(status)); }

  // What to do when the broker answers later (broker thread).
  std::function<void(const Result<uint64_t>&)> on_purged;                 // PurgeQueue
  std::function<void(const Result<uint64_t>&)> on_deleted;                // DeleteQueue
  std::function<void(const Result<PeekPage>&)> on_peeked;                 // Peek
  std::function<void(const PublishResult&, const Status&)> on_published;  // Publish
  std::function<void(const Result<RedriveInfo>&)> on_redrive;  // StartRedrive, CancelRedrive
  std::function<void(const Result<DelayedPage>&)> on_delayed;  // ListDelayed
  std::function<void(const Result<bool>&)> on_cancelled;       // CancelDelayed

  // broker::SessionPeer
  void Deliver(broker::Delivery) override {}
  void CompleteReceive(uint64_t, std::vector<broker::Delivery>) override {}
  void PublishDone(uint64_t request_id, const PublishResult& result, const Status& status) override;
  void CancelDelayedDone(uint64_t request_id, const Result<bool>& result) override;
  void ListDelayedDone(uint64_t request_id, const Result<DelayedPage>& result) override;
  void PeekDone(uint64_t request_id, const Result<PeekPage>& result) override;
  void RedriveDone(uint64_t request_id, const Result<RedriveInfo>& result) override;
  void PurgeDone(uint64_t request_id, const Result<uint64_t>& result) override;
  void DeleteQueueDone(uint64_t request_id, const Result<uint64_t>& result) override;
  void ConsumerCancelled(const std::string&, std::string_view) override {}
  void AckTimedOut(uint64_t, const std::string&, uint32_t) override {}
  void Flush() override {}
  bool Writable() const override { return true; }

 private:
  ApiSession(broker::Broker* broker, Post post, uint64_t id)
      : broker_(broker), post_(std::move(post)), id_(id) {}

  broker::Broker* const broker_;
  const Post post_;
  const uint64_t id_;
  std::promise<api::Reply> promise_;
  bool answered_ = false;
};

}  // namespace wharf::server
