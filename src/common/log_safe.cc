#include "common/log_safe.h"

namespace wharf {

std::string_view CutAtCharBoundary(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  // Step back over continuation bytes (10xxxxxx) to the start of the character that would be
  // split, at most 3 of them: invalid input is cut where it is (and escaped byte by byte).
  for (size_t back = 0;
       back < 3 && end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80; ++back) {
    --end;
  }
  if ((static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) end = max_bytes;
  return text.substr(0, end);
}

std::string CutForDisplay(std::string_view text, size_t max_bytes) {
  std::string_view cut = CutAtCharBoundary(text, max_bytes);
  if (cut.size() == text.size()) return std::string(text);
  return fmt::format("{}...({} bytes)", cut, text.size());
}

std::string QuotedForDisplay(std::string_view text, size_t max_bytes) {
  return "'" + CutForDisplay(text, max_bytes) + "'";
}

std::string EscapeForLog(std::string_view text, size_t max_bytes) {
  return fmt::format("{}", LogSafe(text, max_bytes));
}

}  // namespace wharf
