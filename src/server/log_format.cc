#include "server/log_format.h"

#include <fmt/chrono.h>
#include <spdlog/pattern_formatter.h>
#include <sys/stat.h>

#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

namespace wharf::server {
namespace {

// The message, with any control byte (a call site that forgot LogSafe) as \xNN.
class EscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    for (char c : msg.payload) {
      auto byte = static_cast<unsigned char>(c);
      if (byte < 0x20 || byte == 0x7f) {
        fmt::format_to(std::back_inserter(dest), "\\x{:02x}", byte);
      } else {
        dest.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessage>();
  }
};

class JournalPriority final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string_view prefix = JournalPriorityPrefix(msg.level);
    dest.append(prefix.data(), prefix.data() + prefix.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JournalPriority>();
  }
};

// RFC 3339 in UTC with milliseconds: 2026-01-01T12:00:00.123Z.
std::string Rfc3339(spdlog::log_clock::time_point time) {
  auto ms = std::chrono::time_point_cast<std::chrono::milliseconds>(time);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(spdlog::log_clock::to_time_t(time)),
                     ms.time_since_epoch().count() % 1000);
}

class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(bool journal) : journal_(journal) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line = {
        {"time", Rfc3339(msg.time)},
        {"level", std::string_view(spdlog::level::to_string_view(msg.level).data(),
                                   spdlog::level::to_string_view(msg.level).size())},
        {"thread", msg.thread_id},
        {"message", std::string_view(msg.payload.data(), msg.payload.size())},
    };
    std::string prefix = journal_ ? std::string(JournalPriorityPrefix(msg.level)) : "";
    // `replace`: bytes that are not UTF-8 (a call site that forgot LogSafe) become U+FFFD
    // instead of throwing; the line stays valid JSON.
    std::string text =
        prefix + line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(journal_);
  }

 private:
  const bool journal_;
};

}  // namespace

std::optional<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return std::nullopt;
}

std::string_view JournalPriorityPrefix(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::critical:
      return "<2>";  // SD_CRIT
    case spdlog::level::err:
      return "<3>";  // SD_ERR
    case spdlog::level::warn:
      return "<4>";  // SD_WARNING
    case spdlog::level::info:
      return "<6>";  // SD_INFO
    default:
      return "<7>";  // SD_DEBUG: debug, trace
  }
}

bool JournalStreamMatches(const char* journal_stream, uint64_t device, uint64_t inode) {
  if (journal_stream == nullptr) return false;
  std::string_view text(journal_stream);
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  uint64_t dev = 0, ino = 0;
  auto parse = [](std::string_view part, uint64_t* out) {
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), *out);
    return !part.empty() && ec == std::errc() && end == part.data() + part.size();
  };
  return parse(text.substr(0, colon), &dev) && parse(text.substr(colon + 1), &ino) &&
         dev == device && ino == inode;
}

bool StderrIsJournal() {
  struct stat st {};
  if (fstat(2, &st) != 0) return false;
  return JournalStreamMatches(std::getenv("JOURNAL_STREAM"), st.st_dev, st.st_ino);
}

std::unique_ptr<spdlog::formatter> MakeLogFormatter(LogFormat format, bool journal) {
  if (format == LogFormat::kJson) return std::make_unique<JsonFormatter>(journal);
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<EscapedMessage>('*');
  formatter->add_flag<JournalPriority>('~');
  formatter->set_pattern(journal ? "%~%-5l %*" : "%Y-%m-%dT%H:%M:%S.%eZ %^%-5l%$ %*");
  return formatter;
}

}  // namespace wharf::server
