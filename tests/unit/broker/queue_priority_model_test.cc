// broker/queue.h's priority lanes against a model: random publishes (paged when the queue
// says so), pops, returns, loads that finish while more is paged, and purges with messages in
// flight. After every step the queue must hold what the model holds, and every pop must give
// the model's next message: the oldest of the highest priority, or nothing while that one is
// still on disk.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "broker/queue.h"

namespace wharf::broker {
namespace {

constexpr int64_t kModelNow = 1'700'000'000'000;

class LaneModel {
 public:
  explicit LaneModel(uint64_t seed, uint8_t max_priority)
      : rng_(seed),
        queue_(MakeSpec(), 0, /*store_id=*/7, {}, MakePolicy(max_priority)),
        max_priority_(max_priority) {}

  void Step() {
    switch (std::uniform_int_distribution<int>(0, 9)(rng_)) {
      case 0:
      case 1:
      case 2:
        Publish();
        break;
      case 3:
      case 4:
        Pop();
        break;
      case 5:
        Return();
        break;
      case 6:
        Settle();
        break;
      case 7:
        StartLoad();
        break;
      case 8:
        FinishLoad();
        break;
      case 9:
        if (std::uniform_int_distribution<int>(0, 40)(rng_) == 0) Purge();
        break;
    }
    ASSERT_EQ(queue_.ready(), ready_.size() + 0) << "after step " << steps_;
    ++steps_;
  }

 private:
  static QueueSpec MakeSpec() {
    QueueSpec spec;
    spec.name = "model";
    spec.durable = true;
    return spec;
  }
  static QueuePolicy MakePolicy(uint8_t max_priority) {
    QueuePolicy policy;
    policy.max_priority = max_priority;
    return policy;
  }

  void Publish() {
    auto e = std::make_shared<Envelope>();
    e->message.published_at_ms = kModelNow;
    e->message.properties.priority =
        std::uniform_int_distribution<uint32_t>(0, max_priority_ + 2)(rng_);
    e->message.body = "m" + std::to_string(next_body_++);
    const bool page = queue_.ShouldPage(limits_, *e);
    const uint64_t seq = queue_.Enqueue(e, true, 0, page);
    ASSERT_EQ(store::SeqLane(seq),
              max_priority_ - std::min<uint32_t>(e->message.properties.priority, max_priority_));
    ASSERT_FALSE(ready_.contains(seq)) << "a sequence number used twice";
    ready_[seq] = e;
    if (page) disk_[seq] = e;
  }

  void Pop() {
    auto got = queue_.Pop(kModelNow);
    if (ready_.empty()) {
      ASSERT_FALSE(got.has_value());
      return;
    }
    // The model's next: the lowest sequence number, as lanes sort highest priority first.
    const uint64_t want = ready_.begin()->first;
    if (disk_.contains(want) && !loaded_.contains(want)) {
      ASSERT_FALSE(got.has_value()) << "served past seq " << want << ", still on disk";
      return;
    }
    ASSERT_TRUE(got.has_value()) << "nothing, with seq " << want << " in RAM";
    ASSERT_EQ(got->seq, want);
    ASSERT_EQ(got->envelope, ready_.begin()->second);
    ready_.erase(ready_.begin());
    loaded_.erase(want);
    disk_.erase(want);  // delivered: its entry is the in-flight message's now
    in_flight_.push_back(std::move(*got));
  }

  void Return() {
    if (in_flight_.empty()) return;
    size_t i = std::uniform_int_distribution<size_t>(0, in_flight_.size() - 1)(rng_);
    QueuedMessage m = std::move(in_flight_[i]);
    in_flight_.erase(in_flight_.begin() + static_cast<ptrdiff_t>(i));
    ready_[m.seq] = m.envelope;
    queue_.Requeue(std::move(m));
  }

