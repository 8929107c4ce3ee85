#include "store/dedup_writer.h"

#include <rocksdb/db.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "store/keys.h"
#include "store/rocksdb_status.h"

namespace wharf::store {
namespace {

// A DedupKey's or DedupRunKey's tag and queue id: the bytes the keys of one queue share.
constexpr size_t kDedupQueueBytes = 9;

}  // namespace

DedupWriter::Counts DedupWriter::Prefetch(const std::vector<const StoreBatch*>& batches,
                                          rocksdb::WriteBatch* wb) {
  Counts counts;
  plan_.clear();
  runs_.clear();
  conversions_.clear();
  new_runs_.clear();
  for (const StoreBatch* batch : batches) {
    if (!batch->dedup_outcomes()) continue;
    DedupOutcomes& outcomes = *batch->dedup_outcomes();
    for (const StoreBatch::Op& op : batch->ops()) {
      const auto* put = std::get_if<StoreBatch::PutDedup>(&op);
      if (put && put->outcome < outcomes.size() && !put->key.empty() &&
          put->key.size() <= kMaxDedupKeyBytes) {
        DedupOutcome& outcome = outcomes[put->outcome];
        outcome.decided = false;
        plan_.push_back({DedupKey(put->queue_id, put->key), put, &outcome});
      }
    }
  }
  if (plan_.empty()) return counts;
  ++group_;
  // By key; stable, so that the publishes of one key stay in the order Apply meets them.
  std::stable_sort(plan_.begin(), plan_.end(),
                   [](const PlannedDedup& a, const PlannedDedup& b) { return a.key < b.key; });
  for (size_t i = 0; i < plan_.size(); ++i) {
    plan_[i].outcome->plan = static_cast<uint32_t>(i);
  }
  std::vector<size_t> firsts;  // where each key's publishes begin in plan_
  for (size_t i = 0; i < plan_.size(); ++i) {
    if (i == 0 || plan_[i].key != plan_[i - 1].key) firsts.push_back(i);
  }
  firsts.push_back(plan_.size());
  const size_t distinct = firsts.size() - 1;
  auto key_of = [&](size_t k) -> const std::string& { return plan_[firsts[k]].key; };

  // Each key once; those of a queue are together, in byte order. Only keys at or below the
  // highest their queue has recorded (DedupBounds::high) and in no stream are read, and looked
  // up among runs when within their span. Those above are new, and the last of their queue's
  // keys: when there are enough of them (and the queue has records: the first keys of a window
  // can be in any order), they are written as one run, as are a stream's.
  constexpr size_t kUnread = SIZE_MAX;
  std::vector<size_t> read_as(distinct, kUnread);  // its index in `keys`, or kUnread
  std::vector<bool> in_runs(distinct, false);      // to look up among runs
  std::vector<DedupBounds*> bounds_of(distinct, nullptr);
  std::vector<uint32_t> run_of(distinct, kNoRun);
  std::vector<rocksdb::Slice> keys;
  struct QueueKeys {
    size_t begin, end;  // its keys
    DedupBounds* bounds;
    size_t stream_keys = 0;  // of them, found new in a stream
  };
  std::vector<QueueKeys> queues;
  for (size_t begin = 0; begin < distinct;) {
    const uint64_t queue_id = plan_[firsts[begin]].op->queue_id;
    size_t end = begin + 1;
    while (end < distinct && plan_[firsts[end]].op->queue_id == queue_id) ++end;
    DedupBounds* bounds = BoundsOf(queue_id);
    queues.push_back({begin, end, bounds});
    size_t above = end;  // the first key above the highest
    if (bounds) {
      above = begin;
      while (above < end && !(key_of(above) > bounds->high)) ++above;
    }
    // The queue's streams (in key order: they do not overlap), met in turn by the sorted keys.
    std::span<DedupBounds::Stream> streams;
    if (bounds) streams = bounds->streams;
    auto cursor = streams.begin();
    for (size_t k = begin; k < above;) {
      while (cursor != streams.end() && !(key_of(k) < cursor->upper)) ++cursor;
      DedupBounds::Stream* stream =
          cursor != streams.end() && key_of(k) > cursor->lower ? &*cursor : nullptr;
      if (!stream) {
        read_as[k] = keys.size();
        keys.emplace_back(key_of(k));
        in_runs[k] = MayBeInRun(bounds, key_of(k));
        bounds_of[k] = bounds;
        ++k;
        continue;
      }
      // The group's keys in the span of a stream (together, as they are sorted): new, as no
      // record is there, and a run as those above the highest are.
      size_t last = k + 1;
      while (last < above && key_of(last) < stream->upper) ++last;
      counts.stream_keys += last - k;
      queues.back().stream_keys += last - k;
      stream->used = group_;
      bounds->learning.Reset();                      // streams serve
      if (stream->split) bounds->splitting.Reset();  // and splits do
      if (last - k >= kMinDedupRunKeys || stream->rising) {
        const auto run = static_cast<uint32_t>(runs_.size());
        runs_.push_back({DedupRunKeyOf(key_of(last - 1)), {}, false});
        for (size_t j = k; j < last; ++j) run_of[j] = run;
        new_runs_.push_back({queue_id, key_of(k), key_of(last - 1)});
        if (bounds->runs_low.empty() || key_of(k) < bounds->runs_low) {
          bounds->runs_low = key_of(k);
        }
        if (bounds->runs_high.empty() || key_of(last - 1) > bounds->runs_high) {
          bounds->runs_high = key_of(last - 1);
        }
        stream->rising = true;
      } else {
        stream->rising = false;
      }
      stream->lower = key_of(last - 1);
      k = last;
    }
    if (above < end) {
      // Above every record of the queue, and above one another's span: nothing written later
      // lands in a run's span but keys at or below the highest, which are read and looked up.
      // Should the write fail, the bounds are only wider than needed: a few reads too many.
      if (!bounds->high.empty() && (end - above >= kMinDedupRunKeys || bounds->rising)) {
        const auto run = static_cast<uint32_t>(runs_.size());
        runs_.push_back({DedupRunKeyOf(key_of(end - 1)), {}, false});
        for (size_t k = above; k < end; ++k) run_of[k] = run;
        new_runs_.push_back({queue_id, key_of(above), key_of(end - 1)});
        if (bounds->runs_low.empty()) bounds->runs_low = key_of(above);
        bounds->runs_high = key_of(end - 1);
        bounds->rising = true;
      } else {
        bounds->rising = false;  // the highest is a record of its own
      }
      bounds->high = key_of(end - 1);
    }
    begin = end;
  }

  std::vector<rocksdb::PinnableSlice> values(keys.size());
  std::vector<rocksdb::Status> statuses(keys.size());
  if (!keys.empty()) {
    db_->MultiGet(rocksdb::ReadOptions(), family_, keys.size(), keys.data(), values.data(),
                  statuses.data(), /*sorted_input=*/true);
  }
  std::unique_ptr<rocksdb::Iterator> runs;    // made for the first key to look up among runs
  std::vector<bool> absent(distinct, false);  // read, and no record of it at all
  for (size_t k = 0; k < distinct; ++k) {
    std::optional<DedupValue> record;
    if (const size_t r = read_as[k]; r != kUnread) {
      if (!statuses[r].ok() && !statuses[r].IsNotFound()) continue;  // Apply reads it again
      if (statuses[r].ok()) record = DecodeDedupValue(values[r].ToStringView());
      // Within the span of the queue's runs (which may include this group's: a few lookups
      // more), and in no gap between them that an earlier key of this group found.
      std::optional<DedupValue> in_run;
      if (in_runs[k] && !InGap(bounds_of[k], key_of(k))) {
        if (!runs) runs.reset(db_->NewIterator(rocksdb::ReadOptions(), family_));
        ++counts.run_lookups;
        if (!FindInRun(runs.get(), key_of(k), bounds_of[k], &in_run).ok()) continue;
        record = Later(record, in_run);
      }
      absent[k] = statuses[r].IsNotFound() && !in_run;
    }
    uint64_t recorded = 0;  // the message of this group that recorded the key
    const StoreBatch::PutDedup* recorded_by = nullptr;
    for (size_t i = firsts[k]; i < firsts[k + 1]; ++i) {
      const StoreBatch::PutDedup& op = *plan_[i].op;
      DedupOutcome& outcome = *plan_[i].outcome;
      plan_[i].run = run_of[k];
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
      runs_[run_of[k]].records.Append(recorded_by->key, {recorded, recorded_by->expires_at_ms});
    }
  }
  // Each block of keys read and found new (kMinDedupRunKeys or more, with no other key of the
  // group between them) opens a stream above its highest: a publisher whose keys rise below
  // another's has its next keys in it. While a queue's streams serve publishers, a block may
  // hold the keys of several that have none yet, one after another: it opens streams above
  // each of theirs too (LearnStreamsWithin).
  for (const QueueKeys& queue : queues) {
    if (!queue.bounds) continue;
    for (size_t k = queue.begin; k < queue.end;) {
      if (!absent[k]) {
        ++k;
        continue;
      }
      size_t last = k + 1;
      while (last < queue.end && absent[last]) ++last;
      DedupBounds& bounds = *queue.bounds;
      if (last - k >= kMinDedupRunKeys && bounds.learning.Take()) {
        if (!runs) runs.reset(db_->NewIterator(rocksdb::ReadOptions(), family_));
        const uint64_t queue_id = plan_[firsts[k]].op->queue_id;
        counts.streams += LearnStream(runs.get(), queue_id, &bounds, key_of(last - 1),
                                      last < queue.end ? key_of(last) : std::string());
        // A chance to split is a block that can split: its top eight keys and eight below.
        if (queue.stream_keys >= kMinDedupRunKeys && last - k >= 2 * kMinDedupRunKeys &&
            bounds.splitting.Take()) {
          counts.streams += LearnStreamsWithin(runs.get(), queue_id, &bounds, firsts, k, last);
        }
      }
      k = last;
    }
  }
  counts.reads = keys.size();
  counts.runs = runs_.size();
  counts.runs_converted = conversions_.size();
  WriteConversions(wb);
  return counts;
}

bool DedupWriter::MayBeInRun(const DedupBounds* bounds, const std::string& key) {
  if (!bounds) return true;
  if (bounds->runs_low.empty() || key < bounds->runs_low || key > bounds->runs_high) return false;
  return !InGap(bounds, key);
}

bool DedupWriter::InGap(const DedupBounds* bounds, const std::string& key) {
  if (!bounds) return false;
  for (const auto& [lower, upper] : bounds->gaps) {
    if (key > lower && key < upper) return true;
  }
  return false;
}

std::optional<DedupValue> DedupWriter::Later(const std::optional<DedupValue>& a,
                                             const std::optional<DedupValue>& b) {
  if (!a) return b;
  if (!b) return a;
  return b->expires_at_ms > a->expires_at_ms ? b : a;
}

DedupWriter::DedupBounds* DedupWriter::BoundsOf(uint64_t queue_id) {
  if (auto it = bounds_.find(queue_id); it != bounds_.end()) return &it->second;
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
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, family_));
    it->SeekForPrev(*upper_key);
    if (!it->status().ok()) return nullptr;  // every key of it is read until this works
    if (!it->Valid()) continue;
    // A run's key is its highest key's. Runs are written in the rising way (DedupBounds::
    // rising) while the highest record is in one.
    std::string last = DedupKeyOfRun(it->key().ToStringView());
    if (lower_key == &runs_from) {
      bounds.rising = last > bounds.high;
      bounds.runs_high = last;
    }
    if (last > bounds.high) bounds.high = std::move(last);
  }
  rocksdb::Slice upper(runs_to);
  rocksdb::ReadOptions read;
  read.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> first(db_->NewIterator(read, family_));
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
  return &bounds_.emplace(queue_id, std::move(bounds)).first->second;
}

