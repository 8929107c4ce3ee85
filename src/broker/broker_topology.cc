// Topology: exchanges, queues and bindings declared, deleted, purged and bound (docs/protocol.md).
// Part of class Broker (broker.h); split from broker.cc by concern.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <tuple>

#include "broker/broker.h"
#include "broker/headers_match.h"
#include "broker/rabbitmq_texts.h"
#include "common/log_safe.h"

namespace wharf::broker {
namespace {

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string SpecDifference(const QueueSpec& a, const QueueSpec& b) {
  if (a.durable != b.durable) return "durable";
  if (a.exclusive != b.exclusive) return "exclusive";
  if (a.auto_delete != b.auto_delete) return "auto_delete";
  if (a.arguments != b.arguments) return "arguments";
  return "";
}

// RabbitMQ's equivalence of one argument (rabbit_misc:assert_args_equivalence): absent on
// both sides, or the same value, integers by value (AMQP's widths all arrive as int64) and
// text by its bytes (string or Bytes). "" when equivalent, else what RabbitMQ says.
std::string ArgumentInequivalence(const Headers& have, const Headers& want, std::string_view key,
                                  std::string_view resource) {
  auto x = have.find(key);
  auto y = want.find(key);
  const HeaderValue* current = x == have.end() ? nullptr : &x->second;
  const HeaderValue* received = y == want.end() ? nullptr : &y->second;
  if (!current && !received) return "";
  if (!current || !received) {
    return rabbitmq::Inequivalent(key, resource, rabbitmq::Typed(received),
                                  rabbitmq::Typed(current));
  }
  if (SameValue(*current, *received)) return "";
  return rabbitmq::Inequivalent(key, resource, rabbitmq::Bare(*received), rabbitmq::Bare(*current));
}

// The queue arguments a redeclaration must repeat, in the order RabbitMQ 3.10 checks them
// (rabbit_amqqueue:declare_args), then Wharf's own. Others are kept, never compared.
constexpr const char* kComparedQueueArguments[] = {"x-expires",
                                                   "x-message-ttl",
                                                   "x-dead-letter-exchange",
                                                   "x-dead-letter-routing-key",
                                                   "x-max-length",
                                                   "x-max-length-bytes",
                                                   "x-max-in-memory-length",
                                                   "x-max-in-memory-bytes",
                                                   "x-max-priority",
                                                   "x-overflow",
                                                   "x-queue-mode",
                                                   "x-single-active-consumer",
                                                   "x-queue-type",
                                                   "x-quorum-initial-group-size",
                                                   "x-max-age",
                                                   "x-stream-max-segment-size-bytes",
                                                   "x-initial-cluster-size",
                                                   "x-queue-leader-locator",
                                                   "x-delivery-limit",
                                                   "x-lease-ms",
                                                   "x-max-lease-ms",
                                                   "x-retry-base-ms",
                                                   "x-retry-max-ms",
                                                   "x-dead-letter-queue",
                                                   "x-max-attempts"};

// RabbitMQ's equivalence of a redeclared exchange (rabbit_exchange:assert_equivalence): its
// type, durable, auto_delete, internal, then the arguments it reads. "" when equivalent.
std::string AmqpInequivalence(const ExchangeSpec& have, const ExchangeSpec& want) {
  const std::string resource = rabbitmq::Resource("exchange", have.name, have.vhost);
  auto type = [](const ExchangeSpec& e) {
    return e.delayed ? std::string("x-delayed-message") : std::string(ExchangeTypeName(e.type));
  };
  if (type(have) != type(want)) {
    return rabbitmq::Inequivalent("type", resource, "'" + type(want) + "'", "'" + type(have) + "'");
  }
  for (auto [key, a, b] : {std::tuple{"durable", have.durable, want.durable},
                           std::tuple{"auto_delete", have.auto_delete, want.auto_delete},
                           std::tuple{"internal", have.internal, want.internal}}) {
    if (a != b) return rabbitmq::Inequivalent(key, resource, rabbitmq::Bare(b), rabbitmq::Bare(a));
  }
  for (const char* key : {"alternate-exchange", "x-delayed-type"}) {
    std::string diff = ArgumentInequivalence(have.arguments, want.arguments, key, resource);
    if (!diff.empty()) return diff;
  }
  return "";
}

// RabbitMQ's equivalence of a redeclared queue (exclusivity is checked apart): durable,
// auto_delete, its type, then the arguments above. "" when equivalent, else RabbitMQ's text.
std::string AmqpInequivalence(const QueueSpec& have, const QueueSpec& want) {
  const std::string resource = rabbitmq::Resource("queue", have.name, have.vhost);
  if (have.durable != want.durable) {
    return rabbitmq::Inequivalent("durable", resource, rabbitmq::Bare(want.durable),
                                  rabbitmq::Bare(have.durable));
  }
  if (have.auto_delete != want.auto_delete) {
    return rabbitmq::Inequivalent("auto_delete", resource, rabbitmq::Bare(want.auto_delete),
                                  rabbitmq::Bare(have.auto_delete));
  }
  // A type asked for is compared with the queue's type (classic when it was declared without).
  if (auto asked = want.arguments.find("x-queue-type"); asked != want.arguments.end()) {
    auto declared = have.arguments.find("x-queue-type");
    const HeaderValue current =
        declared != have.arguments.end() ? declared->second : HeaderValue(std::string("classic"));
    if (rabbitmq::Bare(asked->second) != rabbitmq::Bare(current)) {
      return rabbitmq::Inequivalent("x-queue-type", resource, rabbitmq::Bare(asked->second),
                                    rabbitmq::Bare(current));
    }
  }
  for (const char* key : kComparedQueueArguments) {
    // The type was compared above; not asking for one means classic.
    if (std::string_view(key) == "x-queue-type") {
      auto declared = have.arguments.find(key);
      if (want.arguments.contains(key) || declared == have.arguments.end() ||
          rabbitmq::Bare(declared->second) == "'classic'") {
        continue;
      }
    }
    std::string diff = ArgumentInequivalence(have.arguments, want.arguments, key, resource);
    if (!diff.empty()) return diff;
  }
  return "";
}

}  // namespace

Exchange* Broker::FindExchange(std::string_view vhost, std::string_view name) {
  auto it = exchanges_.find(ResourceKey(vhost, name));
  return it == exchanges_.end() ? nullptr : it->second.get();
}

std::shared_ptr<Queue> Broker::QueueIn(std::string_view vhost, std::string_view name) const {
  auto it = queues_.find(ResourceKey(vhost, name));
  return it == queues_.end() ? nullptr : it->second;
}

Status Broker::DeclareExchange(const ExchangeSpec& spec) { return DeclareExchange(0, spec); }

Status Broker::DeclareExchange(uint64_t session_id, const ExchangeSpec& spec) {
  thread_checker_.Check();
  // RabbitMQ's rules for AMQP sessions: its names, a passive name looked up as given.
  const bool amqp = IsAmqp(session_id);
  if (spec.name.empty()) {
    if (spec.passive) return Status::Ok();  // the default exchange always exists
    return Status(StatusCode::kReservedName, "the default exchange cannot be declared");
  }
  if (!spec.passive) {
    WHARF_RETURN_IF_ERROR(
        Authorize(session_id, Permission::kConfigure, ResourceKind::kExchange, spec.name));
  }
  if (!(amqp && spec.passive)) WHARF_RETURN_IF_ERROR(CheckName(amqp, "exchange", spec.name));
  const std::string& vhost = VhostOf(session_id);
  WHARF_RETURN_IF_ERROR(VhostUsable(vhost));
  Exchange* existing = FindExchange(vhost, spec.name);
  if (spec.passive) {
    if (!existing) {
      return Status(StatusCode::kExchangeNotFound, "exchange " + Quote(spec.name) + " not found");
    }
    return Status::Ok();
  }
  if (spec.name.starts_with("amq.") && !existing) {
    return Status(StatusCode::kReservedName,
                  amqp ? rabbitmq::ReservedName("exchange", spec.name)
                       : "exchange names starting with 'amq.' are reserved: " + Quote(spec.name));
  }
  if (!spec.alternate_exchange.empty()) {
    WHARF_RETURN_IF_ERROR(CheckName(amqp, "alternate exchange", spec.alternate_exchange));
  }
  if (existing && amqp) {
    std::string diff = AmqpInequivalence(existing->spec(), spec);
    if (!diff.empty()) return Status(StatusCode::kPreconditionFailed, diff);
    return Status::Ok();
  }
  if (existing) {
    const ExchangeSpec& have = existing->spec();
    if (have.type != spec.type || have.delayed != spec.delayed || have.durable != spec.durable ||
        have.auto_delete != spec.auto_delete ||
        have.alternate_exchange != spec.alternate_exchange) {
      // RabbitMQ answers 406 for a built-in exchange too (AMQP sessions).
      return Status(
          spec.name.starts_with("amq.") && !amqp ? StatusCode::kReservedName
                                                 : StatusCode::kPreconditionFailed,
          "exchange " + Quote(spec.name) + " exists with type " +
              (have.delayed ? "x-delayed-message of " : "") +
              std::string(ExchangeTypeName(have.type)) +
              (have.durable ? ", durable" : ", transient") +
              (have.auto_delete ? ", auto-delete" : "") +
              (have.alternate_exchange.empty() ? ""
                                               : ", alternate " + Quote(have.alternate_exchange)) +
              "; redeclare it with the same arguments or delete it first");
    }
    return Status::Ok();
  }
  // As RabbitMQ, for a new exchange: naming an alternate exchange is publishing into it.
  if (!spec.alternate_exchange.empty()) {
    WHARF_RETURN_IF_ERROR(
        Authorize(session_id, Permission::kRead, ResourceKind::kExchange, spec.name));
    WHARF_RETURN_IF_ERROR(Authorize(session_id, Permission::kWrite, ResourceKind::kExchange,
                                    spec.alternate_exchange));
  }
  WHARF_RETURN_IF_ERROR(TopologyWritable(spec.durable));
  ExchangeSpec declared = spec;
  declared.vhost = vhost;
  declared.passive = false;
  if (spec.durable) Persist(store::StoreBatch::PutExchange{declared});
  auto made = exchanges_.emplace(ResourceKey(vhost, spec.name),
                                 std::make_unique<Exchange>(std::move(declared)));
  ApplyPolicy(*made.first->second);
  return Status::Ok();
}

Status Broker::DeleteExchange(uint64_t session_id, std::string_view name, bool if_unused) {
  thread_checker_.Check();
  if (name.empty() || name.starts_with("amq.")) {
    return Status(StatusCode::kReservedName,
                  "exchange " + Quote(name) + " is built in and cannot be deleted");
  }
  WHARF_RETURN_IF_ERROR(
      Authorize(session_id, Permission::kConfigure, ResourceKind::kExchange, name));
  const std::string& vhost = VhostOf(session_id);
  auto it = exchanges_.find(ResourceKey(vhost, name));
  if (it == exchanges_.end()) {
    return Status(StatusCode::kExchangeNotFound, "exchange " + Quote(name) + " not found");
  }
  if (if_unused && it->second->binding_count() > 0) {
    return Status(StatusCode::kPreconditionFailed, "exchange " + Quote(name) + " has " +
                                                       std::to_string(it->second->binding_count()) +
                                                       " bindings");
  }
  WHARF_RETURN_IF_ERROR(TopologyWritable(it->second->spec().durable));
  RemoveExchange(vhost, name);
  return Status::Ok();
}

void Broker::RemoveExchange(std::string_view vhost_view, std::string_view name_view) {
  auto it = exchanges_.find(ResourceKey(vhost_view, name_view));
  if (it == exchanges_.end()) return;
  // Copies: the views may point into the exchange erased below.
  const std::string vhost(vhost_view), name(name_view);
  for (auto& [queue_key, queue] : queues_) {
    if (queue->vhost() != vhost) continue;
    auto& list = queue->bindings();
    std::erase_if(list, [&](const BindingSpec& b) { return b.exchange == name; });
  }
  // Exchanges bound to this one lose those bindings (and may auto-delete in turn).
  Exchange* doomed = it->second.get();
  // The store drops the exchange's bindings with it, in both directions.
  if (doomed->spec().durable) Persist(store::StoreBatch::RemoveExchange{name, vhost});
  std::vector<std::string> sources;
  for (auto& [other_key, other] : exchanges_) {
    if (other.get() == doomed || other->vhost() != vhost) continue;
    size_t had = other->binding_count();
    other->UnbindDestination(Destination{nullptr, doomed});
    if (other->binding_count() != had) sources.push_back(other->name());
  }
  exchanges_.erase(it);
  for (const auto& source : sources) MaybeAutoDeleteExchange(vhost, source);
}

Result<std::shared_ptr<Queue>> Broker::FindQueue(uint64_t session_id, std::string_view name) const {
  return FindQueue(session_id, VhostOf(session_id), name);
}

Result<std::shared_ptr<Queue>> Broker::FindQueue(uint64_t session_id, std::string_view vhost,
                                                 std::string_view name) const {
  auto it = queues_.find(ResourceKey(vhost, name));
  const bool amqp = IsAmqp(session_id);
  if (it == queues_.end()) {
    return Status(StatusCode::kQueueNotFound, amqp ? rabbitmq::NotFound("queue", name, vhost)
                                                   : "queue " + Quote(name) + " not found");
  }
  const auto& queue = it->second;
  // Any session of the owner (every channel of an AMQP connection) may use it.
  if (queue->spec().exclusive && queue->owner_id() != OwnerOf(session_id)) {
    return Status(StatusCode::kResourceLocked,
                  amqp ? rabbitmq::Locked(name, vhost)
                       : "queue " + Quote(name) + " is exclusive to another connection");
  }
  return queue;
}

Status Broker::CheckQueueType(const QueueSpec& spec) {
  auto it = spec.arguments.find("x-queue-type");
  if (it == spec.arguments.end()) return Status::Ok();
  const auto* type = std::get_if<std::string>(&it->second);
  if (type == nullptr || (*type != "classic" && *type != "quorum")) {
    // Streams included: Wharf's queues are not RabbitMQ's append-only logs (docs/amqp.md).
    return Status(
        StatusCode::kPreconditionFailed,
        rabbitmq::InvalidArg("x-queue-type", spec.name, spec.vhost,
                             "\"unsupported queue type " + rabbitmq::Bare(it->second) + "\""));
  }
  if (*type == "quorum") {
    const char* bad = !spec.durable      ? "non-durable"
                      : spec.exclusive   ? "exclusive-owner"
                      : spec.auto_delete ? "auto-delete"
                                         : nullptr;
    if (bad != nullptr) {
      return Status(StatusCode::kPreconditionFailed,
                    "invalid property '" + std::string(bad) + "' for " +
                        rabbitmq::Resource("queue", spec.name, spec.vhost));
    }
  }
  return Status::Ok();
}

Status Broker::InSessionWords(uint64_t session_id, Status bound, const Headers& arguments) const {
  if (bound.code() != StatusCode::kInvalidArgument || !IsAmqp(session_id)) return bound;
  // The one way a bind fails so: a headers binding's x-match (RabbitMQ's words, its value as
  // Erlang shows a binary).
  auto it = arguments.find("x-match");
  std::string value = it == arguments.end() ? std::string() : HeaderValueToString(it->second);
  if (const auto* text = it == arguments.end() ? nullptr : std::get_if<std::string>(&it->second)) {
    value = "<<\"" + CutForDisplay(*text) + "\">>";
  }
  return Status(
      StatusCode::kPreconditionFailed,
      "Invalid x-match field value " + value + "; expected all, any, all-with-x, or any-with-x");
}

Status Broker::NoExchange(uint64_t session_id, std::string_view name) const {
  return Status(StatusCode::kExchangeNotFound,
                IsAmqp(session_id) ? rabbitmq::NotFound("exchange", name, VhostOf(session_id))
                                   : "exchange " + Quote(name) + " not found");
}

Result<QueueInfo> Broker::DeclareQueue(uint64_t session_id, QueueSpec spec) {
  thread_checker_.Check();
  SessionState* session = FindSession(session_id);
  // RabbitMQ's rules (docs/lifecycle.md, "AMQP sessions"): its names, the amq. prefix refused
  // only on creation, lenient arguments and its equivalence.
  const bool amqp = session != nullptr && session->amqp();
  spec.vhost = VhostOf(session_id);
  WHARF_RETURN_IF_ERROR(VhostUsable(spec.vhost));
  const bool generated = spec.name.empty() && !spec.passive;
  if (generated) {
    if (amqp) {
      do {
        spec.name = RandomName("amq.gen-");
      } while (QueueIn(spec.vhost, spec.name));
    } else {
      spec.name = "wharf.gen-" + Hex64(next_message_id_ ^ (next_generated_name_++ << 40));
    }
  }
  // An AMQP passive declare looks the name up as given: a name Wharf would call invalid is
  // simply not found.
  if (!(amqp && spec.passive)) WHARF_RETURN_IF_ERROR(CheckName(amqp, "queue", spec.name));
  // A passive declare checks nothing, as in RabbitMQ.
  if (!spec.passive) {
    WHARF_RETURN_IF_ERROR(
        Authorize(session_id, Permission::kConfigure, ResourceKind::kQueue, spec.name));
  }
  if (spec.passive) {
    WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, spec.name));
    TouchQueue(*queue);  // a declaration, passive too, is a use (x-expires)
    return queue->Info();
  }
  if (amqp && QueueIn(spec.vhost, spec.name)) {
    // Another owner's exclusive queue is locked; so is a redeclaration that says otherwise
    // about exclusivity (RabbitMQ's check_exclusive_access, strict). The arguments are not
    // parsed again: only the known ones are compared.
    WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, spec.name));
    if (queue->spec().exclusive != spec.exclusive) {
      return Status(StatusCode::kResourceLocked, rabbitmq::Locked(spec.name, spec.vhost));
    }
    std::string diff = AmqpInequivalence(queue->spec(), spec);
    if (!diff.empty()) return Status(StatusCode::kPreconditionFailed, diff);
    TouchQueue(*queue);
    return queue->Info();
  }
  // The server's own generated names are the only amq. names created.
  if (spec.name.starts_with("amq.") && !generated) {
    return Status(StatusCode::kReservedName,
                  amqp ? rabbitmq::ReservedName("queue", spec.name)
                       : "queue names starting with 'amq.' are reserved: " + Quote(spec.name));
  }
  if (amqp) WHARF_RETURN_IF_ERROR(CheckQueueType(spec));
  auto policy = ParseQueuePolicy(spec.arguments, amqp ? QueueRules::kRabbitMq : QueueRules::kWharf,
                                 spec.name, spec.vhost);
  if (!policy.ok()) {
    if (amqp) return policy.status();  // in RabbitMQ's words, naming the queue
    return Status(policy.status().code(),
                  std::string(policy.status().message()) + " (queue " + Quote(spec.name) + ")");
  }
  if (QueueIn(spec.vhost, spec.name)) {
    WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, spec.name));
    std::string diff = SpecDifference(queue->spec(), spec);
    if (!diff.empty()) {
      return Status(StatusCode::kPreconditionFailed,
                    "queue " + Quote(spec.name) + " exists with a different '" + diff +
                        "'; redeclare it with the same arguments or delete it first");
    }
    TouchQueue(*queue);
    return queue->Info();
  }
  if (spec.exclusive && session == nullptr) {
    return Status(StatusCode::kInvalidArgument, "an exclusive queue needs a connection");
  }
  // As RabbitMQ, for a new queue: a dead-letter exchange is read from this queue and written
  // into.
  if (auto dlx = spec.arguments.find("x-dead-letter-exchange"); dlx != spec.arguments.end()) {
    if (const auto* name = std::get_if<std::string>(&dlx->second)) {
      WHARF_RETURN_IF_ERROR(
          Authorize(session_id, Permission::kRead, ResourceKind::kQueue, spec.name));
      WHARF_RETURN_IF_ERROR(
          Authorize(session_id, Permission::kWrite, ResourceKind::kExchange, *name));
    }
  }
  // Exclusive queues end with their connection, so they are never stored (as in RabbitMQ).
  bool stored = store_ && spec.durable && !spec.exclusive;
  if (policy->dedup_window_ms > 0 && !stored) {
    return Status(amqp ? StatusCode::kPreconditionFailed : StatusCode::kInvalidArgument,
                  "queue argument 'x-deduplication-window' needs a durable, non-exclusive queue "
                  "(its deduplication keys are kept in the message store) (queue " +
                      Quote(spec.name) + ")");
  }
  WHARF_RETURN_IF_ERROR(CheckVhostQueueLimit(spec.vhost, spec.name));
  WHARF_RETURN_IF_ERROR(TopologyWritable(stored));
  uint64_t store_id = stored ? next_queue_id_++ : 0;
  // An exclusive queue belongs to the session's owner: any session of it may use it.
  const uint64_t owner = spec.exclusive ? session->owner_id() : 0;
  auto queue = std::make_shared<Queue>(spec, owner, store_id, options_.delay_limits, *policy);
  queues_.emplace(queue->key(), queue);
  ++vhosts_[spec.vhost].queues;
  ApplyPolicy(queue);
  TouchQueue(*queue);
  if (store_id != 0) Persist(store::StoreBatch::PutQueue{spec, store_id});
  if (spec.exclusive) exclusive_queues_[owner].push_back(queue->key());
  return queue->Info();
}

