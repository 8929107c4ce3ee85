#include "broker/broker.h"

#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "broker/message_keys.h"
#include "broker/rabbitmq_texts.h"
#include "common/log_safe.h"

namespace wharf::broker {
namespace {

constexpr size_t kMaxNameBytes = 255;

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == ':';
}

// Valid UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool ValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    uint32_t point = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
      point = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      point = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      point = c & 0x07;
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      point = (point << 6) | (next & 0x3F);
    }
    if ((length == 3 && (point < 0x800 || (point >= 0xD800 && point <= 0xDFFF))) ||
        (length == 4 && (point < 0x10000 || point > 0x10FFFF))) {
      return false;
    }
    i += length;
  }
  return true;
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

std::string Quote(std::string_view name) { return QuotedForDisplay(name); }

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

Status ValidateAmqpName(std::string_view kind, std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(kind) + " name must be 1 to 255 bytes long");
  }
  if (name.find_first_of("\r\n") != std::string_view::npos) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(kind) + " name " + Quote(name) + " contains CR or LF");
  }
  if (!ValidUtf8(name)) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(kind) + " name " + Quote(name) + " is not valid UTF-8");
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
  vhosts_.emplace(kDefaultVhost, VhostState{});
  AddBuiltinExchanges(std::string(kDefaultVhost));
}

// --- Sessions -----------------------------------------------------------------------------------

Status Broker::OpenSession(uint64_t session_id, std::string user, std::shared_ptr<SessionPeer> peer,
                           std::string address, SessionOptions options) {
  thread_checker_.Check();
  if (options.vhost.empty()) options.vhost = kDefaultVhost;
  if (options.internal) {
    if (!HasVhost(options.vhost)) {
      return Status(StatusCode::kVhostNotFound,
                    "vhost '" + CutForDisplay(options.vhost) + "' not found");
    }
  } else if (options.owner_id == 0) {
    WHARF_RETURN_IF_ERROR(CheckVhostConnection(options.vhost));
  }
  auto state =
      std::make_unique<SessionState>(session_id, std::move(user), std::move(peer), options);
  state->address = std::move(address);
  state->connected_at_ms = clock_->WallMillis();
  state->serial = next_session_serial_++;
  if (options.internal) {
    sessions_.emplace(session_id, std::move(state));
    return Status::Ok();
  }
  // A native session is its connection; an AMQP channel's connection was (normally) opened
  // by OpenConnection already.
  auto [it, inserted] = connections_.try_emplace(state->owner_id());
  if (inserted) {
    ConnectionMeta meta =
        state->own_owner() ? std::move(options.connection) : ConnectionMeta{"amqp", {}, {}};
    meta.vhost = state->vhost();
    it->second =
        ConnectionRecord{state->user(), state->address, state->connected_at_ms, std::move(meta)};
  }
  sessions_.emplace(session_id, std::move(state));
  return Status::Ok();
}

Status Broker::OpenConnection(uint64_t owner_id, std::string user, std::string address,
                              ConnectionMeta meta) {
  thread_checker_.Check();
  if (meta.vhost.empty()) meta.vhost = kDefaultVhost;
  WHARF_RETURN_IF_ERROR(CheckVhostConnection(meta.vhost));
  connections_[owner_id] =
      ConnectionRecord{std::move(user), std::move(address), clock_->WallMillis(), std::move(meta)};
  return Status::Ok();
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
  DropReplyConsumer(session);
  if (session.ack_deadline_armed) {
    ack_deadlines_.erase(std::make_tuple(session.ack_deadline, session.id(), session.serial));
  }
  // A channel's session leaves its owner's exclusive queues to CloseOwner.
  if (session.own_owner()) {
    DropExclusiveQueues(session_id);
    connections_.erase(session_id);
  }
  sessions_.erase(it);
}

