// Recovery of RocksDbStore (store/rocksdb_store.h; docs/storage.md, "Recovery"): what the
// last run left, read before the first commit on the caller's thread. Split from
// rocksdb_store.cc by concern.
#include <rocksdb/db.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/keys.h"
#include "store/records.h"
#include "store/rocksdb_status.h"
#include "store/rocksdb_store.h"

namespace wharf::store {

Result<RecoveredState> RocksDbStore::Recover() {
  RecoveredState state;
  rocksdb::ReadOptions read;
  std::string value;
  rocksdb::Status s =
      db_->Get(read, meta_, rocksdb::Slice(kFormatKey.data(), kFormatKey.size()), &value);
  if (s.IsNotFound()) {
    std::unique_ptr<rocksdb::Iterator> any_meta(db_->NewIterator(read, meta_));
    any_meta->SeekToFirst();
    bool any_entry = false;
    for (const auto& lane_family : entries_) {
      auto* family = lane_family.load(std::memory_order_acquire);
      if (!family) continue;
      std::unique_ptr<rocksdb::Iterator> entry(db_->NewIterator(read, family));
      entry->SeekToFirst();
      any_entry = any_entry || entry->Valid();
    }
    if (any_meta->Valid() || any_entry) {
      return Status(StatusCode::kStoreUnavailable,
                    "the message store at " + options_.path +
                        " has data but no format version: not a wharfd data directory?");
    }
    rocksdb::WriteOptions sync;
    sync.sync = true;
    s = db_->Put(sync, meta_, rocksdb::Slice(kFormatKey.data(), kFormatKey.size()),
                 std::to_string(kFormatVersion));
    if (!s.ok()) return FromRocksDb(s, "cannot initialise the message store");
    spdlog::info("store: created a new message store at {} (format {})", options_.path,
                 kFormatVersion);
  } else if (!s.ok()) {
    return FromRocksDb(s, "cannot read the message store's format version");
  } else if (value == "1" || value == "2" || value == "3" || value == "4" || value == "5" ||
             value == "6" || value == "7" || value == "8" || value == "9" || value == "10" ||
             value == "11" || value == "12" || value == "13") {
    // Formats 2 to 10 only add to format 1 (inline entries, delivery marks; the "delayed"
    // family; redrive records; purge records; the AMQP fields of message and exchange
    // records; the "dedup" family; lanes; vhosts, everything older being in "/"; policies):
    // everything older reads as it is, once the lanes' entries are in their families (11;
    // formats 8 to 10 can have them, the rest has none and costs one seek) and the dedup
    // records are under their format-12 keys (formats 7 to 11 have some); format 13's runs
    // are only added to (no older store has one), and format 14 reads format 13's runs as
    // they are and writes its own compactly. Mark the directory
    // as the current format in the write that ends the upgrade, before anything of the new
    // format is written, so that an older build refuses it instead of misreading it, and
    // finds it as it was when the upgrade did not finish.
    if (value != "11" && value != "12" && value != "13") {
      if (Status moved = MoveLaneEntries(); !moved.ok()) return moved;
    }
    rocksdb::WriteBatch last;
    if (Status copied = CopyLegacyDedupRecords(&last); !copied.ok()) return copied;
    last.Put(meta_, rocksdb::Slice(kFormatKey.data(), kFormatKey.size()),
             std::to_string(kFormatVersion));
    rocksdb::WriteOptions sync;
    sync.sync = true;
    s = db_->Write(sync, &last);
    if (!s.ok()) return FromRocksDb(s, "cannot upgrade the message store's format");
    spdlog::warn("store: upgraded {} from storage format {} to {}", options_.path, value,
                 kFormatVersion);
  } else if (value != std::to_string(kFormatVersion)) {
    return Status(StatusCode::kStoreUnavailable,
                  "the message store at " + options_.path + " has storage format " + value +
                      "; this wharfd reads format " + std::to_string(kFormatVersion) +
                      (std::atoi(value.c_str()) > kFormatVersion
                           ? ": it was written by a newer wharfd. Run that version, or restore "
                             "a backup taken before the upgrade (docs/storage.md)"
                           : ""));
  }

  s = db_->Get(read, meta_, rocksdb::Slice(kNextQueueIdKey.data(), kNextQueueIdKey.size()), &value);
  if (s.ok() && value.size() == 8) state.next_queue_id = ReadLittleEndian64(value);

  // Topology.
  std::unordered_map<uint64_t, size_t> queue_index;            // queue id -> state.queues index
  std::map<std::pair<uint64_t, uint8_t>, uint64_t> delivered;  // (queue id, lane) -> mark
  std::vector<StoredRedrive> redrives;
  std::vector<StoredPurge> purges;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, meta_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    rocksdb::Slice key = it->key();
    if (key.empty()) continue;
    rocksdb::Slice payload = it->value();
    switch (key[0]) {
      case kPolicyPrefix: {
        pb::PolicyRecord record;
        if (!record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt policy record");
        }
        WHARF_ASSIGN_OR_RETURN(auto policy, FromRecord(record));
        state.policies.push_back(std::move(policy));
        break;
      }
      case kVhostPrefix: {
        pb::VhostRecord record;
        if (!record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt vhost record");
        }
        state.vhosts.push_back(FromRecord(record));
        break;
      }
      case kExchangePrefix:
      case kVhostExchangePrefix: {
        pb::ExchangeRecord record;
        if (!record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt exchange record");
        }
        WHARF_ASSIGN_OR_RETURN(auto spec, FromRecord(record));
        state.exchanges.push_back(std::move(spec));
        break;
      }
      case kQueuePrefix:
      case kVhostQueuePrefix: {
        pb::QueueRecord record;
        if (!record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt queue record");
        }
        WHARF_ASSIGN_OR_RETURN(auto spec, FromRecord(record));
        StoredQueue queue;
        queue.spec = std::move(spec);
        queue.queue_id = record.queue_id();
        queue_index[queue.queue_id] = state.queues.size();
        state.next_queue_id = std::max(state.next_queue_id, queue.queue_id + 1);
        state.queues.push_back(std::move(queue));
        break;
      }
      case kBindingPrefix: {
        pb::BindingRecord record;
        if (!record.ParseFromArray(key.data() + 1, static_cast<int>(key.size() - 1))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt binding record");
        }
        WHARF_ASSIGN_OR_RETURN(auto binding, FromRecord(record));
        state.bindings.push_back(std::move(binding));
        break;
      }
      case kDeliveredPrefix: {
        // Lane 0's key has no lane byte (as before lanes existed); another lane's ends in it.
        if ((key.size() == 9 || key.size() == 10) && payload.size() == 8) {
          const uint8_t lane = key.size() == 10 ? static_cast<uint8_t>(key[9]) : 0;
          delivered[{ReadBigEndian64(std::string_view(key.data() + 1, 8)), lane}] =
              ReadLittleEndian64(std::string_view(payload.data(), 8));
        }
        break;
      }
      case kUserPrefix: {
        pb::UserRecord record;
        if (!record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt user record");
        }
        UserLimits limits;
        if (record.has_max_connections()) limits.max_connections = record.max_connections();
        if (record.has_max_channels()) limits.max_channels = record.max_channels();
        StoredUser user{record.name(), record.password_hash(), record.admin(), limits, {}, {}};
        if (record.access_model() == 0) {
          // Written before tags and permissions: the rights the user had then.
          if (record.admin()) user.tags.push_back("administrator");
          user.permissions.push_back(UserPermission{"/", ".*", ".*", ".*"});
        } else {
          user.tags.assign(record.tags().begin(), record.tags().end());
          for (const auto& p : record.permissions()) {
            user.permissions.push_back(
                UserPermission{p.vhost(), p.configure(), p.write(), p.read()});
          }
        }
        state.users.push_back(std::move(user));
        break;
      }
      case kRedrivePrefix: {
        pb::RedriveRecord record;
        if (key.size() != 9 ||
            !record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return Status(StatusCode::kStoreUnavailable, "corrupt redrive record");
        }
        WHARF_ASSIGN_OR_RETURN(auto redrive, FromRecord(record));
        redrive.queue_id = ReadBigEndian64(std::string_view(key.data() + 1, 8));
        redrives.push_back(std::move(redrive));
        break;
      }
      case kPurgePrefix: {
        auto purge = DecodePurgeValue(std::string_view(payload.data(), payload.size()));
        if (key.size() != 17 || !purge) {
          return Status(StatusCode::kStoreUnavailable, "corrupt purge record");
        }
        StoredPurge stored;
        stored.queue_id = ReadBigEndian64(std::string_view(key.data() + 1, 8));
        stored.from_seq = ReadBigEndian64(std::string_view(key.data() + 9, 8));
        stored.cursor_seq = purge->cursor_seq;
        stored.to_seq = purge->to_seq;
        stored.messages = purge->messages;
        stored.removed = purge->removed;
        purges.push_back(stored);
        break;
      }
      default:
        break;
    }
  }
  if (!it->status().ok()) return FromRocksDb(it->status(), "cannot read the topology");
  for (auto& redrive : redrives) {
    // A queue's removal removes its redrive in the same batch: one without its queue is
    // not expected, and not worth failing the start for.
    if (queue_index.contains(redrive.queue_id)) state.redrives.push_back(std::move(redrive));
  }
  {
    // Purged ranges still on disk: hidden from loads and counts from here on, and removed
    // once the broker listens (SetReclaimCallback). RemoveQueue removes a queue's records.
    rocksdb::WriteBatch stale;
    std::lock_guard lock(doomed_mu_);
    for (const StoredPurge& purge : purges) {
      if (!queue_index.contains(purge.queue_id) || purge.cursor_seq >= purge.to_seq) {
        // Its queue was removed (RemoveQueue deletes its records in the same write; this is
        // only a leftover): nothing to hide or remove.
        stale.Delete(meta_, PurgeKey(purge.queue_id, purge.from_seq));
        continue;
      }
      doomed_[purge.queue_id].emplace_back(purge.cursor_seq, purge.to_seq);
      state.purges.push_back(purge);
    }
    if (stale.Count() > 0) {
      s = db_->Write(rocksdb::WriteOptions(), &stale);
      if (!s.ok()) return FromRocksDb(s, "cannot remove a stale purge record");
    }
  }
  recovered_reclaims_ = state.purges;