Result<uint64_t> Broker::DeleteQueue(uint64_t session_id, std::string_view name, bool if_unused,
                                     bool if_empty, std::optional<uint64_t> answer_to) {
  thread_checker_.Check();
  WHARF_RETURN_IF_ERROR(Authorize(session_id, Permission::kConfigure, ResourceKind::kQueue, name));
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, name));
  QueueInfo info = queue->Info();
  const bool amqp = IsAmqp(session_id);
  if (if_unused && info.consumers > 0) {
    return Status(
        StatusCode::kPreconditionFailed,
        amqp ? rabbitmq::Resource("queue", name, queue->vhost()) + " in use"
             : "queue " + Quote(name) + " has " + std::to_string(info.consumers) + " consumers");
  }
  if (if_empty && (info.ready > 0 || info.delayed > 0 || queue->delayed().count_estimated())) {
    return Status(StatusCode::kPreconditionFailed,
                  amqp ? rabbitmq::Resource("queue", name, queue->vhost()) + " not empty"
                       : "queue " + Quote(name) + " holds " + std::to_string(info.ready) +
                             " ready and " + std::to_string(info.delayed) + " delayed messages");
  }
  WHARF_RETURN_IF_ERROR(TopologyWritable(queue->store_id() != 0));
  uint64_t dropped = queue->ready() + queue->delayed().size();
  DropQueue(queue, "queue deleted");
  if (!answer_to) return dropped;
  const uint64_t request_id = *answer_to;
  // Answered once the queue's removal is synced: a crash after the answer must not bring the
  // queue back with its messages.
  auto answer = [this, session_id, request_id, dropped](const Status& status) {
    SessionState* session = FindSession(session_id);
    if (!session) return;
    session->peer().DeleteQueueDone(request_id, status.ok() ? Result<uint64_t>(dropped) : status);
    MarkDirty(*session);
  };
  if (queue->store_id() != 0) {
    AnswerWhenDurable(std::move(answer));
  } else {
    answer(Status::Ok());
  }
  return dropped;
}

