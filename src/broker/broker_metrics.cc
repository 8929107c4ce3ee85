// What the broker shows operators: the figures for /metrics (server/metrics.h), copied on the
// broker thread so the HTTP thread formats them without touching broker state; the listings
// (queues with their rates, exchanges, bindings, consumers, connections). Part of class
// Broker (broker.h).
#include <algorithm>
#include <set>
#include <tuple>

#include "broker/broker.h"

namespace wharf::broker {

BrokerMetrics Broker::Metrics() const {
  RefreshRates();
  BrokerMetrics out;
  std::set<std::string, std::less<>> dead_letter_queues;
  for (const auto& [key, queue] : queues_) {  // by ResourceKey: a target is in its vhost
    const QueuePolicy& policy = queue->policy();
    if (!policy.dead_letter_queue.empty()) {
      dead_letter_queues.insert(ResourceKey(queue->vhost(), policy.dead_letter_queue));
    } else if (policy.dead_letter_exchange && policy.dead_letter_exchange->empty() &&
               policy.dead_letter_routing_key) {
      // The default exchange.
      dead_letter_queues.insert(ResourceKey(queue->vhost(), *policy.dead_letter_routing_key));
    }
  }
  out.queues.reserve(queues_.size());
  for (const auto& [key, queue] : queues_) {
    QueueMetrics m;
    m.info = queue->Info();
    m.dead_letter_queue = dead_letter_queues.contains(key);
    m.nacked_total = queue->nacked_total;
    m.redelivered_total = queue->redelivered_total;
    m.dead_lettered_total = queue->dead_lettered_total;
    m.expired_total = queue->expired_total;
    m.lease_expired_total = queue->lease_expired_total;
    m.duplicates_total = queue->duplicates_total;
    m.held = queue->held();
    out.consumers += m.info.consumers;
    out.queues.push_back(std::move(m));
  }
  out.connections = connections_.size();
  for (const auto& [id, connection] : connections_) {
    if (connection.meta.protocol == "amqp") ++out.amqp_connections;
  }
  for (const auto& [id, session] : sessions_) {
    if (!session->own_owner()) ++out.amqp_channels;
  }
  out.deliveries_in_flight = deliveries_in_flight_;
  out.confirm_ms = confirm_ms_;
  out.store_writable = store_error_.ok();
  if (!store_error_.ok()) out.store_error = store_error_.ToString();
  return out;
}

void Broker::RefreshRates() const {
  const SteadyTime now = clock_->Now();
  if (rates_at_ && now - *rates_at_ < kRateWindow) return;
  const double seconds = rates_at_ ? std::chrono::duration<double>(now - *rates_at_).count() : 0.0;
  for (const auto& [name, queue] : queues_) queue->UpdateRates(seconds);
  rates_at_ = now;
}

std::vector<QueueInfo> Broker::ListQueues(std::string_view prefix, std::string_view vhost) const {
  RefreshRates();
  std::vector<QueueInfo> out;
  // Keys sort by vhost, then name: one vhost's queues with the prefix are one range.
  auto it = vhost.empty() ? queues_.begin() : queues_.lower_bound(ResourceKey(vhost, prefix));
  for (; it != queues_.end(); ++it) {
    const Queue& queue = *it->second;
    if (!vhost.empty() && queue.vhost() != vhost) break;
    if (!queue.name().starts_with(prefix)) {
      if (!vhost.empty()) break;
      continue;
    }
    out.push_back(queue.Info());
  }
  return out;
}

std::vector<ExchangeInfo> Broker::ListExchanges(std::string_view vhost) const {
  std::vector<ExchangeInfo> out;
  for (const auto& [name, state] : vhosts_) {
    if (!vhost.empty() && name != vhost) continue;
    ExchangeInfo default_exchange;  // in every vhost
    default_exchange.durable = true;
    default_exchange.vhost = name;
    out.push_back(default_exchange);
  }
  for (const auto& [key, exchange] : exchanges_) {
    if (vhost.empty() || exchange->vhost() == vhost) out.push_back(exchange->Info());
  }
  std::sort(out.begin(), out.end(), [](const ExchangeInfo& a, const ExchangeInfo& b) {
    return std::tie(a.vhost, a.name) < std::tie(b.vhost, b.name);
  });
  return out;
}

std::vector<BindingSpec> Broker::ListBindings(std::string_view exchange, std::string_view queue,
                                              std::string_view vhost) const {
  std::vector<const Exchange*> sources;
  for (const auto& [key, e] : exchanges_) {
    if (!vhost.empty() && e->vhost() != vhost) continue;
    if (exchange.empty() || e->name() == exchange) sources.push_back(e.get());
  }
  std::sort(sources.begin(), sources.end(), [](const Exchange* a, const Exchange* b) {
    return std::tie(a->vhost(), a->name()) < std::tie(b->vhost(), b->name());
  });
  std::vector<BindingSpec> out;
  for (const Exchange* e : sources) {
    for (BindingSpec& b : e->Bindings()) {
      if (!queue.empty() && b.queue != queue) continue;
      b.vhost = e->vhost();
      out.push_back(std::move(b));
    }
  }
  return out;
}

std::vector<ConsumerInfo> Broker::ListConsumers(std::string_view queue,
                                                std::string_view vhost) const {
  std::vector<ConsumerInfo> out;
  for (const auto& [key, q] : queues_) {
    if (!vhost.empty() && q->vhost() != vhost) continue;
    if (!queue.empty() && q->name() != queue) continue;
    const ConsumerSet& set = q->consumers();
    for (const auto& c : set) {
      if (!c->active) continue;
      ConsumerInfo info;
      info.queue = q->name();
      info.vhost = q->vhost();
      info.consumer_tag = c->tag;
      if (c->session) {
        info.connection_id = c->session->owner_id();
        info.user = c->session->user();
        info.channel = c->session->channel();
      }
      info.prefetch = c->prefetch;
      info.unacked = c->unacked;
      info.lease_ms = c->lease_ms;
      info.exclusive = c->exclusive;
      info.priority = c->priority;
      info.activity = !set.single_active_mode() ? "up"
                      : set.IsOffered(*c)       ? "single_active"
                                                : "waiting";
      out.push_back(std::move(info));
    }
  }
  return out;
}

std::vector<ConnectionInfo> Broker::ListConnections(std::string_view vhost) const {
  std::unordered_map<uint64_t, ConnectionInfo> by_owner;
  for (const auto& [id, connection] : connections_) {
    if (!vhost.empty() && connection.meta.vhost != vhost) continue;
    ConnectionInfo& info = by_owner[id];
    info.id = id;
    info.user = connection.user;
    info.address = connection.address;
    info.connected_at_ms = connection.connected_at_ms;
    info.protocol = connection.meta.protocol;
    info.client = connection.meta.client;
    info.client_version = connection.meta.client_version;
    info.vhost = connection.meta.vhost;
  }
  // A connection's figures are its sessions' (an AMQP connection's channels) together.
  for (const auto& [id, session] : sessions_) {
    auto it = by_owner.find(session->owner_id());
    if (it == by_owner.end()) continue;
    ConnectionInfo& info = it->second;
    info.consumers += static_cast<uint32_t>(session->consumers.size());
    info.unacked += session->unacked.size();
    info.pending_receives += session->outstanding_receives;
    ++info.channels;
  }
  std::vector<ConnectionInfo> out;
  out.reserve(by_owner.size());
  for (auto& [id, info] : by_owner) out.push_back(std::move(info));
  std::sort(out.begin(), out.end(),
            [](const ConnectionInfo& a, const ConnectionInfo& b) { return a.id < b.id; });
  return out;
}

}  // namespace wharf::broker
