// store/rocksdb_store_dedup.cc: the writer's side of publish deduplication windows
// (docs/storage.md, "Deduplication is decided by the writer"; docs/lifecycle.md,
// "Deduplication"). Before a write group is applied, its keys are read in one MultiGet; each
// PutDedup then records its key or reports the message holding it, and a duplicate's entry is
// not written (RocksDbStore::Apply). Writer thread only.
#include <rocksdb/db.h>

#include <algorithm>
#include <string>
#include <vector>

#include "store/keys.h"
#include "store/rocksdb_status.h"
#include "store/rocksdb_store.h"

namespace wharf::store {

void RocksDbStore::PrefetchDedup(const std::deque<Request>& group) {
  std::vector<std::string> keys;
  for (const Request& request : group) {
    const auto* commit = std::get_if<CommitRequest>(&request);
    if (!commit) continue;
    for (const StoreBatch::Op& op : commit->batch.ops()) {
      const auto* put = std::get_if<StoreBatch::PutDedup>(&op);
      if (put && !put->key.empty() && put->key.size() <= kMaxDedupKeyBytes) {
        keys.push_back(DedupKey(put->queue_id, put->key));
      }
    }
  }
  if (keys.empty()) return;
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
  std::vector<rocksdb::PinnableSlice> values(keys.size());
  std::vector<rocksdb::Status> statuses(keys.size());
  db_->MultiGet(rocksdb::ReadOptions(), dedup_, keys.size(), slices.data(), values.data(),
                statuses.data(), /*sorted_input=*/true);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (statuses[i].ok()) {
      dedup_before_.emplace(std::move(keys[i]), DecodeDedupValue(values[i].ToStringView()));
    } else if (statuses[i].IsNotFound()) {
      dedup_before_.emplace(std::move(keys[i]), std::nullopt);
    }
  }
}

Status RocksDbStore::ApplyDedup(const StoreBatch::PutDedup& op, rocksdb::WriteBatch* wb) {
  if (!op.outcome || op.key.empty() || op.key.size() > kMaxDedupKeyBytes) {
    return Status(StatusCode::kInternal, "malformed deduplication record");
  }
  std::string key = DedupKey(op.queue_id, op.key);
  uint64_t holder = 0;
  if (auto it = group_dedup_.find(key); it != group_dedup_.end()) {
    holder = it->second;  // recorded earlier in this group, not yet readable
  } else if (auto before = dedup_before_.find(key); before != dedup_before_.end()) {
    const std::optional<DedupValue>& record = before->second;
    if (record && record->expires_at_ms > op.now_ms) holder = record->message_id;
  } else {
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), dedup_, key, &value);
    if (s.ok()) {
      auto record = DecodeDedupValue(value);
      if (record && record->expires_at_ms > op.now_ms) holder = record->message_id;
    } else if (!s.IsNotFound()) {
      return FromRocksDb(s, "cannot read a deduplication record");
    }
  }
  // Held by this very message: not a duplicate of itself.
  if (holder != 0 && holder != op.message_id) {
    op.outcome->duplicate_of = holder;
    duplicates_.insert({op.queue_id, op.message_id});
    return Status::Ok();
  }
  op.outcome->duplicate_of = 0;
  wb->Put(dedup_, key, EncodeDedupValue({op.message_id, op.expires_at_ms}));
  group_dedup_[std::move(key)] = op.message_id;
  return Status::Ok();
}

}  // namespace wharf::store
