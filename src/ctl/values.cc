// ctl/values.cc: what wharfctl reads off its command line and how it writes (ctl/ctl.h).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>

#include "ctl/ctl.h"
#include "ctl/json.h"

namespace wharf::ctl {

CLI::Validator Check(std::string name, std::function<std::string(const std::string&)> problem) {
  return CLI::Validator([problem](std::string& text) { return problem(text); }, std::move(name));
}

CLI::Validator SeparatorText() {
  return Check("SEP", [](const std::string& text) -> std::string {
    if (ParseSeparator(text)) return "";
    return "'" + text + "' is not a separator: text with \\n \\t \\r \\0 \\\\ \\xHH";
  });
}

CLI::Validator TimeText() {
  return Check("TIME", [](const std::string& text) -> std::string {
    if (ParseTime(text)) return "";
    return "'" + text + "' is not Unix ms or a UTC time like 2027-01-31T08:00:00Z";
  });
}

CLI::Validator MessageIdText() {
  return Check("ID", [](const std::string& text) -> std::string {
    if (ParseMessageId(text)) return "";
    return "'" + text + "' is not a hex message id like 0190a3c5e2f40001";
  });
}

CLI::Validator TypedValueText() {
  return Check("K=V", [](const std::string& text) -> std::string {
    Headers scratch;
    std::string error;
    return ParseTypedValue(text, &scratch, &error) ? "" : error;
  });
}

bool ParseTypedValue(const std::string& kv, wharf::Headers* out, std::string* error) {
  const size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) {
    *error = "'" + kv + "' is not KEY=VALUE";
    return false;
  }
  std::string key = kv.substr(0, eq);
  const std::string value = kv.substr(eq + 1);
  std::string type;
  if (size_t colon = key.rfind(':'); colon != std::string::npos) {
    type = key.substr(colon + 1);
    key = key.substr(0, colon);
  }
  auto integer = [&]() -> std::optional<int64_t> {
    int64_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
      return std::nullopt;
    }
    return n;
  };
  auto real = [&]() -> std::optional<double> {
    if (value.empty()) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    double d = std::strtod(value.c_str(), &end);
    if (errno != 0 || *end != '\0' || !std::isfinite(d)) return std::nullopt;
    return d;
  };
  if (type.empty()) {
    // Only a number written as it would print is taken for one: 1000 and 1.5 are numbers,
    // 01234 (a zip code) and 1.10 (a version) stay the text they are.
    auto canonical_double = [&]() -> std::optional<double> {
      auto d = real();
      if (!d || value.find('.') == std::string::npos) return std::nullopt;
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *d);
      if (ec != std::errc() || std::string_view(buf, end - buf) != value) return std::nullopt;
      return d;
    };
    if (auto n = integer(); n && std::to_string(*n) == value) {
      (*out)[key] = *n;
    } else if (value == "true" || value == "false") {
      (*out)[key] = value == "true";
    } else if (auto d = canonical_double()) {
      (*out)[key] = *d;
    } else {
      (*out)[key] = value;
    }
    return true;
  }
  if (type == "string") {
    (*out)[key] = value;
  } else if (type == "int") {
    auto n = integer();
    if (!n) return *error = "'" + value + "' is not a 64-bit integer (" + key + ")", false;
    (*out)[key] = *n;
  } else if (type == "double") {
    auto d = real();
    if (!d) return *error = "'" + value + "' is not a number (" + key + ")", false;
    (*out)[key] = *d;
  } else if (type == "bool") {
    if (value != "true" && value != "false") {
      return *error = "'" + value + "' is not true or false (" + key + ")", false;
    }
    (*out)[key] = value == "true";
  } else {
    *error = "type '" + type + "' of " + key + " is not string, int, double or bool";
    return false;
  }
  return true;
}

