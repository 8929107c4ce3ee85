#include "store/store_check.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/table_properties.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "store/keys.h"
#include "store/records.h"

namespace wharf::store {
namespace {

namespace fs = std::filesystem;

// Keys as fixed-width big-endian numbers, for seeking past a damaged block.
using Wide = std::string;

// Adds 2^bit to `n`; false on overflow.
bool AddPowerOfTwo(Wide* n, size_t bit) {
  size_t index = n->size() - 1 - bit / 8;
  unsigned carry = 1u << (bit % 8);
  for (size_t i = index + 1; i-- > 0 && carry;) {
    unsigned sum = static_cast<uint8_t>((*n)[i]) + carry;
    (*n)[i] = static_cast<char>(sum & 0xff);
    carry = sum >> 8;
  }
  return carry == 0;
}

// (a + b) / 2, both of one width.
Wide Midpoint(const Wide& a, const Wide& b) {
  Wide out(a.size(), '\0');
  unsigned carry = 0;
  std::vector<unsigned> sum(a.size());
  for (size_t i = a.size(); i-- > 0;) {
    unsigned s = static_cast<uint8_t>(a[i]) + static_cast<uint8_t>(b[i]) + carry;
    sum[i] = s & 0xff;
    carry = s >> 8;
  }
  unsigned high = carry;  // the bit above the top byte
  for (size_t i = 0; i < a.size(); ++i) {
    out[i] = static_cast<char>(((high << 7) | (sum[i] >> 1)) & 0xff);
    high = sum[i] & 1;
  }
  return out;
}

// Whether a seek to `target` reads without error (it lands on a key, or past the last).
bool SeekReads(const IteratorFactory& make, const Wide& target) {
  auto it = make();
  it->Seek(target);
  return it->status().ok();
}

// The smallest key past `last` (nullptr: past the start) whose seek does not read the damaged
// block: searched as numbers of a fixed width, first in doubling steps, then by halving the gap.
// False when nothing past the damage reads.
bool FindResume(const IteratorFactory& make, const std::string* last, Wide* resume) {
  const size_t width = std::max<size_t>(32, (last ? last->size() : 0) + 8);
  Wide base = last ? *last : std::string();
  base.resize(width, '\0');
  Wide failing = base;
  Wide reading;
  bool found = false;
  for (size_t bit = 0; bit < width * 8; ++bit) {
    Wide probe = base;
    if (!AddPowerOfTwo(&probe, bit)) break;
    if (SeekReads(make, probe)) {
      reading = probe;
      found = true;
      break;
    }
    failing = probe;
  }
  if (!found) return false;
  while (true) {
    Wide mid = Midpoint(failing, reading);
    if (mid == failing) break;  // adjacent
    (SeekReads(make, mid) ? reading : failing) = mid;
  }
  *resume = reading;
  return true;
}

std::string Printable(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

std::string Hex(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    char hex[4];
    std::snprintf(hex, sizeof hex, "%02x", c);
    out += hex;
  }
  return out;
}

std::string ModifiedAt(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return "unknown";
  char text[32];
  std::tm tm{};
  gmtime_r(&st.st_mtime, &tm);
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// The queues' names by id, from the topology (what of it reads).
std::unordered_map<uint64_t, std::string> QueueNames(const OpenedDb& db) {
  std::unordered_map<uint64_t, std::string> names;
  auto meta = db.by_name.find(rocksdb::kDefaultColumnFamilyName);
  if (meta == db.by_name.end()) return names;
  std::unique_ptr<rocksdb::Iterator> it(db.db->NewIterator(rocksdb::ReadOptions(), meta->second));
  for (char prefix : {kQueuePrefix, kVhostQueuePrefix}) {
    const std::string start(1, prefix);
    for (it->Seek(start); it->Valid() && it->key().starts_with(start); it->Next()) {
      pb::QueueRecord record;
      if (record.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
        names[record.queue_id()] = record.vhost().empty()
                                       ? record.name()
                                       : record.name() + "' in vhost '" + record.vhost();
      }
    }
  }
  return names;
}

// What a table holds, for a report: its column family and its damaged spans.
Damage CheckTable(const fs::path& file) {
  Damage damage{file.filename().string(), "", ""};
  rocksdb::Options options;
  rocksdb::SstFileReader reader(options);
  rocksdb::Status s = reader.Open(file.string());
  if (!s.ok()) {
    damage.kind =
        "cannot be opened (truncated, or its footer or index is damaged): " + s.ToString();
    damage.affected = "every key of the table (last written " + ModifiedAt(file) + ")";
    return damage;
  }
  s = reader.VerifyChecksum();
  if (s.ok()) return damage;
  damage.kind = s.ToString();
  auto props = reader.GetTableProperties();
  const std::string family = props ? props->column_family_name : "";
  std::vector<DamagedSpan> spans;
  IteratorFactory make = [&reader] {
    return std::unique_ptr<rocksdb::Iterator>(reader.NewIterator(rocksdb::ReadOptions()));
  };
  uint64_t readable = WalkReadable(
      make, [](const rocksdb::Slice&, const rocksdb::Slice&) {}, &spans);
  std::string affected = "column family '" + family + "': ";
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i > 0) affected += "; ";
    affected +=
        "keys after " +
        (spans[i].after.empty() ? std::string("the start") : DescribeKey(family, spans[i].after)) +
        " up to " +
        (spans[i].resume.empty() ? std::string("the end") : DescribeKey(family, spans[i].resume));
  }
  if (props && props->num_entries > readable) {
    affected += " (about " + std::to_string(props->num_entries - readable) + " of its " +
                std::to_string(props->num_entries) + " keys)";
  }
  damage.affected = affected;
  return damage;
}

}  // namespace

