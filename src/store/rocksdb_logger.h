// store/rocksdb_logger.h
//
// RocksDB's own log (its "LOG" file) goes through spdlog, into wharfd's log, instead of a file
// in the store's directory. Besides one log for operators, this keeps RocksDB from writing its
// log on a full disk: Debian's build (assertions on) aborted when it logged again after a
// failed write to that file (issue 15).
//
// Thread safety: Logv is called from any RocksDB thread; spdlog's loggers are thread-safe.
#pragma once

#include <rocksdb/env.h>

#include <cstdarg>
#include <memory>

namespace wharf::store {

// Messages at `level` or above are passed on, as "rocksdb: ..." (escaped like client text:
// RocksDB logs file and key names).
std::shared_ptr<rocksdb::Logger> MakeRocksDbLogger(rocksdb::InfoLogLevel level);

}  // namespace wharf::store
