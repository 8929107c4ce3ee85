// server/amqp_confirms.h
//
// ConfirmTracker is one AMQP channel's publisher confirms (confirm.select): the sequence number
// of every publish, which of them are still outstanding, and the basic.ack / basic.nack frames
// that settle them, coalesced as RabbitMQ does (rabbit_channel's coalesce_and_send): below the
// smallest seq still outstanding (or nacked now), one ack with multiple=true covers every seq
// confirmed; above it each is acked alone; a single ack is always multiple=false
// (rabbit_channel's send_confirms). A multiple ack never covers a nacked or an outstanding seq,
// so a client that settles ranges never mistakes a nack for an ack.
//
// Thread safety: confined to the broker thread (owned by its AmqpChannel).
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

namespace wharf::server {

class ConfirmTracker {
 public:
  struct Settle {
    uint64_t seq = 0;
    bool multiple = false;
    bool ack = true;  // false: basic.nack
    friend bool operator==(const Settle&, const Settle&) = default;
  };

  // A new publish: its seq (1, 2, 3...), outstanding until Ack or Nack.
  uint64_t Next() {
    outstanding_.insert(next_);
    return next_++;
  }
  // Seq numbers count every publish, unroutable and refused ones too.
  uint64_t last() const { return next_ - 1; }
  void Ack(uint64_t seq) {
    if (outstanding_.erase(seq) != 0) acked_.push_back(seq);
  }
  void Nack(uint64_t seq) {
    if (outstanding_.erase(seq) != 0) nacked_.push_back(seq);
  }
  bool has_pending() const { return !acked_.empty() || !nacked_.empty(); }
  size_t outstanding() const { return outstanding_.size(); }

  // The frames for everything settled since the last call: nacks (one each), then acks.
  std::vector<Settle> Take() {
    std::vector<Settle> out;
    std::sort(nacked_.begin(), nacked_.end());
    for (uint64_t seq : nacked_) out.push_back({seq, false, false});
    if (acked_.size() == 1) {
      out.push_back({acked_[0], false, true});
    } else if (!acked_.empty()) {
      std::sort(acked_.begin(), acked_.end());
      uint64_t cutoff = outstanding_.empty() ? acked_.back() + 1 : *outstanding_.begin();
      if (!nacked_.empty()) cutoff = std::min(cutoff, nacked_.front());
      auto above = std::lower_bound(acked_.begin(), acked_.end(), cutoff);
      if (above != acked_.begin()) out.push_back({*(above - 1), true, true});
      for (auto it = above; it != acked_.end(); ++it) out.push_back({*it, false, true});
    }
    acked_.clear();
    nacked_.clear();
    return out;
  }

 private:
  uint64_t next_ = 1;
  std::set<uint64_t> outstanding_;
  std::vector<uint64_t> acked_;
  std::vector<uint64_t> nacked_;
};

}  // namespace wharf::server
