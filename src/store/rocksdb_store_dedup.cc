// store/rocksdb_store_dedup.cc: the writer's side of publish deduplication windows
// (docs/storage.md, "Deduplication is decided by the writer"; docs/lifecycle.md,
// "Deduplication"). Before a write group is applied, its keys are read in one MultiGet (but
// for those above every record of their queue, which are new: DedupHighKey) and every PutDedup
// of the group is decided (PrefetchDedup); applying each then writes its record or notes the
// duplicate, whose entry is not written (RocksDbStore::Apply). Writer thread only.
#include <rocksdb/db.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/keys.h"
#include "store/rocksdb_status.h"
#include "store/rocksdb_store.h"

namespace wharf::store {

void RocksDbStore::PrefetchDedup(const std::deque<Request>& group) {
  dedup_plan_.clear();
  for (const Request& request : group) {
    const auto* commit = std::get_if<CommitRequest>(&request);
    if (!commit || !commit->batch.dedup_outcomes()) continue;
    DedupOutcomes& outcomes = *commit->batch.dedup_outcomes();
    for (const StoreBatch::Op& op : commit->batch.ops()) {
      const auto* put = std::get_if<StoreBatch::PutDedup>(&op);
      if (put && put->outcome < outcomes.size() && !put->key.empty() &&
          put->key.size() <= kMaxDedupKeyBytes) {
        DedupOutcome& outcome = outcomes[put->outcome];
        outcome.decided = false;
        dedup_plan_.push_back({DedupKey(put->queue_id, put->key), put, &outcome});
      }
    }
  }
  if (dedup_plan_.empty()) return;
  // By key; stable, so that the publishes of one key stay in the order Apply meets them.
  std::stable_sort(dedup_plan_.begin(), dedup_plan_.end(),
                   [](const PlannedDedup& a, const PlannedDedup& b) { return a.key < b.key; });
  for (size_t i = 0; i < dedup_plan_.size(); ++i) {
    dedup_plan_[i].outcome->plan = static_cast<uint32_t>(i);
  }
  // Each key once; those of a queue are together, in byte order. Only a key at or below the
  // highest its queue has recorded is read (DedupHighKey): rising keys need no read at all.
  std::vector<size_t> firsts;  // where each key's publishes begin in dedup_plan_
  for (size_t i = 0; i < dedup_plan_.size(); ++i) {
    if (i == 0 || dedup_plan_[i].key != dedup_plan_[i - 1].key) firsts.push_back(i);
  }
  firsts.push_back(dedup_plan_.size());
  const size_t distinct = firsts.size() - 1;
  constexpr size_t kUnread = SIZE_MAX;
  std::vector<size_t> read_as(distinct, kUnread);  // its index in `keys`, or kUnread
  std::vector<rocksdb::Slice> keys;
  for (size_t k = 0; k < distinct; ++k) {
    const PlannedDedup& planned = dedup_plan_[firsts[k]];
    std::string* high = DedupHighKey(planned.op->queue_id);
    if (high && planned.key > *high) {
      // Above every record of its queue: new, and now the queue's highest (the queue's keys
      // come in byte order, so the next is compared with it). Should the write fail, the
      // highest is only higher than needed: a few reads too many.
      *high = planned.key;
      continue;
    }
    read_as[k] = keys.size();
    keys.emplace_back(planned.key);
  }
  std::vector<rocksdb::PinnableSlice> values(keys.size());
  std::vector<rocksdb::Status> statuses(keys.size());
  if (!keys.empty()) {
    db_->MultiGet(rocksdb::ReadOptions(), dedup_, keys.size(), keys.data(), values.data(),
                  statuses.data(), /*sorted_input=*/true);
    std::lock_guard lock(mu_);
    counters_.dedup_reads += keys.size();
  }
  for (size_t k = 0; k < distinct; ++k) {
    std::optional<DedupValue> record;
    if (const size_t r = read_as[k]; r != kUnread) {
      if (!statuses[r].ok() && !statuses[r].IsNotFound()) continue;  // ApplyDedup reads it again
      if (statuses[r].ok()) record = DecodeDedupValue(values[r].ToStringView());
    }
    uint64_t recorded = 0;  // the message of this group that recorded the key
    for (size_t i = firsts[k]; i < firsts[k + 1]; ++i) {
      const StoreBatch::PutDedup& op = *dedup_plan_[i].op;
      DedupOutcome& outcome = *dedup_plan_[i].outcome;
      uint64_t holder = recorded;
      if (holder == 0 && record && record->expires_at_ms > op.now_ms) holder = record->message_id;
      // Held by this very message: not a duplicate of itself.
      outcome.duplicate_of = holder != op.message_id ? holder : 0;
      outcome.decided = true;
      if (outcome.duplicate_of == 0) recorded = op.message_id;
    }
  }
}

std::string* RocksDbStore::DedupHighKey(uint64_t queue_id) {
  if (auto it = dedup_high_.find(queue_id); it != dedup_high_.end()) return &it->second;
  // First seen since the store opened: its last record, if any (every record was written
  // before this read or by this writer since, which keeps the highest up to date).
  const std::string from = DedupKey(queue_id, "");
  const std::string to = DedupKey(queue_id + 1, "");
  rocksdb::Slice lower(from);
  rocksdb::ReadOptions read;
  read.iterate_lower_bound = &lower;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, dedup_));
  it->SeekForPrev(to);
  if (!it->status().ok()) return nullptr;  // every key of it is read until this works
  std::string high = it->Valid() ? it->key().ToString() : std::string();
  return &dedup_high_.emplace(queue_id, std::move(high)).first->second;
}

Status RocksDbStore::ApplyDedup(const StoreBatch& batch, const StoreBatch::PutDedup& op,
                                rocksdb::WriteBatch* wb) {
  if (!batch.dedup_outcomes() || op.outcome >= batch.dedup_outcomes()->size() || op.key.empty() ||
      op.key.size() > kMaxDedupKeyBytes) {
    return Status(StatusCode::kInternal, "malformed deduplication record");
  }
  DedupOutcome& outcome = (*batch.dedup_outcomes())[op.outcome];
  std::string unplanned;  // the key of one PrefetchDedup could not read
  if (!outcome.decided) {
    // Its read failed in PrefetchDedup: read it alone, and mind what this group recorded.
    unplanned = DedupKey(op.queue_id, op.key);
    uint64_t holder = 0;
    if (auto it = group_dedup_.find(unplanned); it != group_dedup_.end()) {
      holder = it->second;
    } else {
      std::string value;
      rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), dedup_, unplanned, &value);
      if (s.ok()) {
        auto record = DecodeDedupValue(value);
        if (record && record->expires_at_ms > op.now_ms) holder = record->message_id;
      } else if (!s.IsNotFound()) {
        return FromRocksDb(s, "cannot read a deduplication record");
      }
    }
    outcome.duplicate_of = holder != op.message_id ? holder : 0;
    outcome.decided = true;
    if (outcome.duplicate_of == 0) group_dedup_[unplanned] = op.message_id;
  }
  if (outcome.duplicate_of != 0) {
    duplicates_.insert({op.queue_id, op.message_id});
    return Status::Ok();
  }
  EncodeDedupValue({op.message_id, op.expires_at_ms}, &dedup_value_);
  const std::string& key = unplanned.empty() ? dedup_plan_[outcome.plan].key : unplanned;
  wb->Put(dedup_, key, dedup_value_);
  return Status::Ok();
}

}  // namespace wharf::store
