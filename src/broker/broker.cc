#include "broker/broker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "common/log_safe.h"

namespace wharf::broker {
namespace {

constexpr size_t kMaxNameBytes = 255;

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == ':';
}

uint64_t ApproximateWireSize(const Message& m) {
  uint64_t size = m.body.size() + 128 + HeaderBytes(m.headers) + 16 * m.headers.size();
  const Properties& p = m.properties;
  size += p.message_id.size() + p.correlation_id.size() + p.reply_to.size() +
          p.content_type.size() + p.content_encoding.size() + p.type.size() + p.app_id.size();
  return size;
}

}  // namespace

Status TooManyHeaders(uint64_t count, uint32_t max_headers) {
  return Status(StatusCode::kMessageTooLarge, "message has " + std::to_string(count) +
                                                  " headers, more than max_headers " +
                                                  std::to_string(max_headers));
}

Status CheckMessageSize(const Message& message, uint64_t max_message_bytes, uint32_t max_headers) {
  if (message.headers.size() > max_headers) {
    return TooManyHeaders(message.headers.size(), max_headers);
  }
  const uint64_t header_bytes = HeaderBytes(message.headers);
  if (message.body.size() + header_bytes > max_message_bytes) {
    return Status(StatusCode::kMessageTooLarge,
                  "message body of " + std::to_string(message.body.size()) + " bytes and " +
                      std::to_string(header_bytes) + " bytes of headers exceed max_message_bytes " +
                      std::to_string(max_message_bytes));
  }
  return Status::Ok();
}

std::string Quote(std::string_view name) { return "'" + CutForDisplay(name) + "'"; }

Status ValidateName(std::string_view kind, std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(kind) + " name must be 1 to 255 bytes long");
  }
  for (char c : name) {
    if (!NameChar(c)) {
      return Status(StatusCode::kInvalidArgument,
                    std::string(kind) + " name " + Quote(name) +
                        " may only contain letters, digits and - _ . :");
    }
  }
  return Status::Ok();
}

Broker::Broker(BrokerOptions options, const Clock* clock, store::MessageStore* store)
    : options_(options),
      clock_(clock),
      // Unique across restarts while the average rate stays under 65,536 ids per millisecond
      // (and Recover() moves past every id on disk, whatever the clock did).
      next_message_id_(static_cast<uint64_t>(clock->WallMillis()) << 16),
      store_(store) {
  release_tokens_ = std::max<double>(options_.delay_release_per_second / 10.0, 1.0);
  release_refilled_at_ = clock_->Now();
  for (auto [name, type] : {std::pair{"amq.direct", ExchangeType::kDirect},
                            {"amq.fanout", ExchangeType::kFanout},
                            {"amq.topic", ExchangeType::kTopic},
                            {"amq.headers", ExchangeType::kHeaders}}) {
    ExchangeSpec spec;
    spec.name = name;
    spec.type = type;
    exchanges_.emplace(spec.name, std::make_unique<Exchange>(spec));
  }
}

// --- Sessions -----------------------------------------------------------------------------------

void Broker::OpenSession(uint64_t session_id, std::string user, std::shared_ptr<SessionPeer> peer,
                         std::string address) {
  thread_checker_.Check();
  auto state = std::make_unique<SessionState>(session_id, std::move(user), std::move(peer));
  state->address = std::move(address);
  state->connected_at_ms = clock_->WallMillis();
  sessions_.emplace(session_id, std::move(state));
}

void Broker::CloseSession(uint64_t session_id) {
  thread_checker_.Check();
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return;
  SessionState& session = *it->second;
  // Requeue first, so that an auto-delete queue losing its last consumer below still holds
  // (and drops with itself) everything, rather than those messages vanishing in between.
  // Queue::Requeue restores each message's original position, whatever the order here.
  auto unacked = std::move(session.unacked);
  for (auto& [tag, in_flight] : unacked) SettleOne(std::move(in_flight), Settle::kRequeue);
  std::vector<std::string> tags;
  for (const auto& [tag, consumer] : session.consumers) tags.push_back(tag);
  for (const auto& tag : tags) RemoveConsumer(session, tag, /*notify=*/false, "");
  // DropQueue edits session.exclusive_queues: walk a copy.
  std::vector<std::string> exclusive = session.exclusive_queues;
  for (const auto& name : exclusive) {
    auto q = queues_.find(name);
    if (q != queues_.end()) DropQueue(q->second, "exclusive queue's connection closed");
  }
  sessions_.erase(it);
}