  // Queues: the first and last entry of each; no walk over the entries, so start-up takes
  // the same time for ten messages or ten million. Counting happens later, in the background,
  // against this snapshot (CountRecoveredQueues).
  const rocksdb::Snapshot* snapshot = db_->GetSnapshot();
  rocksdb::ReadOptions at_snapshot;
  at_snapshot.snapshot = snapshot;
  // Only the families with entries are searched, queue by queue.
  std::vector<std::unique_ptr<rocksdb::Iterator>> families;
  for (const auto& lane_family : entries_) {
    auto* family = lane_family.load(std::memory_order_acquire);
    if (!family) continue;
    std::unique_ptr<rocksdb::Iterator> family_it(db_->NewIterator(at_snapshot, family));
    family_it->SeekToFirst();
    if (!family_it->status().ok()) {
      return FromRocksDb(family_it->status(), "cannot read the queues");
    }
    if (family_it->Valid()) families.push_back(std::move(family_it));
  }
  for (StoredQueue& queue : state.queues) {
    auto doomed = DoomedRanges(queue.queue_id);
    std::map<uint8_t, StoredLane> lanes;
    lanes[0] = StoredLane{};
    auto lane_of = [&](uint8_t tag) -> StoredLane& {
      auto [at, made] = lanes.try_emplace(tag);
      if (made) {
        at->second.lane = tag;
        at->second.next_seq = LaneBaseSeq(tag) + 1;
      }
      return at->second;
    };
    for (auto d = delivered.lower_bound({queue.queue_id, 0});
         d != delivered.end() && d->first.first == queue.queue_id; ++d) {
      lane_of(d->first.second).delivered_through = d->second;
    }
    // New sequence numbers start past every purged range, so no new entry lands in one.
    for (const auto& [from, to] : doomed) {
      StoredLane& lane = lane_of(SeqLane(from));
      lane.next_seq = std::max(lane.next_seq, to);
    }
    rocksdb::Iterator* eit = nullptr;  // the family being searched (below)
    auto key_seq = [&]() -> std::optional<uint64_t> {
      if (!eit->Valid()) return std::nullopt;
      auto parts = ParseEntryKey(std::string_view(eit->key().data(), eit->key().size()));
      if (!parts || parts->queue_id != queue.queue_id) return std::nullopt;
      return parts->seq;
    };
    auto purged = [&](uint64_t seq) -> const std::pair<uint64_t, uint64_t>* {
      for (const auto& range : doomed) {
        if (seq >= range.first && seq < range.second) return &range;
      }
      return nullptr;
    };
    // Family by family, lane by lane: the first and last entries outside the purged ranges.
    for (const auto& family : families) {
      eit = family.get();
      for (uint64_t lane_from = 0;;) {
        eit->Seek(EntryKey(queue.queue_id, lane_from));
        auto first = key_seq();
        while (first && purged(*first)) {
          eit->Seek(EntryKey(queue.queue_id, purged(*first)->second));
          first = key_seq();
        }
        if (!first) break;
        const uint8_t tag = SeqLane(*first);
        const uint64_t lane_end = LaneEndSeq(tag);
        eit->SeekForPrev(EntryKey(queue.queue_id, lane_end - 1));
        auto last = key_seq();
        // Never below `first`, which is not purged.
        while (last && purged(*last)) {
          eit->SeekForPrev(EntryKey(queue.queue_id, purged(*last)->first - 1));
          last = key_seq();
        }
        if (!last || *last < *first) break;  // not expected: `first` is there
        StoredLane& lane = lane_of(tag);
        lane.first_seq = *first;
        // Sequence numbers hidden by purges between the first and the last: not in the
        // estimate; those past the last are counted off the estimate too, as next_seq covers
        // them. Ranges may overlap (a purge's range can hold a recovered one still being
        // removed): each hidden number counts once, or the estimate would wrap below zero.
        uint64_t end = std::max(lane.next_seq, *last + 1);
        auto spans = doomed;
        std::sort(spans.begin(), spans.end());
        uint64_t covered = *first;
        for (const auto& [from, to] : spans) {
          uint64_t lo = std::max(from, covered), hi = std::min(to, end);
          if (hi <= lo) continue;
          lane.purged_span += hi - lo;
          covered = hi;
        }
        lane.next_seq = end;
        recovered_ranges_.push_back({queue.queue_id, CountKind::kEntries,
                                     EntryKey(queue.queue_id, lane.first_seq),
                                     EntryKey(queue.queue_id, *last + 1), doomed, tag});
        if (tag == 255) break;
        lane_from = lane_end;
      }
      if (!eit->status().ok()) return FromRocksDb(eit->status(), "cannot read the queues");
    }
    queue.lanes.clear();
    for (auto& [tag, lane] : lanes) queue.lanes.push_back(lane);
  }
  // Timelines: whether each has anything; counted later too (the index keys, one per message).
  std::unique_ptr<rocksdb::Iterator> delayed_it(db_->NewIterator(at_snapshot, delayed_));
  for (StoredQueue& queue : state.queues) {
    std::string start = DelayedPrefix(queue.queue_id, kDelayedIndex);
    delayed_it->Seek(start);
    if (!delayed_it->Valid() || !delayed_it->key().starts_with(start)) continue;
    queue.has_delayed = true;
    recovered_ranges_.push_back({queue.queue_id,
                                 CountKind::kDelayed,
                                 start,
                                 DelayedPrefix(queue.queue_id, kDelayedIndex + 1),
                                 {},
                                 0});
  }
  for (delayed_it->SeekToFirst(); delayed_it->Valid();) {
    if (delayed_it->key().size() < 9) {
      return Status(StatusCode::kStoreUnavailable, "corrupt delayed message key");
    }
    uint64_t queue_id = ReadBigEndian64(std::string_view(delayed_it->key().data(), 8));
    if (!queue_index.contains(queue_id) &&
        std::find(state.orphaned_queue_ids.begin(), state.orphaned_queue_ids.end(), queue_id) ==
            state.orphaned_queue_ids.end()) {
      state.orphaned_queue_ids.push_back(queue_id);
    }
    if (queue_id == UINT64_MAX) break;
    delayed_it->Seek(DelayedPrefix(queue_id + 1, 0));
  }
  if (!delayed_it->status().ok()) {
    return FromRocksDb(delayed_it->status(), "cannot read the delayed messages");
  }
  // Entries of queue ids without a queue record: one seek per distinct id and family.
  for (const auto& family : families) {
    rocksdb::Iterator* fit = family.get();
    for (fit->SeekToFirst(); fit->Valid();) {
      auto parts = ParseEntryKey(std::string_view(fit->key().data(), fit->key().size()));
      if (!parts) return Status(StatusCode::kStoreUnavailable, "corrupt queue entry key");
      if (!queue_index.contains(parts->queue_id) &&
          std::find(state.orphaned_queue_ids.begin(), state.orphaned_queue_ids.end(),
                    parts->queue_id) == state.orphaned_queue_ids.end()) {
        state.orphaned_queue_ids.push_back(parts->queue_id);
      }
      if (parts->queue_id == UINT64_MAX) break;
      fit->Seek(EntryKey(parts->queue_id + 1, 0));
    }
    if (!fit->status().ok()) return FromRocksDb(fit->status(), "cannot read the queues");
  }
  recovery_snapshot_ = snapshot;
  // Entries of deleted queues are removed in the background, as RemoveQueue would have.
  for (uint64_t orphan : state.orphaned_queue_ids) {
    recovered_reclaims_.push_back(StoredPurge{orphan, 0, 0, UINT64_MAX, 0, 0, /*recorded=*/false});
  }

