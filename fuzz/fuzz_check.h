// fuzz/fuzz_check.h
//
// Check(): a property a fuzz target asserts beyond "no crash". A failure prints what was
// expected and aborts, which libFuzzer reports as a crash and keeps the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace wharf::fuzz {

inline void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "check failed: %s\n", what);
    std::abort();
  }
}

// Encodes `value`, decodes that and encodes again: the decode must succeed and the two
// encodings match (what the broker sends back is what it read). `encode(const T&, std::string*)`,
// `decode(std::string_view, T*) -> bool`.
template <typename T, typename Encode, typename Decode>
void CheckStableEncoding(const T& value, Encode encode, Decode decode, const char* what) {
  std::string once;
  encode(value, &once);
  T again;
  if (!decode(std::string_view(once), &again)) {
    std::fprintf(stderr, "check failed: %s: its encoding does not decode\n", what);
    std::abort();
  }
  std::string twice;
  encode(again, &twice);
  Check(once == twice, what);
}

}  // namespace wharf::fuzz
