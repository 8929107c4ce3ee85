#include "broker/message_groups.h"

#include <algorithm>

namespace wharf::broker {

void MessageGroups::Offer(std::string_view key, const Group& group) const {
  if (!group.held && !group.empty()) heads_.emplace(group.seqs[group.head], std::string(key));
}

MessageGroups::Group& MessageGroups::At(std::string_view key) {
  auto it = groups_.find(key);
  if (it == groups_.end()) it = groups_.emplace(std::string(key), Group{}).first;
  return it->second;
}

void MessageGroups::ForgetIfIdle(Groups::iterator it) {
  if (!it->second.held && it->second.empty()) groups_.erase(it);
}

void MessageGroups::Add(std::string_view key, uint64_t seq) {
  ++ready_;
  if (key.empty()) {
    ungrouped_.insert(seq);
    return;
  }
  Group& group = At(key);
  const bool was_empty = group.empty();
  group.seqs.push_back(seq);
  if (was_empty) Offer(key, group);
}

void MessageGroups::AddFront(std::string_view key, uint64_t seq) {
  ++ready_;
  if (key.empty()) {
    ungrouped_.insert(seq);
    return;
  }
  Group& group = At(key);
  if (group.head > 0) {
    group.seqs[--group.head] = seq;
  } else {
    group.seqs.insert(group.seqs.begin(), seq);
  }
  Offer(key, group);
}

void MessageGroups::Remove(std::string_view key, uint64_t seq) {
  if (key.empty()) {
    ready_ -= ungrouped_.erase(seq);
    return;
  }
  auto it = groups_.find(key);
  if (it == groups_.end()) return;
  Group& group = it->second;
  auto begin = group.seqs.begin() + static_cast<ptrdiff_t>(group.head);
  auto found = std::find(begin, group.seqs.end(), seq);
  if (found == group.seqs.end()) return;
  --ready_;
  if (found == begin) {
    ++group.head;
    Offer(key, group);  // the next one heads the group now
  } else {
    group.seqs.erase(found);
  }
  if (group.empty()) {
    group.seqs.clear();
    group.head = 0;
  } else if (group.head >= 32 && group.head * 2 >= group.seqs.size()) {
    group.seqs.erase(group.seqs.begin(), group.seqs.begin() + static_cast<ptrdiff_t>(group.head));
    group.head = 0;
  }
  ForgetIfIdle(it);
}

std::optional<uint64_t> MessageGroups::Next() const {
  while (!heads_.empty()) {
    const auto& [seq, key] = heads_.top();
    auto it = groups_.find(key);
    if (it != groups_.end() && !it->second.held && !it->second.empty() &&
        it->second.seqs[it->second.head] == seq) {
      break;
    }
    heads_.pop();  // stale
  }
  std::optional<uint64_t> next;
  if (!heads_.empty()) next = heads_.top().first;
  if (!ungrouped_.empty() && (!next || *ungrouped_.begin() < *next)) next = *ungrouped_.begin();
  return next;
}

uint64_t MessageGroups::Hold(std::string_view key) {
  if (key.empty()) return 0;
  Group& group = At(key);
  if (!group.held) ++held_;
  group.held = true;
  group.token = next_token_++;
  return group.token;
}

void MessageGroups::Release(std::string_view key, std::optional<uint64_t> token) {
  if (key.empty()) return;
  auto it = groups_.find(key);
  if (it == groups_.end() || !it->second.held) return;
  if (token && it->second.token != *token) return;
  it->second.held = false;
  --held_;
  Offer(key, it->second);
  ForgetIfIdle(it);
}

bool MessageGroups::IsHeld(std::string_view key) const {
  auto it = groups_.find(key);
  return it != groups_.end() && it->second.held;
}

void MessageGroups::ClearReady() {
  ungrouped_.clear();
  for (auto it = groups_.begin(); it != groups_.end();) {
    it->second.seqs.clear();
    it->second.head = 0;
    it = it->second.held ? std::next(it) : groups_.erase(it);
  }
  heads_ = {};
  ready_ = 0;
}

}  // namespace wharf::broker