void Broker::AnswerWhenDurable(std::function<void(const Status&)> answer) {
  if (!store_) return answer(Status::Ok());
  batch_sync_ = true;
  after_commit_.push_back(std::move(answer));
}

void Broker::AnswerWhenDurable(uint64_t session_id,
                               std::function<void(SessionPeer&, const Status&)> answer) {
  thread_checker_.Check();
  AnswerWhenDurable([this, session_id, answer = std::move(answer)](const Status& status) {
    SessionState* session = FindSession(session_id);
    if (!session) return;
    answer(session->peer(), status);
    MarkDirty(*session);
  });
}

PurgeFloors Broker::PurgeFloor(const Queue& queue) const {
  PurgeFloors floors;
  auto above = [&](uint64_t seq) {
    uint64_t& floor = floors[store::SeqLane(seq)];
    floor = std::max(floor, seq + 1);
  };
  if (queue.in_flight > 0) {
    for (const auto& [id, session] : sessions_) {
      for (const auto& [tag, in_flight] : session->unacked) {
        if (in_flight.queue.get() == &queue) above(in_flight.message.seq);
      }
    }
  }
  // An entry must not be removed twice (a shared body would be released twice).
  for (const PurgeRemoval& removal : purge_removals_) {
    if (removal.entry.queue_id == queue.store_id()) above(removal.entry.seq);
  }
  return floors;
}

