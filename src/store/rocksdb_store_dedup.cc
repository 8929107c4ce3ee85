// store/rocksdb_store_dedup.cc: the writer's side of publish deduplication windows
// (docs/storage.md, "Deduplication is decided by the writer"; docs/lifecycle.md,
// "Deduplication"). Before a write group is applied, its keys are read in one MultiGet (but
// for those above every record of their queue, which are new: DedupBoundsOf) and every
// PutDedup of the group is decided (PrefetchDedup); applying each then writes its record (or
// its run's: keys.h) or notes the duplicate, whose entry is not written (RocksDbStore::Apply).
// Writer thread only.
#include <rocksdb/db.h>

#include <algorithm>
#include <chrono>
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
  dedup_runs_.clear();
  dedup_conversions_.clear();
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
  std::vector<size_t> firsts;  // where each key's publishes begin in dedup_plan_
  for (size_t i = 0; i < dedup_plan_.size(); ++i) {
    if (i == 0 || dedup_plan_[i].key != dedup_plan_[i - 1].key) firsts.push_back(i);
  }
  firsts.push_back(dedup_plan_.size());
  const size_t distinct = firsts.size() - 1;
  auto key_of = [&](size_t k) -> const std::string& { return dedup_plan_[firsts[k]].key; };

  // Each key once; those of a queue are together, in byte order. Only keys at or below the
  // highest their queue has recorded are read (DedupBounds::high), and looked up among runs
  // when within their span. Those above are new, and the last of their queue's keys: when
  // there are enough of them (and the queue has records: the first keys of a window can be in
  // any order), they are written as one run.
  constexpr size_t kUnread = SIZE_MAX;
  std::vector<size_t> read_as(distinct, kUnread);  // its index in `keys`, or kUnread
  std::vector<bool> in_runs(distinct, false);      // to look up among runs
  std::vector<DedupBounds*> bounds_of(distinct, nullptr);
  std::vector<uint32_t> run_of(distinct, kNoRun);
  std::vector<rocksdb::Slice> keys;
  for (size_t begin = 0; begin < distinct;) {
    const uint64_t queue_id = dedup_plan_[firsts[begin]].op->queue_id;
    size_t end = begin + 1;
    while (end < distinct && dedup_plan_[firsts[end]].op->queue_id == queue_id) ++end;
    DedupBounds* bounds = DedupBoundsOf(queue_id);
    size_t above = end;  // the first key above the highest
    if (bounds) {
      above = begin;
      while (above < end && !(key_of(above) > bounds->high)) ++above;
    }
    for (size_t k = begin; k < above; ++k) {
      read_as[k] = keys.size();
      keys.emplace_back(key_of(k));
      in_runs[k] = MayBeInRun(bounds, key_of(k));
      bounds_of[k] = bounds;
    }
    if (above < end) {
      // Above every record of the queue, and above one another's span: nothing written later
      // lands in a run's span but keys at or below the highest, which are read and looked up.
      // Should the write fail, the bounds are only wider than needed: a few reads too many.
      if (!bounds->high.empty() && end - above >= kMinDedupRunKeys) {
        const auto run = static_cast<uint32_t>(dedup_runs_.size());
        dedup_runs_.push_back({DedupRunKeyOf(key_of(end - 1)), {}, false});
        for (size_t k = above; k < end; ++k) run_of[k] = run;
        if (bounds->runs_low.empty()) bounds->runs_low = key_of(above);
        bounds->runs_high = key_of(end - 1);
      }
      bounds->high = key_of(end - 1);
    }
    begin = end;
  }

  std::vector<rocksdb::PinnableSlice> values(keys.size());
  std::vector<rocksdb::Status> statuses(keys.size());
  if (!keys.empty()) {
    db_->MultiGet(rocksdb::ReadOptions(), dedup_, keys.size(), keys.data(), values.data(),
                  statuses.data(), /*sorted_input=*/true);
  }
  std::unique_ptr<rocksdb::Iterator> runs;  // made for the first key to look up among runs
  uint64_t seeks = 0;
  for (size_t k = 0; k < distinct; ++k) {
    std::optional<DedupValue> record;
    if (const size_t r = read_as[k]; r != kUnread) {
      if (!statuses[r].ok() && !statuses[r].IsNotFound()) continue;  // ApplyDedup reads it again
      if (statuses[r].ok()) record = DecodeDedupValue(values[r].ToStringView());
      // Within the span of the queue's runs (before this group's), and in no gap between
      // them that an earlier key of this group found.
      if (in_runs[k] && !InDedupGap(bounds_of[k], key_of(k))) {
        if (!runs) runs.reset(db_->NewIterator(rocksdb::ReadOptions(), dedup_));
        ++seeks;
        std::optional<DedupValue> in_run;
        if (!FindInDedupRun(runs.get(), key_of(k), bounds_of[k], &in_run).ok()) continue;
        record = Later(record, in_run);
      }
    }
    uint64_t recorded = 0;  // the message of this group that recorded the key
    const StoreBatch::PutDedup* recorded_by = nullptr;
    for (size_t i = firsts[k]; i < firsts[k + 1]; ++i) {
      const StoreBatch::PutDedup& op = *dedup_plan_[i].op;
      DedupOutcome& outcome = *dedup_plan_[i].outcome;
      dedup_plan_[i].run = run_of[k];
      uint64_t holder = recorded;
      if (holder == 0 && record && record->expires_at_ms > op.now_ms) holder = record->message_id;
      // Held by this very message: not a duplicate of itself.
      outcome.duplicate_of = holder != op.message_id ? holder : 0;
      outcome.decided = true;
      if (outcome.duplicate_of == 0 && !recorded_by) {
        recorded = op.message_id;
        recorded_by = &op;
      }
    }
    if (run_of[k] != kNoRun && recorded_by) {
      AppendDedupRunEntry(recorded_by->key, {recorded, recorded_by->expires_at_ms},
                          &dedup_runs_[run_of[k]].value);
    }
  }
  std::lock_guard lock(mu_);
  counters_.dedup_reads += keys.size();
  counters_.dedup_run_lookups += seeks;
  counters_.dedup_runs += dedup_runs_.size();
}