void Broker::CloseOwner(uint64_t owner_id) {
  thread_checker_.Check();
  DropExclusiveQueues(owner_id);
  connections_.erase(owner_id);
}

void Broker::DropExclusiveQueues(uint64_t owner_id) {
  auto it = exclusive_queues_.find(owner_id);
  if (it == exclusive_queues_.end()) return;
  // DropQueue edits the owner's list (and may erase it): walk a copy.
  std::vector<std::string> exclusive = it->second;
  for (const auto& key : exclusive) {
    auto q = queues_.find(key);
    if (q != queues_.end()) DropQueue(q->second, "exclusive queue's connection closed");
  }
  exclusive_queues_.erase(owner_id);
}

void Broker::ResumeSession(uint64_t session_id) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
  if (!session) return;
  ScheduleConsumers(*session);
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

const SessionState* Broker::FindSession(uint64_t session_id) const {
  auto it = sessions_.find(session_id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

uint64_t Broker::OwnerOf(uint64_t session_id) const {
  const SessionState* session = FindSession(session_id);
  return session ? session->owner_id() : session_id;
}

bool Broker::IsAmqp(uint64_t session_id) const {
  const SessionState* session = FindSession(session_id);
  return session && session->amqp();
}

Status Broker::CheckName(bool amqp, std::string_view kind, std::string_view name) const {
  return amqp ? ValidateAmqpName(kind, name) : ValidateName(kind, name);
}

std::string Broker::RandomName(std::string_view prefix) {
  const uint64_t words[2] = {name_rng_(), name_rng_()};
  return NameOf(prefix, words);
}

std::string Broker::SecureRandomName(std::string_view prefix) {
  uint64_t words[2] = {0, 0};
  size_t got = 0;
  auto* bytes = reinterpret_cast<unsigned char*>(words);
  while (got < sizeof(words)) {
    ssize_t n = getrandom(bytes + got, sizeof(words) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      // No kernel randomness (never on Linux >= 3.17): the name generator, not unguessable.
      spdlog::error("getrandom failed: {}; falling back to the name generator",
                    std::strerror(errno));
      return RandomName(prefix);
    }
  }
  return NameOf(prefix, words);
}

std::string Broker::NameOf(std::string_view prefix, const uint64_t (&words)[2]) {
  // 16 random bytes in base64url without padding: 22 characters, as RabbitMQ's guids.
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string name(prefix);
  uint32_t bits = 0;
  int have = 0;
  for (int byte = 0; byte < 16; ++byte) {
    bits = (bits << 8) | static_cast<uint8_t>(words[byte / 8] >> (8 * (byte % 8)));
    have += 8;
    while (have >= 6) {
      have -= 6;
      name.push_back(kAlphabet[(bits >> have) & 0x3F]);
    }
  }
  name.push_back(kAlphabet[(bits << (6 - have)) & 0x3F]);  // the last 2 bits
  return name;
}

void Broker::ScheduleConsumers(const SessionState& session) {
  for (const auto& [tag, consumer] : session.consumers) {
    auto q = queues_.find(ResourceKey(session.vhost(), consumer->queue));
    if (q != queues_.end()) ScheduleDispatch(q->second);
  }
}

void Broker::NoteSettled(const SessionState& session, size_t unacked_before) {
  if (session.prefetch_limit != 0 && unacked_before >= session.prefetch_limit &&
      session.HasSessionCredit()) {
    ScheduleConsumers(session);
  }
}

Status Broker::SetSessionPrefetch(uint64_t session_id, uint32_t count) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
  if (!session) return Status(StatusCode::kInternal, "no session");
  const uint32_t before = session->prefetch_limit;
  session->prefetch_limit = count;
  // Lowered: deliveries out stay out; consumers wait until the session is under the limit.
  if (before != 0 && (count == 0 || count > before)) ScheduleConsumers(*session);
  return Status::Ok();
}

void Broker::MarkDirty(SessionState& session) {
  if (session.dirty) return;
  session.dirty = true;
  dirty_.emplace_back(session.id(), session.peer_ptr());
}

// --- Messaging ----------------------------------------------------------------------------------

Result<PublishOutcome> Broker::Publish(uint64_t session_id, const std::string& exchange_name,
                                       const std::string& routing_key, Message message,
                                       uint64_t request_id, PublishTiming timing,
                                       std::string_view deduplication_id) {
  thread_checker_.Check();
  WHARF_RETURN_IF_ERROR(
      Authorize(session_id, Permission::kWrite, ResourceKind::kExchange, exchange_name));
  const int64_t now_ms = clock_->WallMillis();
  const std::string& vhost = VhostOf(session_id);
  Exchange* exchange = exchange_name.empty() ? nullptr : FindExchange(vhost, exchange_name);
  if (timing.delay_ms == 0 && timing.deliver_at_ms == 0 && exchange && exchange->spec().delayed) {
    // A delayed-message exchange takes the delay from the message (RabbitMQ's plugin).
    timing.delay_ms = DelayHeader(message.headers);
  }
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
  WHARF_RETURN_IF_ERROR(CheckDedupId(deduplication_id));
  if (routing_key.size() > kMaxRoutingKeyBytes) {
    return Status(StatusCode::kInvalidArgument, "routing key longer than 255 bytes");
  }
  std::vector<Queue*> targets;
  if (exchange_name.empty() && routing_key.size() > kReplyTo.size() &&
      routing_key.starts_with(kReplyTo) && routing_key[kReplyTo.size()] == '.') {
    return PublishReply(routing_key, std::move(message));
  }
  if (exchange_name.empty()) {
    auto it = queues_.find(ResourceKey(vhost, routing_key));
    // Anyone may publish to an exclusive queue (RPC reply queues); only its owner consumes.
    if (it != queues_.end()) targets.push_back(it->second.get());
  } else {
    if (!exchange) {
      return Status(StatusCode::kExchangeNotFound,
                    "exchange " + Quote(exchange_name) + " not found");
    }
    // An internal exchange is fed by exchange-to-exchange bindings only (AMQP's `internal`).
    if (exchange->spec().internal) {
      return Status(
          StatusCode::kAccessRefused,
          IsAmqp(session_id)
              ? "cannot publish to internal " + rabbitmq::Resource("exchange", exchange_name, vhost)
              : "cannot publish to internal exchange " + Quote(exchange_name));
    }
    std::vector<const Exchange*> visited;
    RouteThrough(exchange, routing_key, message.headers, &targets, &visited);
    // Two paths (exchange-to-exchange bindings) may reach one queue: it gets one copy.
    std::sort(targets.begin(), targets.end());
    targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  }
  // Expiration "0" into a queue with messages ahead of it (or deep enough to page): it cannot
  // be delivered at once, so it expires at once, never stored.
  std::vector<Queue*> expire_now;
  if (timing.expire_undelivered && due_ms == 0) {
    std::erase_if(targets, [&](Queue* queue) {
      if (!queue->HasReady() && !queue->ShouldPage(options_.page_limits, queue->LaneOf(message))) {
        return false;
      }
      expire_now.push_back(queue);
      return true;
    });
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
  // Message groups: a group id that is not one is refused before anything is written.
  for (Queue* target : targets) {
    if (target->grouped()) {
      WHARF_RETURN_IF_ERROR(GroupKeyOf(message).status());
      break;
    }
  }
  // Deduplication windows (docs/lifecycle.md, "Deduplication"): the key of each kind (the
  // publisher's id, a hash of the body), made at most once however many queues check it, and
  // how many of the targets check one. The store decides, in the commit, whether they take it.
  // Nothing is allocated for a publish that reaches no window.
  std::optional<std::string> by_id, by_body;
  // Where the key `queue` checks is kept, or null: the queue has no window.
  auto dedup_slot = [&](const Queue& queue) -> std::optional<std::string>* {
    const QueuePolicy& policy = queue.policy();
    if (!store_ || policy.dedup_window_ms == 0 || queue.store_id() == 0) return nullptr;
    return policy.dedup_by_body ? &by_body : &by_id;
  };
  size_t deduplicated = 0;  // targets that check a key ("": a publish without an id, unchecked)
  for (Queue* target : targets) {
    std::optional<std::string>* key = dedup_slot(*target);
    if (!key) continue;
    if (!*key) {
      WHARF_ASSIGN_OR_RETURN(*key,
                             DedupKeyOf(message, target->policy().dedup_by_body, deduplication_id));
    }
    if (!(*key)->empty()) ++deduplicated;
  }
  // Which targets store it: durable queues take persistent messages, and a queue that pages
  // to disk takes every message there.
  const bool persistent = message.persistent;
  enum : uint8_t { kRam, kStore, kPage };
  std::vector<uint8_t> modes(targets.size(), kRam);
  uint32_t references = 0;
  if (store_) {
    // A delayed message in a durable queue is always written: its timeline is on disk. So is
    // a deduplication key, even of a transient message.
    WHARF_RETURN_IF_ERROR(CheckStore(targets, persistent || due_ms != 0 || deduplicated > 0));
    for (size_t i = 0; i < targets.size(); ++i) {
      bool page =
          due_ms == 0 && targets[i]->ShouldPage(options_.page_limits, targets[i]->LaneOf(message));
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
  // One stored queue: the message goes inside its entry. Several: written once, referenced,
  // unless a deduplication window may refuse it: then each entry has its own copy, so one the
  // store skips leaves no reference behind (store::StoreBatch::PutDedup).
  const bool inline_entry = references == 1 || deduplicated > 0;
  const uint8_t flags =
      static_cast<uint8_t>((inline_entry ? store::kEntryInline : store::kEntryShared) |
                           (persistent ? 0 : store::kEntryTransient));
  if (references > 1 && !inline_entry) {
    Persist(store::StoreBatch::PutMessage{envelope, references});
  }
  // This publish's outcomes in the batch (consecutive): a duplicate in any sets its confirm's
  // duplicate_of.
  uint32_t outcomes_first = 0, outcomes_count = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    Queue* queue = targets[i];
    auto it = queues_.find(queue->key());
    std::optional<uint32_t> dedup;  // the outcome the queue's taking it waits for
    std::optional<std::string>* key = deduplicated > 0 ? dedup_slot(*queue) : nullptr;
    if (key && !(*key)->empty()) {
      // Ahead of the entry it may keep from being written. The only queue with a key: the key
      // itself goes into the store.
      dedup = PersistDedup(store::StoreBatch::PutDedup{
          queue->store_id(), deduplicated == 1 ? std::move(**key) : **key, envelope->message.id,
          now_ms + static_cast<int64_t>(queue->policy().dedup_window_ms), now_ms});
      if (dedup && outcomes_count++ == 0) outcomes_first = *dedup;
    }
    if (due_ms != 0) {
      // Routed now, visible when due (docs/scheduler.md).
      DelayKey key{due_ms, envelope->message.id};
      if (modes[i] != kRam) {
        Persist(store::StoreBatch::PutDelayed{
            store::EntryRef{queue->store_id(), 0, envelope->message.id, 0, flags,
                            inline_entry ? envelope : nullptr},
            due_ms});
      }
      DelayedMessage delayed{envelope, 0, modes[i] != kRam ? flags : uint8_t{0}, 0, nullptr};
      if (dedup) {
        held_.delayed.push_back(
            DelayedDedupResolution{ResolutionQueue(it != queues_.end() ? it->second : nullptr),
                                   *dedup, key, std::move(delayed)});
        continue;
      }
      queue->delayed().Add(key, std::move(delayed));
      if (it != queues_.end()) UpdateDelayHead(it->second);
      continue;
    }
    // Held until its commit answers, unless it is paged: then it is counted at once.
    std::optional<uint64_t> undecided;
    if (dedup && modes[i] == kPage) undecided = queue->PageUndecided(*envelope);
    uint64_t seq = undecided ? *undecided
                   : dedup
                       ? queue->EnqueueHeld(envelope, modes[i] != kRam, flags, modes[i] == kPage)
                       : queue->Enqueue(envelope, modes[i] != kRam, flags, modes[i] == kPage);
    if (undecided) {
      held_.paged.push_back(
          PagedDedupResolution{ResolutionQueue(it != queues_.end() ? it->second : nullptr), *dedup,
                               seq, envelope->message.body.size()});
    } else if (dedup) {
      held_.queued.push_back(DedupResolution{
          ResolutionQueue(it != queues_.end() ? it->second : nullptr), *dedup, seq});
    }
    if (timing.expire_undelivered) queue->expire_unless_delivered().push_back(seq);
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
      if (auto it = queues_.find(queue->key()); it != queues_.end()) DropHeads(it->second);
    }
  }
  // Expiration "0" where it could not be delivered at once: dead-lettered now (also when a
  // full queue refuses the publish below: these queues took it).
  for (Queue* queue : expire_now) {
    if (auto it = queues_.find(queue->key()); it != queues_.end()) {
      ++queue->expired_total;
      DeadLetter(it->second, QueuedMessage{envelope, 0, 0, false, 0, 0, nullptr}, "expired");
    }
  }
  if (!full.empty()) {
    // The negative confirm: not enqueued in the full queues (dead-lettered from them with
    // reject-publish-dlx); any other queue it reached has it.
    std::string names;
    for (Queue* queue : full) {
      names += (names.empty() ? "" : ", ") + Quote(queue->name());
      if (queue->policy().overflow == QueuePolicy::Overflow::kRejectPublishDlx) {
        if (auto it = queues_.find(queue->key()); it != queues_.end()) {
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
  outcome.result.routed_queues = static_cast<uint32_t>(targets.size() + expire_now.size());
  outcome.envelope = std::move(envelope);
  if ((persistent && references > 0) || outcomes_count > 0) {
    // Confirmed when the batch holding it is synced; one sync serves every publish in it. A
    // deduplication key is durable before its publish is confirmed, as a message is.
    if (request_id != 0) {
      pending_confirms_.push_back(PendingConfirm{session_id, request_id, outcome.result,
                                                 clock_->Now(), outcomes_first, outcomes_count});
      batch_sync_ = true;
      outcome.deferred = true;
    }
  }
  return outcome;
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

Delivery Broker::NewDelivery(SessionState& session, const std::shared_ptr<Queue>& queue_ptr,
                             QueuedMessage& message, const Consumer* consumer, bool settled) {
  Queue& queue = *queue_ptr;
  ++message.receive_count;
  if (message.first_received_at_ms == 0) message.first_received_at_ms = clock_->WallMillis();
  if (message.stored) {
    if (message.receive_count == 1) {
      // Messages are delivered in sequence order, so one mark per queue records every first
      // delivery (MarkDelivered, written at the flush): after a crash they come back
      // redelivered, without a write per delivery.
      queue.NoteDelivered(message.seq);
      if (!queue.delivered_mark_pending) {
        queue.delivered_mark_pending = true;
        delivered_marks_.push_back(queue_ptr);
      }
    } else if (!settled) {
      // Later deliveries rewrite the entry with the count (not synced: a crash may lose the
      // last few increments, never a message).
      bool inline_entry = message.store_flags & store::kEntryInline;
      Persist(store::StoreBatch::PutEntry{store::EntryRef{
          queue.store_id(), message.seq, message.envelope->message.id, message.receive_count,
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
  delivery.queue = queue.name();
  delivery.first_received_at_ms = message.first_received_at_ms;
  delivery.failures = message.failures;
  delivery.delivery_count_header = queue.policy().delivery_count_header;
  ++queue.delivered_total;
  if (message.receive_count > 1) ++queue.redelivered_total;
  return delivery;
}

Delivery Broker::Track(SessionState& session, const std::shared_ptr<Queue>& queue,
                       QueuedMessage message, const std::shared_ptr<Consumer>& consumer,
                       uint32_t lease_ms) {
  Delivery delivery = NewDelivery(session, queue, message, consumer.get(), /*settled=*/false);
  // Its group waits until it is settled (SettleOne).
  if (queue->grouped()) queue->HoldGroup(*message.envelope);
  if (lease_ms == 0) lease_ms = queue->policy().lease_ms;
  ++queue->in_flight;
  if (consumer) ++consumer->unacked;
  ++deliveries_in_flight_;
  SteadyTime deadline = SteadyTime::max();  // no lease: in no timer, never due
  if (lease_ms != kNoLease) {
    delivery.lease_ms = lease_ms;
    deadline = clock_->Now() + std::chrono::milliseconds(lease_ms);
    leases_.Add(LeaseRef{session.id(), delivery.delivery_tag, deadline});
    if (leases_.size() > 2 * deliveries_in_flight_ + 65'536) CompactLeases();
  }
  const SteadyTime now = clock_->Now();
  session.unacked.emplace_hint(
      session.unacked.end(), delivery.delivery_tag,
      InFlight{queue, std::move(message), consumer, deadline, lease_ms, now});
  if (session.ack_timeout_ms() != 0 && !session.ack_deadline_armed) {
    ArmAckDeadline(session, now + std::chrono::milliseconds(session.ack_timeout_ms()));
  }
  return delivery;
}

void Broker::ArmAckDeadline(SessionState& session, SteadyTime deadline) {
  session.ack_deadline_armed = true;
  session.ack_deadline = deadline;
  ack_deadlines_.emplace(deadline, session.id(), session.serial);
}

void Broker::ExpireAckTimeouts() {
  const SteadyTime now = clock_->Now();
  struct TimedOut {
    std::shared_ptr<SessionPeer> peer;
    uint64_t delivery_tag;
    std::string consumer_tag;
    uint32_t timeout_ms;
  };
  std::vector<TimedOut> timed_out;
  while (!ack_deadlines_.empty() && std::get<0>(*ack_deadlines_.begin()) <= now) {
    auto [deadline, session_id, serial] = *ack_deadlines_.begin();
    ack_deadlines_.erase(ack_deadlines_.begin());
    SessionState* session = FindSession(session_id);
    if (session == nullptr || session->serial != serial) continue;  // gone, or another one
    session->ack_deadline_armed = false;
    if (session->unacked.empty()) continue;  // armed again by its next delivery
    // Tags grow with time: the first unsettled one is the oldest.
    const auto& [tag, oldest] = *session->unacked.begin();
    const SteadyTime due =
        oldest.delivered_at + std::chrono::milliseconds(session->ack_timeout_ms());
    if (due > now) {
      ArmAckDeadline(*session, due);
      continue;
    }
    MarkDirty(*session);
    timed_out.push_back(TimedOut{session->peer_ptr(), tag,
                                 oldest.consumer ? oldest.consumer->tag : std::string(),
                                 session->ack_timeout_ms()});
  }
  // The peers close their sessions in here (CloseSession): not while walking the deadlines.
  for (TimedOut& t : timed_out) t.peer->AckTimedOut(t.delivery_tag, t.consumer_tag, t.timeout_ms);
}

Delivery Broker::DeliverSettled(SessionState& session, const std::shared_ptr<Queue>& queue,
                                QueuedMessage message, const Consumer* consumer) {
  Delivery delivery = NewDelivery(session, queue, message, consumer, /*settled=*/true);
  // As an ack (SettleOne): gone from the queue and the store.
  ++queue->acked_total;
  Unstore(*queue, message);
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
  bool served = false;  // a long poll ended: x-expires counts from then
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
    served = true;
  }
  waiters.insert(waiters.begin(), behind.begin(), behind.end());
  if (served) TouchQueue(*queue);
  // Then push consumers: the highest priority that can take one, round-robin within it;
  // only the active one on a single-active-consumer queue (consumer_set.h). A consumer can
  // take one with its own credit, its session's channel-wide prefetch (unless auto-ack), and
  // a connection that is keeping up.
  ConsumerSet& consumers = queue->consumers();
  auto can_take = [](const Consumer& candidate) {
    return candidate.HasCredit() && (candidate.auto_ack || candidate.session->HasSessionCredit()) &&
           candidate.session->peer().Writable();
  };
  while (queue->HasReady() && !consumers.empty()) {
    std::shared_ptr<Consumer> chosen = consumers.Next(can_take);
    if (!chosen) break;
    auto message = queue->Pop(now_ms, &expired);
    if (!message) break;
    SessionState& session = *chosen->session;
    session.peer().Deliver(
        chosen->auto_ack ? DeliverSettled(session, queue, std::move(*message), chosen.get())
                         : Track(session, queue, std::move(*message), chosen, chosen->lease_ms));
    MarkDirty(session);
  }
  // Expiration "0": what this dispatch did not deliver expires now.
  for (uint64_t seq : std::exchange(queue->expire_unless_delivered(), {})) {
    if (auto message = queue->Take(seq)) {
      ++queue->expired_total;
      expired.push_back(std::move(*message));
    }
  }
  if (queue->policy().expire_undelivered) {
    // x-message-ttl 0 (RabbitMQ's rules): what no one could take at once expires now.
    while (auto message = queue->Pop(now_ms, &expired)) {
      ++queue->expired_total;
      expired.push_back(std::move(*message));
    }
  }
  for (QueuedMessage& m : expired) DeadLetter(queue, std::move(m), "expired");
  if (store_ && queue->NeedsLoad(options_.load_batch, options_.page_limits.max_bytes)) {
    // Issued after this flush's commit: the load must see the entries it just paged.
    queue->MarkLoading();
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
  WakeGroups(now);
  ExpireLeases();
  ExpireAckTimeouts();
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
      TouchQueue(*q->second);  // x-expires counts from the end of the wait
      --session->outstanding_receives;
      session->peer().CompleteReceive(waiter.request_id, {});
      MarkDirty(*session);
    }
  }
  ExpireIdleQueues();
}

void Broker::WakeGroups(SteadyTime now) {
  while (!group_wakes_.empty() && group_wakes_.begin()->first <= now) {
    GroupWake wake = std::move(group_wakes_.begin()->second);
    group_wakes_.erase(group_wakes_.begin());
    std::shared_ptr<Queue> queue = wake.queue.lock();
    if (!queue || queue->deleted) continue;
    queue->ReleaseGroup(wake.group, wake.token);
    ScheduleDispatch(queue);
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
  if (!group_wakes_.empty() && (!next || group_wakes_.begin()->first < *next)) {
    next = group_wakes_.begin()->first;
  }
  if (!ack_deadlines_.empty() && (!next || std::get<0>(*ack_deadlines_.begin()) < *next)) {
    next = std::get<0>(*ack_deadlines_.begin());
  }
  if (auto expiry = expiries_.next(); expiry && (!next || *expiry < *next)) next = expiry;
  if (auto redrive = NextRedriveDeadline(); redrive && (!next || *redrive < *next)) next = redrive;
  if (!idle_queues_.empty() && (!next || idle_queues_.begin()->first < *next)) {
    next = idle_queues_.begin()->first;
  }
  return next;
}

}  // namespace wharf::broker