Status DedupWriter::FindInRun(rocksdb::Iterator* runs, const std::string& key, DedupBounds* bounds,
                              std::optional<DedupValue>* record) {
  record->reset();
  const std::string target = DedupRunKeyOf(key);
  // The run with the lowest highest key at or above this one is the only one whose span can
  // hold it.
  runs->Seek(target);
  if (!runs->status().ok()) return FromRocksDb(runs->status(), "cannot read a deduplication run");
  const rocksdb::Slice queue(target.data(), kDedupQueueBytes);
  const uint64_t queue_id = ReadBigEndian64(std::string_view(key).substr(1, 8));
  const bool in_queue = runs->Valid() && runs->key().starts_with(queue);
  std::string upper;  // the upper end of the gap the key is in, when not in a run's span
  if (in_queue) {
    // Its keys are in the order of their DedupKeys: by length, then by byte.
    auto before = [](std::string_view a, std::string_view b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    };
    const std::string_view wanted = std::string_view(key).substr(kDedupQueueBytes + 1);
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
      if (std::none_of(conversions_.begin(), conversions_.end(),
                       [&](const Conversion& c) { return c.key == run_key; })) {
        runs->Prev();
        if (!runs->status().ok()) return Status::Ok();  // converted when next met
        std::string lower = runs->Valid() && runs->key().starts_with(queue)
                                ? DedupKeyOfRun(runs->key().ToStringView())
                                : DedupKey(queue_id, "");
        runs->Seek(run_key);
        if (!runs->status().ok() || !runs->Valid() || runs->key() != run_key) return Status::Ok();
        conversions_.push_back({queue_id,
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

bool DedupWriter::LearnStream(rocksdb::Iterator* it, uint64_t queue_id, DedupBounds* bounds,
                              const std::string& top, const std::string& next, bool split) {
  // The highest key is a record (or was, and may have expired since): every key above it is
  // written without a look at the streams, so no span may reach past it.
  if (bounds->high.empty()) return false;
  std::string upper = bounds->high;
  if (!next.empty() && next < upper) upper = next;
  // Not from a stream's lower end up: that key's record may have expired and gone since (then
  // `top` read absent), and the stream still holds the span above it. No stream holds `top`
  // (it was read), so the next stream is the first whose lower end is at or above it.
  auto next_stream = std::lower_bound(
      bounds->streams.begin(), bounds->streams.end(), top,
      [](const DedupBounds::Stream& stream, const std::string& key) { return stream.lower < key; });
  if (next_stream != bounds->streams.end() && next_stream->lower < upper) {
    upper = next_stream->lower;
  }
  // The next record alone: `top` has none (it was read), so the first key after it (below
  // `upper`, a key of this queue).
  it->Seek(top);
  if (!it->status().ok()) return false;
  if (it->Valid() && it->key().compare(rocksdb::Slice(upper)) < 0) upper = it->key().ToString();
  // The next key in a run: the first key of the run with the lowest highest key at or above
  // `top` (runs do not overlap). When that run's span holds `top` (a run this group converts),
  // its first key is below `top`, and nothing is learnt: runs written in the stream would
  // overlap that one.
  const std::string run_key = DedupRunKeyOf(top);
  it->Seek(run_key);
  if (!it->status().ok()) return false;
  if (it->Valid() && it->key().starts_with(rocksdb::Slice(run_key.data(), kDedupQueueBytes))) {
    std::string first;
    ForEachDedupRunEntry(it->value().ToStringView(), [&](std::string_view k, const auto&) {
      first = DedupKey(queue_id, k);
      return false;
    });
    if (first.empty()) return false;  // malformed: its span is not known
    if (first < upper) upper = std::move(first);
  }
  if (!(top < upper)) return false;
  bounds->Open({top, std::move(upper), false, group_, split});
  return true;
}

size_t DedupWriter::LearnStreamsWithin(rocksdb::Iterator* it, uint64_t queue_id,
                                       DedupBounds* bounds, const std::vector<size_t>& firsts,
                                       size_t begin, size_t end) {
  auto key_of = [&](size_t k) -> const std::string& { return plan_[firsts[k]].key; };
  auto common = [&](size_t j) {  // how long a prefix keys j and j + 1 share
    const std::string& a = key_of(j);
    const std::string& b = key_of(j + 1);
    return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first -
                               a.begin());
  };
  // The block's highest keys are taken for one publisher's (its top eight, as many as a block
  // needs), and the shortest prefix they share for what any two consecutive keys of one
  // publisher share. Two keys that share less are taken for two publishers', and the lower
  // one for the highest of its publisher in the group. A mistaken one (a publisher whose
  // sequence carries into a digit where the highest's did not) learns a span that no key
  // falls in, which goes first once the queue has as many streams as it keeps.
  size_t within = SIZE_MAX;
  for (size_t j = end - kMinDedupRunKeys; j + 1 < end; ++j) within = std::min(within, common(j));
  size_t learnt = 0, tried = 0;
  size_t top = end - 1;  // the highest key of the publisher above the next split
  for (size_t j = end - 1; j-- > begin && tried < kMaxStreamsLearntInBlock;) {
    if (j + 1 - begin < kMinDedupRunKeys) break;  // fewer keys below than a block needs
    if (top - j < kMinDedupRunKeys || common(j) >= within) continue;
    ++tried;
    learnt += LearnStream(it, queue_id, bounds, key_of(j), key_of(j + 1), /*split=*/true);
    top = j;
  }
  return learnt;
}

void DedupWriter::DedupBounds::Open(Stream stream) {
  if (streams.size() >= kMaxStreams) {
    streams.erase(
        std::min_element(streams.begin(), streams.end(),
                         [](const Stream& a, const Stream& b) { return a.used < b.used; }));
  }
  auto at = std::lower_bound(streams.begin(), streams.end(), stream.lower,
                             [](const Stream& s, const std::string& key) { return s.lower < key; });
  streams.insert(at, std::move(stream));
}

void DedupWriter::DedupBounds::ForgetGapsOver(const std::string& low, const std::string& high) {
  std::erase_if(gaps, [&](const auto& gap) { return gap.first < high && gap.second > low; });
  if (next_gap >= gaps.size()) next_gap = 0;
}

void DedupWriter::DedupBounds::Learn(std::pair<std::string, std::string> gap) {
  if (gaps.size() < kMaxGaps) {
    gaps.push_back(std::move(gap));
  } else {
    gaps[next_gap] = std::move(gap);
    next_gap = (next_gap + 1) % kMaxGaps;
  }
}

void DedupWriter::WriteConversions(rocksdb::WriteBatch* wb) {
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  for (const Conversion& conversion : conversions_) {
    wb->Delete(family_, conversion.key);
    ForEachDedupRunEntry(conversion.value, [&](std::string_view key, const DedupValue& record) {
      // A record of its own with the key can only have been written once this one had expired
      // (a later key at or below the highest is looked up in the run first): expired ones are
      // left out.
      if (record.expires_at_ms > now_ms) {
        EncodeDedupValue(record, &value_);
        wb->Put(family_, DedupKey(conversion.queue_id, key), value_);
      }
      return true;
    });
  }
}

void DedupWriter::Reset(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family) {
  db_ = db;
  family_ = family;
  bounds_.clear();
  Written(true);
}

void DedupWriter::PutRecord(const std::string& key, const StoreBatch::PutDedup& op,
                            rocksdb::WriteBatch* wb) {
  EncodeDedupValue({op.message_id, op.expires_at_ms}, &value_);
  wb->Put(family_, key, value_);
}

void DedupWriter::WriteRecord(PlannedDedup& planned, rocksdb::WriteBatch* wb) {
  PutRecord(planned.key, *planned.op, wb);
  planned.write = false;
}

void DedupWriter::WriteRecords(rocksdb::WriteBatch* wb) {
  for (PlannedDedup& planned : plan_) {
    if (planned.write) WriteRecord(planned, wb);
  }
}

void DedupWriter::RemoveQueue(uint64_t queue_id, rocksdb::WriteBatch* wb) {
  // Its records this group marked go in first, as they would have in the order of the ops.
  for (PlannedDedup& planned : plan_) {
    if (planned.write && planned.op->queue_id == queue_id) WriteRecord(planned, wb);
  }
  // The records of a deleted queue are never read again (ids are never reused).
  wb->DeleteRange(family_, DedupKey(queue_id, ""), DedupKey(queue_id + 1, ""));
  wb->DeleteRange(family_, DedupRunKey(queue_id, ""), DedupRunKey(queue_id + 1, ""));
  bounds_.erase(queue_id);
}

void DedupWriter::Written(bool ok) {
  if (!ok) {
    bounds_.clear();
  } else {
    for (Conversion& conversion : conversions_) {
      auto it = bounds_.find(conversion.queue_id);
      if (it == bounds_.end()) continue;
      it->second.Learn(std::move(conversion.gap));
      it->second.rising = false;  // its keys were not rising after all
    }
    for (const NewRun& run : new_runs_) {
      if (auto it = bounds_.find(run.queue_id); it != bounds_.end()) {
        it->second.ForgetGapsOver(run.low, run.high);
      }
    }
  }
  plan_.clear();
  runs_.clear();
  conversions_.clear();
  new_runs_.clear();
  unplanned_.clear();
}

Status DedupWriter::Apply(const StoreBatch& batch, const StoreBatch::PutDedup& op,
                          rocksdb::WriteBatch* wb, bool* duplicate) {
  *duplicate = false;
  if (!batch.dedup_outcomes() || op.outcome >= batch.dedup_outcomes()->size() || op.key.empty() ||
      op.key.size() > kMaxDedupKeyBytes) {
    return Status(StatusCode::kInternal, "malformed deduplication record");
  }
  DedupOutcome& outcome = (*batch.dedup_outcomes())[op.outcome];
  std::string unplanned;  // the key of one Prefetch could not read
  if (!outcome.decided) {
    // Its read failed in Prefetch: read it alone, and mind what this group recorded.
    unplanned = DedupKey(op.queue_id, op.key);
    uint64_t holder = 0;
    if (auto it = unplanned_.find(unplanned); it != unplanned_.end()) {
      holder = it->second;
    } else {
      std::optional<DedupValue> record;
      std::string value;
      rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), family_, unplanned, &value);
      if (s.ok()) {
        record = DecodeDedupValue(value);
      } else if (!s.IsNotFound()) {
        return FromRocksDb(s, "cannot read a deduplication record");
      }
      // What Prefetch knew of the window, not BoundsOf: should its read of the bounds have
      // failed there and succeed now, it would read the store without this group's records
      // (in `wb` only) and keep a highest key below them, so that a retry of one would be
      // taken for new until the next reopen. Without an entry, the key is looked up.
      const auto known = bounds_.find(op.queue_id);
      if (MayBeInRun(known != bounds_.end() ? &known->second : nullptr, unplanned)) {
        std::unique_ptr<rocksdb::Iterator> runs(db_->NewIterator(rocksdb::ReadOptions(), family_));
        std::optional<DedupValue> in_run;
        if (Status found = FindInRun(runs.get(), unplanned, nullptr, &in_run); !found.ok()) {
          return found;
        }
        record = Later(record, in_run);
      }
      if (record && record->expires_at_ms > op.now_ms) holder = record->message_id;
    }
    outcome.duplicate_of = holder != op.message_id ? holder : 0;
    outcome.decided = true;
    if (outcome.duplicate_of == 0) unplanned_[unplanned] = op.message_id;
  }
  if (outcome.duplicate_of != 0) {
    *duplicate = true;
    return Status::Ok();
  }
  if (!unplanned.empty()) {
    PutRecord(unplanned, op, wb);
    return Status::Ok();
  }
  PlannedDedup& planned = plan_[outcome.plan];
  if (planned.run == kNoRun) {
    planned.write = true;
  } else if (!runs_[planned.run].written) {
    // In a run: the first of its keys writes it whole (the group is one atomic write).
    wb->Put(family_, runs_[planned.run].key, runs_[planned.run].records.value());
    runs_[planned.run].written = true;
  }
  return Status::Ok();
}

}  // namespace wharf::store
