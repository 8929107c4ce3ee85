#include "broker/queue.h"

#include <algorithm>

#include "broker/message_keys.h"
#include "broker/vhost.h"

namespace wharf::broker {

// One lane's messages (see the header): what a queue without priorities holds, all of it.
struct Queue::Lane {
  explicit Lane(uint8_t tag)
      : tag(tag), next_seq(store::LaneBaseSeq(tag) + 1), load_from_seq(store::LaneBaseSeq(tag)) {}

  uint64_t live_in_ram() const { return ready.size() - tombstones; }
  uint64_t ready_count() const { return live_in_ram() + returned.size() + paged; }
  bool has_in_ram() const { return live_in_ram() > 0 || !returned.empty(); }
  uint64_t load_end_seq() const { return held.empty() ? next_seq : held.front().message.seq; }
  const QueuedMessage* FindBySeq(uint64_t seq) const {
    // ready is in sequence order (enqueued, then loaded, in rising seq).
    auto it = std::lower_bound(ready.begin(), ready.end(), seq,
                               [](const QueuedMessage& m, uint64_t s) { return m.seq < s; });
    return it != ready.end() && it->seq == seq ? &*it : nullptr;
  }
  // Drops tombstones at the front of ready, so that they never pile up there.
  void TrimFront() {
    while (!ready.empty() && !ready.front().envelope) {
      ready.pop_front();
      --tombstones;
    }
  }