void Broker::DropQueue(const std::shared_ptr<Queue>& queue, std::string_view reason) {
  const std::string name = queue->name();
  const std::string key = queue->key();
  // Walk a moved-out copy: an auto-deleted exchange edits every queue's binding list.
  auto bindings = std::move(queue->bindings());
  queue->bindings().clear();
  for (const auto& binding : bindings) {
    if (Exchange* exchange = FindExchange(queue->vhost(), binding.exchange)) {
      exchange->UnbindQueue(queue.get());
      MaybeAutoDeleteExchange(queue->vhost(), binding.exchange);
    }
  }
  // Cancel consumers, telling their clients why.
  auto consumers = queue->consumers();
  for (const auto& consumer : consumers) {
    if (SessionState* session = consumer->session) {
      RemoveConsumer(*session, consumer->tag, /*notify=*/true, reason);
    }
  }
  // Long polls waiting on the queue complete empty.
  auto waiters = std::move(queue->waiters());
  queue->waiters().clear();
  for (const PullWaiter& waiter : waiters) CompleteWaiter(waiter, {});
  if (queue->owner_id() != 0) {
    if (auto owned = exclusive_queues_.find(queue->owner_id()); owned != exclusive_queues_.end()) {
      std::erase(owned->second, key);
      if (owned->second.empty()) exclusive_queues_.erase(owned);
    }
  }
  queue->Purge();
  // RemoveQueue removes every entry: a purge's pending removal would release a body twice.
  // A purge waiting for those removals is durable once the queue's removal is.
  std::erase_if(purge_removals_, [&](PurgeRemoval& removal) {
    if (queue->store_id() == 0 || removal.entry.queue_id != queue->store_id()) return false;
    if (removal.answer) AnswerWhenDurable(std::move(removal.answer));
    return true;
  });
  queue->delayed().Clear();
  ForgetDelayHead(queue.get());
  queue->deleted = true;
  ForgetIdle(*queue);  // after its consumers and waiters went (each of them touched it)
  // Its redrive goes with it (RemoveQueue removes the stored one).
  redrives_.erase(key);
  // One op removes the queue and its bindings; the store removes its entries (and the bodies
  // only they held) in the background.
  if (queue->store_id() != 0) {
    Persist(store::StoreBatch::RemoveQueue{name, queue->store_id(), queue->vhost()});
  }
  if (auto vhost = vhosts_.find(queue->vhost()); vhost != vhosts_.end() && vhost->second.queues) {
    --vhost->second.queues;
  }
  queues_.erase(key);
}

