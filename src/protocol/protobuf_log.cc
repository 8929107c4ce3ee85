#include "protocol/protobuf_log.h"

#include <google/protobuf/stubs/common.h>
#if GOOGLE_PROTOBUF_VERSION < 4022000
#include <google/protobuf/stubs/logging.h>
#endif
#include <spdlog/spdlog.h>

#include <string_view>
#include <utility>

#include "common/log_safe.h"

namespace wharf::protocol {

namespace {

thread_local std::string last_error;

#if GOOGLE_PROTOBUF_VERSION < 4022000
void Handler(google::protobuf::LogLevel level, const char* filename, int line,
             const std::string& message) {
  last_error = message;
  const auto spd_level =
      level >= google::protobuf::LOGLEVEL_FATAL ? spdlog::level::critical : spdlog::level::debug;
  spdlog::log(spd_level, "libprotobuf {}:{}: {}", filename, line, LogSafe(message));
}
#endif

}  // namespace

void InstallProtobufLogHandler() {
#if GOOGLE_PROTOBUF_VERSION < 4022000
  google::protobuf::SetLogHandler(&Handler);
#endif
}

std::string TakeParseError() {
  std::string error = std::exchange(last_error, {});
  static constexpr std::string_view kUtf8Start = "String field '";
  static constexpr std::string_view kUtf8End = "' contains invalid UTF-8";
  if (error.starts_with(kUtf8Start)) {
    const size_t end = error.find(kUtf8End, kUtf8Start.size());
    if (end != std::string::npos) {
      return "string field '" + error.substr(kUtf8Start.size(), end - kUtf8Start.size()) +
             "' is not valid UTF-8";
    }
  }
  while (!error.empty() && (error.back() == ' ' || error.back() == '\n')) error.pop_back();
  return error;
}

}  // namespace wharf::protocol