  const uint8_t tag;
  uint64_t next_seq;
  uint64_t paged = 0;      // messages in the store only, from load_from_seq on
  uint64_t load_from_seq;  // the first paged message's sequence number, or higher
  // The end of the load in flight (UINT64_MAX: none), and what was paged at or past it.
  uint64_t load_to_seq = UINT64_MAX;
  uint64_t paged_beyond_load = 0;
  uint64_t paged_beyond_load_bytes = 0;
  uint64_t ram_bytes = 0;       // body bytes in ready
  uint64_t ram_memory = 0;      // whole bytes (Envelope::whole_bytes) in ready
  uint64_t returned_bytes = 0;  // body bytes in returned
  uint64_t paged_bytes = 0;     // body bytes paged since start (recovered ones are unknown)
  uint64_t tombstones = 0;      // entries of ready taken out by expiry (no envelope)
  uint64_t estimate = 0;        // > 0: paged counts a recovery estimate this large
  uint64_t delivered_through = 0;
  bool mark_changed = false;  // delivered_through moved since TakeDeliveredMarks
  std::deque<QueuedMessage> ready;
  struct Held {
    QueuedMessage message;
    bool page = false;
    bool resolved = false;  // the store answered (or it never needed an answer)
    bool keep = true;
  };
  std::deque<Held> held;
  uint64_t held_paged = 0;  // of held, those to be paged
  std::map<uint64_t, QueuedMessage> returned;
};

Queue::Queue(QueueSpec spec, uint64_t owner_id, uint64_t store_id,
             DelayTimeline::Limits delay_limits, QueuePolicy policy)
    : spec_(std::move(spec)),
      owner_id_(owner_id),
      store_id_(store_id),
      policy_(std::move(policy)),
      consumers_(policy_.single_active_consumer),
      delayed_(store_id != 0, delay_limits) {
  if (spec_.vhost.empty()) spec_.vhost = kDefaultVhost;
  key_ = ResourceKey(spec_.vhost, spec_.name);
  LaneAt(policy_.max_priority);  // the lane of priority 0 (of every message without one)
  if (policy_.message_groups) groups_ = std::make_unique<MessageGroups>();
}

std::string_view Queue::GroupView(const Envelope& envelope, std::string& scratch) const {
  // Checked at publish (Broker::Publish): a message with a bad one never gets here.
  return groups_ ? GroupKeyView(envelope.message, scratch) : std::string_view();
}

std::string Queue::GroupOf(const Envelope& envelope) const {
  std::string scratch;
  return std::string(GroupView(envelope, scratch));
}

uint64_t Queue::HoldGroup(const Envelope& envelope) {
  std::string scratch;
  return groups_ ? groups_->Hold(GroupView(envelope, scratch)) : 0;
}

void Queue::ReleaseGroup(const Envelope& envelope, std::optional<uint64_t> token) {
  std::string scratch;
  if (groups_) groups_->Release(GroupView(envelope, scratch), token);
}

void Queue::ReleaseGroup(const std::string& group, std::optional<uint64_t> token) {
  if (groups_) groups_->Release(group, token);
}

Queue::~Queue() = default;

uint8_t Queue::LaneOf(const Message& message) const {
  if (policy_.max_priority == 0) return 0;
  const uint32_t priority = std::min<uint32_t>(message.properties.priority, policy_.max_priority);
  return static_cast<uint8_t>(policy_.max_priority - priority);
}

Queue::Lane& Queue::LaneAt(uint8_t tag) {
  if (tag >= lanes_.size()) lanes_.resize(size_t{tag} + 1);
  if (!lanes_[tag]) {
    lanes_[tag] = std::make_unique<Lane>(tag);
    used_.insert(std::upper_bound(used_.begin(), used_.end(), tag), tag);
  }
  return *lanes_[tag];
}

const Queue::Lane* Queue::HeadLane() const {
  for (uint8_t tag : used_) {
    const Lane& lane = *lanes_[tag];
    if (lane.ready_count() > 0) return &lane;
  }
  return nullptr;
}

bool Queue::ShouldPage(const PageLimits& limits, std::optional<uint8_t> lane) const {
  if (store_id_ == 0) return false;
  if (live_in_ram() >= limits.max_messages || ram_memory_bytes() >= limits.max_bytes) return true;
  auto behind_disk = [](const Lane& l) { return l.paged > 0 || l.held_paged > 0; };
  if (lane) {
    const Lane* l = FindLane(*lane);
    return l != nullptr && behind_disk(*l);
  }
  return std::any_of(used_.begin(), used_.end(),
                     [&](uint8_t tag) { return behind_disk(*lanes_[tag]); });
}

int64_t Queue::ExpiresAt(const Envelope& envelope) const {
  const Message& m = envelope.message;
  int64_t at = 0;
  if (m.properties.expiration_ms != 0) {
    at = m.published_at_ms + static_cast<int64_t>(m.properties.expiration_ms);
  }
  if (policy_.message_ttl_ms != 0) {
    int64_t by_queue = m.published_at_ms + static_cast<int64_t>(policy_.message_ttl_ms);
    at = at == 0 ? by_queue : std::min(at, by_queue);
  }
  return at;
}

bool Queue::Expired(const QueuedMessage& m, int64_t now_wall_ms) const {
  int64_t at = ExpiresAt(*m.envelope);
  return at != 0 && now_wall_ms >= at;
}

std::optional<QueuedMessage> Queue::TakeExpired(uint64_t seq, int64_t now_wall_ms) {
  const Lane* lane = FindLane(store::SeqLane(seq));
  if (!lane) return std::nullopt;
  const QueuedMessage* found = nullptr;
  if (auto it = lane->returned.find(seq); it != lane->returned.end()) {
    found = &it->second;
  } else {
    found = lane->FindBySeq(seq);
  }
  if (!found || !found->envelope || !Expired(*found, now_wall_ms)) return std::nullopt;
  ++expired_total;
  return Take(seq);
}

const QueuedMessage* Queue::NextReadyInLane(uint64_t seq) const {
  const Lane* lane = FindLane(store::SeqLane(seq));
  if (!lane) return nullptr;
  // Every returned message came from the head, so returned sorts before ready.
  if (auto it = lane->returned.lower_bound(seq); it != lane->returned.end()) return &it->second;
  auto it = std::lower_bound(lane->ready.begin(), lane->ready.end(), seq,
                             [](const QueuedMessage& m, uint64_t s) { return m.seq < s; });
  while (it != lane->ready.end() && !it->envelope) ++it;  // tombstones
  return it == lane->ready.end() ? nullptr : &*it;
}

std::optional<uint64_t> Queue::NextLaneStart(uint64_t seq) const {
  const uint8_t tag = store::SeqLane(seq);
  for (auto it = std::upper_bound(used_.begin(), used_.end(), tag); it != used_.end(); ++it) {
    const Lane& lane = *lanes_[*it];
    if (lane.ready_count() > 0) return store::LaneBaseSeq(lane.tag);
  }
  return std::nullopt;
}

const QueuedMessage* Queue::NextReadyInRam(uint64_t seq) const {
  for (std::optional<uint64_t> at = seq; at; at = NextLaneStart(*at)) {
    if (const QueuedMessage* m = NextReadyInLane(*at)) return m;
  }
  return nullptr;
}

std::optional<QueuedMessage> Queue::Take(uint64_t seq) {
  Lane* lane = FindLane(store::SeqLane(seq));
  if (!lane) return std::nullopt;
  if (auto it = lane->returned.find(seq); it != lane->returned.end()) {
    QueuedMessage m = std::move(it->second);
    lane->returned.erase(it);
    lane->returned_bytes -= m.envelope->message.body.size();
    std::string scratch;
    if (groups_) groups_->Remove(GroupView(*m.envelope, scratch), seq);
    return m;
  }
  auto* found = const_cast<QueuedMessage*>(lane->FindBySeq(seq));
  if (!found || !found->envelope) return std::nullopt;
  QueuedMessage m = std::move(*found);
  std::string scratch;
  if (groups_) groups_->Remove(GroupView(*m.envelope, scratch), seq);
  found->envelope = nullptr;
  lane->ram_bytes -= m.envelope->message.body.size();
  lane->ram_memory -= m.envelope->whole_bytes();
  if (found == &lane->ready.front()) {
    lane->ready.pop_front();
    lane->TrimFront();
  } else {
    // Out of the middle of the deque: left as a tombstone (no envelope) that Pop skips.
    ++lane->tombstones;
  }
  return m;
}

bool Queue::IsPaged(uint64_t seq) const {
  const Lane* lane = FindLane(store::SeqLane(seq));
  return lane != nullptr && lane->paged > 0 && seq >= lane->load_from_seq &&
         loading_lane_ != lane->tag;
}

void Queue::TakePaged(uint64_t seq, uint64_t bytes) {
  Lane* lane = FindLane(store::SeqLane(seq));
  if (!lane) return;
  if (lane->paged > 0) --lane->paged;
  lane->paged_bytes = lane->paged == 0 ? 0 : lane->paged_bytes - std::min(lane->paged_bytes, bytes);
}

void Queue::SetPolicy(QueuePolicy policy, std::string name, Headers definition, Headers effective) {
  policy.max_priority = policy_.max_priority;
  policy.message_groups = policy_.message_groups;
  policy.single_active_consumer = policy_.single_active_consumer;
  policy.dedup_window_ms = policy_.dedup_window_ms;
  policy.dedup_by_body = policy_.dedup_by_body;
  policy.delivery_count_header = policy_.delivery_count_header;
  policy_ = std::move(policy);
  applied_policy_ = std::move(name);
  policy_definition_ = std::move(definition);
  effective_arguments_ = applied_policy_.empty() ? Headers{} : std::move(effective);
}

void Queue::NoteExpiries() {
  for (uint8_t tag : used_) {
    const Lane& lane = *lanes_[tag];
    for (const auto& [seq, m] : lane.returned) NoteExpiry(m);
    for (const QueuedMessage& m : lane.ready) {
      if (m.envelope) NoteExpiry(m);
    }
  }
}

void Queue::NoteExpiry(const QueuedMessage& m) {
  if (int64_t at = ExpiresAt(*m.envelope); at != 0) new_expiries_.emplace_back(m.seq, at);
}

uint64_t Queue::Enqueue(EnvelopePtr envelope, bool stored, uint8_t store_flags, bool page,
                        uint32_t receive_count, int64_t first_received_at_ms,
                        FailuresPtr failures) {
  Lane& lane = LaneAt(LaneOf(*envelope));
  uint64_t seq = lane.next_seq++;
  QueuedMessage message{
      std::move(envelope), seq, receive_count, stored, store_flags, first_received_at_ms,
      std::move(failures)};
  if (!lane.held.empty()) {
    // Behind a held message: ready in its turn.
    lane.held_paged += page ? 1 : 0;
    lane.held.push_back(Lane::Held{std::move(message), page, /*resolved=*/true, /*keep=*/true});
    return seq;
  }
  Place(lane, std::move(message), page);
  return seq;
}

uint64_t Queue::EnqueueHeld(EnvelopePtr envelope, bool stored, uint8_t store_flags, bool page) {
  Lane& lane = LaneAt(LaneOf(*envelope));
  uint64_t seq = lane.next_seq++;
  lane.held_paged += page ? 1 : 0;
  lane.held.push_back(
      Lane::Held{QueuedMessage{std::move(envelope), seq, 0, stored, store_flags, 0, nullptr}, page,
                 /*resolved=*/false, /*keep=*/false});
  return seq;
}

bool Queue::Resolve(uint64_t seq, bool keep) {
  Lane* lane = FindLane(store::SeqLane(seq));
  if (!lane) return false;
  // Held messages are few (those of the commits in flight): a walk is enough.
  auto it = std::find_if(lane->held.begin(), lane->held.end(),
                         [&](const Lane::Held& h) { return h.message.seq == seq && !h.resolved; });
  if (it == lane->held.end()) return false;
  it->resolved = true;
  it->keep = keep;
  bool released = false;
  while (!lane->held.empty() && lane->held.front().resolved) {
    Lane::Held front = std::move(lane->held.front());
    lane->held.pop_front();
    lane->held_paged -= front.page ? 1 : 0;
    if (!front.keep) continue;
    Place(*lane, std::move(front.message), front.page);
    released = true;
  }
  return released;
}

std::optional<uint64_t> Queue::PageUndecided(const Envelope& envelope) {
  if (policy_.has_length_limit()) return std::nullopt;
  Lane& lane = LaneAt(LaneOf(envelope));
  if (!lane.held.empty()) return std::nullopt;
  const uint64_t seq = lane.next_seq++;
  CountPaged(lane, seq, envelope.message.body.size());
  return seq;
}

bool Queue::SettleUndecided(uint64_t seq, uint64_t bytes, bool keep) {
  if (keep) {
    ++published_total;
    return false;
  }
  Lane* lane = FindLane(store::SeqLane(seq));
  // Not counted any more: a purge took it (what is paged since starts past it). A load that
  // reached past it was sent after its commit, and is answered after this.
  if (!lane || lane->paged == 0 || seq < lane->load_from_seq) return false;
  --lane->paged;
  lane->paged_bytes -= std::min(lane->paged_bytes, bytes);
  if (seq >= lane->load_to_seq && lane->paged_beyond_load > 0) {
    // Paged while a load is in flight: past its end, so the load's answer keeps it counted.
    --lane->paged_beyond_load;
    lane->paged_beyond_load_bytes -= std::min(lane->paged_beyond_load_bytes, bytes);
  }
  return true;
}

void Queue::CountPaged(Lane& lane, uint64_t seq, uint64_t body) {
  if (lane.paged == 0) lane.load_from_seq = seq;
  ++lane.paged;
  lane.paged_bytes += body;
  if (seq >= lane.load_to_seq) {
    ++lane.paged_beyond_load;
    lane.paged_beyond_load_bytes += body;
  }
}

void Queue::Place(Lane& lane, QueuedMessage message, bool page) {
  const uint64_t seq = message.seq;
  ++published_total;
  const uint64_t body = message.envelope->message.body.size();
  if (page) {
    CountPaged(lane, seq, body);
    return;
  }
  lane.ram_bytes += body;
  lane.ram_memory += message.envelope->whole_bytes();
  std::string scratch;
  if (groups_) groups_->Add(GroupView(*message.envelope, scratch), seq);
  lane.ready.push_back(std::move(message));
  NoteExpiry(lane.ready.back());
}

void Queue::Requeue(QueuedMessage message) {
  Lane& lane = LaneAt(store::SeqLane(message.seq));
  uint64_t seq = message.seq;
  if (groups_) {
    // Back at the head of its group, which goes on (a requeued delivery is settled).
    std::string scratch;
    const std::string_view group = GroupView(*message.envelope, scratch);
    groups_->AddFront(group, seq);
    groups_->Release(group);
  }
  lane.returned_bytes += message.envelope->message.body.size();
  NoteExpiry(message);
  lane.returned.emplace(seq, std::move(message));
}

std::optional<QueuedMessage> Queue::PopFrom(Lane& lane, int64_t now_wall_ms,
                                            std::vector<QueuedMessage>* expired) {
  while (true) {
    QueuedMessage next;
    if (!lane.returned.empty()) {
      auto it = lane.returned.begin();
      next = std::move(it->second);
      lane.returned.erase(it);
      lane.returned_bytes -= next.envelope->message.body.size();
    } else if (!lane.ready.empty()) {
      next = std::move(lane.ready.front());
      lane.ready.pop_front();
      if (!next.envelope) {  // expired earlier (TakeExpired)
        --lane.tombstones;
        continue;
      }
      lane.ram_bytes -= next.envelope->message.body.size();
      lane.ram_memory -= next.envelope->whole_bytes();
      lane.TrimFront();
    } else {
      return std::nullopt;
    }
    if (!Expired(next, now_wall_ms)) return next;
    ++expired_total;
    if (expired) expired->push_back(std::move(next));
  }
}

std::optional<QueuedMessage> Queue::PopGrouped(int64_t now_wall_ms,
                                               std::vector<QueuedMessage>* expired) {
  while (std::optional<uint64_t> seq = groups_->Next()) {
    std::optional<QueuedMessage> next = Take(*seq);
    if (!next) return std::nullopt;  // not expected: the groups know only what is in RAM
    if (!Expired(*next, now_wall_ms)) return next;
    ++expired_total;
    if (expired) expired->push_back(std::move(*next));
  }
  return std::nullopt;
}

std::optional<QueuedMessage> Queue::Pop(int64_t now_wall_ms, std::vector<QueuedMessage>* expired) {
  // Paged messages all follow those in RAM: what the groups offer from RAM goes first.
  if (groups_) return PopGrouped(now_wall_ms, expired);
  for (uint8_t tag : used_) {
    Lane& lane = *lanes_[tag];
    if (lane.has_in_ram()) {
      if (auto m = PopFrom(lane, now_wall_ms, expired)) return m;
    }
    // Its next messages are on disk: lower lanes wait for them.
    if (lane.paged > 0) return std::nullopt;
  }
  return std::nullopt;
}

bool Queue::HasReady() const {
  if (groups_) return groups_->Next().has_value();
  for (uint8_t tag : used_) {
    const Lane& lane = *lanes_[tag];
    if (lane.has_in_ram()) return true;
    if (lane.paged > 0) return false;
  }
  return false;
}

template <typename F>
uint64_t Queue::SumLanes(F of) const {
  uint64_t n = 0;
  for (uint8_t tag : used_) n += of(*lanes_[tag]);
  return n;
}

uint64_t Queue::ready() const {
  return SumLanes([](const Lane& l) { return l.ready_count(); });
}

uint64_t Queue::ready_bytes() const {
  return SumLanes([](const Lane& l) { return l.ram_bytes + l.returned_bytes + l.paged_bytes; });
}

uint64_t Queue::ram_memory_bytes() const {
  return SumLanes([](const Lane& l) { return l.ram_memory; });
}

uint64_t Queue::live_in_ram() const {
  return SumLanes([](const Lane& l) { return l.live_in_ram(); });
}

uint64_t Queue::paged() const {
  return SumLanes([](const Lane& l) { return l.paged; });
}

size_t Queue::held() const {
  return SumLanes([](const Lane& l) { return l.held.size(); });
}

uint64_t Queue::PagedInLane(uint64_t seq) const {
  const Lane* lane = FindLane(store::SeqLane(seq));
  return lane ? lane->paged : 0;
}

uint64_t Queue::LoadFromSeq(uint64_t seq) const {
  const Lane* lane = FindLane(store::SeqLane(seq));
  return lane ? lane->load_from_seq : store::LaneEndSeq(store::SeqLane(seq));
}

uint64_t Queue::LoadEndSeq(uint64_t seq) const {
  const Lane* lane = FindLane(store::SeqLane(seq));
  return lane ? lane->load_end_seq() : store::LaneEndSeq(store::SeqLane(seq));
}

uint64_t Queue::next_seq() const { return lanes_[used_.back()]->next_seq; }

bool Queue::NeedsLoad(uint32_t batch, uint64_t max_bytes) const {
  if (loading()) return false;
  const Lane* lane = HeadLane();
  // Live messages only: tombstones must not hold a load back (a lane whose RAM is all
  // tombstones would never pop them, nor load).
  if (lane == nullptr || lane->paged == 0 || lane->ram_memory >= max_bytes) return false;
  // With groups, RAM may hold only messages of held groups: then the next free ones are on
  // disk (up to the byte limit).
  return lane->live_in_ram() < batch || (groups_ && !groups_->Next());
}

void Queue::MarkLoading() {
  const Lane* lane = HeadLane();
  loading_lane_ = lane ? lane->tag : -1;
}

std::pair<uint64_t, uint64_t> Queue::BeginLoad() {
  Lane& lane = *lanes_[static_cast<uint8_t>(loading_lane_)];
  lane.load_to_seq = lane.load_end_seq();
  lane.paged_beyond_load = 0;
  lane.paged_beyond_load_bytes = 0;
  return {lane.load_from_seq, lane.load_to_seq};
}

PurgeResult Queue::Purge(const PurgeFloors& floors) {
  PurgeResult result;
  for (uint8_t tag : used_) {
    auto floor = floors.find(tag);
    PurgeLane(*lanes_[tag], floor == floors.end() ? 0 : floor->second, &result);
  }
  new_expiries_.clear();
  if (groups_) groups_->ClearReady();
  loading_lane_ = -1;
  ++load_generation;
  return result;
}

void Queue::PurgeLane(Lane& lane, uint64_t floor, PurgeResult* result) {
  // Held messages go too: the store may yet accept them, and the range hides their entries.
  result->count += lane.ready_count() + lane.held.size();
  // Ready messages come after every delivered one (deliveries take the head), returned ones
  // interleave with those still in flight: the range starts at the first ready message at or
  // above `floor`, and whatever is stored below it is removed entry by entry.
  uint64_t from = lane.paged > 0 ? lane.load_from_seq : lane.next_seq;
  PurgedRange range;
  auto consider = [&](QueuedMessage& m) {
    if (!m.envelope || !m.stored) return;
    if (m.seq < floor) {
      result->stored.push_back(std::move(m));
    } else {
      from = std::min(from, m.seq);
      ++range.messages;
    }
  };
  for (auto& [seq, m] : lane.returned) consider(m);
  for (auto& m : lane.ready) consider(m);
  for (auto& h : lane.held) consider(h.message);
  range.paged = lane.paged;
  range.messages += lane.paged;
  if (range.messages > 0) {
    range.from = std::max(from, floor);
    // One past the last sequence number, which stays unused: a later purge's range never
    // ends where this one does (the store tells ranges apart by their end).
    range.to = lane.next_seq + 1;
    lane.next_seq = range.to;
    result->ranges.push_back(range);
  }
  lane.ready.clear();
  lane.returned.clear();
  lane.held.clear();
  lane.held_paged = 0;
  lane.ram_bytes = 0;
  lane.ram_memory = 0;
  lane.returned_bytes = 0;
  lane.paged_bytes = 0;
  lane.tombstones = 0;
  lane.paged = 0;
  lane.estimate = 0;
  lane.load_to_seq = UINT64_MAX;
  lane.paged_beyond_load = 0;
  lane.paged_beyond_load_bytes = 0;
}

bool Queue::AddLoaded(std::vector<QueuedMessage> kept, uint64_t consumed, uint64_t last_seq,
                      bool reached_end) {
  if (loading_lane_ < 0) return true;  // not expected: a purge drops a load's result
  Lane& lane = *lanes_[static_cast<uint8_t>(loading_lane_)];
  loading_lane_ = -1;
  bool consistent = consumed <= lane.paged && (consumed > 0 || reached_end);
  uint64_t loaded_bytes = 0;
  for (auto& m : kept) {
    loaded_bytes += m.envelope->message.body.size();
    lane.ram_memory += m.envelope->whole_bytes();
    std::string scratch;
    if (groups_) groups_->Add(GroupView(*m.envelope, scratch), m.seq);
    lane.ready.push_back(std::move(m));
    NoteExpiry(lane.ready.back());
  }
  lane.ram_bytes += loaded_bytes;
  // Messages recovered at start-up were never counted in paged_bytes: never below zero.
  lane.paged_bytes -= std::min(lane.paged_bytes, loaded_bytes);
  if (consumed > 0) lane.load_from_seq = last_seq + 1;
  // Messages paged while the load was in flight lie past its end: the store did not look
  // for them, so they are still on disk whatever it found.
  const bool bounded = lane.load_to_seq != UINT64_MAX;
  const uint64_t beyond = bounded ? lane.paged_beyond_load : 0;
  if (reached_end || !consistent) {
    // Nothing is left on disk before the load's end: an estimated count becomes exact here.
    consistent = consistent && (lane.estimate > 0 || consumed + beyond == lane.paged);
    lane.paged = beyond;
    lane.paged_bytes = bounded ? lane.paged_beyond_load_bytes : 0;
    lane.estimate = 0;
    if (lane.paged > 0) lane.load_from_seq = std::max(lane.load_from_seq, lane.load_to_seq);
  } else {
    lane.paged -= consumed;
  }
  lane.load_to_seq = UINT64_MAX;
  lane.paged_beyond_load = 0;
  lane.paged_beyond_load_bytes = 0;
  return consistent;
}

void Queue::Restore(uint8_t tag, uint64_t first_seq, uint64_t next_seq, uint64_t estimate) {
  Lane& lane = LaneAt(tag);
  lane.next_seq = std::max(lane.next_seq, next_seq);
  if (first_seq == 0 || next_seq <= first_seq) return;
  lane.paged = std::max<uint64_t>(estimate, 1);
  lane.estimate = lane.paged;
  lane.load_from_seq = first_seq;
}

void Queue::SetRecoveredCount(uint8_t tag, uint64_t count) {
  Lane* lane = FindLane(tag);
  if (!lane || lane->estimate == 0) return;
  // paged = estimate - (recovered entries loaded since) + (messages paged since): replacing
  // the estimate by the count keeps the rest.
  lane->paged = lane->paged + count >= lane->estimate ? lane->paged + count - lane->estimate : 0;
  lane->estimate = 0;
}

bool Queue::count_estimated() const {
  return std::any_of(used_.begin(), used_.end(),
                     [&](uint8_t tag) { return lanes_[tag]->estimate > 0; });
}

bool Queue::DeliveredBefore(uint64_t seq) const {
  const Lane* lane = FindLane(store::SeqLane(seq));
  return lane != nullptr && seq <= lane->delivered_through;
}

void Queue::NoteDelivered(uint64_t seq) {
  Lane& lane = LaneAt(store::SeqLane(seq));
  if (seq <= lane.delivered_through) return;
  lane.delivered_through = seq;
  lane.mark_changed = true;
}

std::vector<uint64_t> Queue::TakeDeliveredMarks() {
  std::vector<uint64_t> marks;
  for (uint8_t tag : used_) {
    Lane& lane = *lanes_[tag];
    if (!lane.mark_changed) continue;
    lane.mark_changed = false;
    marks.push_back(lane.delivered_through);
  }
  return marks;
}

void Queue::EnsureNextSeqAbove(uint64_t seq) {
  Lane& lane = LaneAt(store::SeqLane(seq));
  lane.next_seq = std::max(lane.next_seq, seq + 1);
}

int64_t Queue::HeadPublishedAt() const {
  const QueuedMessage* head = NextReadyInRam(0);
  return head ? head->envelope->message.published_at_ms : 0;
}

QueueInfo Queue::Info() const {
  QueueInfo info;
  info.name = spec_.name;
  info.vhost = spec_.vhost;
  info.durable = spec_.durable;
  info.exclusive = spec_.exclusive;
  info.auto_delete = spec_.auto_delete;
  info.ready = ready();
  info.in_flight = in_flight;
  uint32_t active = 0;
  for (const auto& c : consumers_) active += c->active ? 1 : 0;
  info.consumers = active;
  info.published_total = published_total;
  info.delivered_total = delivered_total;
  info.acked_total = acked_total;
  info.delayed = delayed_.size();
  if (auto head = delayed_.head_due()) info.next_delayed_at_ms = *head;
  info.arguments = spec_.arguments;
  info.policy = applied_policy_;
  info.policy_definition = policy_definition_;
  info.effective_arguments = applied_policy_.empty() ? spec_.arguments : effective_arguments_;
  if (!policy_.dead_letter_queue.empty()) {
    info.dead_letter_target = policy_.dead_letter_queue;
  } else if (policy_.dead_letter_exchange) {
    info.dead_letter_target = "exchange '" + *policy_.dead_letter_exchange + "'";
  }
  info.head_published_at_ms = HeadPublishedAt();
  info.publish_rate = rates_.publish;
  info.deliver_rate = rates_.deliver;
  info.ack_rate = rates_.ack;
  info.purge_reclaiming = purge_ranges > 0 ? std::max<uint64_t>(purge_reclaiming, 1) : 0;
  if (groups_) {
    info.groups = groups_->groups();
    info.groups_held = groups_->held();
  }
  return info;
}

void Queue::UpdateRates(double seconds) {
  if (seconds > 0) {
    rates_.publish = static_cast<double>(published_total - rates_.published) / seconds;
    rates_.deliver = static_cast<double>(delivered_total - rates_.delivered) / seconds;
    rates_.ack = static_cast<double>(acked_total - rates_.acked) / seconds;
  }
  rates_.published = published_total;
  rates_.delivered = delivered_total;
  rates_.acked = acked_total;
}

}  // namespace wharf::broker
