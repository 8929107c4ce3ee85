// The reader thread of RocksDbStore (store/rocksdb_store.h): loads of paged messages and of
// timelines, delayed-message lookups, listings, and the background count of recovered queues.
// Split from rocksdb_store.cc (the writer side) by thread.
#include <rocksdb/db.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/log_safe.h"
#include "store/keys.h"
#include "store/records.h"
#include "store/rocksdb_status.h"
#include "store/rocksdb_store.h"

namespace wharf::store {

// --- Reader --------------------------------------------------------------------------------------

namespace {

// Moves an iterator over a queue's entries past any purged range it stands in.
void SkipPurged(rocksdb::Iterator* it, uint64_t queue_id,
                const std::vector<std::pair<uint64_t, uint64_t>>& purged) {
  while (!purged.empty() && it->Valid()) {
    auto parts = ParseEntryKey(std::string_view(it->key().data(), it->key().size()));
    if (!parts || parts->queue_id != queue_id) return;
    auto range = std::find_if(purged.begin(), purged.end(), [&](const auto& r) {
      return parts->seq >= r.first && parts->seq < r.second;
    });
    if (range == purged.end()) return;
    it->Seek(EntryKey(queue_id, range->second));
  }
}

}  // namespace

void RocksDbStore::ReaderLoop() {
  while (true) {
    ReadJob job;
    {
      std::unique_lock lock(read_mu_);
      read_cv_.wait(lock, [this] { return reads_closing_ || !reads_.empty(); });
      if (reads_.empty()) break;
      job = std::move(reads_.front());
      reads_.pop_front();
    }
    std::shared_lock db_lock(db_mu_);
    if (!db_) {
      Status closed(StatusCode::kStoreUnavailable, "the message store is not open");
      if (auto* load = std::get_if<LoadRequest>(&job)) {
        post_([done = std::move(load->done), closed] { done(closed); });
      } else if (auto* find = std::get_if<FindRequest>(&job)) {
        post_([done = std::move(find->done), closed] { done(closed); });
      } else {
        AbandonCount(&std::get<CountJob>(job));
      }
      continue;
    }
    if (auto* load = std::get_if<LoadRequest>(&job)) {
      auto result = DoLoad(*load);
      post_([done = std::move(load->done), result = std::move(result)]() mutable {
        done(std::move(result));
      });
      continue;
    }
    if (auto* find = std::get_if<FindRequest>(&job)) {
      auto result = DoFind(*find);
      post_([done = std::move(find->done), result = std::move(result)]() mutable {
        done(std::move(result));
      });
      continue;
    }
    auto& count = std::get<CountJob>(job);
    if (CountSlice(&count)) {
      std::lock_guard lock(read_mu_);
      // Behind the loads that came meanwhile.
      reads_.emplace_back(std::in_place_type<CountJob>, std::move(count));
    } else if (const rocksdb::Snapshot* snapshot = recovery_snapshot_.exchange(nullptr)) {
      db_->ReleaseSnapshot(snapshot);
    }
  }
  if (const rocksdb::Snapshot* snapshot = recovery_snapshot_.exchange(nullptr)) {
    db_->ReleaseSnapshot(snapshot);
  }
}

void RocksDbStore::AbandonCount(CountJob* job) {
  // The snapshot went with a reopen: the remaining queues keep their estimates.
  for (const auto& range : job->queues) {
    post_([done = job->done, id = range.queue_id, kind = range.kind, lane = range.lane] {
      done(id, kind, kCountUnknown, lane);
    });
  }
  job->queues.clear();
}

bool RocksDbStore::CountSlice(CountJob* job) {
  // About 100 ms of work per slice, then the loads queued behind it get their turn.
  constexpr uint64_t kSlice = 500'000;
  const rocksdb::Snapshot* snapshot = recovery_snapshot_.load();
  if (!snapshot) {
    AbandonCount(job);
    return false;
  }
  uint64_t budget = kSlice;
  while (!job->queues.empty() && budget > 0) {
    auto& range = job->queues.front();
    rocksdb::Slice upper_slice(range.upper);
    rocksdb::ReadOptions read;
    read.snapshot = snapshot;
    read.iterate_upper_bound = &upper_slice;
    rocksdb::ColumnFamilyHandle* family =
        range.kind == CountKind::kEntries
            ? entries_[LaneFamily(range.lane)].load(std::memory_order_acquire)
            : delayed_;
    // A lane family not made yet holds nothing.
    std::unique_ptr<rocksdb::Iterator> it(family ? db_->NewIterator(read, family)
                                                 : rocksdb::NewEmptyIterator());
    bool finished = true;
    for (it->Seek(range.lower); it->Valid(); it->Next()) {
      SkipPurged(it.get(), range.queue_id, range.skip);
      if (!it->Valid()) break;
      if (budget-- == 0) {
        range.lower = it->key().ToString();  // resumes here
        finished = false;
        break;
      }
      ++job->counted;
    }
    if (!finished) return true;
    // A count cut short by a read error (a damaged block) is not the queue's count: the queue
    // keeps its estimate rather than a figure that is silently too low.
    uint64_t counted = job->counted;
    if (!it->status().ok()) {
      spdlog::error(
          "store: counting queue id {} failed (its depth stays an estimate; if the store is "
          "damaged, stop wharfd and run wharfd --repair): {}",
          range.queue_id, LogSafe(it->status().ToString(), kLogSafeStatusBytes));
      counted = kCountUnknown;
    }
    post_([done = job->done, id = range.queue_id, kind = range.kind, n = counted,
           lane = range.lane] { done(id, kind, n, lane); });
    job->counted = 0;
    job->queues.erase(job->queues.begin());
  }
  return !job->queues.empty();
}

Result<std::optional<DelayedRef>> RocksDbStore::DoFind(const FindRequest& request) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), delayed_,
                               DelayedIndexKey(request.queue_id, request.message_id), &value);
  if (s.IsNotFound()) return std::optional<DelayedRef>();
  if (!s.ok()) return FromRocksDb(s, "cannot read a delayed message's index");
  if (value.size() != 9) return Status(StatusCode::kStoreUnavailable, "corrupt delayed index");
  return std::optional<DelayedRef>(
      DelayedRef{static_cast<int64_t>(ReadLittleEndian64(value)), static_cast<uint8_t>(value[8])});
}