  void Settle() {
    if (in_flight_.empty()) return;
    in_flight_.erase(in_flight_.begin() +
                     static_cast<ptrdiff_t>(
                         std::uniform_int_distribution<size_t>(0, in_flight_.size() - 1)(rng_)));
  }

  void StartLoad() {
    if (load_ || !queue_.NeedsLoad(kBatch, 1 << 30)) return;
    queue_.MarkLoading();
    load_ = queue_.BeginLoad();
    generation_ = queue_.load_generation;
  }

  void FinishLoad() {
    if (!load_) return;
    auto [from, to] = *load_;
    load_.reset();
    if (generation_ != queue_.load_generation) return;  // purged: the broker drops it
    std::vector<QueuedMessage> kept;
    uint64_t last = 0;
    for (auto it = disk_.lower_bound(from); it != disk_.end() && it->first < to; ++it) {
      if (loaded_.contains(it->first)) continue;
      if (kept.size() == kBatch) break;
      kept.push_back(QueuedMessage{it->second, it->first, 0, true, 0, 0, nullptr});
      last = it->first;
    }
    const size_t n = kept.size();
    for (const auto& m : kept) loaded_.insert(m.seq);
    ASSERT_TRUE(queue_.AddLoaded(std::move(kept), n, last, /*reached_end=*/n < kBatch))
        << "the queue's count disagrees with the disk at step " << steps_;
  }

  void Purge() {
    PurgeFloors floors;
    for (const auto& m : in_flight_) {
      uint64_t& floor = floors[store::SeqLane(m.seq)];
      floor = std::max(floor, m.seq + 1);
    }
    PurgeResult purged = queue_.Purge(floors);
    ASSERT_EQ(purged.count, ready_.size());
    // Every purged message with an entry is below its lane's floor (removed one by one) or in
    // its lane's range; nothing in flight is in a range.
    for (const auto& [seq, envelope] : ready_) {
      const bool one_by_one = std::any_of(purged.stored.begin(), purged.stored.end(),
                                          [&](const QueuedMessage& m) { return m.seq == seq; });
      const bool ranged =
          std::any_of(purged.ranges.begin(), purged.ranges.end(),
                      [&](const PurgedRange& r) { return seq >= r.from && seq < r.to; });
      ASSERT_TRUE(one_by_one != ranged) << "seq " << seq;
    }
    for (const auto& m : in_flight_) {
      for (const auto& r : purged.ranges) ASSERT_FALSE(m.seq >= r.from && m.seq < r.to);
    }
    for (const auto& r : purged.ranges) {
      ASSERT_EQ(store::SeqLane(r.from), store::SeqLane(r.to - 1)) << "a range in one lane";
    }
    ready_.clear();
    disk_.clear();
    loaded_.clear();
  }

  static constexpr uint32_t kBatch = 5;
  std::mt19937_64 rng_;
  Queue queue_;
  const uint8_t max_priority_;
  PageLimits limits_{/*max_messages=*/12, /*max_bytes=*/1 << 20};
  std::map<uint64_t, EnvelopePtr> ready_;  // by seq: the model's delivery order
  std::map<uint64_t, EnvelopePtr> disk_;   // paged (the store's entries not yet delivered)
  std::set<uint64_t> loaded_;              // of disk_, those loaded into RAM
  std::vector<QueuedMessage> in_flight_;
  std::optional<std::pair<uint64_t, uint64_t>> load_;
  uint64_t generation_ = 0;
  uint64_t next_body_ = 0;
  uint64_t steps_ = 0;
};

TEST(QueuePriorityModel, RandomWorkloadsKeepPriorityOrderCountsAndPaging) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    LaneModel model(seed, static_cast<uint8_t>(1 + seed % 9));
    for (int i = 0; i < 3'000; ++i) {
      model.Step();
      if (::testing::Test::HasFatalFailure()) {
        FAIL() << "seed " << seed << " step " << i;
      }
    }
  }
}

}  // namespace
}  // namespace wharf::broker
