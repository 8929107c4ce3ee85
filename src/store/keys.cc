#include "store/keys.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>

namespace wharf::store {

void AppendBigEndian64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint64_t ReadBigEndian64(std::string_view in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

void AppendLittleEndian64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t ReadLittleEndian64(std::string_view in) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

void AppendLittleEndian32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint32_t ReadLittleEndian32(std::string_view in) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

std::string MessageKey(uint64_t message_id) {
  std::string key;
  key.reserve(8);
  AppendBigEndian64(&key, message_id);
  return key;
}

std::string RefsKey(uint64_t message_id) {
  std::string key(1, kRefsPrefix);
  AppendBigEndian64(&key, message_id);
  return key;
}

bool IsEntriesFamily(std::string_view family) {
  for (const char* name : kEntriesFamilies) {
    if (family == name) return true;
  }
  return false;
}

std::string EntryKey(uint64_t queue_id, uint64_t seq) {
  std::string key;
  key.reserve(16);
  AppendBigEndian64(&key, queue_id);
  AppendBigEndian64(&key, seq);
  return key;
}

std::optional<EntryKeyParts> ParseEntryKey(std::string_view key) {
  if (key.size() != 16) return std::nullopt;
  return EntryKeyParts{ReadBigEndian64(key), ReadBigEndian64(key.substr(8))};
}

std::string EncodeEntryValue(const EntryValue& value, std::string_view attempts) {
  std::string out;
  out.reserve(13 + (attempts.empty() ? 0 : 4 + attempts.size()));
  AppendLittleEndian64(&out, value.message_id);
  AppendLittleEndian32(&out, value.receive_count);
  uint8_t flags = value.flags & ~kEntryAttempts;
  if (!attempts.empty()) flags |= kEntryAttempts;
  out.push_back(static_cast<char>(flags));
  if (!attempts.empty()) {
    AppendLittleEndian32(&out, static_cast<uint32_t>(attempts.size()));
    out.append(attempts);
  }
  return out;
}

std::string_view EntryAttemptsBytes(std::string_view value) {
  if (value.size() < 17 || !(static_cast<uint8_t>(value[12]) & kEntryAttempts)) return {};
  uint32_t n = ReadLittleEndian32(value.substr(13));
  if (value.size() - 17 < n) return {};
  return value.substr(17, n);
}

std::string_view EntryRecordBytes(std::string_view value) {
  if (value.size() <= 13) return {};
  if (!(static_cast<uint8_t>(value[12]) & kEntryAttempts)) return value.substr(13);
  if (value.size() < 17) return {};
  uint32_t n = ReadLittleEndian32(value.substr(13));
  if (value.size() - 17 < n) return {};
  return value.substr(17 + n);
}

std::string DeliveredKey(uint64_t queue_id, uint8_t lane) {
  std::string key(1, kDeliveredPrefix);
  AppendBigEndian64(&key, queue_id);
  if (lane != 0) key.push_back(static_cast<char>(lane));
  return key;
}

std::string RedriveKey(uint64_t queue_id) {
  std::string key(1, kRedrivePrefix);
  AppendBigEndian64(&key, queue_id);
  return key;
}

std::string PurgeKey(uint64_t queue_id, uint64_t from_seq) {
  std::string key(1, kPurgePrefix);
  AppendBigEndian64(&key, queue_id);
  AppendBigEndian64(&key, from_seq);
  return key;
}

std::string EncodePurgeValue(const PurgeValue& value) {
  std::string out;
  AppendLittleEndian64(&out, value.cursor_seq);
  AppendLittleEndian64(&out, value.to_seq);
  AppendLittleEndian64(&out, value.messages);
  AppendLittleEndian64(&out, value.removed);
  return out;
}

std::optional<PurgeValue> DecodePurgeValue(std::string_view value) {
  if (value.size() != 32) return std::nullopt;
  PurgeValue out;
  out.cursor_seq = ReadLittleEndian64(value.substr(0, 8));
  out.to_seq = ReadLittleEndian64(value.substr(8, 8));
  out.messages = ReadLittleEndian64(value.substr(16, 8));
  out.removed = ReadLittleEndian64(value.substr(24, 8));
  return out;
}

std::string DedupKey(uint64_t queue_id, std::string_view key) {
  static_assert(kMaxDedupKeyBytes <= 255, "the key's length is one byte");
  std::string out;
  out.reserve(10 + key.size());
  out.push_back(kDedupKeyTag);
  AppendBigEndian64(&out, queue_id);
  out.push_back(static_cast<char>(static_cast<uint8_t>(key.size())));
  out.append(key);
  return out;
}

std::string DedupRunKey(uint64_t queue_id, std::string_view key) {
  return DedupRunKeyOf(DedupKey(queue_id, key));
}

std::string DedupRunKeyOf(std::string_view dedup_key) {
  std::string out(dedup_key);
  if (!out.empty()) out[0] = kDedupRunTag;
  return out;
}

std::string DedupKeyOfRun(std::string_view run_key) {
  std::string out(run_key);
  if (!out.empty()) out[0] = kDedupKeyTag;
  return out;
}

std::optional<DedupKeyParts> ParseDedupKey(std::string_view key) {
  if (key.size() < 10 || (key[0] != kDedupKeyTag && key[0] != kDedupRunTag)) return std::nullopt;
  const size_t length = static_cast<uint8_t>(key[9]);
  if (key.size() != 10 + length) return std::nullopt;
  return DedupKeyParts{ReadBigEndian64(key.substr(1, 8)), key.substr(10), key[0] == kDedupRunTag};
}

std::string EncodeDedupValue(const DedupValue& value) {
  std::string out;
  EncodeDedupValue(value, &out);
  return out;
}

void EncodeDedupValue(const DedupValue& value, std::string* out) {
  out->clear();
  AppendLittleEndian64(out, value.message_id);
  AppendLittleEndian64(out, static_cast<uint64_t>(value.expires_at_ms));
}

std::optional<DedupValue> DecodeDedupValue(std::string_view value) {
  if (value.size() != 16) return std::nullopt;
  return DedupValue{ReadLittleEndian64(value),
                    static_cast<int64_t>(ReadLittleEndian64(value.substr(8)))};
}

namespace {

// The first byte of a format-14 run (a format-13 run starts with a key's length, 1 or more).
constexpr char kDedupRunCompact = '\0';

// A varint as protobuf writes it (seven bits a byte, low first).
void AppendVarint(std::string* out, uint64_t v) {
  uint8_t bytes[10];
  const uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(v, bytes);
  out->append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(end - bytes));
}

// A difference of two uint64s (modulo 2^64), zigzag-mapped so that small ones of either sign
// take one varint byte.
uint64_t ZigZag(uint64_t difference) {
  return google::protobuf::internal::WireFormatLite::ZigZagEncode64(
      static_cast<int64_t>(difference));
}

uint64_t UnZigZag(uint64_t v) {
  return static_cast<uint64_t>(google::protobuf::internal::WireFormatLite::ZigZagDecode64(v));
}

bool ForEachLegacyRunEntry(std::string_view run,
                           const std::function<bool(std::string_view, const DedupValue&)>& each) {
  while (!run.empty()) {
    const size_t length = static_cast<uint8_t>(run[0]);
    if (length == 0 || run.size() < 1 + length + 16) return false;
    const std::string_view key = run.substr(1, length);
    const DedupValue value{ReadLittleEndian64(run.substr(1 + length)),
                           static_cast<int64_t>(ReadLittleEndian64(run.substr(9 + length)))};
    run.remove_prefix(1 + length + 16);
    if (!each(key, value)) return true;
  }
  return true;
}

}  // namespace

void DedupRunBuilder::Append(std::string_view key, const DedupValue& value) {
  if (value_.empty()) value_.push_back(kDedupRunCompact);
  const size_t shared = static_cast<size_t>(
      std::mismatch(key.begin(), key.end(), last_key_.begin(), last_key_.end()).first -
      key.begin());
  AppendVarint(&value_, shared);
  AppendVarint(&value_, key.size() - shared);
  value_.append(key.substr(shared));
  AppendVarint(&value_, ZigZag(value.message_id - last_.message_id));
  AppendVarint(&value_, ZigZag(static_cast<uint64_t>(value.expires_at_ms) -
                               static_cast<uint64_t>(last_.expires_at_ms)));
  last_key_.assign(key);
  last_ = value;
}

bool ForEachDedupRunEntry(std::string_view run,
                          const std::function<bool(std::string_view, const DedupValue&)>& each) {
  if (run.empty()) return false;
  if (run[0] != kDedupRunCompact) return ForEachLegacyRunEntry(run, each);
  run.remove_prefix(1);
  if (run.empty()) return false;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(run.data()),
                                            static_cast<int>(run.size()));
  std::string key;
  uint64_t message_id = 0, expires_at = 0;
  while (static_cast<size_t>(in.CurrentPosition()) < run.size()) {
    uint64_t shared = 0, rest = 0, id_delta = 0, expiry_delta = 0;
    if (!in.ReadVarint64(&shared) || !in.ReadVarint64(&rest) || shared > key.size() ||
        rest > kMaxDedupKeyBytes || shared + rest == 0 || shared + rest > kMaxDedupKeyBytes) {
      return false;
    }
    key.resize(shared + rest);
    if (!in.ReadRaw(key.data() + shared, static_cast<int>(rest))) return false;
    if (!in.ReadVarint64(&id_delta) || !in.ReadVarint64(&expiry_delta)) return false;
    message_id += UnZigZag(id_delta);
    expires_at += UnZigZag(expiry_delta);
    if (!each(key, DedupValue{message_id, static_cast<int64_t>(expires_at)})) return true;
  }
  return true;
}

