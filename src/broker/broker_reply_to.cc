// Direct reply-to (RabbitMQ's amq.rabbitmq.reply-to, docs/amqp.md): an RPC client consumes
// the pseudo-queue "amq.rabbitmq.reply-to" with no-ack and publishes its requests with that
// reply-to; the server's reply, published to the default exchange with the address the
// broker put in its place, goes straight to the client's consumer, with no queue in between.
// Part of class Broker (broker.h).
#include "broker/broker.h"

namespace wharf::broker {

Result<std::string> Broker::SubscribeReplyTo(uint64_t session_id, std::string consumer_tag,
                                             bool no_ack) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
  if (!session) return Status(StatusCode::kInternal, "no session");
  if (!consumer_tag.empty()) {
    WHARF_RETURN_IF_ERROR(CheckName(session->amqp(), "consumer tag", consumer_tag));
    if (session->consumers.contains(consumer_tag) || session->reply_tag == consumer_tag) {
      return Status(StatusCode::kConsumerTagInUse, "consumer tag " + Quote(consumer_tag) +
                                                       " is already in use on this connection");
    }
  }
  // RabbitMQ's words.
  if (!no_ack) return Status(StatusCode::kPreconditionFailed, "reply consumer cannot acknowledge");
  if (!session->reply_tag.empty()) {
    return Status(StatusCode::kPreconditionFailed, "reply consumer already set");
  }
  if (consumer_tag.empty()) {
    do {
      consumer_tag = RandomName("amq.ctag-");
    } while (session->consumers.contains(consumer_tag));
  }
  std::string suffix;
  do {
    suffix = SecureRandomName("");
  } while (reply_sessions_.contains(suffix));
  reply_sessions_.emplace(suffix, session_id);
  session->reply_tag = consumer_tag;
  session->reply_suffix = std::move(suffix);
  return consumer_tag;
}

Result<std::string> Broker::ReplyToAddress(uint64_t session_id) const {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end() || it->second->reply_suffix.empty()) {
    return Status(StatusCode::kPreconditionFailed, "fast reply consumer does not exist");
  }
  return std::string(kReplyTo) + "." + it->second->reply_suffix;
}

bool Broker::ReplyToExists(std::string_view name) const {
  if (name == kReplyTo) return true;
  if (name.size() <= kReplyTo.size() + 1 || !name.starts_with(kReplyTo) ||
      name[kReplyTo.size()] != '.') {
    return false;
  }
  return reply_sessions_.contains(std::string(name.substr(kReplyTo.size() + 1)));
}

PublishOutcome Broker::PublishReply(const std::string& routing_key, Message message) {
  message.id = NextMessageId();
  message.published_at_ms = clock_->WallMillis();
  message.deaths.clear();
  auto envelope = MakeEnvelope(Envelope{std::move(message), std::string(), routing_key});
  PublishOutcome outcome;
  outcome.result.message_id = envelope->message.id;
  outcome.envelope = envelope;
  auto it = reply_sessions_.find(routing_key.substr(kReplyTo.size() + 1));
  if (it == reply_sessions_.end()) return outcome;  // its consumer is gone: dropped
  SessionState* session = FindSession(it->second);
  if (session == nullptr) return outcome;
  // A no-ack delivery of no queue: it takes the session's next tag, as any delivery.
  Delivery delivery;
  delivery.consumer_tag = session->reply_tag;
  delivery.delivery_tag = session->next_delivery_tag++;
  delivery.envelope = std::move(envelope);
  delivery.receive_count = 1;
  session->peer().Deliver(std::move(delivery));
  MarkDirty(*session);
  outcome.result.routed_queues = 1;
  return outcome;
}

void Broker::DropReplyConsumer(SessionState& session) {
  if (session.reply_tag.empty()) return;
  reply_sessions_.erase(session.reply_suffix);
  session.reply_tag.clear();
  session.reply_suffix.clear();
}

}  // namespace wharf::broker
