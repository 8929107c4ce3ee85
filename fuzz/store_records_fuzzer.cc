// fuzz/store_records_fuzzer.cc
//
// The store's decoders (store/keys.h, store/records.h) on bytes as a damaged disk, a bad
// backup or a bug could leave them: byte 0 picks the record kind, the rest is the key or value.
// Each kind is read the way the store reads it (rocksdb_store_recover.cc, _reader.cc,
// dedup_expiry.cc): an entry's header, its delivery history and inline MessageRecord into a
// message envelope; keys of entries and delayed messages; purge and dedup values and dedup runs;
// exchange, queue, binding, redrive, user, vhost and policy records through FromRecord.
//
// Checked besides "no crash": what decodes re-encodes to the same bytes (fixed-layout keys and
// values), and a record read back into Wharf's types writes a record that reads back alike.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/envelope.h"
#include "fuzz_check.h"
#include "quiet_protobuf.h"
#include "store/keys.h"
#include "store/message_store.h"
#include "store/records.h"

namespace {

using wharf::fuzz::Check;
namespace store = wharf::store;
namespace pb = store::pb;

template <typename Record>
bool Parse(std::string_view bytes, Record* record) {
  return record->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

void Entry(std::string_view value) {
  auto entry = store::DecodeEntryValue(value);
  if (!entry) return;
  store::LoadedMessage loaded;
  (void)store::ReadAttempts(store::EntryAttemptsBytes(value), &loaded);
  if (!(entry->flags & store::kEntryInline)) return;
  pb::MessageRecord record;
  if (!Parse(store::EntryRecordBytes(value), &record)) return;
  auto envelope = store::FromRecord(std::move(record));
  if (!envelope.ok()) return;
  wharf::EnvelopePtr made = wharf::MakeEnvelope(std::move(envelope).value());
  (void)made->whole_bytes();
  // Written again (a requeue rewrites it) and read back.
  pb::MessageRecord rewritten;
  store::ToRecord(*made, &rewritten);
  auto again = store::FromRecord(std::move(rewritten));
  Check(again.ok(), "a record written from a read one reads back");
  Check(again->message.body == made->message.body, "the body survives a rewrite");
}

// A deduplication run's value (either format): the records a whole one lists, written again
// the format-14 way, list alike.
void DedupRun(std::string_view value) {
  std::vector<std::pair<std::string, store::DedupValue>> records;
  auto collect = [](std::vector<std::pair<std::string, store::DedupValue>>* out) {
    return [out](std::string_view key, const store::DedupValue& record) {
      out->emplace_back(std::string(key), record);
      return true;
    };
  };
  if (!store::ForEachDedupRunEntry(value, collect(&records))) return;
  // A format-13 run's keys may be up to 255 bytes; the builder takes the store's (up to
  // kMaxDedupKeyBytes), as the writer only ever writes those.
  for (const auto& [key, record] : records) {
    if (key.size() > store::kMaxDedupKeyBytes) return;
  }
  store::DedupRunBuilder builder;
  for (const auto& [key, record] : records) builder.Append(key, record);
  std::vector<std::pair<std::string, store::DedupValue>> again;
  Check(store::ForEachDedupRunEntry(builder.value(), collect(&again)), "a run written reads");
  Check(again.size() == records.size(), "a run written again lists as many records");
  Check(again == records, "a run written again lists the same records");
}

template <typename Spec, typename Record>
void Topology(std::string_view bytes) {
  Record record;
  if (!Parse(bytes, &record)) return;
  auto spec = store::FromRecord(record);
  if (!spec.ok()) return;
  Record rewritten;
  if constexpr (std::is_same_v<Record, pb::QueueRecord>) {
    rewritten = store::ToRecord(*spec, record.queue_id());
  } else {
    rewritten = store::ToRecord(*spec);
  }
  Check(store::FromRecord(rewritten).ok(), "a topology record written from a read one reads");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 12) {
    case 0:
      Entry(bytes);
      break;
    case 1:
      if (auto parts = store::ParseEntryKey(bytes)) {
        Check(store::EntryKey(parts->queue_id, parts->seq) == bytes, "entry keys round-trip");
      }
      break;
    case 2:
      if (auto parts = store::ParseDelayedKey(bytes)) {
        Check(store::DelayedKey(parts->queue_id, parts->due_ms, parts->message_id) == bytes,
              "delayed keys round-trip");
      }
      break;
    case 3:
      if (auto purge = store::DecodePurgeValue(bytes)) {
        Check(store::EncodePurgeValue(*purge) == bytes, "purge values round-trip");
      }
      break;
    case 4:
      if (auto dedup = store::DecodeDedupValue(bytes)) {
        Check(store::EncodeDedupValue(*dedup) == bytes, "dedup values round-trip");
      }
      DedupRun(bytes);  // the same family's other value (dedup_expiry.cc reads both)
      break;
    case 5:
      Topology<wharf::ExchangeSpec, pb::ExchangeRecord>(bytes);
      break;
    case 6:
      Topology<wharf::QueueSpec, pb::QueueRecord>(bytes);
      break;
    case 7: {
      pb::BindingRecord record;
      if (!Parse(bytes, &record)) break;
      auto binding = store::FromRecord(record);
      if (!binding.ok()) break;
      const std::string key = store::BindingKey(*binding);
      pb::BindingRecord again;
      Check(!key.empty() && Parse(std::string_view(key).substr(1), &again) &&
                store::FromRecord(again).ok(),
            "a binding's key is its prefix and a record that reads back");
      break;
    }
    case 8: {
      pb::RedriveRecord record;
      if (!Parse(bytes, &record)) break;
      if (auto redrive = store::FromRecord(record); redrive.ok()) {
        Check(store::FromRecord(store::ToRecord(*redrive)).ok(),
              "a redrive record written from a read one reads");
      }
      break;
    }
    case 9: {
      pb::UserRecord record;
      (void)Parse(bytes, &record);
      break;
    }
    case 10: {
      pb::VhostRecord record;
      if (!Parse(bytes, &record)) break;
      const store::StoredVhost vhost = store::FromRecord(record);
      const store::StoredVhost again = store::FromRecord(store::ToRecord(vhost));
      Check(again.name == vhost.name && again.description == vhost.description &&
                again.limits == vhost.limits,
            "a vhost record written from a read one reads alike");
      // Its topology keys never collide with "/"'s.
      const std::string queue_key = store::QueueKey(vhost.name, "q");
      Check(store::IsDefaultVhost(vhost.name) || queue_key[0] == store::kVhostQueuePrefix,
            "another vhost's queue key has its own prefix");
      break;
    }
    case 11: {
      pb::PolicyRecord record;
      if (!Parse(bytes, &record)) break;
      auto policy = store::FromRecord(record);
      if (!policy.ok()) break;
      auto again = store::FromRecord(store::ToRecord(*policy));
      // Compared as bytes: a NaN in the definition is not equal to itself.
      Check(again.ok() && store::ToRecord(*again).SerializeAsString() ==
                              store::ToRecord(*policy).SerializeAsString(),
            "a policy record written from a read one reads alike");
      break;
    }
  }
  return 0;
}
