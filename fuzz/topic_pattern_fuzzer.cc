// fuzz/topic_pattern_fuzzer.cc
//
// Topic routing (broker/topic_trie.h), checked against the rule itself: the input is lines,
// each "+pattern" (bind), "-pattern" (unbind) or "?key" (route). Every routed key's matches
// are compared with a plain recursive matcher over the patterns still bound (words split at
// '.', '*' exactly one word, '#' zero or more), counting a pattern bound twice twice; and a
// match may visit at most (words + 1) x trie nodes, the trie's promise that no set of patterns
// makes routing slow.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "broker/topic_trie.h"
#include "fuzz_check.h"

namespace {

using wharf::broker::SplitTopicWords;
using wharf::fuzz::Check;
using Words = std::vector<std::string_view>;

// Does pattern[i..] match key[j..]? Memoized: '#' runs make the plain recursion exponential.
bool Matches(const Words& pattern, size_t i, const Words& key, size_t j,
             std::vector<signed char>& memo) {
  signed char& m = memo[i * (key.size() + 1) + j];
  if (m >= 0) return m;
  bool result;
  if (i == pattern.size()) {
    result = j == key.size();
  } else if (pattern[i] == "#") {
    result = Matches(pattern, i + 1, key, j, memo) ||
             (j < key.size() && Matches(pattern, i, key, j + 1, memo));
  } else if (j == key.size()) {
    result = false;
  } else if (pattern[i] == "*") {
    result = Matches(pattern, i + 1, key, j + 1, memo);
  } else {
    result = pattern[i] == key[j] && Matches(pattern, i + 1, key, j + 1, memo);
  }
  m = result;
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  wharf::broker::TopicTrie<int> trie;
  std::multimap<std::string, int> bound;  // pattern -> value
  size_t start = 0;
  int next_value = 0;
  while (start < input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    const std::string_view line = input.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    const std::string_view text = line.substr(1);
    if (line[0] == '+') {
      // Values repeat (a queue bound by several patterns): a small set.
      const int value = next_value++ % 4;
      trie.Add(text, value);
      bound.emplace(std::string(text), value);
    } else if (line[0] == '-') {
      auto it = bound.find(std::string(text));
      const int value = it == bound.end() ? 0 : it->second;
      const bool removed = trie.Remove(text, value);
      Check(removed == (it != bound.end()), "Remove finds exactly what was bound");
      if (it != bound.end()) bound.erase(it);
    } else if (line[0] == '?') {
      const Words key = SplitTopicWords(text);
      std::vector<int> got;
      const size_t visits = trie.Match(text, [&got](int v) { got.push_back(v); });
      Check(visits <= (key.size() + 1) * trie.node_count(), "a match visits a bounded set");
      std::vector<int> want;
      for (const auto& [pattern, value] : bound) {
        const Words words = SplitTopicWords(pattern);
        std::vector<signed char> memo((words.size() + 1) * (key.size() + 1), -1);
        if (Matches(words, 0, key, 0, memo)) want.push_back(value);
      }
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      Check(got == want, "the trie matches what the rule matches");
    }
    Check(trie.size() == bound.size(), "the trie holds what is bound");
  }
  return 0;
}
