// store/keys.h
//
// The RocksDB layout of storage format v11: column families, key grammar and the entry value.
// docs/storage.md explains the choices; this is the reference an implementation follows.
//
//   column family "default"   (meta and topology; small)
//     "F"                                 -> decimal storage format version, "9"
//     "N"                                 -> fixed64le next queue id
//     "M"                                 -> fixed64le highest message id written
//     "x" exchange-name                   -> ExchangeRecord       (durable exchanges of "/")
//     "q" queue-name                      -> QueueRecord          (durable, non-exclusive queues
//                                                                  of "/")
//     "X" vhost 0x00 exchange-name        -> ExchangeRecord       (of another vhost; its
//     "Q" vhost 0x00 queue-name           -> QueueRecord           record names the vhost)
//     "v" vhost-name                      -> VhostRecord          (vhosts but "/"; "/" once it
//                                                                  has limits)
//     "b" BindingRecord-bytes             -> ""                   (both ends durable; the
//                                                                  record names a vhost but "/")
//     "u" user-name                       -> UserRecord           (users made with PutUser)
//     "y" vhost 0x00 policy-name          -> PolicyRecord         (policies, every vhost's)
//     "d" fixed64be(queue-id) [byte(lane)] -> fixed64le seq: every message of the lane up to it
//                                            was delivered (no lane byte: lane 0)
//     "r" fixed64be(message-id)           -> fixed32le references (bodies in 2+ queues only)
//     "t" fixed64be(queue-id)             -> RedriveRecord        (the queue's last redrive)
//     "p" fixed64be(queue-id) fixed64be(from-seq) -> purge-value  (a purged range of entries
//                                            still being removed; gone once it is removed)
//   purge-value := fixed64le(cursor-seq) fixed64le(to-seq) fixed64le(messages) fixed64le(removed)
//     Entries of the queue in [cursor-seq, to-seq) are purged: never loaded or counted, and
//     removed in the background (docs/storage.md, "Purge").
//   column family "messages"  (messages in two or more queues: written once, deleted once)
//     fixed64be(message-id)               -> MessageRecord
//   column families "entries", "entries.1" .. "entries.15"
//                             (one entry per message per queue: the queues themselves)
//     fixed64be(queue-id) fixed64be(seq)  -> entry-value
//     seq's top byte is the entry's lane (kLaneShift: a priority of a queue with
//     x-max-priority, 0 the highest; 0 for every other queue). An entry lives in the family of
//     its lane, LaneFamily(lane) = lane % 16: "entries" for lanes 0, 16, 32..., "entries.N"
//     for lane N and N + 16... So a queue's lanes, which grow side by side, are each one
//     growing key range in a family of its own, whose flushed tables RocksDB moves down
//     without rewriting them (docs/storage.md, "Priority lanes"). "entries.N" is made when
//     the first entry of one of its lanes is written: a store without priority queues has
//     only "entries" (each family costs every open a larger OPTIONS file to write and parse).
//   column family "delayed"   (messages routed to a queue and not yet due: the timelines)
//     fixed64be(queue-id) "T" due(due-ms) fixed64be(message-id) -> entry-value
//     fixed64be(queue-id) "I" fixed64be(message-id)             -> fixed64le(due-ms) byte(flags)
//     due(ms) := fixed64be(ms XOR 2^63), so signed times sort in time order. "T" is the
//     timeline in due order (loaded from its start, listed in pages); "I" finds a message's
//     due time from its id (cancel). Both are written and removed together.
//   column family "dedup"     (publish deduplication windows: the ids each queue accepted)
//     'k' fixed64be(queue-id) byte(n) dedup-key -> fixed64le(message-id) fixed64le(expires-at-ms)
//     dedup-key: the publisher's deduplication id, or a hash of the body (n: 1 to 128 bytes).
//     The length before the key makes ids that rise as numbers ("9", "10") rise in byte
//     order too. Formats 7 to 11 wrote fixed64be(queue-id) dedup-key, whose first byte is 0
//     (queue ids are below 2^56); Recover moves such records (CopyLegacyDedupRecords).
//     'r' fixed64be(queue-id) byte(n) dedup-key -> dedup-run (format 13)
//     A run: the records of new keys of one write group with no record of their queue between
//     them (above every record, or in a span the writer knows to be empty: a stream), in one
//     value, under the run's highest key.
//     dedup-run := 0x00 (varint(shared) varint(n) suffix zigzag(message-id delta)
//                  zigzag(expires-at-ms delta))+                              (format 14)
//                | (byte(n) dedup-key fixed64le(message-id) fixed64le(expires-at-ms))+
//                                                                            (format 13)
//     in the byte order of their 'k' keys. Format 14 writes each key as the length of the
//     prefix it shares with the key before and the rest, and its message id and expiry as
//     differences from the record before (from 0 for the first): about 6 bytes a record of
//     keys that rise, against 17 and the key. A format-13 value starts with a key's length,
//     never 0, so both read. Runs of a queue never overlap, one another nor any record
//     written before them (DedupWriter::Prefetch).
//     A record whose expiry (Unix ms) has passed counts as absent; compaction drops it, and a
//     run once every record in it has expired (store/dedup_expiry.h).
//   entry-value := fixed64le(message-id) fixed32le(receive-count) byte(flags)
//                  [fixed32le(n) AttemptsRecord(n bytes)] [MessageRecord]
//     flags: kEntryInline    the MessageRecord follows in the value (a message in one queue:
//                            one write to publish it, one to settle it)
//            kEntryShared    the message is in "messages", referenced from several queues: "r"
//            kEntryAttempts  an AttemptsRecord follows the header (first receive time, failures
//                            and last error; written from the second delivery on)
//            kEntryTransient the message is not persistent (written only because the queue
//                            pages to disk); dropped when loaded after a restart
//     The receive count is rewritten from the second delivery on; the first is recorded for
//     the whole queue by "d".
//
// Big-endian ids and sequence numbers make RocksDB's bytewise order the numeric order, so a
// queue is one contiguous key range in sequence order.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "store/message_store.h"

