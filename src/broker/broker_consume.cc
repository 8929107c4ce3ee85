// The ways a session takes messages from a queue: push subscriptions (Subscribe, Cancel, and
// a consumer's removal), long-polling pulls (Receive) and AMQP's basic.get (Get). Which
// consumer a ready message goes to is Dispatch's (broker.cc) with the queue's ConsumerSet.
#include "broker/broker.h"
#include "broker/rabbitmq_texts.h"
#include "common/log_safe.h"

namespace wharf::broker {

Result<std::string> Broker::Subscribe(uint64_t session_id, const std::string& queue_name,
                                      std::string consumer_tag, uint32_t prefetch, bool exclusive,
                                      uint32_t lease_ms, bool auto_ack, int32_t priority) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
  if (!session) return Status(StatusCode::kInternal, "no session");
  // First, as RabbitMQ does (a tag in use is refused as such below, whatever the count).
  const uint32_t max_consumers = options_.max_consumers_per_session;
  if (max_consumers != 0 && session->consumers.size() >= max_consumers &&
      !session->consumers.contains(consumer_tag)) {
    return Status(StatusCode::kResourceExhausted,
                  session->amqp() ? "reached maximum (" + std::to_string(max_consumers) +
                                        ") of consumers per channel"
                                  : "this connection has " + std::to_string(max_consumers) +
                                        " consumers, the most [limits] "
                                        "max_consumers_per_channel allows; cancel one first");
  }
  WHARF_RETURN_IF_ERROR(Authorize(session_id, Permission::kRead, ResourceKind::kQueue, queue_name));
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, queue_name));
  WHARF_RETURN_IF_ERROR(CheckLease(*queue, lease_ms, session->amqp()));
  lease_ms = LeaseOf(*queue, lease_ms);
  if (consumer_tag.empty()) {
    if (session->amqp()) {
      do {
        consumer_tag = RandomName("amq.ctag-");
      } while (session->consumers.contains(consumer_tag));
    } else {
      consumer_tag = "ctag-" + std::to_string(session_id) + "-" +
                     std::to_string(session->next_consumer_number++);
    }
  }
  WHARF_RETURN_IF_ERROR(CheckName(session->amqp(), "consumer tag", consumer_tag));
  if (session->consumers.contains(consumer_tag) || session->reply_tag == consumer_tag) {
    return Status(StatusCode::kConsumerTagInUse,
                  "consumer tag " + Quote(consumer_tag) + " is already in use on this connection");
  }
  // RabbitMQ refuses an exclusive consumer on a single-active-consumer queue, even as the
  // first: one consumer at a time is that queue's rule already.
  if (exclusive && queue->consumers().single_active_mode()) {
    if (session->amqp()) {
      return Status(
          StatusCode::kAccessRefused,
          rabbitmq::Resource("queue", queue_name, session->vhost()) + " in exclusive use");
    }
    return Status(StatusCode::kResourceLocked,
                  "queue " + Quote(queue_name) +
                      " has a single active consumer (x-single-active-consumer); an exclusive "
                      "consumer cannot be added");
  }
  for (const auto& other : queue->consumers()) {
    if (other->exclusive || exclusive) {
      if (session->amqp()) {  // RabbitMQ's 403
        return Status(
            StatusCode::kAccessRefused,
            rabbitmq::Resource("queue", queue_name, session->vhost()) + " in exclusive use");
      }
      return Status(StatusCode::kResourceLocked,
                    "queue " + Quote(queue_name) +
                        (other->exclusive ? " has an exclusive consumer"
                                          : " has consumers; cannot add an exclusive one"));
    }
  }
  auto consumer = std::make_shared<Consumer>();
  consumer->tag = consumer_tag;
  consumer->session = session;
  consumer->queue = queue_name;
  consumer->prefetch = prefetch;
  consumer->exclusive = exclusive;
  consumer->lease_ms = lease_ms;
  consumer->auto_ack = auto_ack;
  consumer->priority = priority;
  queue->consumers().Add(consumer);
  session->consumers.emplace(consumer_tag, consumer);
  TouchQueue(*queue);  // x-expires: in use while it has a consumer
  ScheduleDispatch(queue);
  return consumer_tag;
}

Status Broker::Cancel(uint64_t session_id, std::string_view consumer_tag) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
  if (session && !session->reply_tag.empty() && session->reply_tag == consumer_tag) {
    DropReplyConsumer(*session);
    return Status::Ok();
  }
  if (!session || !session->consumers.contains(consumer_tag)) {
    return Status(StatusCode::kConsumerNotFound,
                  "no consumer " + Quote(consumer_tag) + " on this connection");
  }
  RemoveConsumer(*session, std::string(consumer_tag), /*notify=*/false, "");
  return Status::Ok();
}