Result<std::vector<LoadedMessage>> RocksDbStore::DoLoad(const LoadRequest& request) {
  // A lane family not made yet: none of its lanes' entries was ever written.
  if (!request.delayed && !EntriesFor(request.from_seq)) return std::vector<LoadedMessage>();
  std::string lower = request.delayed
                          ? DelayedKey(request.queue_id, request.from_due, request.from_id)
                          : EntryKey(request.queue_id, request.from_seq);
  // A load reads one lane, in its lane's family, and no further than the lane's end (the
  // family also holds the lanes 16, 32... above it).
  std::string upper =
      request.delayed ? DelayedPrefix(request.queue_id, kDelayedTimeline + 1)
                      : EntryKey(request.queue_id,
                                 std::min(request.to_seq, LaneEndSeq(SeqLane(request.from_seq))));
  rocksdb::Slice lower_slice(lower), upper_slice(upper);
  rocksdb::ReadOptions read;
  read.iterate_lower_bound = &lower_slice;
  read.iterate_upper_bound = &upper_slice;
  std::vector<LoadedMessage> out;
  // Taken before the iterator: a range removed since is removed in what the iterator sees.
  const auto purged = request.delayed ? std::vector<std::pair<uint64_t, uint64_t>>()
                                      : DoomedRanges(request.queue_id);
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(read, request.delayed ? delayed_ : EntriesFor(request.from_seq)));
  it->Seek(lower);
  SkipPurged(it.get(), request.queue_id, purged);
  uint64_t bytes = 0;
  // Takes a parsed record (or a failed parse) into `loaded`.
  auto take = [&](LoadedMessage& loaded, pb::MessageRecord* record) {
    if (!record) {
      // A body lost to a failed write, or corrupt: the broker removes the entry.
      spdlog::error("store: queue id {} seq {}: message {} has no readable body; skipped",
                    request.queue_id, loaded.seq, loaded.message_id);
      return;
    }
    auto envelope = FromRecord(std::move(*record));
    if (!envelope.ok()) {
      spdlog::error("store: message {}: {}; skipped", loaded.message_id,
                    envelope.status().ToString());
      return;
    }
    loaded.envelope = MakeEnvelope(std::move(envelope).value());
    bytes += loaded.envelope->whole_bytes();  // headers weigh on RAM as the body does
  };
  // Entries in chunks; inline messages come with their entry, the bodies of shared ones in
  // one MultiGet per chunk; until the limits are reached.
  constexpr size_t kChunk = 64;
  while (it->Valid() && out.size() < request.limit && bytes < request.max_bytes) {
    std::vector<size_t> shared;  // indexes in `out` whose body is in "messages"
    std::vector<std::string> keys;
    for (size_t n = 0; it->Valid() && out.size() < request.limit && n < kChunk;
         it->Next(), ++n, SkipPurged(it.get(), request.queue_id, purged)) {
      std::string_view value(it->value().data(), it->value().size());
      std::string_view key(it->key().data(), it->key().size());
      auto entry = DecodeEntryValue(value);
      if (!entry) return Status(StatusCode::kStoreUnavailable, "corrupt queue entry");
      LoadedMessage& loaded = out.emplace_back();
      if (request.delayed) {
        auto parts = ParseDelayedKey(key);
        if (!parts) return Status(StatusCode::kStoreUnavailable, "corrupt delayed message key");
        loaded.due_ms = parts->due_ms;
      } else {
        auto parts = ParseEntryKey(key);
        if (!parts) return Status(StatusCode::kStoreUnavailable, "corrupt queue entry key");
        loaded.seq = parts->seq;
      }
      loaded.message_id = entry->message_id;
      loaded.receive_count = entry->receive_count;
      loaded.flags = entry->flags & ~kEntryAttempts;
      if (!ReadAttempts(EntryAttemptsBytes(value), &loaded)) {
        spdlog::warn("store: queue id {} message {}: unreadable delivery history; reset",
                     request.queue_id, loaded.message_id);
      }
      if (entry->flags & kEntryInline) {
        std::string_view bytes_view = EntryRecordBytes(value);
        pb::MessageRecord record;
        bool parsed = record.ParseFromArray(bytes_view.data(), static_cast<int>(bytes_view.size()));
        take(loaded, parsed ? &record : nullptr);
      } else {
        shared.push_back(out.size() - 1);
        keys.push_back(MessageKey(entry->message_id));
      }
    }
    if (keys.empty()) continue;
    std::vector<rocksdb::Slice> key_slices(keys.begin(), keys.end());
    std::vector<rocksdb::PinnableSlice> values(keys.size());
    std::vector<rocksdb::Status> statuses(keys.size());
    db_->MultiGet(rocksdb::ReadOptions(), messages_, keys.size(), key_slices.data(), values.data(),
                  statuses.data());
    for (size_t i = 0; i < keys.size(); ++i) {
      LoadedMessage& loaded = out[shared[i]];
      if (!statuses[i].ok() && !statuses[i].IsNotFound()) {
        return FromRocksDb(statuses[i], "cannot read message " + std::to_string(loaded.message_id) +
                                            " of queue id " + std::to_string(request.queue_id));
      }
      pb::MessageRecord record;
      bool parsed = statuses[i].ok() &&
                    record.ParseFromArray(values[i].data(), static_cast<int>(values[i].size()));
      take(loaded, parsed ? &record : nullptr);
    }
  }
  if (!it->status().ok()) return FromRocksDb(it->status(), "cannot read a queue");
  return out;
}

}  // namespace wharf::store