namespace wharf::store {

// The storage format this build writes and reads. Changing the layout or the meaning of any
// record: (1) bump this, (2) teach RocksDbStore::Recover to upgrade the previous version in
// place, or to refuse it with a message saying how to migrate, (3) add a test that opens a
// data directory written by the previous version, (4) describe the change in docs/storage.md.
// A data directory with a newer version than this is refused: an old wharfd must not guess.
//
// History: 1 - first release of the layout. 2 - adds inline entries (kEntryInline) and the
// "d" delivery marks; a format-1 directory is upgraded by rewriting "F" only. 3 - adds the
// "delayed" column family and kEntryAttempts; 1 and 2 are upgraded by rewriting "F" (the
// family starts empty, no older entry has the flag). 4 - adds redrive records ("t"); 1-3 are
// upgraded by rewriting "F". 5 - adds purge records ("p"); 1-4 are upgraded by rewriting "F"
// (a format-4 build would not know them and would bring purged messages back). 6 - adds
// MessageRecord.amqp_properties and ExchangeRecord.internal and .arguments (AMQP 0-9-1); 1-5
// are upgraded by rewriting "F" (no older record has them). A format-5 build would drop them:
// deliver an AMQP message without its properties, and let clients publish to an internal
// exchange. 7 - adds the "dedup" column family (publish deduplication windows); 1-6 are
// upgraded by rewriting "F" (the family starts empty). A format-6 build cannot open it (RocksDB
// refuses a store with a column family it does not name). 8 - adds lanes (priority queues):
// the top byte of an entry's sequence number and "d" keys with a lane byte; 1-7 are upgraded by
// rewriting "F" (no older entry has a lane but 0). A format-7 build would misread them: take
// a lane's delivery mark for none and count a queue's lanes as one span. 9 - adds virtual
// hosts: "v" records, "X" and "Q" keys, and a vhost in exchange, queue and binding records
// (empty for "/", so every older record is in "/" as it is); 1-8 are upgraded by rewriting
// "F". A format-8 build would merge every vhost's bindings into "/" and drop their queues.
// 10 - adds policies ("y" records); 1-9 are upgraded by rewriting "F". A format-9 build would
// skip them: run every queue without the limits and dead-letter targets its operator set.
// 11 - puts each lane's entries in the family LaneFamily(lane) ("entries.1" to "entries.15");
// 8-10 are upgraded by moving every entry of a lane whose family is not "entries" into its
// family (one atomic write per batch, so an interrupted upgrade resumes), then rewriting "F";
// 1-7 have no such entry. A format-10 build would not find those entries: it would recover a
// priority queue without its lower lanes. 12 - dedup keys with the key's length before it
// ('k', queue id, length, key); the records of formats 7-11 are copied to their new keys (the
// expired ones left out), then one synced write range-deletes the old keys and rewrites "F",
// so an interrupted upgrade starts again. A format-11 build would not find the moved records:
// it would take a retried publish for a new one. 13 - dedup runs ('r' keys); 1-12 are upgraded
// as 12 is (none has a run). A format-12 build would not find the records in runs: it would
// take a retried publish for a new one. 14 - dedup runs written compactly (shared key
// prefixes, differences of ids and expiries; a value starting with 0x00); format-13 runs are
// read as they are, and 1-13 are upgraded as 13 is. A format-13 build would take a compact run
// for a malformed one: it would look every key in its span up again and take a retried
// publish for a new one.
inline constexpr int kFormatVersion = 14;

inline constexpr char kColumnMessages[] = "messages";
inline constexpr char kColumnEntries[] = "entries";
inline constexpr char kColumnDelayed[] = "delayed";
inline constexpr char kColumnDedup[] = "dedup";
// The entries' families: kLaneFamilies of them, lane L's entries in kEntriesFamilies[L % 16].
inline constexpr int kLaneFamilies = 16;
inline constexpr const char* kEntriesFamilies[kLaneFamilies] = {
    kColumnEntries, "entries.1",  "entries.2",  "entries.3", "entries.4",  "entries.5",
    "entries.6",    "entries.7",  "entries.8",  "entries.9", "entries.10", "entries.11",
    "entries.12",   "entries.13", "entries.14", "entries.15"};
inline constexpr int LaneFamily(uint8_t lane) { return lane % kLaneFamilies; }
// Whether `family` is one of kEntriesFamilies.
bool IsEntriesFamily(std::string_view family);
// Every column family this format may have, "default" first (a store has the first five and
// the lane families made so far; a raw opening names those that exist, a repair makes all).
inline constexpr const char* kColumnFamilies[] = {
    "default",    kColumnMessages, kColumnEntries, kColumnDelayed, kColumnDedup,
    "entries.1",  "entries.2",     "entries.3",    "entries.4",    "entries.5",
    "entries.6",  "entries.7",     "entries.8",    "entries.9",    "entries.10",
    "entries.11", "entries.12",    "entries.13",   "entries.14",   "entries.15"};
inline constexpr char kDelayedTimeline = 'T';
inline constexpr char kDelayedIndex = 'I';

inline constexpr std::string_view kFormatKey = "F";
inline constexpr std::string_view kNextQueueIdKey = "N";
inline constexpr std::string_view kMaxMessageIdKey = "M";
inline constexpr char kExchangePrefix = 'x';
inline constexpr char kQueuePrefix = 'q';
inline constexpr char kVhostExchangePrefix = 'X';  // an exchange of a vhost other than "/"
inline constexpr char kVhostQueuePrefix = 'Q';
inline constexpr char kVhostPrefix = 'v';
inline constexpr char kBindingPrefix = 'b';
inline constexpr char kRefsPrefix = 'r';
inline constexpr char kUserPrefix = 'u';
inline constexpr char kPolicyPrefix = 'y';
inline constexpr char kDeliveredPrefix = 'd';
inline constexpr char kRedrivePrefix = 't';
inline constexpr char kPurgePrefix = 'p';

struct EntryValue {
  uint64_t message_id = 0;
  uint32_t receive_count = 0;
  uint8_t flags = 0;
};

void AppendBigEndian64(std::string* out, uint64_t v);
uint64_t ReadBigEndian64(std::string_view in);  // REQUIRES: in.size() >= 8
void AppendLittleEndian64(std::string* out, uint64_t v);
uint64_t ReadLittleEndian64(std::string_view in);
void AppendLittleEndian32(std::string* out, uint32_t v);
uint32_t ReadLittleEndian32(std::string_view in);

std::string MessageKey(uint64_t message_id);
std::string RefsKey(uint64_t message_id);
std::string EntryKey(uint64_t queue_id, uint64_t seq);
struct EntryKeyParts {
  uint64_t queue_id = 0;
  uint64_t seq = 0;
};
std::optional<EntryKeyParts> ParseEntryKey(std::string_view key);

// The header, then `attempts` (a serialized AttemptsRecord) when not empty, with
// kEntryAttempts set.
std::string EncodeEntryValue(const EntryValue& value, std::string_view attempts = {});
// The 13-byte header (flags as written, kEntryAttempts included).
std::optional<EntryValue> DecodeEntryValue(std::string_view value);
// The AttemptsRecord bytes, empty when there are none (or the value is malformed).
std::string_view EntryAttemptsBytes(std::string_view value);
// An inline entry's MessageRecord: what follows the header and the attempts.
std::string_view EntryRecordBytes(std::string_view value);
std::string DeliveredKey(uint64_t queue_id, uint8_t lane = 0);
std::string RedriveKey(uint64_t queue_id);
// A purge's record: 'p', fixed64be(queue-id), fixed64be(first purged seq). Its value:
// EncodePurgeValue. PurgeKey(q, 0) to PurgeKey(q + 1, 0) spans every purge of queue q.
std::string PurgeKey(uint64_t queue_id, uint64_t from_seq);
struct PurgeValue {
  uint64_t cursor_seq = 0;  // entries below it (and from from_seq) are removed already
  uint64_t to_seq = 0;      // exclusive end of the purged range
  uint64_t messages = 0;    // messages the range held when purged (an estimate when paged)
  uint64_t removed = 0;     // entries removed so far
};
std::string EncodePurgeValue(const PurgeValue& value);
std::optional<PurgeValue> DecodePurgeValue(std::string_view value);

// A deduplication record: kDedupKeyTag, fixed64be(queue-id), the key's length (one byte)
// and the key (1 to kMaxDedupKeyBytes bytes). DedupKey(q, "") to DedupKey(q + 1, "") spans
// every record of queue q. Every key a format before 12 wrote sorts before kDedupKeyTag.
inline constexpr char kDedupKeyTag = 'k';
std::string DedupKey(uint64_t queue_id, std::string_view key);
// A run of deduplication records, under the highest key in it: DedupKey with kDedupRunTag.
// DedupRunKey(q, "") to DedupRunKey(q + 1, "") spans every run of queue q.
inline constexpr char kDedupRunTag = 'r';
std::string DedupRunKey(uint64_t queue_id, std::string_view key);
// The DedupRunKey of a DedupKey, and back: the same bytes after the tag.
std::string DedupRunKeyOf(std::string_view dedup_key);
std::string DedupKeyOfRun(std::string_view run_key);
struct DedupKeyParts {
  uint64_t queue_id = 0;
  std::string_view key;  // a view into the key parsed
  bool run = false;      // a DedupRunKey (the highest key of a run)
};
// The parts of a DedupKey or DedupRunKey, or nullopt when `key` is neither (a length that does
// not match).
std::optional<DedupKeyParts> ParseDedupKey(std::string_view key);
struct DedupValue {
  uint64_t message_id = 0;    // the message accepted with the key
  int64_t expires_at_ms = 0;  // Unix ms; the key is forgotten from then on
  bool operator==(const DedupValue&) const = default;
};
std::string EncodeDedupValue(const DedupValue& value);
// The same into *out, which it replaces (the writer reuses one string).
void EncodeDedupValue(const DedupValue& value, std::string* out);
std::optional<DedupValue> DecodeDedupValue(std::string_view value);
// A run holds at least this many keys; fewer are written as records of their own. A run can
// make the writer look a key up in it (a seek: DedupWriter::FindInRun), so keys that
// come in no order, of which few are above the highest, must not make runs.
inline constexpr size_t kMinDedupRunKeys = 8;
// A run's value as it is built (format 14), one record after another in key order.
class DedupRunBuilder {
 public:
  // Appends a key (1 to kMaxDedupKeyBytes bytes) and its record.
  void Append(std::string_view key, const DedupValue& value);
  const std::string& value() const { return value_; }

 private:
  std::string value_;
  std::string last_key_;  // the key appended last ("" before the first)
  DedupValue last_;       // its record ({0, 0} before the first)
};
// Calls `each(key, record)` for every entry of a run's value (format 14 or 13) in order, until
// it returns false. False when the value is malformed (the entries before were passed).
bool ForEachDedupRunEntry(std::string_view run,
                          const std::function<bool(std::string_view, const DedupValue&)>& each);

std::string DelayedKey(uint64_t queue_id, int64_t due_ms, uint64_t message_id);
struct DelayedKeyParts {
  uint64_t queue_id = 0;
  int64_t due_ms = 0;
  uint64_t message_id = 0;
};
std::optional<DelayedKeyParts> ParseDelayedKey(std::string_view key);
std::string DelayedIndexKey(uint64_t queue_id, uint64_t message_id);
std::string EncodeDelayedIndexValue(int64_t due_ms, uint8_t flags);
// fixed64be(queue-id) followed by `kind` ('T' or 'I'): the start of that part of a queue's
// range; DelayedPrefix(q, kind + 1) is its end.
std::string DelayedPrefix(uint64_t queue_id, char kind);

}  // namespace wharf::store
