// cli/validators.cc: see cli/validators.h.
#include "cli/validators.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string_view>

namespace wharf::cli {
namespace {

bool AllDigits(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

// "0012" -> "12": the value CLI11 converts afterwards must not look octal.
std::string Canonical(std::string_view digits) {
  size_t first = digits.find_first_not_of('0');
  return first == std::string_view::npos ? "0" : std::string(digits.substr(first));
}

}  // namespace

CLI::Validator Unsigned(uint64_t min, uint64_t max) {
  const std::string range = std::to_string(min) + " to " + std::to_string(max);
  CLI::Validator v(
      [min, max, range](std::string& text) -> std::string {
        uint64_t value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (!AllDigits(text) || ec != std::errc() || end != text.data() + text.size() ||
            value < min || value > max) {
          return "'" + text + "' is not a whole number from " + range;
        }
        text = Canonical(text);
        return "";
      },
      std::to_string(min) + ".." + std::to_string(max));
  return v.non_modifying(false);
}

CLI::Validator Integer(int64_t min, int64_t max) {
  const std::string range = std::to_string(min) + " to " + std::to_string(max);
  CLI::Validator v(
      [min, max, range](std::string& text) -> std::string {
        const bool negative = text.starts_with('-');
        const std::string_view digits = std::string_view(text).substr(negative ? 1 : 0);
        int64_t value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (!AllDigits(digits) || ec != std::errc() || end != text.data() + text.size() ||
            value < min || value > max) {
          return "'" + text + "' is not a whole number from " + range;
        }
        text = std::to_string(value);
        return "";
      },
      std::to_string(min) + ".." + std::to_string(max));
  return v.non_modifying(false);
}

CLI::Validator Finite(double min, double max) {
  std::ostringstream range;
  range << min << " to " << max;
  const std::string text_range = range.str();
  return CLI::Validator(
      [min, max, text_range](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || errno != 0 || *end != '\0' || !std::isfinite(value) || value < min ||
            value > max) {
          return "'" + text + "' is not a number from " + text_range;
        }
        return "";
      },
      text_range);
}

bool ParseHostPort(const std::string& text, std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string h = text.substr(0, colon);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') return false;
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string::npos) {
    return false;  // an IPv6 address needs its brackets: [::1]:5680
  }
  const std::string p = text.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (!AllDigits(p) || ec != std::errc() || end != p.data() + p.size() || value == 0 ||
      value > 65535) {
    return false;
  }
  *host = h;
  *port = static_cast<uint16_t>(value);
  return true;
}

CLI::Validator HostPort() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::string host;
        uint16_t port = 0;
        if (ParseHostPort(text, &host, &port)) return "";
        return "'" + text + "' is not HOST:PORT with a port from 1 to 65535 ([::1]:5680 for IPv6)";
      },
      "HOST:PORT");
}

}  // namespace wharf::cli
