#include "store/background_errors.h"

#include <spdlog/spdlog.h>

#include "common/log_safe.h"

namespace wharf::store {

void BackgroundErrors::OnBackgroundError(rocksdb::BackgroundErrorReason reason,
                                         rocksdb::Status* error) {
  if (reason != rocksdb::BackgroundErrorReason::kCompaction || !error->IsNoSpace()) return;
  const uint64_t count = out_of_space_.fetch_add(1) + 1;
  spdlog::warn(
      "store: a compaction ran out of disk space ({} so far): its partial output is deleted, "
      "nothing stored is lost, and it is retried; removed messages give their space back once "
      "one succeeds: {}",
      count, LogSafe(error->ToString()));
  *error = rocksdb::Status::OK();
}

}  // namespace wharf::store