void Broker::TouchQueue(Queue& queue) {
  const uint64_t expires_ms = queue.policy().expires_ms;
  if (expires_ms == 0 || queue.deleted) return;
  ForgetIdle(queue);
  if (!queue.consumers().empty()) return;  // in use: never expires while consumed
  // A century is never, in practice; the clamp keeps the deadline from overflowing.
  constexpr uint64_t kMaxMs = uint64_t{100} * 365 * 86'400'000;
  queue.idle_deadline = clock_->Now() + std::chrono::milliseconds(std::min(expires_ms, kMaxMs));
  idle_queues_.emplace(*queue.idle_deadline, &queue);
}

void Broker::ForgetIdle(Queue& queue) {
  if (!queue.idle_deadline) return;
  idle_queues_.erase({*queue.idle_deadline, &queue});
  queue.idle_deadline.reset();
}

void Broker::ExpireIdleQueues() {
  const SteadyTime now = clock_->Now();
  // Bounded per tick: NextDeadline is then already due, and the next tick goes on.
  constexpr int kPerCall = 256;
  for (int n = 0; n < kPerCall && !idle_queues_.empty() && idle_queues_.begin()->first <= now;
       ++n) {
    Queue* idle = idle_queues_.begin()->second;
    auto it = queues_.find(idle->key());
    if (it == queues_.end() || it->second.get() != idle) {  // not expected: DropQueue forgets
      idle_queues_.erase(idle_queues_.begin());
      idle->idle_deadline.reset();
      continue;
    }
    std::shared_ptr<Queue> queue = it->second;
    ForgetIdle(*queue);
    // A long poll still waiting is a use: the clock starts again (and again when it ends).
    if (!queue->waiters().empty()) {
      TouchQueue(*queue);
      continue;
    }
    const uint64_t dropped = queue->ready() + queue->delayed().size();
    spdlog::info("queue={} expired: unused for {} ms (x-expires); deleted with {} messages",
                 LogSafe(queue->name()), queue->policy().expires_ms, dropped);
    DropQueue(queue, "queue expired (x-expires)");
  }
}

