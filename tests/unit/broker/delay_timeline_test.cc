#include "broker/delay_timeline.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace wharf::broker {
namespace {

DelayedMessage Make(uint64_t id, size_t bytes = 10) {
  Envelope e;
  e.message.id = id;
  e.message.body.assign(bytes, 'x');
  return DelayedMessage{std::make_shared<const Envelope>(std::move(e)), 0, 0, 0, nullptr};
}

std::vector<uint64_t> Ids(const std::vector<std::pair<DelayKey, DelayedMessage>>& items) {
  std::vector<uint64_t> out;
  for (const auto& [key, m] : items) out.push_back(key.message_id);
  return out;
}

TEST(DelayTimelineTest, ReleasesInDueOrderThenPublishOrder) {
  DelayTimeline t(/*backed=*/false, {});
  t.Add({300, 1}, Make(1));
  t.Add({100, 2}, Make(2));
  t.Add({300, 0}, Make(0));
  t.Add({200, 3}, Make(3));
  EXPECT_EQ(t.head_due(), 100);
  EXPECT_TRUE(t.TakeDue(99, 10).empty());
  EXPECT_EQ(Ids(t.TakeDue(200, 10)), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(Ids(t.TakeDue(1'000, 1)), (std::vector<uint64_t>{0}));  // limit respected
  EXPECT_EQ(Ids(t.TakeDue(1'000, 10)), (std::vector<uint64_t>{1}));
  EXPECT_FALSE(t.head_due().has_value());
  EXPECT_EQ(t.size(), 0u);
}

TEST(DelayTimelineTest, CancelFromRamOnlyOnce) {
  DelayTimeline t(false, {});
  t.Add({100, 1}, Make(1));
  t.Add({50, 2}, Make(2));
  auto removed = t.RemoveFromRam(2);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->first.due_ms, 50);
  EXPECT_FALSE(t.RemoveFromRam(2).has_value());
  EXPECT_EQ(t.head_due(), 100);
  EXPECT_EQ(Ids(t.TakeDue(100, 10)), (std::vector<uint64_t>{1}));
  EXPECT_FALSE(t.RemoveFromRam(1).has_value()) << "released messages are not cancellable";
}

TEST(DelayTimelineTest, ListRamPagesInOrder) {
  DelayTimeline t(false, {});
  for (uint64_t id = 1; id <= 5; ++id) t.Add({static_cast<int64_t>(10 * (6 - id)), id}, Make(id));
  auto first = t.ListRam(kDelayKeyMin, 2);
  EXPECT_EQ(Ids(first), (std::vector<uint64_t>{5, 4}));
  auto second = t.ListRam(first.back().first, 2);
  EXPECT_EQ(Ids(second), (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(t.size(), 5u) << "listing changes nothing";
}

// A backed timeline keeps only the nearest messages in RAM; the rest are counted.
TEST(DelayTimelineTest, BackedKeepsOnlyTheNearestInRam) {
  DelayTimeline t(/*backed=*/true, {.max_messages = 4, .max_bytes = 1 << 20});
  for (uint64_t id = 1; id <= 6; ++id) t.Add({static_cast<int64_t>(id * 10), id}, Make(id));
  EXPECT_EQ(t.ram_size(), 4u);
  EXPECT_EQ(t.disk_count(), 2u);
  EXPECT_EQ(t.size(), 6u);
  EXPECT_EQ(t.disk_from(), (DelayKey{50, 5}));
  // An earlier message goes to RAM and pushes the latest RAM one to disk.
  EXPECT_TRUE(t.Add({5, 7}, Make(7)));
  EXPECT_EQ(t.ram_size(), 4u);
  EXPECT_EQ(t.disk_count(), 3u);
  EXPECT_EQ(t.disk_from(), (DelayKey{40, 4}));
  // A later one goes to disk only.
  EXPECT_FALSE(t.Add({45, 8}, Make(8)));
  EXPECT_EQ(t.disk_count(), 4u);
  EXPECT_EQ(t.head_due(), 5);
  EXPECT_FALSE(t.NeedsLoad());
  EXPECT_EQ(Ids(t.TakeDue(30, 10)), (std::vector<uint64_t>{7, 1, 2, 3}));
  EXPECT_TRUE(t.NeedsLoad());
}

// The load protocol: what the store returns from disk_from() on fills RAM in order, messages
// added or cancelled while the load is in flight are neither lost nor doubled.
TEST(DelayTimelineTest, LoadRacesWithAddCancelAndRelease) {
  DelayTimeline t(true, {.max_messages = 4, .max_bytes = 1 << 20});
  t.RestoreFromDisk();  // start-up: everything on disk, count unknown
  EXPECT_TRUE(t.count_estimated());
  ASSERT_TRUE(t.NeedsLoad());
  EXPECT_EQ(t.disk_from(), kDelayKeyMin);
  t.BeginLoad();
  // Meanwhile: a new message (committed before the load read it, so the load returns it too),
  // another one the load does not see, and a cancel of a disk message the load returns.
  t.Add({15, 20}, Make(20));
  t.Add({16, 21}, Make(21));
  EXPECT_TRUE(t.ClaimOnDisk({30, 3}));
  EXPECT_FALSE(t.ClaimOnDisk({30, 3})) << "a second cancel of the same message finds nothing";
  // The new message is due and released before the load returns.
  EXPECT_EQ(Ids(t.TakeDue(15, 10)), (std::vector<uint64_t>{20}));
  std::vector<DelayTimeline::Loaded> loaded;
  for (uint64_t id : {1, 2}) loaded.push_back({{static_cast<int64_t>(id * 10), id}, Make(id)});
  loaded.push_back({{15, 20}, Make(20)});
  loaded.push_back({{30, 3}, Make(3)});
  loaded.push_back({{40, 4}, std::nullopt});  // dropped by the broker (no body)
  t.AddLoaded(std::move(loaded), /*reached_end=*/false);
  EXPECT_EQ(t.disk_from(), (DelayKey{40, 5}));
  // RAM: 1 (10), 21 (16), 2 (20); not 20 (released), not 3 (cancelled).
  EXPECT_EQ(Ids(t.TakeDue(1'000, 10)), (std::vector<uint64_t>{1, 21, 2}));
  t.SetRecoveredCount(7);  // 1, 2, 3, 4 and three more; 3 and 4 are gone, 1, 2 loaded
  EXPECT_FALSE(t.count_estimated());
  EXPECT_EQ(t.disk_count(), 3u);
  ASSERT_TRUE(t.NeedsLoad());
  t.BeginLoad();
  std::vector<DelayTimeline::Loaded> rest;
  for (uint64_t id : {5, 6, 7}) rest.push_back({{static_cast<int64_t>(id * 10), id}, Make(id)});
  t.AddLoaded(std::move(rest), /*reached_end=*/true);
  EXPECT_EQ(t.disk_count(), 0u);
  EXPECT_EQ(t.disk_from(), kDelayKeyMax);
  EXPECT_FALSE(t.NeedsLoad());
  EXPECT_EQ(Ids(t.TakeDue(1'000, 10)), (std::vector<uint64_t>{5, 6, 7}));
}

// Messages added during a load beyond where it stopped belong to the disk part afterwards.
TEST(DelayTimelineTest, AddsDuringLoadBeyondTheNewBoundaryGoBackToDisk) {
  DelayTimeline t(true, {.max_messages = 2, .max_bytes = 1 << 20});
  for (uint64_t id = 1; id <= 4; ++id) t.Add({static_cast<int64_t>(id * 10), id}, Make(id));
  EXPECT_EQ(Ids(t.TakeDue(20, 10)), (std::vector<uint64_t>{1, 2}));
  ASSERT_TRUE(t.NeedsLoad());
  t.BeginLoad();
  t.Add({100, 9}, Make(9));  // far beyond what the load will return
  std::vector<DelayTimeline::Loaded> loaded;
  loaded.push_back({{30, 3}, Make(3)});
  t.AddLoaded(std::move(loaded), /*reached_end=*/false);
  EXPECT_EQ(t.ram_size(), 1u);
  EXPECT_EQ(t.disk_count(), 2u);  // 4 and 9
  EXPECT_EQ(t.disk_from(), (DelayKey{30, 4}));
}

TEST(DelayTimelineTest, ClearDropsEverythingAndInvalidatesLoads) {
  DelayTimeline t(true, {.max_messages = 2, .max_bytes = 1 << 20});
  for (uint64_t id = 1; id <= 5; ++id) t.Add({static_cast<int64_t>(id), id}, Make(id));
  uint64_t generation = t.generation();
  EXPECT_EQ(t.Clear(), 5u);
  EXPECT_NE(t.generation(), generation);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_FALSE(t.NeedsLoad());
  EXPECT_TRUE(t.Add({1, 6}, Make(6)));
}

// Two cancels of one message on disk (both looked up before either removal was written):
// only the first claims it, with or without a load in flight, and the count drops once.
TEST(DelayTimelineTest, ADiskMessageIsClaimedOnce) {
  DelayTimeline t(true, {.max_messages = 2, .max_bytes = 1 << 20});
  for (uint64_t id = 1; id <= 5; ++id) t.Add({static_cast<int64_t>(id * 10), id}, Make(id));
  EXPECT_EQ(t.disk_count(), 3u);
  EXPECT_TRUE(t.ClaimOnDisk({40, 4}));
  EXPECT_FALSE(t.ClaimOnDisk({40, 4}));
  EXPECT_EQ(t.disk_count(), 2u);
  // A load that returns it (it read before the removal was written) skips it.
  EXPECT_EQ(Ids(t.TakeDue(20, 10)), (std::vector<uint64_t>{1, 2}));
  t.BeginLoad();
  std::vector<DelayTimeline::Loaded> loaded;
  for (uint64_t id : {3, 4, 5}) loaded.push_back({{static_cast<int64_t>(id * 10), id}, Make(id)});
  t.AddLoaded(std::move(loaded), /*reached_end=*/true);
  EXPECT_EQ(Ids(t.TakeDue(1'000, 10)), (std::vector<uint64_t>{3, 5}));
  EXPECT_EQ(t.size(), 0u);
}

// The earliest message is never evicted, however large: else it would be loaded and evicted
// again forever.
TEST(DelayTimelineTest, AMessageLargerThanTheByteLimitStaysInRam) {
  DelayTimeline t(true, {.max_messages = 100, .max_bytes = 100});
  EXPECT_TRUE(t.Add({10, 1}, Make(1, 500)));
  EXPECT_EQ(t.ram_size(), 1u);
  EXPECT_FALSE(t.Add({20, 2}, Make(2, 500)));
  EXPECT_EQ(t.head_due(), 10);
  EXPECT_EQ(Ids(t.TakeDue(10, 10)), (std::vector<uint64_t>{1}));
  ASSERT_TRUE(t.NeedsLoad());
  t.BeginLoad();
  std::vector<DelayTimeline::Loaded> loaded;
  loaded.push_back({{20, 2}, Make(2, 500)});
  t.AddLoaded(std::move(loaded), /*reached_end=*/true);
  EXPECT_EQ(Ids(t.TakeDue(20, 10)), (std::vector<uint64_t>{2}));
}

TEST(DelayTimelineTest, ByteLimitEvictsToo) {
  // Whole messages count (Envelope::whole_bytes): room for two and a half.
  const uint64_t each = Make(1, 100).envelope->whole_bytes();
  DelayTimeline t(true, {.max_messages = 100, .max_bytes = each * 5 / 2});
  for (uint64_t id = 1; id <= 4; ++id) t.Add({static_cast<int64_t>(id), id}, Make(id, 100));
  EXPECT_EQ(t.ram_size(), 2u);
  EXPECT_EQ(t.disk_count(), 2u);
}

// Headers weigh as much as the body: messages heavy in headers are evicted as heavy bodies are.
TEST(DelayTimelineTest, HeadersCountTowardsTheByteLimit) {
  const uint64_t each = Make(1, 16u << 10).envelope->whole_bytes();
  DelayTimeline t(true, {.max_messages = 100, .max_bytes = each * 5 / 2});
  for (uint64_t id = 1; id <= 4; ++id) {
    Envelope e;
    e.message.id = id;
    e.message.headers["h"] = std::string(16u << 10, 'h');
    t.Add({static_cast<int64_t>(id), id},
          DelayedMessage{std::make_shared<const Envelope>(std::move(e)), 0, 0, 0, nullptr});
  }
  EXPECT_EQ(t.ram_size(), 2u);
  EXPECT_EQ(t.disk_count(), 2u);
}

}  // namespace
}  // namespace wharf::broker