std::optional<int64_t> ParseTime(const std::string& text) {
  int64_t ms = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (!text.empty() && ec == std::errc() && end == text.data() + text.size()) return ms;
  // Exactly YYYY-MM-DDTHH:MM:SS, a real date (no February 30th, no second 60).
  std::tm tm{};
  int millis = 0;
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':') {
    return std::nullopt;
  }
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18}) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
  }
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest != text.c_str() + 19) return std::nullopt;
  const std::tm given = tm;
  const time_t seconds = timegm(&tm);  // normalises an impossible date...
  std::tm back{};
  if (!gmtime_r(&seconds, &back) || back.tm_year != given.tm_year || back.tm_mon != given.tm_mon ||
      back.tm_mday != given.tm_mday || back.tm_hour != given.tm_hour ||
      back.tm_min != given.tm_min || back.tm_sec != given.tm_sec) {
    return std::nullopt;  // ...which shows as a difference
  }
  if (*rest == '.') {
    for (int i = 1; i <= 3; ++i) {
      if (rest[i] < '0' || rest[i] > '9') return std::nullopt;
      millis = millis * 10 + (rest[i] - '0');
    }
    rest += 4;
  }
  if (std::string_view(rest) != "Z") return std::nullopt;
  return static_cast<int64_t>(seconds) * 1000 + millis;
}

std::optional<int64_t> OldestReadyAgeMs(const QueueInfo& q) {
  if (q.head_published_at_ms == 0) return std::nullopt;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  return std::max<int64_t>(0, now - q.head_published_at_ms);
}

std::string FormatTime(int64_t ms) {
  // Floor division, so times before 1970 keep a positive millisecond part.
  int64_t floor_seconds = ms / 1000 - (ms % 1000 < 0 ? 1 : 0);
  int millis = static_cast<int>(ms - floor_seconds * 1000);
  std::time_t seconds = static_cast<std::time_t>(floor_seconds);
  std::tm tm{};
  if (!gmtime_r(&seconds, &tm)) return std::to_string(ms) + " ms";
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, millis);
  return out;
}

std::optional<std::string> ParseSeparator(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (++i == text.size()) return std::nullopt;
    switch (text[i]) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '0':
        out += '\0';
        break;
      case '\\':
        out += '\\';
        break;
      case 'x': {
        unsigned byte = 0;
        if (i + 2 >= text.size()) return std::nullopt;
        auto [end, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, byte, 16);
        if (ec != std::errc() || end != text.data() + i + 3) return std::nullopt;
        out += static_cast<char>(byte);
        i += 2;
        break;
      }
      default:
        return std::nullopt;
    }
  }
  return out;
}

bool WriteOut(std::string_view bytes, std::string* error) {
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size()) {
    *error = std::strerror(errno);
    std::clearerr(stdout);
    return false;
  }
  if (std::fflush(stdout) != 0) {
    *error = std::strerror(errno);
    std::clearerr(stdout);
    return false;
  }
  return true;
}

std::string Printable(std::string_view text) {
  // fmt's debug format, as the logs use (common/log_safe.h): control bytes and invalid UTF-8 as
  // \xNN, non-printable code points (bidi overrides, U+2028) as \uNNNN; without its quotes.
  // A quote is harmless in a table: it stays as it is.
  const std::string quoted = fmt::format("{:?}", text);
  std::string out;
  for (size_t i = 1; i + 1 < quoted.size(); ++i) {
    if (quoted[i] == '\\' && quoted[i + 1] == '"') continue;  // \" -> "
    out += quoted[i];
    if (quoted[i] == '\\') out += quoted[++i];  // any other escape, whole
  }
  return out;
}

int Refused(const wharf::Status& status) {
  std::fprintf(stderr, "wharfctl: %s\n", Printable(status.ToString()).c_str());
  return kExitRefused;
}

int Usage(const std::string& message) {
  std::fprintf(stderr,
               "wharfctl: %s\nRun 'wharfctl --help' (or 'wharfctl COMMAND --help') for usage.\n",
               message.c_str());
  return kExitUsage;
}

std::string ReadAll(std::istream& in) { return {std::istreambuf_iterator<char>(in), {}}; }

bool ReadInput(const std::string& path, std::string* out, std::string* error) {
  if (path == "-") {
    *out = ReadAll(std::cin);
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return *error = "cannot read '" + path + "'", false;
  *out = ReadAll(in);
  return true;
}

}  // namespace wharf::ctl
