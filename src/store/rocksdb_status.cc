#include "store/rocksdb_status.h"

#include <string>

namespace wharf::store {

Status FromRocksDb(const rocksdb::Status& status, std::string_view context) {
  if (status.ok()) return Status::Ok();
  std::string message = std::string(context) + ": " + status.ToString();
  if (status.IsNoSpace() || status.subcode() == rocksdb::Status::kNoSpace) {
    return Status(StatusCode::kStoreFull, message);
  }
  return Status(StatusCode::kStoreUnavailable, message);
}

}  // namespace wharf::store