Result<uint64_t> Broker::PurgeQueue(uint64_t session_id, std::string_view name,
                                    std::optional<uint64_t> answer_to) {
  thread_checker_.Check();
  WHARF_RETURN_IF_ERROR(Authorize(session_id, Permission::kRead, ResourceKind::kQueue, name));
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, name));
  const bool stored = store_ && queue->store_id() != 0;
  WHARF_RETURN_IF_ERROR(TopologyWritable(stored));
  // One range purges the ready messages, in RAM and paged, in this flush's batch; only
  // returned messages below one still in flight are removed entry by entry (docs/storage.md,
  // "Purge").
  PurgeResult purged = queue->Purge(stored ? PurgeFloor(*queue) : PurgeFloors{});
  // The first failure of any of its writes: this flush's batch (the range, the timeline) and
  // each slice of removals.
  auto outcome = std::make_shared<Status>();
  if (stored) {
    after_commit_.push_back([outcome](const Status& s) {
      if (!s.ok() && outcome->ok()) *outcome = s;
    });
  }
  for (QueuedMessage& m : purged.stored) {
    purge_removals_.push_back(
        PurgeRemoval{store::EntryRef{queue->store_id(), m.seq, m.envelope->message.id,
                                     m.receive_count, m.store_flags},
                     outcome, nullptr});
  }
  uint64_t range_messages = 0;
  for (const PurgedRange& range : stored ? purged.ranges : std::vector<PurgedRange>{}) {
    // Gone for every reader with this batch; the disk is reclaimed in steps in the background
    // (a purge of millions does not hold up other writes), its progress in OnReclaimed. One
    // range per lane.
    Persist(store::StoreBatch::PurgeRange{queue->store_id(), range.from, range.to, range.messages});
    queue->purge_reclaiming += range.messages;
    ++queue->purge_ranges;
    range_messages += range.messages;
    // Not written (the store failed): nothing is removed in the background, so nothing is
    // left to wait for. The range comes back after a restart, as an ack written then would.
    after_commit_.push_back(
        [weak = std::weak_ptr<Queue>(queue), messages = range.messages](const Status& s) {
          std::shared_ptr<Queue> q = weak.lock();
          if (s.ok() || !q || q->purge_ranges == 0) return;
          q->purge_reclaiming -= std::min(q->purge_reclaiming, messages);
          if (--q->purge_ranges == 0) q->purge_reclaiming = 0;
        });
  }
  if (stored && purged.paged() > 0) {
    spdlog::info("queue={} purged {} messages; {} are removed from the disk in the background",
                 LogSafe(queue->name()), purged.count, range_messages);
  }
  // Delayed messages go too (as SQS's purge takes them; they are the queue's messages).
  uint64_t delayed = queue->delayed().Clear();
  if (queue->delayed().backed()) {
    Persist(store::StoreBatch::RemoveAllDelayed{queue->store_id()});
  }
  UpdateDelayHead(queue);
  const uint64_t count = purged.count + delayed;
  if (!answer_to) return count;
  const uint64_t request_id = *answer_to;
  // Answered once every part of the purge is synced, like a confirm: a crash after the answer
  // brings none of the purged messages back.
  auto answer = [this, session_id, request_id, count, outcome](const Status& status) {
    SessionState* session = FindSession(session_id);
    if (!session) return;
    Status written = status;
    if (written.ok()) written = *outcome;
    session->peer().PurgeDone(request_id, written.ok() ? Result<uint64_t>(count) : written);
    MarkDirty(*session);
  };
  if (!stored) {
    answer(Status::Ok());
  } else if (!purged.stored.empty()) {
    purge_removals_.back().answer = std::move(answer);  // with the slice of its last removal
  } else {
    AnswerWhenDurable(std::move(answer));
  }
  return count;
}