std::optional<EntryValue> DecodeEntryValue(std::string_view value) {
  if (value.size() < 13) return std::nullopt;
  return EntryValue{ReadLittleEndian64(value), ReadLittleEndian32(value.substr(8)),
                    static_cast<uint8_t>(value[12])};
}

namespace {
uint64_t OrderedTime(int64_t ms) { return static_cast<uint64_t>(ms) ^ (uint64_t{1} << 63); }
int64_t TimeFromOrdered(uint64_t v) { return static_cast<int64_t>(v ^ (uint64_t{1} << 63)); }
}  // namespace

std::string DelayedPrefix(uint64_t queue_id, char kind) {
  std::string key;
  key.reserve(25);
  AppendBigEndian64(&key, queue_id);
  key.push_back(kind);
  return key;
}

std::string DelayedKey(uint64_t queue_id, int64_t due_ms, uint64_t message_id) {
  std::string key = DelayedPrefix(queue_id, kDelayedTimeline);
  AppendBigEndian64(&key, OrderedTime(due_ms));
  AppendBigEndian64(&key, message_id);
  return key;
}

std::optional<DelayedKeyParts> ParseDelayedKey(std::string_view key) {
  if (key.size() != 25 || key[8] != kDelayedTimeline) return std::nullopt;
  return DelayedKeyParts{ReadBigEndian64(key), TimeFromOrdered(ReadBigEndian64(key.substr(9))),
                         ReadBigEndian64(key.substr(17))};
}

std::string DelayedIndexKey(uint64_t queue_id, uint64_t message_id) {
  std::string key = DelayedPrefix(queue_id, kDelayedIndex);
  AppendBigEndian64(&key, message_id);
  return key;
}

std::string EncodeDelayedIndexValue(int64_t due_ms, uint8_t flags) {
  std::string out;
  out.reserve(9);
  AppendLittleEndian64(&out, static_cast<uint64_t>(due_ms));
  out.push_back(static_cast<char>(flags));
  return out;
}

}  // namespace wharf::store