void CapturingLogger::Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) {
  if (level < GetInfoLogLevel()) return;
  char buffer[2048];
  int n = std::vsnprintf(buffer, sizeof buffer, format, ap);
  if (n < 0) return;
  std::lock_guard lock(mu_);
  lines_.emplace_back(buffer, std::min<size_t>(static_cast<size_t>(n), sizeof buffer - 1));
}

std::vector<std::string> CapturingLogger::lines() {
  std::lock_guard lock(mu_);
  return lines_;
}

std::vector<std::string> DroppedLogRecords(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& line : lines) {
    if (line.find(".log: dropping ") != std::string::npos) out.push_back(line);
  }
  return out;
}

uint64_t WalkReadable(
    const IteratorFactory& make,
    const std::function<void(const rocksdb::Slice& key, const rocksdb::Slice& value)>& visit,
    std::vector<DamagedSpan>* damaged) {
  uint64_t visited = 0;
  std::string last;
  bool have_last = false;
  auto it = make();
  it->SeekToFirst();
  while (true) {
    for (; it->Valid(); it->Next()) {
      visit(it->key(), it->value());
      last.assign(it->key().data(), it->key().size());
      have_last = true;
      ++visited;
    }
    if (it->status().ok()) return visited;
    DamagedSpan span{have_last ? last : std::string(), std::string(), it->status().ToString()};
    Wide resume;
    if (!FindResume(make, have_last ? &last : nullptr, &resume)) {
      damaged->push_back(std::move(span));  // nothing past the damage reads
      return visited;
    }
    it = make();
    it->Seek(resume);
    if (it->Valid()) span.resume.assign(it->key().data(), it->key().size());
    damaged->push_back(std::move(span));
  }
}

