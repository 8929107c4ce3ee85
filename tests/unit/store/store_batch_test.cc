// StoreBatch (store/message_store.h): the ops a commit carries, how much room a batch takes
// ahead, and how the large rare kinds are kept.
#include <gtest/gtest.h>

#include <string>
#include <type_traits>

#include "store/message_store.h"

namespace wharf::store {
namespace {

// Reserve makes room for the next batch's ops and outcomes, and a batch without a PutDedup
// still has no outcomes (the writer skips such a batch's deduplication).
TEST(StoreBatchTest, ReserveMakesRoomAndOutcomesWaitForAPutDedup) {
  StoreBatch batch;
  batch.Reserve(16, 4);
  EXPECT_GE(batch.ops().capacity(), 16u);
  batch.Add(StoreBatch::MarkDelivered{1, 2});
  EXPECT_EQ(batch.dedup_outcomes(), nullptr);
  EXPECT_EQ(batch.AddDedup(StoreBatch::PutDedup{1, "k", 7, 1'000, 0}), 0u);
  ASSERT_NE(batch.dedup_outcomes(), nullptr);
  EXPECT_GE(batch.dedup_outcomes()->capacity(), 4u);
  EXPECT_EQ(batch.dedup_outcomes()->size(), 1u);
  EXPECT_EQ(batch.size(), 2u);
}

// The large kinds are kept behind a pointer, so an op is no larger than a publish's ops need;
// Visit hands every op back as it was added, in order.
TEST(StoreBatchTest, LargeKindsAreBoxedAndVisitedAsAdded) {
  static_assert(sizeof(StoreBatch::Op) < sizeof(StoreBatch::PutQueue));
  static_assert(sizeof(StoreBatch::Op) < sizeof(StoreBatch::PutRedrive));
  static_assert(std::is_same_v<StoreBatch::Stored<StoreBatch::PutEntry>, StoreBatch::PutEntry>);
  static_assert(std::is_same_v<StoreBatch::Stored<StoreBatch::PutDedup>, StoreBatch::PutDedup>);

  StoreBatch batch;
  QueueSpec spec;
  spec.name = "orders";
  batch.Add(StoreBatch::PutQueue{spec, 7});
  batch.Add(StoreBatch::MarkDelivered{7, 3});
  StoredRedrive redrive;
  redrive.queue_id = 9;
  batch.Add(StoreBatch::PutRedrive{redrive});
  std::string seen;
  for (const StoreBatch::Op& op : batch.ops()) {
    StoreBatch::Visit(op, [&seen](const auto& o) {
      using T = std::decay_t<decltype(o)>;
      if constexpr (std::is_same_v<T, StoreBatch::PutQueue>) {
        seen += "queue " + o.spec.name + " " + std::to_string(o.queue_id) + ";";
      } else if constexpr (std::is_same_v<T, StoreBatch::MarkDelivered>) {
        seen += "delivered " + std::to_string(o.seq) + ";";
      } else if constexpr (std::is_same_v<T, StoreBatch::PutRedrive>) {
        seen += "redrive " + std::to_string(o.redrive.queue_id) + ";";
      } else {
        seen += "other;";
      }
    });
  }
  EXPECT_EQ(seen, "queue orders 7;delivered 3;redrive 9;");
}

}  // namespace
}  // namespace wharf::store
