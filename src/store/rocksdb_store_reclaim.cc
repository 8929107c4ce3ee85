// The background removal of purged ranges and of deleted queues' entries (docs/storage.md,
// "Purge"): a step at a time on the writer thread of RocksDbStore (store/rocksdb_store.h),
// between write groups. Split from rocksdb_store.cc by concern.
#include <rocksdb/db.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "store/keys.h"
#include "store/rocksdb_status.h"
#include "store/rocksdb_store.h"

namespace wharf::store {

void RocksDbStore::SetReclaimCallback(ReclaimCallback progress) {
  {
    std::lock_guard lock(mu_);
    reclaim_callback_ = std::move(progress);
    pending_reclaims_ = std::move(recovered_reclaims_);
  }
  cv_.notify_one();
}

std::vector<std::pair<uint64_t, uint64_t>> RocksDbStore::DoomedRanges(uint64_t queue_id) {
  std::lock_guard lock(doomed_mu_);
  auto it = doomed_.find(queue_id);
  return it == doomed_.end() ? std::vector<std::pair<uint64_t, uint64_t>>() : it->second;
}

void RocksDbStore::ReclaimStep() {
  // About 4 MiB of entries per step: a few milliseconds of reading and one write.
  constexpr size_t kReclaimEntries = 4096;
  constexpr size_t kReclaimBytes = 4u << 20;
  if (reclaims_.empty() || !error_.ok() || !ReclaimAllowed()) return;
  if (options_.write_faults && options_.write_faults->reclaim_steps > 0) {
    --options_.write_faults->reclaim_steps;
  }
  StoredPurge& purge = reclaims_.front();
  const uint64_t queue_id = purge.queue_id;
  rocksdb::WriteBatch wb;
  group_max_id_ = 0;
  size_t entries = 0;
  size_t bytes = 0;
  uint64_t next_cursor = purge.to_seq;
  Status status;
  // Lane by lane from the cursor (each lane's entries are in its lane's family, store/keys.h),
  // until the range ends or the step is full. A lane without entries in the range costs a seek.
  for (uint64_t cursor = purge.cursor_seq; cursor < purge.to_seq && status.ok();) {
    const uint64_t lane_to = std::min(purge.to_seq, LaneEndSeq(SeqLane(cursor)));
    rocksdb::ColumnFamilyHandle* family = EntriesFor(cursor);
    if (!family) {  // not made yet: none of its lanes has entries
      cursor = lane_to;
      continue;
    }
    const std::string lower = EntryKey(queue_id, cursor);
    const std::string upper = EntryKey(queue_id, lane_to);
    rocksdb::Slice upper_slice(upper);
    rocksdb::ReadOptions read;
    read.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, family));
    bool full = false;
    size_t found = 0;
    for (it->Seek(lower); it->Valid(); it->Next()) {
      if (entries == kReclaimEntries || bytes >= kReclaimBytes) {
        auto parts = ParseEntryKey(std::string_view(it->key().data(), it->key().size()));
        if (parts) {
          next_cursor = parts->seq;
        } else {
          status = Status(StatusCode::kStoreUnavailable, "corrupt queue entry key");
        }
        full = true;
        break;
      }
      auto entry = DecodeEntryValue(std::string_view(it->value().data(), it->value().size()));
      if (entry && !(entry->flags & kEntryInline)) {
        status = Release(entry->message_id, entry->flags & kEntryShared, &wb);
        if (!status.ok()) break;
      }
      ++entries;
      ++found;
      bytes += it->key().size() + it->value().size();
    }
    if (status.ok() && !it->status().ok()) {
      status = FromRocksDb(it->status(), "cannot read a purged range to remove it");
    }
    if (!status.ok()) break;
    const uint64_t end = full ? next_cursor : lane_to;
    if (found > 0) wb.DeleteRange(family, lower, EntryKey(queue_id, end));
    if (full) break;
    cursor = end;
  }
  if (!status.ok()) {
    // A read failed (a corrupt block?): writing is not at fault, so nothing else stops. The
    // range stays hidden and recorded, and its removal is tried again at the next start.
    references_.clear();
    spdlog::error(
        "store: cannot read purged queue id {} to remove it (left until the next "
        "start): {}",
        queue_id, status.ToString());
    reclaims_.pop_front();
    return;
  }
  const bool finished = next_cursor >= purge.to_seq;
  const uint64_t removed = purge.removed + entries;
  // The step's entries (the ranges above), the bodies only they held and the record's new
  // position: one atomic write, so a crash resumes exactly here.
  if (!purge.recorded) {
    // A deleted queue's entries: the missing queue record is their record.
  } else if (finished) {
    wb.Delete(meta_, PurgeKey(queue_id, purge.from_seq));
  } else {
    wb.Put(meta_, PurgeKey(queue_id, purge.from_seq),
           EncodePurgeValue({next_cursor, purge.to_seq, purge.messages, removed}));
  }
  status = Write(&wb, false);
  references_.clear();
  if (!status.ok()) {
    if (error_.ok()) {
      error_ = status;
      spdlog::error(
          "store: removing purged queue id {} failed, writes are refused until it "
          "recovers: {}",
          queue_id, status.ToString());
    }
    return;  // the same step is tried again once writes work again
  }
  purge.cursor_seq = next_cursor;
  purge.removed = removed;
  {
    std::lock_guard lock(doomed_mu_);
    auto& ranges = doomed_[queue_id];
    for (auto range = ranges.begin(); range != ranges.end(); ++range) {
      if (range->second != purge.to_seq) continue;
      if (finished) {
        ranges.erase(range);
      } else {
        range->first = purge.cursor_seq;
      }
      break;
    }
    if (ranges.empty()) doomed_.erase(queue_id);
  }
  if (finished) {
    spdlog::info("store: {} queue id {} removed ({} entries)",
                 purge.recorded ? "purged range of" : "entries of deleted", queue_id,
                 purge.removed);
    // The space comes back once no log file holds the removed entries and compaction has
    // dropped them: after a large removal, flush the memtables (so the logs they pin can go)
    // and ask for the range's compaction now rather than whenever its files would be
    // compacted anyway. Both run on RocksDB's own threads; the writer does not wait. Not for
    // small ones: a client deleting queues by the hundred would pile up tiny files.
    if (purge.removed >= kReclaimEntries) {
      rocksdb::FlushOptions flush;
      flush.wait = false;
      flush.allow_write_stall = true;
      rocksdb::Status s = db_->Flush(flush, AllFamilies());
      std::string begin = EntryKey(queue_id, purge.from_seq);
      std::string end =
          purge.to_seq == UINT64_MAX ? EntryKey(queue_id + 1, 0) : EntryKey(queue_id, purge.to_seq);
      rocksdb::Slice begin_slice(begin), end_slice(end);
      // The families of the range's lanes (every family for a range of many lanes).
      const int first_lane = SeqLane(purge.from_seq);
      const int last_lane = purge.to_seq > purge.from_seq ? SeqLane(purge.to_seq - 1) : first_lane;
      for (int lane = first_lane; s.ok() && lane <= last_lane && lane < first_lane + kLaneFamilies;
           ++lane) {
        auto* family = EntriesFor(LaneBaseSeq(static_cast<uint8_t>(lane)));
        if (family) s = db_->SuggestCompactRange(family, &begin_slice, &end_slice);
      }
      if (!s.ok()) {
        spdlog::warn("store: cannot ask for a removed range's space back: {}", s.ToString());
      }
    }
    reclaims_.pop_front();
  } else if (reclaims_.size() > 1) {
    // Purges of several queues take turns, so each one shows progress.
    reclaims_.push_back(std::move(reclaims_.front()));
    reclaims_.pop_front();
  }
  ReclaimCallback callback;
  {
    std::lock_guard lock(mu_);
    callback = reclaim_callback_;
  }
  if (callback) {
    post_([callback = std::move(callback), queue_id, entries, finished] {
      callback(queue_id, entries, finished);
    });
  }
}

}  // namespace wharf::store
