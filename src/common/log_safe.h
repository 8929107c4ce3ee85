// common/log_safe.h
//
// Client-supplied text on its way into a log line or an error message. A client chooses its
// user name, queue names, routing keys, consumer tags and error texts; written as they are, a
// newline in one forges a log line, an escape sequence rewrites the operator's terminal, and a
// 1 MB name fills the log. Two tools:
//
//   LogSafe(text)    for logs: `"text"` quoted and escaped by fmt's debug format ({:?}):
//                    \n \r \t \" \\ as such, other control bytes and invalid UTF-8 as \xNN,
//                    non-printable code points (U+2028, bidi overrides) as \uNNNN.
//                    Printable UTF-8 (é, 東) is kept. Text longer than `max` bytes is cut at
//                    a character boundary and marked: "aaaa"...(1048576 bytes).
//                    Escaping is lazy: a filtered-out debug line costs nothing.
//   CutForDisplay(text)  for error messages sent back to a client: the same cut, no escaping
//                    (the client gets its own bytes back, only not a megabyte of them).
//
// The text log's formatter also escapes control bytes in the whole message (server/log_format.h),
// a net under call sites: one record stays one line whatever a call site forgot.
//
// Thread safety: pure functions.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace wharf {

// Names are at most 255 bytes (broker/broker.h), so this never cuts a valid one.
inline constexpr size_t kLogSafeMaxBytes = 256;
// A status message may hold a few names and a sentence around them.
inline constexpr size_t kLogSafeStatusBytes = 1024;

struct LogSafeText {
  std::string_view text;
  size_t max_bytes;
};

// For a log argument: spdlog::warn("user={} login refused", LogSafe(user)). `text` must outlive
// the log call (it is formatted there).
inline LogSafeText LogSafe(std::string_view text, size_t max_bytes = kLogSafeMaxBytes) {
  return {text, max_bytes};
}

// The longest prefix of `text` of at most `max_bytes` that does not split a UTF-8 sequence.
std::string_view CutAtCharBoundary(std::string_view text, size_t max_bytes);

// `text` when it fits in `max_bytes`; else its cut prefix and "...(N bytes)".
std::string CutForDisplay(std::string_view text, size_t max_bytes = kLogSafeMaxBytes);

// CutForDisplay(text, max_bytes) in single quotes: a name inside an error message.
std::string QuotedForDisplay(std::string_view text, size_t max_bytes = kLogSafeMaxBytes);

// LogSafe as a string, for places that build text before logging it.
std::string EscapeForLog(std::string_view text, size_t max_bytes = kLogSafeMaxBytes);

}  // namespace wharf

template <>
struct fmt::formatter<wharf::LogSafeText> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  template <typename FormatContext>
  auto format(const wharf::LogSafeText& safe, FormatContext& ctx) const {
    std::string_view cut = wharf::CutAtCharBoundary(safe.text, safe.max_bytes);
    auto out = fmt::format_to(ctx.out(), "{:?}", cut);
    if (cut.size() < safe.text.size()) out = fmt::format_to(out, "...({} bytes)", safe.text.size());
    return out;
  }
};
