// store/records.h
//
// Conversions between Wharf's value types and the storage records of
// proto/wharf/storage/v1/records.proto. The store is the only user.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/envelope.h"
#include "store/message_store.h"
#include "wharf/result.h"
#include "wharf/storage/v1/records.pb.h"
#include "wharf/types.h"

namespace wharf::store {

namespace pb = ::wharf::storage::v1;

void ToRecord(const Envelope& envelope, pb::MessageRecord* out);
Result<Envelope> FromRecord(pb::MessageRecord&& record);

// An entry's delivery history, serialized; "" when there is none to keep.
std::string AttemptsBytes(const EntryRef& entry);
// Reads it back into `out` (first_received_at_ms, failures); false when malformed.
bool ReadAttempts(std::string_view bytes, LoadedMessage* out);

pb::ExchangeRecord ToRecord(const ExchangeSpec& spec);
Result<ExchangeSpec> FromRecord(const pb::ExchangeRecord& record);

pb::QueueRecord ToRecord(const QueueSpec& spec, uint64_t queue_id);
Result<QueueSpec> FromRecord(const pb::QueueRecord& record);

pb::BindingRecord ToRecord(const BindingSpec& binding);
Result<BindingSpec> FromRecord(const pb::BindingRecord& record);

pb::RedriveRecord ToRecord(const StoredRedrive& redrive);
// queue_id is not in the record (it is in the key).
Result<StoredRedrive> FromRecord(const pb::RedriveRecord& record);

// The key of a binding: its record's bytes (deterministic: headers are sorted, no maps).
std::string BindingKey(const BindingSpec& binding);

// Format 9's virtual hosts (store/keys.h). A record's vhost is empty for "/".
bool IsDefaultVhost(std::string_view vhost);        // "" or "/"
std::string RecordVhost(const std::string& vhost);  // "" -> "/"
// "x" name for "/", "X" vhost NUL name otherwise; "q"/"Q" the same.
std::string ExchangeKey(std::string_view vhost, std::string_view name);
std::string QueueKey(std::string_view vhost, std::string_view name);
std::string VhostKey(std::string_view name);
pb::VhostRecord ToRecord(const StoredVhost& vhost);
StoredVhost FromRecord(const pb::VhostRecord& record);

std::string PolicyKey(std::string_view vhost, std::string_view name);
pb::PolicyRecord ToRecord(const PolicyInfo& policy);
Result<PolicyInfo> FromRecord(const pb::PolicyRecord& record);

}  // namespace wharf::store
