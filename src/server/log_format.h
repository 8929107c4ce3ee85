// server/log_format.h
//
// How wharfd's log lines look (docs/operations.md, "Logs"):
//
//   text (default)  2026-01-01T12:00:00.123Z info  conn=7 peer=127.0.0.1:5000 user="bob" ...
//                   Timestamps are UTC (RFC 3339, `Z`). Control bytes left in a message are
//                   written as \xNN: one record is always one line.
//   json            {"time":"2026-01-01T12:00:00.123Z","level":"info","thread":123,
//                    "message":"..."}, one object per line (nlohmann-json escapes the message).
//   journal         when stderr is the systemd journal (JOURNAL_STREAM names it): each line
//                   starts with its sd-daemon(3) priority, <0>..<7>, and has no timestamp
//                   (journald stamps it). With json, the object follows the priority.
//
// Client-supplied text inside messages is escaped at the call site (common/log_safe.h).
//
// Thread safety: the formatters are used under spdlog's sink mutexes, like any spdlog formatter.
#pragma once

#include <spdlog/common.h>
#include <spdlog/formatter.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace wharf::server {

enum class LogFormat { kText, kJson };

// "text" or "json"; nullopt for anything else.
std::optional<LogFormat> ParseLogFormat(std::string_view name);

// The sd-daemon(3) prefix of `level`: "<2>" (critical) ... "<7>" (debug, trace).
std::string_view JournalPriorityPrefix(spdlog::level::level_enum level);

// True when `journal_stream` (JOURNAL_STREAM's value, "DEV:INODE", systemd.exec(5)) names the
// file with `device` and `inode`. Null or malformed: false.
bool JournalStreamMatches(const char* journal_stream, uint64_t device, uint64_t inode);

// True when wharfd's stderr is connected to the journal (JOURNAL_STREAM matches fd 2).
bool StderrIsJournal();

// The formatter for every sink: `journal` adds the priority prefix and drops the timestamp.
std::unique_ptr<spdlog::formatter> MakeLogFormatter(LogFormat format, bool journal);

}  // namespace wharf::server