bool RocksDbStore::MayBeInRun(const DedupBounds* bounds, const std::string& key) {
  if (!bounds) return true;
  if (bounds->runs_low.empty() || key < bounds->runs_low || key > bounds->runs_high) return false;
  return !InDedupGap(bounds, key);
}

bool RocksDbStore::InDedupGap(const DedupBounds* bounds, const std::string& key) {
  if (!bounds) return false;
  for (const auto& [lower, upper] : bounds->gaps) {
    if (key > lower && key < upper) return true;
  }
  return false;
}

std::optional<DedupValue> RocksDbStore::Later(const std::optional<DedupValue>& a,
                                              const std::optional<DedupValue>& b) {
  if (!a) return b;
  if (!b) return a;
  return b->expires_at_ms > a->expires_at_ms ? b : a;
}

RocksDbStore::DedupBounds* RocksDbStore::DedupBoundsOf(uint64_t queue_id) {
  if (auto it = dedup_bounds_.find(queue_id); it != dedup_bounds_.end()) return &it->second;
  // First seen since the store opened: its last record and its runs, if any (every record was
  // written before these reads or by this writer since, which keeps the bounds up to date).
  DedupBounds bounds;
  const std::string from = DedupKey(queue_id, "");
  const std::string to = DedupKey(queue_id + 1, "");
  const std::string runs_from = DedupRunKey(queue_id, "");
  const std::string runs_to = DedupRunKey(queue_id + 1, "");
  for (const auto& [lower_key, upper_key] : {std::pair{&from, &to}, {&runs_from, &runs_to}}) {
    rocksdb::Slice lower(*lower_key);
    rocksdb::ReadOptions read;
    read.iterate_lower_bound = &lower;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, dedup_));
    it->SeekForPrev(*upper_key);
    if (!it->status().ok()) return nullptr;  // every key of it is read until this works
    if (!it->Valid()) continue;
    // A run's key is its highest key's.
    std::string last = DedupKeyOfRun(it->key().ToStringView());
    if (lower_key == &runs_from) bounds.runs_high = last;
    if (last > bounds.high) bounds.high = std::move(last);
  }
  rocksdb::Slice upper(runs_to);
  rocksdb::ReadOptions read;
  read.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> first(db_->NewIterator(read, dedup_));
  first->Seek(runs_from);
  if (!first->status().ok()) return nullptr;
  if (first->Valid()) {
    // Runs do not overlap: the first one's first key is the lowest in any.
    bounds.runs_low = from;  // a value that does not decode: every key is looked up
    ForEachDedupRunEntry(first->value().ToStringView(), [&](std::string_view key, const auto&) {
      bounds.runs_low = DedupKey(queue_id, key);
      return false;
    });
  }
  return &dedup_bounds_.emplace(queue_id, std::move(bounds)).first->second;
}

