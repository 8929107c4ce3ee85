// Virtual hosts (broker/vhost.h; docs/security.md, "Virtual hosts"): made, limited, listed and
// deleted. Every name a session gives is looked up in its vhost (SessionState::vhost). Part of
// class Broker (broker.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "broker/broker.h"
#include "common/log_safe.h"

namespace wharf::broker {

const std::string& Broker::VhostOf(uint64_t session_id) const {
  static const std::string kDefault(kDefaultVhost);
  const SessionState* session = FindSession(session_id);
  return session == nullptr ? kDefault : session->vhost();
}

void Broker::AddBuiltinExchanges(const std::string& vhost) {
  for (auto [name, type] : {std::pair{"amq.direct", ExchangeType::kDirect},
                            {"amq.fanout", ExchangeType::kFanout},
                            {"amq.topic", ExchangeType::kTopic},
                            {"amq.headers", ExchangeType::kHeaders},
                            {"amq.match", ExchangeType::kHeaders}}) {
    ExchangeSpec spec;
    spec.name = name;
    spec.type = type;
    spec.vhost = vhost;
    exchanges_.emplace(ResourceKey(vhost, spec.name), std::make_unique<Exchange>(spec));
  }
}

Status Broker::VhostUsable(std::string_view vhost) const {
  if (HasVhost(vhost)) return Status::Ok();
  return Status(StatusCode::kVhostNotFound, "vhost '" + CutForDisplay(vhost) + "' was deleted");
}

Status Broker::CheckVhostQueueLimit(std::string_view vhost, std::string_view queue) const {
  auto it = vhosts_.find(vhost);
  if (it == vhosts_.end() || it->second.limits.max_queues < 0) return Status::Ok();
  if (it->second.queues < static_cast<uint64_t>(it->second.limits.max_queues)) {
    return Status::Ok();
  }
  // RabbitMQ's 406 (rabbit_amqqueue:check_vhost_queue_limit), in its words.
  return Status(StatusCode::kPreconditionFailed,
                "cannot declare queue '" + CutForDisplay(queue) + "': queue limit in vhost '" +
                    CutForDisplay(vhost) + "' (" + std::to_string(it->second.limits.max_queues) +
                    ") is reached");
}

Status Broker::AddVhost(const std::string& name, std::string description, VhostLimits limits) {
  thread_checker_.Check();
  WHARF_RETURN_IF_ERROR(ValidateVhostName(name));
  if (HasVhost(name)) return Status::Ok();  // as rabbitmqctl add_vhost: nothing changes
  WHARF_RETURN_IF_ERROR(TopologyWritable(store_ != nullptr));
  Persist(store::StoreBatch::PutVhost{store::StoredVhost{name, description, limits}});
  vhosts_.emplace(name, VhostState{std::move(description), limits, 0});
  AddBuiltinExchanges(name);
  spdlog::info("vhost={} added", LogSafe(name));
  return Status::Ok();
}

Status Broker::SetVhostLimits(std::string_view name, VhostLimits limits) {
  thread_checker_.Check();
  auto it = vhosts_.find(name);
  if (it == vhosts_.end()) {
    return Status(StatusCode::kVhostNotFound, "vhost '" + CutForDisplay(name) + "' not found");
  }
  WHARF_RETURN_IF_ERROR(TopologyWritable(store_ != nullptr));
  it->second.limits = limits;
  // "/" has no record; its limits are stored in one like any other's.
  Persist(store::StoreBatch::PutVhost{
      store::StoredVhost{it->first, it->second.description, it->second.limits}});
  return Status::Ok();
}

Status Broker::DeleteVhost(std::string_view name_view) {
  thread_checker_.Check();
  const std::string name(name_view);
  if (name == kDefaultVhost) {
    return Status(StatusCode::kReservedName, "the default vhost '/' cannot be deleted");
  }
  if (!HasVhost(name)) {
    return Status(StatusCode::kVhostNotFound, "vhost '" + CutForDisplay(name) + "' not found");
  }
  WHARF_RETURN_IF_ERROR(TopologyWritable(store_ != nullptr));
  // Keys sort by vhost: its queues are one range.
  std::vector<std::shared_ptr<Queue>> queues;
  const std::string first = ResourceKey(name, "");
  for (auto it = queues_.lower_bound(first); it != queues_.end(); ++it) {
    if (it->second->vhost() != name) break;
    queues.push_back(it->second);
  }
  uint64_t messages = 0;
  for (const auto& queue : queues) {
    messages += queue->ready() + queue->delayed().size();
    DropQueue(queue, "vhost deleted");
  }
  std::vector<std::string> exchanges;
  for (const auto& [key, exchange] : exchanges_) {
    if (exchange->vhost() == name) exchanges.push_back(exchange->name());
  }
  for (const auto& exchange : exchanges) RemoveExchange(name, exchange);
  for (const PolicyInfo& policy : policies_.List(name)) {
    Persist(store::StoreBatch::RemovePolicy{name, policy.name});
  }
  policies_.RemoveVhost(name);
  // After everything in it, in the same batch: a crash keeps all of it or none.
  Persist(store::StoreBatch::RemoveVhost{name});
  vhosts_.erase(name);
  spdlog::info("vhost={} deleted with {} queues ({} messages) and {} exchanges", LogSafe(name),
               queues.size(), messages, exchanges.size());
  return Status::Ok();
}

Status Broker::CheckVhostConnection(std::string_view name) const {
  auto it = vhosts_.find(name);
  if (it == vhosts_.end()) {
    return Status(StatusCode::kVhostNotFound, "vhost '" + CutForDisplay(name) + "' not found");
  }
  const int64_t limit = it->second.limits.max_connections;
  if (limit < 0) return Status::Ok();
  int64_t open = 0;
  for (const auto& [id, connection] : connections_) {
    if (connection.meta.vhost == name) ++open;
  }
  if (open < limit) return Status::Ok();
  return Status(StatusCode::kResourceExhausted,
                "connection limit (" + std::to_string(limit) + ") is reached");
}

std::vector<VhostInfo> Broker::ListVhosts() const {
  std::vector<VhostInfo> out;
  for (const auto& [name, state] : vhosts_) {
    VhostInfo info;
    info.name = name;
    info.description = state.description;
    info.limits = state.limits;
    info.queues = state.queues;
    out.push_back(std::move(info));
  }
  // `out` is in name order (vhosts_ is).
  auto find = [&](std::string_view name) -> VhostInfo* {
    auto it =
        std::lower_bound(out.begin(), out.end(), name,
                         [](const VhostInfo& info, std::string_view n) { return info.name < n; });
    return it != out.end() && it->name == name ? &*it : nullptr;
  };
  for (const auto& [key, exchange] : exchanges_) {
    if (VhostInfo* info = find(exchange->vhost())) ++info->exchanges;
  }
  for (const auto& [id, connection] : connections_) {
    if (VhostInfo* info = find(connection.meta.vhost)) ++info->connections;
  }
  return out;
}

}  // namespace wharf::broker
