// store/rocksdb_status.h
//
// The one place where rocksdb::Status becomes wharf::Status.
//
// Thread safety: pure function.
#pragma once

#include <rocksdb/status.h>

#include <string_view>

#include "wharf/status.h"

namespace wharf::store {

// OK stays OK; anything else becomes kStoreUnavailable ("<context>: <rocksdb message>"), or
// kStoreFull when the disk is full.
Status FromRocksDb(const rocksdb::Status& status, std::string_view context);

}  // namespace wharf::store
