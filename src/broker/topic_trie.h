// broker/topic_trie.h
//
// TopicTrie maps AMQP topic binding patterns to values and finds every value whose pattern
// matches a routing key. Words are separated by '.'; in a pattern '*' matches exactly one word
// and '#' matches zero or more words. Words may be empty ("a..b" has three words). As in
// RabbitMQ, the empty string has no words at all: "#" matches it, "*" does not.
//
// Patterns share prefixes in a trie, so matching costs about the key's length times the number
// of wildcard branches taken, not the number of bindings (see bench/topic_bench.cc).
//
// Thread safety: not thread-safe; owned by its exchange (broker thread).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace wharf::broker {

// Splits a routing key or pattern into its words ("" -> no words).
inline std::vector<std::string_view> SplitTopicWords(std::string_view key) {
  std::vector<std::string_view> words;
  if (key.empty()) return words;
  size_t start = 0;
  while (true) {
    size_t dot = key.find('.', start);
    words.push_back(key.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return words;
}

template <typename T>
class TopicTrie {
 public:
  void Add(std::string_view pattern, const T& value) {
    Node* node = &root_;
    for (std::string_view word : SplitTopicWords(pattern)) {
      auto& child = node->children[std::string(word)];
      if (!child) child = std::make_unique<Node>();
      node = child.get();
    }
    node->values.push_back(value);
    ++size_;
  }

  // Removes one (pattern, value) pair. Returns false if it was not there.
  bool Remove(std::string_view pattern, const T& value) {
    auto words = SplitTopicWords(pattern);
    if (!RemoveAt(&root_, words, 0, value)) return false;
    --size_;
    return true;
  }

  // Calls emit(value) once for every (pattern, value) pair that matches; a value bound by two
  // matching patterns is emitted twice, so callers that need uniqueness deduplicate.
  template <typename Emit>
  void Match(std::string_view routing_key, Emit&& emit) const {
    auto words = SplitTopicWords(routing_key);
    Visited visited;
    MatchAt(&root_, words, 0, emit, visited);
  }

  size_t size() const { return size_; }

 private:
  // Lets lookups take a string_view without building a std::string.
  struct WordHash {
    using is_transparent = void;
    size_t operator()(std::string_view word) const { return std::hash<std::string_view>{}(word); }
  };

  struct Node {
    // Literal words, "*" and "#" are all children keyed by their text.
    std::unordered_map<std::string, std::unique_ptr<Node>, WordHash, std::equal_to<>> children;
    std::vector<T> values;
    bool Empty() const { return children.empty() && values.empty(); }
    const Node* Child(std::string_view word) const {
      auto it = children.find(word);
      return it == children.end() ? nullptr : it->second.get();
    }
  };

  // (hash node, word position) states already explored. Different ways of splitting the key
  // between '#' words meet only on entering a '#' node at the same position, so remembering
  // those states makes matching polynomial (and emits each pattern once) even for patterns
  // like "#.#.#.#" against long keys.
  struct StateHash {
    size_t operator()(const std::pair<const Node*, size_t>& s) const {
      return std::hash<const void*>{}(s.first) ^ (s.second * 0x9e3779b97f4a7c15ull);
    }
  };
  using Visited = std::unordered_set<std::pair<const Node*, size_t>, StateHash>;

  template <typename Emit>
  static void MatchAt(const Node* node, const std::vector<std::string_view>& words, size_t i,
                      Emit& emit, Visited& visited) {
    if (const Node* hash = node->Child("#")) {
      // '#' swallows zero or more words: continue from every position i..n.
      for (size_t j = i; j <= words.size(); ++j) {
        if (!visited.emplace(hash, j).second) continue;
        MatchAt(hash, words, j, emit, visited);
      }
    }
    if (i == words.size()) {
      for (const T& value : node->values) emit(value);
      return;
    }
    // "*" and "#" children are wildcards, so a key word spelled "*" or "#" only reaches them
    // through the wildcard paths, never as a literal.
    if (words[i] != "*" && words[i] != "#") {
      if (const Node* literal = node->Child(words[i])) {
        MatchAt(literal, words, i + 1, emit, visited);
      }
    }
    if (const Node* star = node->Child("*")) MatchAt(star, words, i + 1, emit, visited);
  }

  static bool RemoveAt(Node* node, const std::vector<std::string_view>& words, size_t i,
                       const T& value) {
    if (i == words.size()) {
      auto it = std::find(node->values.begin(), node->values.end(), value);
      if (it == node->values.end()) return false;
      node->values.erase(it);
      return true;
    }
    auto child = node->children.find(words[i]);
    if (child == node->children.end()) return false;
    if (!RemoveAt(child->second.get(), words, i + 1, value)) return false;
    if (child->second->Empty()) node->children.erase(child);
    return true;
  }

  Node root_;
  size_t size_ = 0;
};

}  // namespace wharf::broker
