// broker/lease_timer.h
//
// LeaseTimer finds the deliveries whose lease ran out (docs/lifecycle.md). Leases are kept in
// 10 ms buckets by deadline, so adding one and finding the expired ones cost the same however
// many deliveries are in flight: a tick looks only at the buckets that are due. A lease that
// was settled or extended is not removed (that would need a search); its stale entry is
// dropped when its bucket comes due, after the caller checks it against the delivery's
// current deadline. Buckets fire at their end: never before a deadline, at most 10 ms after.
// So that stale entries do not pile up (a busy queue settles most deliveries long before their
// lease ends), the owner compacts when they outnumber the live ones (RemoveIf).
//
// Thread safety: confined to the broker thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <vector>

#include "common/clock.h"

namespace wharf::broker {

struct LeaseRef {
  uint64_t session_id = 0;
  uint64_t delivery_tag = 0;
  SteadyTime deadline;
};

// The same buckets serve message expiry (x-message-ttl): any `Ref` with a `deadline`.
template <typename Ref>
class BucketTimer {
 public:
  static constexpr std::chrono::milliseconds kGranularity{10};

  void Add(const Ref& ref) {
    buckets_[Bucket(ref.deadline)].push_back(ref);
    ++size_;
  }
  // Entries, stale ones included.
  size_t size() const { return size_; }
  // Drops the entries `stale` says are settled or superseded (a compaction, O(entries)).
  template <typename Pred>
  void RemoveIf(Pred stale) {
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      size_ -= std::erase_if(it->second, stale);
      it = it->second.empty() ? buckets_.erase(it) : std::next(it);
    }
  }

  // Removes and returns the leases of every bucket due at `now`, at most about `limit` (whole
  // buckets, so a bucket is never split).
  std::vector<Ref> TakeDue(SteadyTime now, size_t limit) {
    std::vector<Ref> out;
    while (!buckets_.empty() && out.size() < limit && End(buckets_.begin()->first) <= now) {
      auto node = buckets_.extract(buckets_.begin());
      size_ -= node.mapped().size();
      if (out.empty()) {
        out = std::move(node.mapped());
      } else {
        out.insert(out.end(), node.mapped().begin(), node.mapped().end());
      }
    }
    return out;
  }

  // When the earliest bucket comes due.
  std::optional<SteadyTime> next() const {
    if (buckets_.empty()) return std::nullopt;
    return End(buckets_.begin()->first);
  }
  size_t buckets() const { return buckets_.size(); }

 private:
  static int64_t Bucket(SteadyTime t) {
    auto ticks = t.time_since_epoch().count();
    auto width = std::chrono::duration_cast<SteadyTime::duration>(kGranularity).count();
    return ticks / width + (ticks % width != 0 ? 1 : 0);  // rounded up: never early
  }
  static SteadyTime End(int64_t bucket) {
    return SteadyTime(std::chrono::duration_cast<SteadyTime::duration>(kGranularity) * bucket);
  }

  std::map<int64_t, std::vector<Ref>> buckets_;
  size_t size_ = 0;
};

using LeaseTimer = BucketTimer<LeaseRef>;

}  // namespace wharf::broker