void Broker::ResumeSession(uint64_t session_id) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
  if (!session) return;
  for (const auto& [tag, consumer] : session->consumers) {
    auto q = queues_.find(consumer->queue);
    if (q != queues_.end()) ScheduleDispatch(q->second);
  }
  // Its long polls may have been passed over too. Resumes are rare; a scan is fine.
  if (session->outstanding_receives > 0) {
    for (auto& [name, queue] : queues_) {
      if (!queue->waiters().empty()) ScheduleDispatch(queue);
    }
  }
}

SessionState* Broker::FindSession(uint64_t session_id) {
  auto it = sessions_.find(session_id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

void Broker::MarkDirty(SessionState& session) {
  if (session.dirty) return;
  session.dirty = true;
  dirty_.emplace_back(session.id(), session.peer_ptr());
}

// --- Messaging ----------------------------------------------------------------------------------

Result<PublishOutcome> Broker::Publish(uint64_t session_id, const std::string& exchange_name,
                                       const std::string& routing_key, Message message,
                                       uint64_t request_id, PublishTiming timing) {
  thread_checker_.Check();
  const int64_t now_ms = clock_->WallMillis();
  int64_t due_ms = 0;  // > 0: delayed until then
  if (timing.delay_ms != 0 || timing.deliver_at_ms != 0) {
    if (timing.delay_ms != 0 && timing.deliver_at_ms != 0) {
      return Status(StatusCode::kInvalidArgument,
                    "a publish may set delay_ms or deliver_at_ms, not both");
    }
    WHARF_RETURN_IF_ERROR(CheckDelay(timing.delay_ms, timing.deliver_at_ms, now_ms));
    // A relative delay counts from now to the microsecond, rounded up: never early.
    due_ms = timing.delay_ms != 0 ? DueAfter(timing.delay_ms) : timing.deliver_at_ms;
    if (due_ms <= now_ms) due_ms = 0;  // a time in the past: deliver at once
  }
  WHARF_RETURN_IF_ERROR(
      CheckMessageSize(message, options_.max_message_bytes, options_.max_headers));
  if (routing_key.size() > kMaxRoutingKeyBytes) {
    return Status(StatusCode::kInvalidArgument, "routing key longer than 255 bytes");
  }
  std::vector<Queue*> targets;
  if (exchange_name.empty()) {
    auto it = queues_.find(routing_key);
    // Anyone may publish to an exclusive queue (RPC reply queues); only its owner consumes.
    if (it != queues_.end()) targets.push_back(it->second.get());
  } else {
    Exchange* exchange = FindExchange(exchange_name);
    if (!exchange) {
      return Status(StatusCode::kExchangeNotFound,
                    "exchange " + Quote(exchange_name) + " not found");
    }
    std::vector<const Exchange*> visited;
    RouteThrough(exchange, routing_key, message.headers, &targets, &visited);
    // Two paths (exchange-to-exchange bindings) may reach one queue: it gets one copy.
    std::sort(targets.begin(), targets.end());
    targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  }
  // Length limits (docs/lifecycle.md): a full reject-publish queue does not take it.
  std::vector<Queue*> full;
  if (due_ms == 0) {
    std::erase_if(targets, [&](Queue* queue) {
      const QueuePolicy& policy = queue->policy();
      if (policy.overflow == QueuePolicy::Overflow::kDropHead ||
          !WouldOverflow(*queue, message.body.size())) {
        return false;
      }
      full.push_back(queue);
      return true;
    });
  }
  // Which targets store it: durable queues take persistent messages, and a queue that pages
  // to disk takes every message there.
  const bool persistent = message.persistent;
  enum : uint8_t { kRam, kStore, kPage };
  std::vector<uint8_t> modes(targets.size(), kRam);
  uint32_t references = 0;
  if (store_) {
    // A delayed message in a durable queue is always written: its timeline is on disk.
    WHARF_RETURN_IF_ERROR(CheckStore(targets, persistent || due_ms != 0));
    for (size_t i = 0; i < targets.size(); ++i) {
      bool page = due_ms == 0 && targets[i]->ShouldPage(options_.page_limits);
      if (targets[i]->store_id() != 0 && (persistent || page || due_ms != 0)) {
        modes[i] = page ? kPage : kStore;
        ++references;
      }
    }
  }
  message.id = NextMessageId();
  message.published_at_ms = now_ms;
  message.deaths.clear();  // the broker's to set
  auto envelope = MakeEnvelope(Envelope{std::move(message), exchange_name, routing_key});
  // One stored queue: the message goes inside its entry. Several: written once, referenced.
  const bool inline_entry = references == 1;
  const uint8_t flags =
      static_cast<uint8_t>((inline_entry ? store::kEntryInline : store::kEntryShared) |
                           (persistent ? 0 : store::kEntryTransient));
  if (references > 1) Persist(store::StoreBatch::PutMessage{envelope, references});
  for (size_t i = 0; i < targets.size(); ++i) {
    Queue* queue = targets[i];
    auto it = queues_.find(queue->name());
    if (due_ms != 0) {
      // Routed now, visible when due (docs/scheduler.md).
      DelayKey key{due_ms, envelope->message.id};
      if (modes[i] != kRam) {
        Persist(store::StoreBatch::PutDelayed{
            store::EntryRef{queue->store_id(), 0, envelope->message.id, 0, flags,
                            inline_entry ? envelope : nullptr},
            due_ms});
      }
      queue->delayed().Add(
          key, DelayedMessage{envelope, 0, modes[i] != kRam ? flags : uint8_t{0}, 0, nullptr});
      if (it != queues_.end()) UpdateDelayHead(it->second);
      continue;
    }
    uint64_t seq = queue->Enqueue(envelope, modes[i] != kRam, flags, modes[i] == kPage);
    if (modes[i] != kRam) {
      Persist(store::StoreBatch::PutEntry{store::EntryRef{queue->store_id(), seq,
                                                          envelope->message.id, 0, flags,
                                                          inline_entry ? envelope : nullptr}});
    }
    if (it != queues_.end()) ScheduleDispatch(it->second);
  }
  // drop-head queues over their limit let their oldest ready messages go (max_length).
  for (Queue* queue : targets) {
    if (due_ms == 0 && queue->policy().has_length_limit() &&
        queue->policy().overflow == QueuePolicy::Overflow::kDropHead) {
      if (auto it = queues_.find(queue->name()); it != queues_.end()) DropHeads(it->second);
    }
  }
  if (!full.empty()) {
    // The negative confirm: not enqueued in the full queues (dead-lettered from them with
    // reject-publish-dlx); any other queue it reached has it.
    std::string names;
    for (Queue* queue : full) {
      names += (names.empty() ? "" : ", ") + Quote(queue->name());
      if (queue->policy().overflow == QueuePolicy::Overflow::kRejectPublishDlx) {
        if (auto it = queues_.find(queue->name()); it != queues_.end()) {
          DeadLetter(it->second, QueuedMessage{envelope, 0, 0, false, 0, 0, nullptr}, "max_length");
        }
      }
    }
    spdlog::debug("conn={} message={} refused by full queue(s) {}", session_id,
                  envelope->message.id, LogSafe(names));
    return Status(StatusCode::kQueueFull,
                  "queue " + names +
                      " is full (x-max-length / x-max-length-bytes with x-overflow " +
                      (full[0]->policy().overflow == QueuePolicy::Overflow::kRejectPublish
                           ? "reject-publish"
                           : "reject-publish-dlx, so it was dead-lettered") +
                      "): the message was not enqueued there" +
                      (targets.empty()
                           ? std::string()
                           : "; it reached " + std::to_string(targets.size()) + " other queue(s)"));
  }
  PublishOutcome outcome;
  outcome.result.message_id = envelope->message.id;
  outcome.result.routed_queues = static_cast<uint32_t>(targets.size());
  outcome.envelope = std::move(envelope);
  if (persistent && references > 0) {
    // Confirmed when the batch holding it is synced; one sync serves every publish in it.
    if (request_id != 0) {
      pending_confirms_.push_back(
          PendingConfirm{session_id, request_id, outcome.result, clock_->Now()});
      batch_sync_ = true;
      outcome.deferred = true;
    }
  }
  return outcome;
}

Result<std::string> Broker::Subscribe(uint64_t session_id, const std::string& queue_name,
                                      std::string consumer_tag, uint32_t prefetch, bool exclusive,
                                      uint32_t lease_ms) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
  if (!session) return Status(StatusCode::kInternal, "no session");
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, queue_name));
  WHARF_RETURN_IF_ERROR(CheckLease(*queue, lease_ms));
  if (consumer_tag.empty()) {
    consumer_tag = "ctag-" + std::to_string(session_id) + "-" +
                   std::to_string(session->next_consumer_number++);
  }
  WHARF_RETURN_IF_ERROR(ValidateName("consumer tag", consumer_tag));
  if (session->consumers.contains(consumer_tag)) {
    return Status(StatusCode::kConsumerTagInUse,
                  "consumer tag " + Quote(consumer_tag) + " is already in use on this connection");
  }
  for (const auto& other : queue->consumers()) {
    if (other->exclusive || exclusive) {
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
  queue->consumers().push_back(consumer);
  session->consumers.emplace(consumer_tag, consumer);
  ScheduleDispatch(queue);
  return consumer_tag;
}

Status Broker::Cancel(uint64_t session_id, std::string_view consumer_tag) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
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
  auto q = queues_.find(consumer->queue);
  if (q == queues_.end()) return;
  auto& list = q->second->consumers();
  std::erase(list, consumer);
  if (q->second->next_consumer() >= list.size()) q->second->next_consumer() = 0;
  if (list.empty() && q->second->spec().auto_delete && !notify) {
    DropQueue(q->second, "auto-delete queue lost its last consumer");
  }
}

