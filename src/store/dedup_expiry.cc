#include "store/dedup_expiry.h"

#include <chrono>

#include "store/keys.h"

namespace wharf::store {

bool DedupExpiry::Filter(int /*level*/, const rocksdb::Slice& key, const rocksdb::Slice& value,
                         std::string* /*new_value*/, bool* /*value_changed*/) const {
  const std::string_view bytes(value.data(), value.size());
  if (!key.empty() && key[0] == kDedupRunTag) {
    bool live = false;
    const bool whole = ForEachDedupRunEntry(bytes, [&](std::string_view, const DedupValue& record) {
      live = record.expires_at_ms > now_ms_;
      return !live;  // one live record keeps the run
    });
    return whole && !live;
  }
  auto record = DecodeDedupValue(bytes);
  return record && record->expires_at_ms <= now_ms_;
}

std::unique_ptr<rocksdb::CompactionFilter> DedupExpiryFactory::CreateCompactionFilter(
    const rocksdb::CompactionFilter::Context& /*context*/) {
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  return std::make_unique<DedupExpiry>(now_ms);
}

}  // namespace wharf::store
