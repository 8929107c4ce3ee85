// Unit tests for broker/topic_trie.h: AMQP topic pattern matching.
#include "broker/topic_trie.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace wharf::broker {
namespace {

// Every value emitted for `key`, sorted (duplicates kept).
std::vector<int> Matches(const TopicTrie<int>& trie, std::string_view key) {
  std::vector<int> out;
  trie.Match(key, [&out](int v) { out.push_back(v); });
  std::sort(out.begin(), out.end());
  return out;
}

// True when a trie holding only `pattern` matches `key`.
bool PatternMatches(std::string_view pattern, std::string_view key) {
  TopicTrie<int> trie;
  trie.Add(pattern, 1);
  return !Matches(trie, key).empty();
}

using Words = std::vector<std::string_view>;

TEST(SplitTopicWords, EmptyKeyHasNoWords) { EXPECT_EQ(SplitTopicWords(""), Words{}); }

TEST(SplitTopicWords, SplitsOnDots) {
  EXPECT_EQ(SplitTopicWords("a.b.c"), (Words{"a", "b", "c"}));
  EXPECT_EQ(SplitTopicWords("a"), (Words{"a"}));
}

TEST(SplitTopicWords, KeepsEmptyWords) {
  EXPECT_EQ(SplitTopicWords("a..b"), (Words{"a", "", "b"}));
  EXPECT_EQ(SplitTopicWords(".a"), (Words{"", "a"}));
  EXPECT_EQ(SplitTopicWords("a."), (Words{"a", ""}));
  EXPECT_EQ(SplitTopicWords("."), (Words{"", ""}));
}

TEST(TopicTrie, LiteralPatternMatchesOnlyEqualKey) {
  EXPECT_TRUE(PatternMatches("a.b", "a.b"));
  EXPECT_FALSE(PatternMatches("a.b", "a"));
  EXPECT_FALSE(PatternMatches("a.b", "a.b.c"));
  EXPECT_FALSE(PatternMatches("a.b", "a.c"));
  EXPECT_FALSE(PatternMatches("a.b", "ab"));
}

TEST(TopicTrie, StarMatchesExactlyOneWord) {
  EXPECT_TRUE(PatternMatches("a.*", "a.b"));
  EXPECT_TRUE(PatternMatches("*.b", "a.b"));
  EXPECT_FALSE(PatternMatches("a.*", "a"));
  EXPECT_FALSE(PatternMatches("a.*", "a.b.c"));
  EXPECT_TRUE(PatternMatches("*", "a"));
  EXPECT_FALSE(PatternMatches("*", "a.b"));
}

TEST(TopicTrie, StarMatchesAnEmptyWord) {
  EXPECT_TRUE(PatternMatches("a.*", "a."));
  EXPECT_TRUE(PatternMatches("*.a", ".a"));
  EXPECT_TRUE(PatternMatches("a.*.b", "a..b"));
}

TEST(TopicTrie, StarDoesNotMatchEmptyKey) { EXPECT_FALSE(PatternMatches("*", "")); }

TEST(TopicTrie, HashMatchesZeroWords) {
  EXPECT_TRUE(PatternMatches("a.#", "a"));
  EXPECT_TRUE(PatternMatches("#.a", "a"));
  EXPECT_TRUE(PatternMatches("a.#.b", "a.b"));
}

TEST(TopicTrie, HashMatchesOneOrMoreWords) {
  EXPECT_TRUE(PatternMatches("a.#", "a.b"));
  EXPECT_TRUE(PatternMatches("a.#", "a.b.c.d"));
  EXPECT_TRUE(PatternMatches("#.d", "a.b.c.d"));
  EXPECT_FALSE(PatternMatches("a.#", "b.a"));
  EXPECT_FALSE(PatternMatches("#.d", "d.a"));
}

TEST(TopicTrie, LoneHashMatchesEverythingIncludingEmptyKey) {
  for (std::string_view key : {"", "a", "a.b", "a.b.c", "..", ".", "*", "#", "a..b"}) {
    EXPECT_TRUE(PatternMatches("#", key)) << "key '" << key << "'";
  }
}

TEST(TopicTrie, HashDotHashMatchesEverything) {
  for (std::string_view key : {"", "a", "a.b", "a.b.c.d.e"}) {
    EXPECT_TRUE(PatternMatches("#.#", key)) << "key '" << key << "'";
  }
}

// Regression: matching once emitted per split of the key between '#' words (combinatorial).
TEST(TopicTrie, HashDotHashEmitsOncePerMatchingPatternNotPerPath) {
  // "#.#" can split a key between its two hashes in several ways; it is still one binding.
  TopicTrie<int> trie;
  trie.Add("#.#", 7);
  EXPECT_EQ(Matches(trie, "a.b.c"), std::vector<int>{7});
}

TEST(TopicTrie, HashBetweenLiteralsMatchesAnyMiddle) {
  EXPECT_TRUE(PatternMatches("a.#.b", "a.b"));
  EXPECT_TRUE(PatternMatches("a.#.b", "a.x.b"));
  EXPECT_TRUE(PatternMatches("a.#.b", "a.x.y.z.b"));
  EXPECT_TRUE(PatternMatches("a.#.b", "a.b.b"));
  EXPECT_FALSE(PatternMatches("a.#.b", "a"));
  EXPECT_FALSE(PatternMatches("a.#.b", "a.x"));
  EXPECT_FALSE(PatternMatches("a.#.b", "a.b.c"));
  EXPECT_FALSE(PatternMatches("a.#.b", "x.a.b"));
}

TEST(TopicTrie, StarBetweenLiteralsMatchesExactlyOneMiddleWord) {
  EXPECT_TRUE(PatternMatches("a.*.b", "a.x.b"));
  EXPECT_FALSE(PatternMatches("a.*.b", "a.b"));
  EXPECT_FALSE(PatternMatches("a.*.b", "a.x.y.b"));
  EXPECT_FALSE(PatternMatches("a.*.b", "a.x.c"));
}

TEST(TopicTrie, StarAndHashCombine) {
  EXPECT_TRUE(PatternMatches("*.#", "a"));
  EXPECT_TRUE(PatternMatches("*.#", "a.b.c"));
  EXPECT_FALSE(PatternMatches("*.#", ""));
  EXPECT_TRUE(PatternMatches("#.*", "a"));
  EXPECT_FALSE(PatternMatches("#.*", ""));
  EXPECT_TRUE(PatternMatches("*.*.#", "a.b"));
  EXPECT_FALSE(PatternMatches("*.*.#", "a"));
}

TEST(TopicTrie, EmptyWordsAreWordsLikeAnyOther) {
  EXPECT_TRUE(PatternMatches("a..b", "a..b"));
  EXPECT_FALSE(PatternMatches("a..b", "a.b"));
  EXPECT_FALSE(PatternMatches("a.b", "a..b"));
  EXPECT_TRUE(PatternMatches(".a", ".a"));
  EXPECT_FALSE(PatternMatches(".a", "a"));
  EXPECT_TRUE(PatternMatches("a.", "a."));
  EXPECT_FALSE(PatternMatches("a.", "a"));
  EXPECT_TRUE(PatternMatches("a.#", "a."));
  EXPECT_TRUE(PatternMatches("#.b", "a..b"));
}

TEST(TopicTrie, EmptyPatternMatchesOnlyEmptyKey) {
  EXPECT_TRUE(PatternMatches("", ""));
  EXPECT_FALSE(PatternMatches("", "a"));
  EXPECT_FALSE(PatternMatches("", "."));
}

TEST(TopicTrie, KeyWordStarIsNotALiteralMatchForPatternStar) {
  // A routing key word "*" is just a word: "*" and "#" patterns match it as a wildcard would
  // match any word, and a literal pattern only if the literal is the same word "*".
  EXPECT_TRUE(PatternMatches("a.*", "a.*"));  // the wildcard matches the word "*"
  EXPECT_FALSE(PatternMatches("a.*", "a.*.b"));
  EXPECT_FALSE(PatternMatches("a.b", "a.*"));
  EXPECT_FALSE(PatternMatches("a.*.c", "a.#"));
}

TEST(TopicTrie, PatternWithSeveralHashesMatchesLikeOneHash) {
  // Whatever the emission count, "#.#" and "#.a.#" select the right keys.
  EXPECT_TRUE(PatternMatches("#.#", "a.b.c"));
  EXPECT_TRUE(PatternMatches("#.a.#", "a"));
  EXPECT_TRUE(PatternMatches("#.a.#", "x.a.y.z"));
  EXPECT_FALSE(PatternMatches("#.a.#", "x.b.y"));
}

TEST(TopicTrie, KeyWordStarMatchedOnceByStarPattern) {
  // The key word "*" must not reach the "*" child twice (once as a literal, once as a wildcard).
  TopicTrie<int> trie;
  trie.Add("a.*", 1);
  EXPECT_EQ(Matches(trie, "a.*"), std::vector<int>{1});
}

TEST(TopicTrie, KeyWordHashDoesNotActAsWildcard) {
  // "#" in a routing key is a plain word: it does not swallow words of a pattern.
  EXPECT_FALSE(PatternMatches("a.b.c", "a.#"));
  EXPECT_FALSE(PatternMatches("a.b", "#"));
  EXPECT_FALSE(PatternMatches("a", "#"));
  EXPECT_TRUE(PatternMatches("#", "#"));
  EXPECT_TRUE(PatternMatches("*", "#"));
}

TEST(TopicTrie, KeyWordHashMatchedOnceByHashPattern) {
  TopicTrie<int> trie;
  trie.Add("a.#", 1);
  EXPECT_EQ(Matches(trie, "a.#"), std::vector<int>{1});
}

TEST(TopicTrie, MatchesSeveralPatternsAtOnce) {
  TopicTrie<int> trie;
  trie.Add("stock.usd.nyse", 1);
  trie.Add("stock.*.nyse", 2);
  trie.Add("stock.#", 3);
  trie.Add("#.nyse", 4);
  trie.Add("stock.eur.*", 5);
  trie.Add("#", 6);
  EXPECT_EQ(Matches(trie, "stock.usd.nyse"), (std::vector<int>{1, 2, 3, 4, 6}));
  EXPECT_EQ(Matches(trie, "stock.eur.nyse"), (std::vector<int>{2, 3, 4, 5, 6}));
  EXPECT_EQ(Matches(trie, "stock"), (std::vector<int>{3, 6}));
  EXPECT_EQ(Matches(trie, "bond.nyse"), (std::vector<int>{4, 6}));
  EXPECT_EQ(Matches(trie, ""), (std::vector<int>{6}));
}

TEST(TopicTrie, NoMatchEmitsNothing) {
  TopicTrie<int> trie;
  trie.Add("a.b", 1);
  trie.Add("a.*.c", 2);
  EXPECT_TRUE(Matches(trie, "x.y").empty());
  EXPECT_TRUE(Matches(TopicTrie<int>{}, "a").empty());
}

TEST(TopicTrie, ValueBoundByTwoMatchingPatternsIsEmittedPerPattern) {
  TopicTrie<int> trie;
  trie.Add("a.*", 9);
  trie.Add("a.#", 9);
  trie.Add("a.b", 9);
  EXPECT_EQ(Matches(trie, "a.b"), (std::vector<int>{9, 9, 9}));
  EXPECT_EQ(Matches(trie, "a.c"), (std::vector<int>{9, 9}));
}

TEST(TopicTrie, SamePatternAddedTwiceIsEmittedTwice) {
  TopicTrie<int> trie;
  trie.Add("a.b", 1);
  trie.Add("a.b", 1);
  EXPECT_EQ(trie.size(), 2u);
  EXPECT_EQ(Matches(trie, "a.b"), (std::vector<int>{1, 1}));
}

TEST(TopicTrie, SizeCountsPairs) {
  TopicTrie<int> trie;
  EXPECT_EQ(trie.size(), 0u);
  trie.Add("a", 1);
  trie.Add("a", 2);
  trie.Add("b.#", 1);
  EXPECT_EQ(trie.size(), 3u);
}

TEST(TopicTrie, RemoveDropsOnlyThatPair) {
  TopicTrie<int> trie;
  trie.Add("a.*", 1);
  trie.Add("a.*", 2);
  trie.Add("a.b", 1);
  EXPECT_TRUE(trie.Remove("a.*", 1));
  EXPECT_EQ(trie.size(), 2u);
  EXPECT_EQ(Matches(trie, "a.b"), (std::vector<int>{1, 2}));
  EXPECT_EQ(Matches(trie, "a.c"), (std::vector<int>{2}));
}

TEST(TopicTrie, RemoveOfAbsentPairReturnsFalseAndChangesNothing) {
  TopicTrie<int> trie;
  trie.Add("a.b", 1);
  EXPECT_FALSE(trie.Remove("a.b", 2));    // value not bound there
  EXPECT_FALSE(trie.Remove("a.c", 1));    // pattern not present
  EXPECT_FALSE(trie.Remove("a", 1));      // a prefix of a present pattern
  EXPECT_FALSE(trie.Remove("a.b.c", 1));  // longer than a present pattern
  EXPECT_FALSE(trie.Remove("a.*", 1));    // a wildcard is not a literal
  EXPECT_FALSE(TopicTrie<int>{}.Remove("", 1));
  EXPECT_EQ(trie.size(), 1u);
  EXPECT_EQ(Matches(trie, "a.b"), std::vector<int>{1});
}

TEST(TopicTrie, RemoveTwiceReturnsFalseTheSecondTime) {
  TopicTrie<int> trie;
  trie.Add("a.#", 1);
  EXPECT_TRUE(trie.Remove("a.#", 1));
  EXPECT_FALSE(trie.Remove("a.#", 1));
  EXPECT_EQ(trie.size(), 0u);
  EXPECT_TRUE(Matches(trie, "a.b").empty());
}

TEST(TopicTrie, RemoveOneOfTwoDuplicatesKeepsTheOther) {
  TopicTrie<int> trie;
  trie.Add("a", 1);
  trie.Add("a", 1);
  EXPECT_TRUE(trie.Remove("a", 1));
  EXPECT_EQ(Matches(trie, "a"), std::vector<int>{1});
}

TEST(TopicTrie, RemovePrunesLeafButKeepsSharedPrefix) {
  TopicTrie<int> trie;
  trie.Add("a.b.c", 1);
  trie.Add("a.b", 2);
  trie.Add("a.#", 3);
  EXPECT_TRUE(trie.Remove("a.b.c", 1));
  // The prefix "a.b" still carries value 2, and "a.#" shares the "a" node.
  EXPECT_EQ(Matches(trie, "a.b"), (std::vector<int>{2, 3}));
  EXPECT_EQ(Matches(trie, "a.b.c"), std::vector<int>{3});
  EXPECT_TRUE(trie.Remove("a.b", 2));
  EXPECT_EQ(Matches(trie, "a.b"), std::vector<int>{3});
  EXPECT_TRUE(trie.Remove("a.#", 3));
  EXPECT_EQ(trie.size(), 0u);
  for (std::string_view key : {"", "a", "a.b", "a.b.c"}) {
    EXPECT_TRUE(Matches(trie, key).empty()) << key;
  }
}

TEST(TopicTrie, PatternCanBeAddedAgainAfterPruning) {
  TopicTrie<int> trie;
  trie.Add("x.y.z", 1);
  EXPECT_TRUE(trie.Remove("x.y.z", 1));
  trie.Add("x.y.z", 2);
  EXPECT_EQ(Matches(trie, "x.y.z"), std::vector<int>{2});
  trie.Add("x.y", 3);
  EXPECT_EQ(Matches(trie, "x.y"), std::vector<int>{3});
}

TEST(TopicTrie, RemoveWithEmptyWordsAndEmptyPattern) {
  TopicTrie<int> trie;
  trie.Add("a..b", 1);
  trie.Add("", 2);
  EXPECT_FALSE(trie.Remove("a.b", 1));
  EXPECT_TRUE(trie.Remove("a..b", 1));
  EXPECT_TRUE(trie.Remove("", 2));
  EXPECT_EQ(trie.size(), 0u);
}

TEST(TopicTrie, NodeCountFollowsAddAndRemove) {
  TopicTrie<int> trie;
  EXPECT_EQ(trie.node_count(), 1u);  // the root
  trie.Add("a.#.b", 1);
  trie.Add("a.*", 2);
  EXPECT_EQ(trie.node_count(), 5u);
  EXPECT_TRUE(trie.Remove("a.#.b", 1));
  EXPECT_EQ(trie.node_count(), 3u);
  EXPECT_TRUE(trie.Remove("a.*", 2));
  EXPECT_EQ(trie.node_count(), 1u);
  EXPECT_TRUE(Matches(trie, "a.x").empty());
}

// Issue 15: 100 '#'-heavy patterns against a 127-word key that matches none of them. Matching
// used to try the splits of the key between the '#' words (536 ms of broker thread per publish
// in the report); it must visit each trie node at most once per word position.
TEST(TopicTrie, HashHeavyPatternsCostAtMostOneVisitPerNodeAndWord) {
  TopicTrie<int> trie;
  for (int i = 0; i < 100; ++i) {
    std::string pattern;
    if (i % 2 == 0) {
      // "#.#.#.a.#.#.b.#" style, the literals spelling i in binary so patterns part early.
      pattern = "#.#.#";
      for (int bit = 0; bit < 7; ++bit) pattern += ((i >> bit) & 1) ? ".a.#.#" : ".b.#.#";
    } else {
      // "#.x.#.x.#..." style, with a different number of x's.
      pattern = "#";
      for (int x = 0; x < 3 + i % 11; ++x) pattern += ".x.#";
    }
    trie.Add(pattern + ".end", i);  // no key word is "end": nothing matches
  }
  std::string key;
  std::mt19937 random(15);
  for (int i = 0; i < 127; ++i) {
    if (i > 0) key += '.';
    key += "abx"[random() % 3];
  }
  ASSERT_EQ(SplitTopicWords(key).size(), 127u);
  std::vector<int> out;
  size_t visits = trie.Match(key, [&out](int v) { out.push_back(v); });
  EXPECT_TRUE(out.empty());
  EXPECT_LE(visits, 128 * trie.node_count());
  // Most of the trie stays reachable all along: the walk does real work, just not exponential.
  EXPECT_GT(visits, 127u * 100);

  // The same key ending in "end" matches every pattern, each once.
  std::vector<int> all;
  visits = trie.Match(key + ".end", [&all](int v) { all.push_back(v); });
  std::sort(all.begin(), all.end());
  std::vector<int> expected(100);
  for (int i = 0; i < 100; ++i) expected[static_cast<size_t>(i)] = i;
  EXPECT_EQ(all, expected);
  EXPECT_LE(visits, 129 * trie.node_count());
}

// A straightforward reference matcher, to check the trie against.
bool ReferenceMatch(const std::vector<std::string_view>& pattern, size_t p,
                    const std::vector<std::string_view>& key, size_t k) {
  if (p == pattern.size()) return k == key.size();
  if (pattern[p] == "#") {
    for (size_t j = k; j <= key.size(); ++j) {
      if (ReferenceMatch(pattern, p + 1, key, j)) return true;
    }
    return false;
  }
  if (k == key.size()) return false;
  if (pattern[p] == "*" || pattern[p] == key[k]) return ReferenceMatch(pattern, p + 1, key, k + 1);
  return false;
}

TEST(TopicTrie, TenThousandBindingsMatchLikeTheReference) {
  // Patterns over a small alphabet so that many of them overlap; every value is distinct, so the
  // expected result is exactly the set of matching patterns (one emission each).
  const std::vector<std::string> words = {"a", "b", "c", "", "*", "#"};
  std::vector<std::string> patterns;
  uint32_t state = 12345;
  auto next = [&state] {
    state = state * 1103515245u + 12345u;
    return (state >> 16) & 0x7fff;
  };
  while (patterns.size() < 10'000) {
    size_t length = next() % 5;  // 0..4 words
    std::string pattern;
    bool has_hash = false;
    for (size_t i = 0; i < length; ++i) {
      const std::string& word = words[next() % words.size()];
      // At most one '#' per pattern keeps the reference "emitted once" claim simple.
      if (word == "#") {
        if (has_hash) continue;
        has_hash = true;
      }
      if (i > 0) pattern += '.';
      pattern += word;
    }
    patterns.push_back(pattern);
  }
  TopicTrie<int> trie;
  for (size_t i = 0; i < patterns.size(); ++i) trie.Add(patterns[i], static_cast<int>(i));
  ASSERT_EQ(trie.size(), patterns.size());

  std::vector<std::string> keys = {"",        ".",    "a",   "b",   "a.b",     "a.b.c",
                                   "c.c.c.c", "a..b", ".a",  "a.",  "b.a.c.a", "a.b.c.a.b",
                                   "*",       "#",    "a.*", "#.b", "x.y"};
  for (const std::string& key : keys) {
    std::vector<int> expected;
    auto key_words = SplitTopicWords(key);
    for (size_t i = 0; i < patterns.size(); ++i) {
      if (ReferenceMatch(SplitTopicWords(patterns[i]), 0, key_words, 0)) {
        expected.push_back(static_cast<int>(i));
      }
    }
    EXPECT_EQ(Matches(trie, key), expected) << "key '" << key << "'";
  }

  // Remove every other binding; the rest still match exactly.
  for (size_t i = 0; i < patterns.size(); i += 2) {
    ASSERT_TRUE(trie.Remove(patterns[i], static_cast<int>(i))) << patterns[i];
  }
  EXPECT_EQ(trie.size(), patterns.size() / 2);
  for (const std::string& key : keys) {
    std::vector<int> expected;
    auto key_words = SplitTopicWords(key);
    for (size_t i = 1; i < patterns.size(); i += 2) {
      if (ReferenceMatch(SplitTopicWords(patterns[i]), 0, key_words, 0)) {
        expected.push_back(static_cast<int>(i));
      }
    }
    EXPECT_EQ(Matches(trie, key), expected) << "key '" << key << "'";
  }
}

// Random patterns and keys (fixed seed) over a small alphabet with empty words, '*' and '#', any
// number of '#' per pattern ("#.#", "*.#", leading and trailing '#'): each pattern alone, and all
// of them in one trie, match exactly as the reference says, each matching pattern emitted once.
TEST(TopicTrie, RandomPatternsAndKeysMatchLikeTheReference) {
  std::mt19937 random(20261201);
  auto pick = [&random](size_t n) { return static_cast<size_t>(random() % n); };
  auto make = [&](const std::vector<std::string>& alphabet, size_t max_words) {
    std::string text;
    size_t length = pick(max_words + 1);
    for (size_t i = 0; i < length; ++i) {
      if (i > 0) text += '.';
      text += alphabet[pick(alphabet.size())];
    }
    return text;
  };
  const std::vector<std::string> pattern_words = {"a", "b", "", "*", "#", "#", "*"};
  const std::vector<std::string> key_words = {"a", "b", "", "c", "*", "#"};
  std::vector<std::string> patterns = {"#",     "#.#",   "*.#",     "#.*",   "#.a",   "a.#",
                                       "#.a.#", "#.#.#", "#..#",    ".#",    "#.",    "*.*.#",
                                       "#.*.#", "",      "#.#.a.#", "a.#.#", "#.*.*", "*"};
  while (patterns.size() < 2000) patterns.push_back(make(pattern_words, 6));
  std::vector<std::string> keys = {"", ".", "..", "a", "#", "*", "a.b", "a..b"};
  while (keys.size() < 300) keys.push_back(make(key_words, 9));

  TopicTrie<int> all;
  for (size_t i = 0; i < patterns.size(); ++i) all.Add(patterns[i], static_cast<int>(i));
  for (const std::string& key : keys) {
    auto words = SplitTopicWords(key);
    std::vector<int> expected;
    for (size_t i = 0; i < patterns.size(); ++i) {
      bool match = ReferenceMatch(SplitTopicWords(patterns[i]), 0, words, 0);
      if (match) expected.push_back(static_cast<int>(i));
      if (i < 200) {
        TopicTrie<int> one;
        one.Add(patterns[i], 1);
        EXPECT_EQ(Matches(one, key), match ? std::vector<int>{1} : std::vector<int>{})
            << "pattern '" << patterns[i] << "' key '" << key << "'";
      }
    }
    std::vector<int> got;
    size_t visits = all.Match(key, [&got](int v) { got.push_back(v); });
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected) << "key '" << key << "'";
    EXPECT_LE(visits, (words.size() + 1) * all.node_count()) << "key '" << key << "'";
  }
}

}  // namespace
}  // namespace wharf::broker
