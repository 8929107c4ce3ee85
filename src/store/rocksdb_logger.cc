#include "store/rocksdb_logger.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "common/log_safe.h"

namespace wharf::store {
namespace {

spdlog::level::level_enum ToSpdlog(rocksdb::InfoLogLevel level) {
  switch (level) {
    case rocksdb::DEBUG_LEVEL:
      return spdlog::level::debug;
    case rocksdb::INFO_LEVEL:
    case rocksdb::HEADER_LEVEL:
      return spdlog::level::info;
    case rocksdb::WARN_LEVEL:
      return spdlog::level::warn;
    case rocksdb::ERROR_LEVEL:
      return spdlog::level::err;
    case rocksdb::FATAL_LEVEL:
    default:
      return spdlog::level::critical;
  }
}

class SpdlogRocksDbLogger final : public rocksdb::Logger {
 public:
  explicit SpdlogRocksDbLogger(rocksdb::InfoLogLevel level) : rocksdb::Logger(level) {}

  void Logv(const char* format, va_list ap) override { Logv(rocksdb::INFO_LEVEL, format, ap); }

  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    // A checkpoint (a backup) disables file deletions twice, nested, and RocksDB warns about
    // its own nesting each time: balanced, and nothing an operator can act on.
    const bool nesting =
        level == rocksdb::WARN_LEVEL && (std::strstr(format, "but already disabled") ||
                                         std::strstr(format, "but not really enabled"));
    if (level < GetInfoLogLevel()) return;
    const spdlog::level::level_enum to = nesting ? spdlog::level::debug : ToSpdlog(level);
    if (!spdlog::should_log(to)) return;
    char buffer[1024];
    va_list copy;
    va_copy(copy, ap);
    int n = std::vsnprintf(buffer, sizeof buffer, format, copy);
    va_end(copy);
    if (n < 0) return;
    std::string text;
    if (static_cast<size_t>(n) < sizeof buffer) {
      text.assign(buffer, static_cast<size_t>(n));
    } else {
      text.resize(static_cast<size_t>(n) + 1);
      std::vsnprintf(text.data(), text.size(), format, ap);
      text.resize(static_cast<size_t>(n));
    }
    spdlog::log(to, "rocksdb: {}", LogSafe(text, kLogSafeStatusBytes));
  }
};

}  // namespace

std::shared_ptr<rocksdb::Logger> MakeRocksDbLogger(rocksdb::InfoLogLevel level) {
  return std::make_shared<SpdlogRocksDbLogger>(level);
}

}  // namespace wharf::store
