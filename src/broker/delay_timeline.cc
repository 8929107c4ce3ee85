#include "broker/delay_timeline.h"

#include <algorithm>

namespace wharf::broker {
namespace {

// The whole message, headers included (Envelope::whole_bytes): the RAM limits bound memory.
uint64_t WholeBytes(const DelayedMessage& m) { return m.envelope->whole_bytes(); }

}  // namespace

bool DelayTimeline::Add(DelayKey key, DelayedMessage message) {
  if (backed_ && !loading_ && key >= disk_from_) {
    NoteDiskAdded();
    return false;
  }
  if (loading_ && key >= disk_from_) added_during_load_.insert(key.message_id);
  ram_bytes_ += WholeBytes(message);
  ram_ids_[key.message_id] = key.due_ms;
  ram_.emplace(key, std::move(message));
  if (!loading_) EnforceLimits();
  return ram_.contains(key);
}

std::vector<std::pair<DelayKey, DelayedMessage>> DelayTimeline::TakeDue(int64_t now_ms,
                                                                        size_t limit) {
  std::vector<std::pair<DelayKey, DelayedMessage>> out;
  while (out.size() < limit && !ram_.empty() && ram_.begin()->first.due_ms <= now_ms) {
    auto node = ram_.extract(ram_.begin());
    ram_bytes_ -= WholeBytes(node.mapped());
    ram_ids_.erase(node.key().message_id);
    out.emplace_back(node.key(), std::move(node.mapped()));
  }
  return out;
}

std::optional<int64_t> DelayTimeline::head_due() const {
  if (ram_.empty()) return std::nullopt;
  return ram_.begin()->first.due_ms;
}

std::optional<std::pair<DelayKey, DelayedMessage>> DelayTimeline::RemoveFromRam(
    uint64_t message_id) {
  auto id = ram_ids_.find(message_id);
  if (id == ram_ids_.end()) return std::nullopt;
  DelayKey key{id->second, message_id};
  ram_ids_.erase(id);
  auto node = ram_.extract(key);
  ram_bytes_ -= WholeBytes(node.mapped());
  return std::make_pair(key, std::move(node.mapped()));
}

bool DelayTimeline::ClaimOnDisk(DelayKey key) {
  if (!backed_ || key < disk_from_ || ram_ids_.contains(key.message_id)) return false;
  // Remembered until a load passes its key: a second cancel (two lookups answered before
  // either removal was written) finds it claimed, and a load in flight that returns it skips
  // it; either way it is counted off once.
  if (!claimed_.emplace(key.message_id, key).second) return false;
  NoteDiskRemoved();
  return true;
}

uint64_t DelayTimeline::disk_count() const {
  int64_t n = static_cast<int64_t>(recovered_count_) + disk_delta_;
  return n > 0 ? static_cast<uint64_t>(n) : 0;
}

bool DelayTimeline::NeedsLoad() const {
  if (!backed_ || loading_ || disk_from_ == kDelayKeyMax) return false;
  if (!count_unknown_ && disk_count() == 0) return false;
  return ram_.size() < std::max<uint64_t>(limits_.max_messages / 2, 1) &&
         ram_bytes_ < limits_.max_bytes / 2;
}

void DelayTimeline::AddLoaded(std::vector<Loaded> loaded, bool reached_end) {
  loading_ = false;
  DelayKey last = disk_from_;
  for (Loaded& item : loaded) {
    last = item.key;
    if (claimed_.contains(item.key.message_id)) continue;  // cancelled, counted off already
    // Added during the load: in RAM (or released, or cancelled) already, and never counted.
    if (added_during_load_.contains(item.key.message_id)) continue;
    if (ram_ids_.contains(item.key.message_id)) continue;  // cannot happen: RAM is a prefix
    NoteDiskRemoved();
    if (!item.message) continue;  // dropped by the broker
    ram_bytes_ += WholeBytes(*item.message);
    ram_ids_[item.key.message_id] = item.key.due_ms;
    ram_.emplace(item.key, std::move(*item.message));
  }
  added_during_load_.clear();
  if (reached_end) {
    disk_from_ = kDelayKeyMax;
    count_unknown_ = false;
    recovered_count_ = 0;
    disk_delta_ = 0;
  } else if (!loaded.empty()) {
    disk_from_ = last;
    // One past the last key read.
    if (disk_from_.message_id == UINT64_MAX) {
      disk_from_ = DelayKey{disk_from_.due_ms + 1, 0};
    } else {
      ++disk_from_.message_id;
    }
  }
  // Claims the disk part no longer covers are done with: no later load can return them.
  std::erase_if(claimed_, [&](const auto& claim) { return claim.second < disk_from_; });
  // Messages added during the load at or beyond the new boundary belong to the disk part.
  while (!ram_.empty() && std::prev(ram_.end())->first >= disk_from_) {
    auto it = std::prev(ram_.end());
    ram_bytes_ -= WholeBytes(it->second);
    ram_ids_.erase(it->first.message_id);
    ram_.erase(it);
    NoteDiskAdded();
  }
  EnforceLimits();
}

void DelayTimeline::Evict(std::map<DelayKey, DelayedMessage>::iterator it) {
  disk_from_ = it->first;
  ram_bytes_ -= WholeBytes(it->second);
  ram_ids_.erase(it->first.message_id);
  ram_.erase(it);
  NoteDiskAdded();
}

void DelayTimeline::EnforceLimits() {
  if (!backed_) return;
  // The earliest message always stays, however large: it is the next to be released.
  while (ram_.size() > 1 &&
         (ram_.size() > limits_.max_messages || ram_bytes_ > limits_.max_bytes)) {
    Evict(std::prev(ram_.end()));
  }
}

void DelayTimeline::RestoreFromDisk() {
  disk_from_ = kDelayKeyMin;
  count_unknown_ = true;
  recovered_count_ = 0;
  disk_delta_ = 0;
}

void DelayTimeline::SetRecoveredCount(uint64_t count) {
  if (!count_unknown_) return;
  count_unknown_ = false;
  recovered_count_ = count;
}

uint64_t DelayTimeline::Clear() {
  uint64_t n = size();
  ram_.clear();
  ram_ids_.clear();
  ram_bytes_ = 0;
  disk_from_ = kDelayKeyMax;
  count_unknown_ = false;
  recovered_count_ = 0;
  disk_delta_ = 0;
  loading_ = false;
  claimed_.clear();
  added_during_load_.clear();
  ++generation_;
  return n;
}

std::vector<std::pair<DelayKey, DelayedMessage>> DelayTimeline::ListRam(DelayKey after,
                                                                        size_t limit) const {
  std::vector<std::pair<DelayKey, DelayedMessage>> out;
  for (auto it = ram_.upper_bound(after); it != ram_.end() && out.size() < limit; ++it) {
    out.emplace_back(it->first, it->second);
  }
  return out;
}

}  // namespace wharf::broker
