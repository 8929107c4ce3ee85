// The broker's figures for /metrics (server/metrics.h): a copy taken on the broker thread, so
// the HTTP thread formats it without touching broker state. Part of class Broker (broker.h).
#include <set>

#include "broker/broker.h"

namespace wharf::broker {

BrokerMetrics Broker::Metrics() const {
  RefreshRates();
  BrokerMetrics out;
  std::set<std::string, std::less<>> dead_letter_queues;
  for (const auto& [name, queue] : queues_) {
    const QueuePolicy& policy = queue->policy();
    if (!policy.dead_letter_queue.empty()) {
      dead_letter_queues.insert(policy.dead_letter_queue);
    } else if (policy.dead_letter_exchange && policy.dead_letter_exchange->empty() &&
               policy.dead_letter_routing_key) {
      dead_letter_queues.insert(*policy.dead_letter_routing_key);  // the default exchange
    }
  }
  out.queues.reserve(queues_.size());
  for (const auto& [name, queue] : queues_) {
    QueueMetrics m;
    m.info = queue->Info();
    m.dead_letter_queue = dead_letter_queues.contains(name);
    m.nacked_total = queue->nacked_total;
    m.redelivered_total = queue->redelivered_total;
    m.dead_lettered_total = queue->dead_lettered_total;
    m.expired_total = queue->expired_total;
    m.lease_expired_total = queue->lease_expired_total;
    out.consumers += m.info.consumers;
    out.queues.push_back(std::move(m));
  }
  out.connections = sessions_.size();
  out.deliveries_in_flight = deliveries_in_flight_;
  out.confirm_ms = confirm_ms_;
  out.store_writable = store_error_.ok();
  if (!store_error_.ok()) out.store_error = store_error_.ToString();
  return out;
}

}  // namespace wharf::broker
