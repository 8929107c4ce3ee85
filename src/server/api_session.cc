#include "server/api_session.h"

#include <utility>

namespace wharf::server {

std::future<api::Reply> ApiSession::Start(broker::Broker* broker, const Post& post,
                                          uint64_t session_id, std::string user, std::string vhost,
                                          std::string address, Operation operation,
                                          SharedProgress progress) {
  std::shared_ptr<ApiSession> session(new ApiSession(broker, post, session_id));
  std::future<api::Reply> answer = session->promise_.get_future();
  post([session, user = std::move(user), vhost = std::move(vhost), address = std::move(address),
        operation = std::move(operation), progress = std::move(progress)]() mutable {
    // Nothing for a request its worker gave up on: a get that took messages, or a publish,
    // that no one would hear of would lose them, or be repeated by the client's retry.
    int waiting = kWaiting;
    if (!progress->compare_exchange_strong(waiting, kStarted)) return;
    broker::SessionOptions options;
    options.amqp = true;  // RabbitMQ's names, arguments and texts, as its API has them
    options.internal = true;
    options.vhost = std::move(vhost);
    broker::Broker& broker = *session->broker_;
    Status opened = broker.OpenSession(session->id_, std::move(user), session, std::move(address),
                                       std::move(options));
    if (!opened.ok()) {
      // Not open: nothing to close.
      session->answered_ = true;
      session->promise_.set_value(api::ErrorOf(opened));
      return;
    }
    operation(*session, broker);
  });
  return answer;
}

void ApiSession::Answer(api::Reply reply) {
  if (answered_) return;
  answered_ = true;
  promise_.set_value(std::move(reply));
  // Not from inside the broker's own call into this peer: closing it is the next piece of
  // broker work.
  post_([broker = broker_, id = id_] { broker->CloseSession(id); });
}

void ApiSession::PublishDone(uint64_t, const PublishResult& result, const Status& status) {
  if (on_published) on_published(result, status);
}

void ApiSession::PeekDone(uint64_t, const Result<PeekPage>& result) {
  if (on_peeked) on_peeked(result);
}

void ApiSession::PurgeDone(uint64_t, const Result<uint64_t>& result) {
  if (on_purged) on_purged(result);
}

void ApiSession::DeleteQueueDone(uint64_t, const Result<uint64_t>& result) {
  if (on_deleted) on_deleted(result);
}

void ApiSession::RedriveDone(uint64_t, const Result<RedriveInfo>& result) {
  if (on_redrive) on_redrive(result);
}

void ApiSession::ListDelayedDone(uint64_t, const Result<DelayedPage>& result) {
  if (on_delayed) on_delayed(result);
}

void ApiSession::CancelDelayedDone(uint64_t, const Result<bool>& result) {
  if (on_cancelled) on_cancelled(result);
}

}  // namespace wharf::server