Status Broker::Bind(uint64_t session_id, const BindingSpec& binding) {
  thread_checker_.Check();
  return BindIn(session_id, VhostOf(session_id), binding, /*bind=*/true);
}

Status Broker::Unbind(uint64_t session_id, const BindingSpec& binding) {
  thread_checker_.Check();
  return BindIn(session_id, VhostOf(session_id), binding, /*bind=*/false);
}

Status Broker::BindIn(uint64_t session_id, const std::string& vhost, const BindingSpec& binding,
                      bool bind) {
  WHARF_RETURN_IF_ERROR(AuthorizeBinding(session_id, binding));
  if (binding.exchange.empty()) {
    return Status(StatusCode::kReservedName,
                  bind ? "the default exchange routes by queue name and takes no bindings"
                       : "the default exchange takes no bindings");
  }
  if (bind && binding.routing_key.size() > kMaxRoutingKeyBytes) {
    return Status(StatusCode::kInvalidArgument, "binding key longer than 255 bytes");
  }
  if (!binding.destination_exchange.empty()) {
    Exchange* source = FindExchange(vhost, binding.exchange);
    if (!source) return NoExchange(session_id, binding.exchange);
    return BindExchanges(session_id, binding, source, bind);
  }
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, vhost, binding.queue));
  Exchange* exchange = FindExchange(vhost, binding.exchange);
  if (!exchange) return NoExchange(session_id, binding.exchange);
  const bool stored = exchange->spec().durable && queue->store_id() != 0;
  WHARF_RETURN_IF_ERROR(TopologyWritable(stored));
  BindingSpec made = binding;
  made.vhost = vhost;
  if (bind) {
    bool added = false;
    WHARF_RETURN_IF_ERROR(InSessionWords(
        session_id, exchange->Bind(queue.get(), binding.routing_key, binding.arguments, &added),
        binding.arguments));
    if (added) {
      if (stored) Persist(store::StoreBatch::PutBinding{made});
      queue->bindings().push_back(std::move(made));
    }
    return Status::Ok();
  }
  // Unbinding what is not bound succeeds, as in AMQP.
  if (exchange->Unbind(queue.get(), binding.routing_key, binding.arguments)) {
    auto& list = queue->bindings();
    auto it = std::find_if(list.begin(), list.end(), [&](const BindingSpec& b) {
      return b.exchange == binding.exchange && b.routing_key == binding.routing_key &&
             Exchange::Canonical(b.arguments) == Exchange::Canonical(binding.arguments);
    });
    if (it != list.end()) list.erase(it);
    if (stored) Persist(store::StoreBatch::RemoveBinding{std::move(made)});
    MaybeAutoDeleteExchange(vhost, binding.exchange);
  }
  return Status::Ok();
}

