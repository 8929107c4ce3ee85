// broker/message_groups.h
//
// MessageGroups decides which ready message of a queue with message groups (x-message-groups;
// docs/lifecycle.md, "Message groups") goes next. A group is every message with one x-group-id;
// its messages go in publish order, one at a time: while one is out (delivered and not yet
// settled, or backing off before a retry) the group is held and the rest of it waits. Other
// groups, and messages of no group, go meanwhile.
//
// It knows the ready messages in RAM only, by sequence number: the Queue keeps the messages
// and tells it what comes and goes. Next() is the lowest sequence number among the heads of the
// free groups and the messages of no group: publish order across groups, as far as holds
// allow. Cost: O(log n) per message in n ready groups, whatever the number of groups; a group
// with nothing ready and nothing out is forgotten, so idle groups cost nothing, and the groups
// known are bounded by the messages in RAM plus the deliveries out.
//
// Thread safety: confined to the broker thread (as its Queue).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace wharf::broker {

class MessageGroups {
 public:
  // A ready message joins the back of group `key` ("": no group).
  void Add(std::string_view key, uint64_t seq);
  // A message comes back to the head of its group (a return: nothing of its group was taken
  // after it, since the group was held).
  void AddFront(std::string_view key, uint64_t seq);
  // A ready message leaves (taken to deliver, expired, moved, purged).
  void Remove(std::string_view key, uint64_t seq);
  // The next message to deliver; nullopt when every ready message is in a held group.
  std::optional<uint64_t> Next() const;

  // A delivery of group `key` is out: the group is held until Release. Returns the hold's
  // token (for a release that may come late: a timer's).
  uint64_t Hold(std::string_view key);
  // The group's delivery was settled: the group is free again. With a token, only if the hold
  // is still that one.
  void Release(std::string_view key, std::optional<uint64_t> token = std::nullopt);
  bool IsHeld(std::string_view key) const;

  // Every ready message goes (purge); holds stay until released.
  void ClearReady();

  // Groups known: with a ready message in RAM or a hold; and of them, those held.
  size_t groups() const { return groups_.size(); }
  size_t held() const { return held_; }
  // Ready messages known (grouped and not).
  size_t ready() const { return ready_; }

 private:
  struct Group {
    std::vector<uint64_t> seqs;  // ready, in delivery order, from `head` on
    size_t head = 0;
    bool held = false;
    uint64_t token = 0;
    bool empty() const { return head == seqs.size(); }
  };
  // Looked up by std::string_view without a copy.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
  };
  using Groups = std::unordered_map<std::string, Group, Hash, std::equal_to<>>;
  // The group `key`, made when missing.
  Group& At(std::string_view key);
  // Puts the group's head among the candidates, if it is free and has one.
  void Offer(std::string_view key, const Group& group) const;
  void ForgetIfIdle(Groups::iterator it);

  Groups groups_;
  std::set<uint64_t> ungrouped_;
  // Candidates: (head seq, group). An entry is stale once its group is held, gone, or has
  // another head; stale entries are dropped when they reach the top.
  using Candidate = std::pair<uint64_t, std::string>;
  mutable std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heads_;
  size_t held_ = 0;
  size_t ready_ = 0;
  uint64_t next_token_ = 1;
};

}  // namespace wharf::broker