Status RocksDbStore::FindInDedupRun(rocksdb::Iterator* runs, const std::string& key,
                                    DedupBounds* bounds, std::optional<DedupValue>* record) {
  record->reset();
  const std::string target = DedupRunKeyOf(key);
  // The run with the lowest highest key at or above this one is the only one whose span can
  // hold it.
  runs->Seek(target);
  if (!runs->status().ok()) return FromRocksDb(runs->status(), "cannot read a deduplication run");
  constexpr size_t kQueuePrefix = 9;  // the tag and the queue id
  const rocksdb::Slice queue(target.data(), kQueuePrefix);
  const uint64_t queue_id = ReadBigEndian64(std::string_view(key).substr(1, 8));
  const bool in_queue = runs->Valid() && runs->key().starts_with(queue);
  std::string upper;  // the upper end of the gap the key is in, when not in a run's span
  if (in_queue) {
    // Its keys are in the order of their DedupKeys: by length, then by byte.
    auto before = [](std::string_view a, std::string_view b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    };
    const std::string_view wanted = std::string_view(key).substr(kQueuePrefix + 1);
    bool in_span = false;  // at or above the run's first key
    bool first = true;
    ForEachDedupRunEntry(runs->value().ToStringView(),
                         [&](std::string_view k, const DedupValue& value) {
                           if (first) {
                             first = false;
                             in_span = !before(wanted, k);
                             if (!in_span) upper = DedupKey(queue_id, k);
                           }
                           if (k == wanted) *record = value;
                           return !record->has_value() && before(k, wanted);
                         });
    if (!bounds || record->has_value() || first) return Status::Ok();
    if (in_span) {
      // Interleaved with keys it does not hold: its records are written alone, in this
      // group's write, which leaves no run up to its highest key.
      const std::string run_key = runs->key().ToString();
      if (std::none_of(dedup_conversions_.begin(), dedup_conversions_.end(),
                       [&](const DedupConversion& c) { return c.key == run_key; })) {
        runs->Prev();
        if (!runs->status().ok()) return Status::Ok();  // converted when next met
        std::string lower = runs->Valid() && runs->key().starts_with(queue)
                                ? DedupKeyOfRun(runs->key().ToStringView())
                                : DedupKey(queue_id, "");
        runs->Seek(run_key);
        if (!runs->status().ok() || !runs->Valid() || runs->key() != run_key) return Status::Ok();
        dedup_conversions_.push_back({queue_id,
                                      run_key,
                                      runs->value().ToString(),
                                      {std::move(lower), DedupKeyOfRun(run_key) + '\0'}});
      }
      return Status::Ok();
    }
    runs->Prev();
  } else {
    if (!bounds) return Status::Ok();
    upper = DedupKey(queue_id + 1, "");  // above every run of the queue
    runs->SeekForPrev(target);
  }
  // Between the run found (or the end of the queue's) and the one before it (if any).
  if (!runs->status().ok()) return Status::Ok();  // the record is found; the gap is not learnt
  bounds->Learn({runs->Valid() && runs->key().starts_with(queue)
                     ? DedupKeyOfRun(runs->key().ToStringView())
                     : DedupKey(queue_id, ""),
                 std::move(upper)});
  return Status::Ok();
}