Status Broker::Receive(uint64_t session_id, uint64_t request_id, const std::string& queue_name,
                       uint32_t max_messages, uint32_t wait_ms, uint32_t lease_ms) {
  thread_checker_.Check();
  if (!FindSession(session_id)) return Status(StatusCode::kInternal, "no session");
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, queue_name));
  WHARF_RETURN_IF_ERROR(CheckLease(*queue, lease_ms));
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
                                               std::pair{queue_name, waiter.waiter_id});
  queue->waiters().push_back(waiter);
  ScheduleDispatch(queue);
  return Status::Ok();
}

// --- Dispatch -----------------------------------------------------------------------------------

void Broker::ScheduleDispatch(const std::shared_ptr<Queue>& queue) {
  if (queue->dispatch_scheduled) return;
  queue->dispatch_scheduled = true;
  pending_dispatch_.push_back(queue);
}

void Broker::CompleteWaiter(const PullWaiter& waiter, std::vector<Delivery> deliveries) {
  receive_deadlines_.erase(waiter.deadline);
  if (SessionState* session = FindSession(waiter.session_id)) {
    --session->outstanding_receives;
    session->peer().CompleteReceive(waiter.request_id, std::move(deliveries));
    MarkDirty(*session);
  }
}

Delivery Broker::Track(SessionState& session, const std::shared_ptr<Queue>& queue,
                       QueuedMessage message, const std::shared_ptr<Consumer>& consumer,
                       uint32_t lease_ms) {
  ++message.receive_count;
  if (message.first_received_at_ms == 0) message.first_received_at_ms = clock_->WallMillis();
  if (message.stored) {
    if (message.receive_count == 1) {
      // Messages are delivered in sequence order, so one mark per queue records every first
      // delivery (MarkDelivered, written at the flush): after a crash they come back
      // redelivered, without a write per delivery.
      queue->NoteDelivered(message.seq);
      if (!queue->delivered_mark_pending) {
        queue->delivered_mark_pending = true;
        delivered_marks_.push_back(queue);
      }
    } else {
      // Later deliveries rewrite the entry with the count (not synced: a crash may lose the
      // last few increments, never a message).
      bool inline_entry = message.store_flags & store::kEntryInline;
      Persist(store::StoreBatch::PutEntry{store::EntryRef{
          queue->store_id(), message.seq, message.envelope->message.id, message.receive_count,
          message.store_flags, inline_entry ? message.envelope : nullptr,
          message.first_received_at_ms, message.failures}});
    }
  }
  Delivery delivery;
  delivery.consumer_tag = consumer ? consumer->tag : std::string();
  delivery.delivery_tag = session.next_delivery_tag++;
  delivery.envelope = message.envelope;
  delivery.receive_count = message.receive_count;
  delivery.redelivered = message.receive_count > 1;
  delivery.queue = queue->name();
  delivery.first_received_at_ms = message.first_received_at_ms;
  delivery.failures = message.failures;
  if (lease_ms == 0) lease_ms = queue->policy().lease_ms;
  delivery.lease_ms = lease_ms;
  ++queue->in_flight;
  ++queue->delivered_total;
  if (message.receive_count > 1) ++queue->redelivered_total;
  if (consumer) ++consumer->unacked;
  SteadyTime deadline = clock_->Now() + std::chrono::milliseconds(lease_ms);
  leases_.Add(LeaseRef{session.id(), delivery.delivery_tag, deadline});
  ++deliveries_in_flight_;
  if (leases_.size() > 2 * deliveries_in_flight_ + 65'536) CompactLeases();
  session.unacked.emplace_hint(session.unacked.end(), delivery.delivery_tag,
                               InFlight{queue, std::move(message), consumer, deadline, lease_ms});
  return delivery;
}

void Broker::Dispatch(const std::shared_ptr<Queue>& queue) {
  if (queue->deleted) return;
  ArmExpiries(queue);
  int64_t now_ms = clock_->WallMillis();
  std::vector<QueuedMessage> expired;
  auto& waiters = queue->waiters();
  // Long polls first: they are waiting for exactly this. A connection that is behind on
  // writing keeps its place in line; ResumeSession brings it back.
  std::vector<PullWaiter> behind;
  while (!waiters.empty() && queue->HasReady()) {
    PullWaiter waiter = waiters.front();
    waiters.pop_front();
    SessionState* session = FindSession(waiter.session_id);
    if (!session) {
      receive_deadlines_.erase(waiter.deadline);
      continue;
    }
    if (!session->peer().Writable()) {
      behind.push_back(waiter);
      continue;
    }
    std::vector<Delivery> deliveries;
    uint64_t bytes = 0;
    while (deliveries.size() < waiter.max_messages) {
      auto message = queue->Pop(now_ms, &expired);
      if (!message) break;
      // Keep one ReceiveOk within a frame: stop before the batch outgrows the body limit.
      uint64_t size = ApproximateWireSize(message->envelope->message);
      if (!deliveries.empty() && bytes + size > options_.max_message_bytes) {
        queue->Requeue(std::move(*message));  // same sequence: it stays at the head
        break;
      }
      bytes += size;
      deliveries.push_back(Track(*session, queue, std::move(*message), nullptr, waiter.lease_ms));
    }
    if (deliveries.empty()) {
      waiters.push_front(waiter);  // everything left had expired
      break;
    }
    CompleteWaiter(waiter, std::move(deliveries));
  }
  waiters.insert(waiters.begin(), behind.begin(), behind.end());
  // Then push consumers, round-robin among those with credit.
  auto& consumers = queue->consumers();
  while (queue->HasReady() && !consumers.empty()) {
    std::shared_ptr<Consumer> chosen;
    size_t n = consumers.size();
    for (size_t i = 0; i < n; ++i) {
      size_t index = (queue->next_consumer() + i) % n;
      if (consumers[index]->HasCredit() && consumers[index]->session->peer().Writable()) {
        chosen = consumers[index];
        queue->next_consumer() = (index + 1) % n;
        break;
      }
    }
    if (!chosen) break;
    auto message = queue->Pop(now_ms, &expired);
    if (!message) break;
    SessionState& session = *chosen->session;
    session.peer().Deliver(Track(session, queue, std::move(*message), chosen, chosen->lease_ms));
    MarkDirty(session);
  }
  for (QueuedMessage& m : expired) DeadLetter(queue, std::move(m), "expired");
  if (store_ && queue->NeedsLoad(options_.load_batch, options_.page_limits.max_bytes)) {
    // Issued after this flush's commit: the load must see the entries it just paged.
    queue->loading = true;
    pending_loads_.push_back(queue);
  }
}

void Broker::Flush() {
  thread_checker_.Check();
  // Dispatch may schedule nothing new, so one pass suffices; swap to stay safe anyway.
  while (!pending_dispatch_.empty()) {
    auto pending = std::move(pending_dispatch_);
    pending_dispatch_.clear();
    for (const auto& queue : pending) {
      queue->dispatch_scheduled = false;
      Dispatch(queue);
    }
  }
  CommitPending();
  RefreshRates();
  for (auto& queue : std::exchange(pending_loads_, {})) {
    if (queue->deleted) continue;
    RequestLoad(queue);
  }
  for (auto& queue : std::exchange(pending_delayed_loads_, {})) RequestDelayedLoad(queue);
  for (auto& read : std::exchange(pending_reads_, {})) read();
  auto dirty = std::move(dirty_);
  dirty_.clear();
  for (auto& [session_id, peer] : dirty) {
    if (SessionState* session = FindSession(session_id)) session->dirty = false;
    peer->Flush();
  }
}

void Broker::OnTimer() {
  thread_checker_.Check();
  SteadyTime now = clock_->Now();
  if (load_retry_at_ && *load_retry_at_ <= now) {
    load_retry_at_.reset();
    for (auto& weak : std::exchange(load_retries_, {})) {
      if (auto queue = weak.lock(); queue && !queue->deleted) {
        ScheduleDispatch(queue);
        UpdateDelayHead(queue);  // a failed timeline load
      }
    }
  }
  if (store_probe_at_ && *store_probe_at_ <= now) {
    // The store failed: a synced commit, empty if need be, tells whether it writes again.
    store_probe_at_.reset();
    CommitPending(/*probe=*/true);
  }
  ReleaseDue();
  ExpireLeases();
  ExpireMessages();
  RunRedrives();
  while (!receive_deadlines_.empty() && receive_deadlines_.begin()->first <= now) {
    auto [queue_name, waiter_id] = receive_deadlines_.begin()->second;
    receive_deadlines_.erase(receive_deadlines_.begin());
    auto q = queues_.find(queue_name);
    if (q == queues_.end()) continue;
    auto& waiters = q->second->waiters();
    auto it = std::find_if(waiters.begin(), waiters.end(),
                           [id = waiter_id](const PullWaiter& w) { return w.waiter_id == id; });
    if (it == waiters.end()) continue;
    PullWaiter waiter = *it;
    waiters.erase(it);
    if (SessionState* session = FindSession(waiter.session_id)) {
      --session->outstanding_receives;
      session->peer().CompleteReceive(waiter.request_id, {});
      MarkDirty(*session);
    }
  }
}

std::optional<SteadyTime> Broker::NextDeadline() const {
  std::optional<SteadyTime> next = store_probe_at_;
  if (load_retry_at_ && (!next || *load_retry_at_ < *next)) next = load_retry_at_;
  if (!receive_deadlines_.empty() && (!next || receive_deadlines_.begin()->first < *next)) {
    next = receive_deadlines_.begin()->first;
  }
  if (auto release = NextReleaseDeadline(); release && (!next || *release < *next)) {
    next = release;
  }
  if (auto lease = leases_.next(); lease && (!next || *lease < *next)) next = lease;
  if (auto expiry = expiries_.next(); expiry && (!next || *expiry < *next)) next = expiry;
  if (auto redrive = NextRedriveDeadline(); redrive && (!next || *redrive < *next)) next = redrive;
  return next;
}

}  // namespace wharf::broker