  s = db_->Get(read, meta_, rocksdb::Slice(kMaxMessageIdKey.data(), kMaxMessageIdKey.size()),
               &value);
  if (s.ok() && value.size() == 8) state.max_message_id = ReadLittleEndian64(value);
  max_message_id_ = state.max_message_id;
  return state;
}

Status RocksDbStore::MoveLaneEntries() {
  // A lane's entries are contiguous, so the lanes that stay ("entries" holds lanes 0, 16,
  // 32...) are skipped with a seek each; a store without priority queues costs one seek per
  // queue. The iterator reads what was there when it was made, so the moves do not disturb it;
  // each batch moves its entries atomically, so an interrupted upgrade (the format is marked
  // only after this) resumes with what is left.
  constexpr uint32_t kBatchWrites = 20'000;
  rocksdb::ColumnFamilyHandle* stays = entries_[0].load(std::memory_order_acquire);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), stays));
  rocksdb::WriteBatch wb;
  uint64_t moved = 0;
  auto write = [&]() -> Status {
    if (wb.Count() == 0) return Status::Ok();
    rocksdb::WriteOptions sync;
    sync.sync = true;
    rocksdb::Status s = db_->Write(sync, &wb);
    wb.Clear();
    return s.ok() ? Status::Ok()
                  : FromRocksDb(s, "cannot move the priority lanes' entries (format 11)");
  };
  for (it->Seek(EntryKey(0, LaneBaseSeq(1))); it->Valid();) {
    auto parts = ParseEntryKey(std::string_view(it->key().data(), it->key().size()));
    if (!parts) return Status(StatusCode::kStoreUnavailable, "corrupt queue entry key");
    const uint8_t lane = SeqLane(parts->seq);
    if (LaneFamily(lane) == 0) {
      // Past this lane: to the queue's next lane, or to the next queue's lane 1.
      if (lane != 0 && lane != 255) {
        it->Seek(EntryKey(parts->queue_id, LaneEndSeq(lane)));
      } else if (lane == 0) {
        it->Seek(EntryKey(parts->queue_id, LaneBaseSeq(1)));
      } else if (parts->queue_id != UINT64_MAX) {
        it->Seek(EntryKey(parts->queue_id + 1, LaneBaseSeq(1)));
      } else {
        break;
      }
      continue;
    }
    rocksdb::ColumnFamilyHandle* family = nullptr;
    if (Status s = EntriesForWrite(parts->seq, &family); !s.ok()) return s;
    wb.Put(family, it->key(), it->value());
    wb.Delete(stays, it->key());
    ++moved;
    if (wb.Count() >= kBatchWrites) {
      if (Status s = write(); !s.ok()) return s;
    }
    it->Next();
  }
  if (!it->status().ok()) {
    return FromRocksDb(it->status(), "cannot read the entries to upgrade them (format 11)");
  }
  if (Status s = write(); !s.ok()) return s;
  if (moved > 0) {
    spdlog::warn("store: moved {} entries of priority lanes into their lanes' families", moved);
  }
  return Status::Ok();
}