std::string DescribeKey(std::string_view family, std::string_view key) {
  if (IsEntriesFamily(family)) {
    if (auto parts = ParseEntryKey(key)) {
      return "queue id " + std::to_string(parts->queue_id) + " seq " + std::to_string(parts->seq);
    }
  } else if (family == kColumnMessages && key.size() == 8) {
    return "message " + std::to_string(ReadBigEndian64(key));
  } else if (family == kColumnDelayed && key.size() >= 9) {
    std::string queue = "queue id " + std::to_string(ReadBigEndian64(key));
    if (auto parts = ParseDelayedKey(key)) {
      return queue + " delayed message " + std::to_string(parts->message_id);
    }
    if (key[8] == kDelayedIndex && key.size() >= 17) {
      return queue + " delayed message " + std::to_string(ReadBigEndian64(key.substr(9)));
    }
    return queue + " delayed messages";
  } else if (family == kColumnDedup) {
    if (auto parts = ParseDedupKey(key)) {
      return "queue id " + std::to_string(parts->queue_id) +
             (parts->run ? " deduplication ids up to '" : " deduplication id '") +
             Printable(parts->key) + "'";
    }
    if (key.size() > 8 && key[0] == 0) {  // formats 7 to 11, before the upgrade moved it
      return "queue id " + std::to_string(ReadBigEndian64(key)) + " deduplication id '" +
             Printable(key.substr(8)) + "' (formats 7 to 11)";
    }
  } else if (family == rocksdb::kDefaultColumnFamilyName && !key.empty()) {
    switch (key[0]) {
      case kExchangePrefix:
        return "exchange '" + Printable(key.substr(1)) + "'";
      case kQueuePrefix:
        return "queue '" + Printable(key.substr(1)) + "'";
      case kVhostExchangePrefix:
      case kVhostQueuePrefix: {
        const std::string_view rest = key.substr(1);
        const size_t nul = std::min(rest.find('\0'), rest.size());
        return std::string(key[0] == kVhostQueuePrefix ? "queue '" : "exchange '") +
               Printable(rest.substr(std::min(nul + 1, rest.size()))) + "' in vhost '" +
               Printable(rest.substr(0, nul)) + "'";
      }
      case kVhostPrefix:
        return "vhost '" + Printable(key.substr(1)) + "'";
      case kPolicyPrefix: {
        const std::string_view rest = key.substr(1);
        const size_t nul = std::min(rest.find('\0'), rest.size());
        return "policy '" + Printable(rest.substr(std::min(nul + 1, rest.size()))) +
               "' in vhost '" + Printable(rest.substr(0, nul)) + "'";
      }
      case kUserPrefix:
        return "user '" + Printable(key.substr(1)) + "'";
      case kBindingPrefix:
        return "a binding";
      default:
        if (key.size() >= 9) {
          return "record '" + std::string(1, key[0]) + "' of id " +
                 std::to_string(ReadBigEndian64(key.substr(1)));
        }
        return "record '" + Printable(key) + "'";
    }
  }
  return "key " + Hex(key);
}

OpenedDb::~OpenedDb() {
  if (!db) return;
  for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
  db->Close();
}

rocksdb::Status OpenReadOnly(const std::string& path, const rocksdb::DBOptions& options,
                             OpenedDb* out) {
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(options, path, &names);
  if (!s.ok()) return s;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names) families.push_back({name, rocksdb::ColumnFamilyOptions()});
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::OpenForReadOnly(options, path, families, &out->handles, &db);
  if (!s.ok()) return s;
  out->db.reset(db);
  for (size_t i = 0; i < names.size(); ++i) out->by_name[names[i]] = out->handles[i];
  return s;
}

bool HasDatabaseFiles(const std::string& path) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "CURRENT" || name == "IDENTITY" || name.starts_with("MANIFEST-") ||
        name.ends_with(".sst") || name.ends_with(".log") || name.ends_with(".blob")) {
      return true;
    }
  }
  return false;
}

