#include "common/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace wharf {
namespace {

// Enough for any sane pattern over a 255-byte name; a runaway one stops here.
constexpr uint32_t kMatchLimit = 100'000;

struct MatchData {
  MatchData()
      : data(pcre2_match_data_create(1, nullptr)), context(pcre2_match_context_create(nullptr)) {
    pcre2_set_match_limit(context, kMatchLimit);
  }
  ~MatchData() {
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  pcre2_match_data* data;
  pcre2_match_context* context;
};

}  // namespace

struct Regex::Code {
  explicit Code(pcre2_code* c) : code(c) {}
  ~Code() { pcre2_code_free(code); }
  pcre2_code* code;
};

Result<Regex> Regex::Compile(std::string_view pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return Status(StatusCode::kInvalidArgument, "invalid regular expression '" +
                                                    std::string(pattern) +
                                                    "': " + reinterpret_cast<const char*>(message) +
                                                    " at offset " + std::to_string(offset));
  }
  // JIT where the platform has it; the interpreter otherwise.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return Regex(std::string(pattern), std::make_shared<const Code>(code));
}

bool Regex::Search(std::string_view text) const {
  thread_local MatchData match;
  // PCRE2_NO_UTF_CHECK is not passed: a name that is not UTF-8 simply does not match.
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                             0, match.data, match.context);
  return rc >= 0;
}

}  // namespace wharf