void Broker::RemoveConsumer(SessionState& session, const std::string& tag, bool notify,
                            std::string_view reason) {
  auto it = session.consumers.find(tag);
  if (it == session.consumers.end()) return;
  std::shared_ptr<Consumer> consumer = it->second;
  session.consumers.erase(it);
  consumer->active = false;
  consumer->session = nullptr;
  if (notify) {
    session.peer().ConsumerCancelled(tag, reason);
    MarkDirty(session);
  }
  auto q = queues_.find(ResourceKey(session.vhost(), consumer->queue));
  if (q == queues_.end()) return;
  ConsumerSet& list = q->second->consumers();
  list.Remove(consumer);
  if (list.empty()) TouchQueue(*q->second);  // x-expires: its idle clock starts now
  if (list.empty() && q->second->spec().auto_delete && !notify) {
    DropQueue(q->second, "auto-delete queue lost its last consumer");
    return;
  }
  // Another consumer may take what this one could not: the next single active one, or a
  // lower priority.
  if (!list.empty() && q->second->HasReady()) ScheduleDispatch(q->second);
}

Status Broker::Receive(uint64_t session_id, uint64_t request_id, const std::string& queue_name,
                       uint32_t max_messages, uint32_t wait_ms, uint32_t lease_ms) {
  thread_checker_.Check();
  if (!FindSession(session_id)) return Status(StatusCode::kInternal, "no session");
  WHARF_RETURN_IF_ERROR(Authorize(session_id, Permission::kRead, ResourceKind::kQueue, queue_name));
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, queue_name));
  WHARF_RETURN_IF_ERROR(CheckLease(*queue, lease_ms, IsAmqp(session_id)));
  lease_ms = LeaseOf(*queue, lease_ms);
  for (const auto& consumer : queue->consumers()) {
    if (consumer->exclusive) {
      return Status(StatusCode::kResourceLocked,
                    "queue " + Quote(queue_name) + " has an exclusive consumer");
    }
  }
  if (max_messages == 0) max_messages = 1;
  if (max_messages > options_.max_receive_batch) {
    return Status(StatusCode::kInvalidArgument, "max_messages " + std::to_string(max_messages) +
                                                    " exceeds the limit of " +
                                                    std::to_string(options_.max_receive_batch));
  }
  wait_ms = std::min(wait_ms, options_.max_receive_wait_ms);
  SessionState* session = FindSession(session_id);
  if (session->outstanding_receives >= options_.max_receives_per_session) {
    return Status(StatusCode::kResourceExhausted,
                  "this connection already has " +
                      std::to_string(options_.max_receives_per_session) +
                      " Receive requests waiting");
  }
  ++session->outstanding_receives;
  PullWaiter waiter;
  waiter.waiter_id = next_waiter_id_++;
  waiter.session_id = session_id;
  waiter.request_id = request_id;
  waiter.max_messages = max_messages;
  waiter.lease_ms = lease_ms;
  waiter.deadline = receive_deadlines_.emplace(clock_->Now() + std::chrono::milliseconds(wait_ms),
                                               std::pair{queue->key(), waiter.waiter_id});
  queue->waiters().push_back(waiter);
  TouchQueue(*queue);
  ScheduleDispatch(queue);
  return Status::Ok();
}

Result<GetResult> Broker::Get(uint64_t session_id, std::string_view queue_name, bool no_ack,
                              uint32_t lease_ms) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
  if (!session) return Status(StatusCode::kInternal, "no session");
  WHARF_RETURN_IF_ERROR(Authorize(session_id, Permission::kRead, ResourceKind::kQueue, queue_name));
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, queue_name));
  WHARF_RETURN_IF_ERROR(CheckLease(*queue, lease_ms, /*no_lease_allowed=*/true));
  lease_ms = LeaseOf(*queue, lease_ms);
  // An exclusive consumer does not keep a Get away, as in RabbitMQ (its basic.get fetches
  // whatever the queue's consumers hold).
  TouchQueue(*queue);
  ArmExpiries(queue);
  std::vector<QueuedMessage> expired;
  auto message = queue->Pop(clock_->WallMillis(), &expired);
  for (QueuedMessage& m : expired) DeadLetter(queue, std::move(m), "expired");
  GetResult result;
  if (message) {
    result.delivery = no_ack ? DeliverSettled(*session, queue, std::move(*message), nullptr)
                             : Track(*session, queue, std::move(*message), nullptr, lease_ms);
  }
  result.message_count = queue->ready();
  // The RAM head runs low, or is all on disk (nothing was taken, though messages are ready):
  // load the next paged ones, as Dispatch does; issued after this flush's commit. Until they
  // are in RAM a Get answers empty (AMQP get-empty): it does not wait for the disk.
  if (store_ && queue->NeedsLoad(options_.load_batch, options_.page_limits.max_bytes)) {
    queue->MarkLoading();
    pending_loads_.push_back(queue);
  }
  return result;
}

}  // namespace wharf::broker