Status RocksDbStore::CopyLegacyDedupRecords(rocksdb::WriteBatch* last) {
  // Formats 7 to 11 keyed a record fixed64be(queue-id) key: every such key starts with a 0
  // byte, before kDedupKeyTag, so they are the family's first keys and a store without them
  // costs one seek. Each is copied to its new key through `last`, written (unsynced) each time
  // it holds kBatchWrites copies; it ends with the range deletion of the old keys, and Recover
  // adds "F" and syncs it. A copy is the same each time it is made and nothing else writes
  // before Recover returns, so an interrupted upgrade simply starts again. A record whose
  // window has passed, or whose key is malformed, is not copied. (Copying and deleting each
  // record in one batch took twice the writes: 6 s a million records.)
  constexpr uint32_t kBatchWrites = 20'000;
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), dedup_));
  uint64_t copied = 0;
  uint64_t dropped = 0;
  uint64_t malformed = 0;
  auto legacy = [](const rocksdb::Slice& key) {
    return key.empty() || static_cast<uint8_t>(key[0]) < static_cast<uint8_t>(kDedupKeyTag);
  };
  for (it->SeekToFirst(); it->Valid() && legacy(it->key()); it->Next()) {
    if (copied + dropped + malformed == 0) {
      spdlog::warn("store: copying the deduplication records of {} to their format-12 keys",
                   options_.path);
    } else if ((copied + dropped + malformed) % 1'000'000 == 0) {
      spdlog::info("store: {} deduplication records copied so far, {} dropped", copied,
                   dropped + malformed);
    }
    const std::string_view key(it->key().data(), it->key().size());
    if (key.size() <= 8 || key.size() > 8 + kMaxDedupKeyBytes) {
      // No key a window could hold: damage. Losing it costs at most one duplicate admitted.
      ++malformed;
      continue;
    }
    auto record = DecodeDedupValue(std::string_view(it->value().data(), it->value().size()));
    if (record && record->expires_at_ms <= now_ms) {
      ++dropped;
      continue;
    }
    // An undecodable value moves as it is: the store's checks report it, lookups skip it.
    last->Put(dedup_, DedupKey(ReadBigEndian64(key), key.substr(8)), it->value());
    ++copied;
    if (last->Count() >= kBatchWrites) {
      rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), last);
      last->Clear();
      if (!s.ok()) return FromRocksDb(s, "cannot copy the deduplication records (format 12)");
    }
  }
  if (!it->status().ok()) {
    return FromRocksDb(it->status(), "cannot read the deduplication records (format 12)");
  }
  if (copied + dropped + malformed == 0) return Status::Ok();
  // Synced by Recover: the log then holds every copy written before it (one log, in order).
  last->DeleteRange(dedup_, rocksdb::Slice(), rocksdb::Slice(&kDedupKeyTag, 1));
  spdlog::warn(
      "store: copied {} deduplication records to their format-12 keys, dropped {} expired; the "
      "old keys go with the upgrade's last write",
      copied, dropped);
  if (malformed > 0) {
    spdlog::error(
        "store: dropped {} deduplication records of an older format whose key was not 9 to {} "
        "bytes long (damage)",
        malformed, 8 + kMaxDedupKeyBytes);
  }
  return Status::Ok();
}

}  // namespace wharf::store