std::vector<Damage> Diagnose(const std::string& path, std::string_view open_error) {
  std::vector<Damage> found;
  std::unordered_map<uint64_t, std::string> names;  // queue id -> name, when readable
  const fs::path dir(path);
  std::error_code ec;
  bool manifest_known = false;
  std::string manifest;
  if (!fs::exists(dir / "CURRENT", ec)) {
    if (HasDatabaseFiles(path)) {
      found.push_back({"CURRENT", "missing",
                       "the name of the current MANIFEST: no file of the store can be used "
                       "without it (every message, the topology and the users)"});
    }
  } else {
    std::ifstream in(dir / "CURRENT", std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string name = text.ends_with('\n') ? text.substr(0, text.size() - 1) : text;
    bool well_formed = name.starts_with("MANIFEST-") && name.size() > 9 &&
                       std::all_of(name.begin() + 9, name.end(), ::isdigit);
    if (!well_formed) {
      found.push_back({"CURRENT", "garbled (\"" + Printable(text.substr(0, 64)) + "\")",
                       "the name of the current MANIFEST: no file of the store can be used "
                       "without it (every message, the topology and the users)"});
    } else if (!fs::exists(dir / name, ec)) {
      found.push_back({"CURRENT", "names " + name + ", which is missing",
                       "the list of the store's files: every message, the topology and the "
                       "users"});
    } else {
      manifest_known = true;
      manifest = name;
    }
  }
  std::vector<fs::path> tables;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".sst") tables.push_back(entry.path());
  }
  std::sort(tables.begin(), tables.end());
  for (const fs::path& table : tables) {
    Damage damage = CheckTable(table);
    if (!damage.kind.empty()) found.push_back(std::move(damage));
  }
  if (manifest_known) {
    // A read-only replay of the logs, as a start would do it, with the log lines kept: a
    // damaged record is reported there with its file.
    auto logger = std::make_shared<CapturingLogger>();
    rocksdb::DBOptions options;
    options.info_log = logger;
    options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
    options.paranoid_checks = true;
    rocksdb::Status s;
    {
      OpenedDb db;
      s = OpenReadOnly(path, options, &db);
      if (s.ok()) names = QueueNames(db);
    }
    bool explained = false;
    for (const std::string& line : logger->lines()) {
      size_t dropping = line.find(": dropping ");
      if (dropping == std::string::npos) continue;
      size_t start = line.rfind('/', dropping);
      start = start == std::string::npos ? line.rfind(' ', dropping) : start;
      std::string file = line.substr(start == std::string::npos ? 0 : start + 1,
                                     dropping - (start == std::string::npos ? 0 : start + 1));
      if (!file.ends_with(".log")) continue;
      std::string what = line.substr(dropping + 2);
      auto same =
          std::find_if(found.begin(), found.end(), [&](const Damage& d) { return d.file == file; });
      if (same != found.end()) {
        same->kind += ", " + what;  // one entry per file
        continue;
      }
      found.push_back({file, "damaged records: " + what,
                       "writes logged to it (last written " + ModifiedAt(dir / file) +
                           ") from the damaged record on: its 32 KiB block is lost, and a "
                           "start would drop every write after it"});
      explained = true;
    }
    if (!s.ok() && !explained && found.empty()) {
      found.push_back({manifest, s.ToString(),
                       "the list of the store's files: every message, the topology and the "
                       "users"});
    }
  }
  if (found.empty() && !open_error.empty()) {
    found.push_back({"(the store)", std::string(open_error), "unknown"});
  }
  // "queue id 3 seq 9" -> "queue 'orders' (id 3) seq 9", where the topology could be read.
  for (Damage& damage : found) {
    for (const auto& [id, name] : names) {
      const std::string from = "queue id " + std::to_string(id) + " ";
      const std::string to = "queue '" + Printable(name) + "' (id " + std::to_string(id) + ") ";
      for (size_t at = damage.affected.find(from); at != std::string::npos;
           at = damage.affected.find(from, at + to.size())) {
        damage.affected.replace(at, from.size(), to);
      }
    }
  }
  return found;
}

std::string DescribeDamage(const std::vector<Damage>& damage) {
  std::string out;
  for (const Damage& d : damage) {
    if (!out.empty()) out += "; ";
    out += d.file + ": " + d.kind;
    if (!d.affected.empty()) out += " (holds: " + d.affected + ")";
  }
  return out;
}

}  // namespace wharf::store
