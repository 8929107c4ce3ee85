#include "server/overview_history.h"

namespace wharf::server {

void OverviewHistory::Add(const std::vector<QueueInfo>& queues, int64_t at_ms) {
  Taken taken;
  taken.at_ms = at_ms;
  for (const QueueInfo& q : queues) {
    Totals& t = taken.vhosts[q.vhost];
    t.publish_rate += q.publish_rate;
    t.deliver_rate += q.deliver_rate;
    t.ack_rate += q.ack_rate;
    t.ready += q.ready;
    t.unacked += q.in_flight;
  }
  std::lock_guard lock(mu_);
  samples_.push_back(std::move(taken));
  while (samples_.size() > kKeep) samples_.pop_front();
}

std::vector<OverviewHistory::Sample> OverviewHistory::Samples(
    const std::function<bool(const std::string&)>& sees) const {
  std::lock_guard lock(mu_);
  std::vector<Sample> out;
  out.reserve(samples_.size());
  for (const Taken& taken : samples_) {
    Sample sample;
    sample.at_ms = taken.at_ms;
    for (const auto& [vhost, t] : taken.vhosts) {
      if (!sees(vhost)) continue;
      sample.totals.publish_rate += t.publish_rate;
      sample.totals.deliver_rate += t.deliver_rate;
      sample.totals.ack_rate += t.ack_rate;
      sample.totals.ready += t.ready;
      sample.totals.unacked += t.unacked;
    }
    out.push_back(sample);
  }
  return out;
}

}  // namespace wharf::server