Status Broker::AuthorizeBinding(uint64_t session_id, const BindingSpec& binding) {
  // RabbitMQ's binding_action: write on the destination, read on the source exchange.
  if (binding.destination_exchange.empty()) {
    WHARF_RETURN_IF_ERROR(
        Authorize(session_id, Permission::kWrite, ResourceKind::kQueue, binding.queue));
  } else {
    WHARF_RETURN_IF_ERROR(Authorize(session_id, Permission::kWrite, ResourceKind::kExchange,
                                    binding.destination_exchange));
  }
  // Binding from the default exchange is refused as such (RabbitMQ: after the write check).
  if (binding.exchange.empty()) return Status::Ok();
  return Authorize(session_id, Permission::kRead, ResourceKind::kExchange, binding.exchange);
}

Status Broker::BindExchanges(uint64_t session_id, const BindingSpec& binding, Exchange* source,
                             bool bind) {
  if (!binding.queue.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "a binding goes to a queue or to a destination exchange, not both");
  }
  Exchange* destination = FindExchange(source->vhost(), binding.destination_exchange);
  if (!destination) return NoExchange(session_id, binding.destination_exchange);
  Destination to{nullptr, destination};
  bool durable = source->spec().durable && destination->spec().durable;
  WHARF_RETURN_IF_ERROR(TopologyWritable(durable));
  BindingSpec stored = binding;
  stored.vhost = source->vhost();
  if (bind) {
    bool added = false;
    WHARF_RETURN_IF_ERROR(
        InSessionWords(session_id, source->Bind(to, binding.routing_key, binding.arguments, &added),
                       binding.arguments));
    if (added && durable) Persist(store::StoreBatch::PutBinding{std::move(stored)});
    return Status::Ok();
  }
  if (source->Unbind(to, binding.routing_key, binding.arguments)) {
    if (durable) Persist(store::StoreBatch::RemoveBinding{std::move(stored)});
    MaybeAutoDeleteExchange(source->vhost(), binding.exchange);
  }
  return Status::Ok();
}

void Broker::RouteThrough(Exchange* exchange, const std::string& routing_key,
                          const Headers& headers, std::vector<Queue*>* targets,
                          std::vector<const Exchange*>* visited) {
  if (std::find(visited->begin(), visited->end(), exchange) != visited->end()) return;
  visited->push_back(exchange);
  size_t before = targets->size();
  std::vector<Destination> hits;
  exchange->Route(routing_key, headers, &hits);
  for (const Destination& hit : hits) {
    if (hit.queue) {
      targets->push_back(hit.queue);
    } else {
      RouteThrough(hit.exchange, routing_key, headers, targets, visited);
    }
  }
  // Nothing reached a queue through this exchange: its alternate exchange gets the message.
  if (targets->size() == before && !exchange->alternate_exchange().empty()) {
    if (Exchange* alternate = FindExchange(exchange->vhost(), exchange->alternate_exchange())) {
      RouteThrough(alternate, routing_key, headers, targets, visited);
    }
  }
}

void Broker::MaybeAutoDeleteExchange(std::string_view vhost, std::string_view name) {
  auto it = exchanges_.find(ResourceKey(vhost, name));
  if (it != exchanges_.end() && it->second->spec().auto_delete &&
      it->second->binding_count() == 0) {
    RemoveExchange(vhost, name);
  }
}

}  // namespace wharf::broker
