// common/regex.h
//
// Regex is a compiled Perl-compatible regular expression (PCRE2, the library RabbitMQ's `re`
// wraps), for the permission patterns of users (broker/access.h). Search() is unanchored, as
// RabbitMQ's re:run: "bob" matches "xbobx"; anchor with ^ and $.
//
// A pattern that backtracks without end cannot stall the caller: each search is bounded (a
// match limit), and a search that hits it counts as no match.
//
// Thread safety: an immutable Regex may be searched from any thread at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "wharf/result.h"
#include "wharf/status.h"

namespace wharf {

class Regex {
 public:
  // kInvalidArgument with PCRE2's reason and offset for a pattern that does not compile.
  static Result<Regex> Compile(std::string_view pattern);

  bool Search(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  Regex(std::string pattern, std::shared_ptr<const Code> code)
      : pattern_(std::move(pattern)), code_(std::move(code)) {}

  std::string pattern_;
  std::shared_ptr<const Code> code_;
};

}  // namespace wharf