void RocksDbStore::DedupBounds::Learn(std::pair<std::string, std::string> gap) {
  if (gaps.size() < kMaxDedupGaps) {
    gaps.push_back(std::move(gap));
  } else {
    gaps[next_gap] = std::move(gap);
    next_gap = (next_gap + 1) % kMaxDedupGaps;
  }
}

void RocksDbStore::WriteDedupConversions(rocksdb::WriteBatch* wb) {
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  for (const DedupConversion& conversion : dedup_conversions_) {
    wb->Delete(dedup_, conversion.key);
    ForEachDedupRunEntry(conversion.value, [&](std::string_view key, const DedupValue& record) {
      // No record of its own has the key: the run's keys were above every record when it was
      // written, and a later one below the highest was looked up in the run first.
      if (record.expires_at_ms > now_ms) {
        EncodeDedupValue(record, &dedup_value_);
        wb->Put(dedup_, DedupKey(conversion.queue_id, key), dedup_value_);
      }
      return true;
    });
  }
  if (!dedup_conversions_.empty()) {
    std::lock_guard lock(mu_);
    counters_.dedup_runs_converted += dedup_conversions_.size();
  }
}

void RocksDbStore::DedupWritten(bool ok) {
  if (!ok) {
    dedup_bounds_.clear();
  } else {
    for (DedupConversion& conversion : dedup_conversions_) {
      auto it = dedup_bounds_.find(conversion.queue_id);
      if (it != dedup_bounds_.end()) it->second.Learn(std::move(conversion.gap));
    }
  }
  dedup_conversions_.clear();
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
      std::optional<DedupValue> record;
      std::string value;
      rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), dedup_, unplanned, &value);
      if (s.ok()) {
        record = DecodeDedupValue(value);
      } else if (!s.IsNotFound()) {
        return FromRocksDb(s, "cannot read a deduplication record");
      }
      if (MayBeInRun(DedupBoundsOf(op.queue_id), unplanned)) {
        std::unique_ptr<rocksdb::Iterator> runs(db_->NewIterator(rocksdb::ReadOptions(), dedup_));
        std::optional<DedupValue> in_run;
        if (Status found = FindInDedupRun(runs.get(), unplanned, nullptr, &in_run); !found.ok()) {
          return found;
        }
        record = Later(record, in_run);
      }
      if (record && record->expires_at_ms > op.now_ms) holder = record->message_id;
    }
    outcome.duplicate_of = holder != op.message_id ? holder : 0;
    outcome.decided = true;
    if (outcome.duplicate_of == 0) group_dedup_[unplanned] = op.message_id;
  }
  if (outcome.duplicate_of != 0) {
    duplicates_.insert({op.queue_id, op.message_id});
    return Status::Ok();
  }
  if (unplanned.empty()) {
    if (const uint32_t run = dedup_plan_[outcome.plan].run; run != kNoRun) {
      // In a run: the first of its keys writes it whole (the group is one atomic write).
      if (!dedup_runs_[run].written) {
        wb->Put(dedup_, dedup_runs_[run].key, dedup_runs_[run].value);
        dedup_runs_[run].written = true;
      }
      return Status::Ok();
    }
  }
  EncodeDedupValue({op.message_id, op.expires_at_ms}, &dedup_value_);
  const std::string& key = unplanned.empty() ? dedup_plan_[outcome.plan].key : unplanned;
  wb->Put(dedup_, key, dedup_value_);
  return Status::Ok();
}

}  // namespace wharf::store
