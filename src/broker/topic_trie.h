// broker/topic_trie.h
//
// TopicTrie maps AMQP topic binding patterns to values and finds every value whose pattern
// matches a routing key. Words are separated by '.'; in a pattern '*' matches exactly one word
// and '#' matches zero or more words. Words may be empty ("a..b" has three words). As in
// RabbitMQ, the empty string has no words at all: "#" matches it, "*" does not.
//
// Patterns share prefixes in a trie. Match walks it word by word with the set of trie nodes the
// key's words so far can have reached (like a set-of-states NFA run): for each word, every active
// node advances by a literal lookup and by its '*' child, a '#' node also stays active (it
// swallows the word), and entering a node enters its '#' child too ('#' may match zero words).
// A node enters the set at most once per word position, so a match costs at most
// (words + 1) x (trie nodes) node visits, whatever the patterns: no backtracking, no recursion.
// In practice the set holds only the nodes the key can still reach, so a key costs about its
// length times the wildcard branches it keeps open, not the number of bindings
// (bench/topic_bench.cc; docs/benchmarks.md, "Topic routing worst case").
//
// Thread safety: not thread-safe, not even Match (it marks the nodes it visits); owned by its
// exchange (broker thread).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
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
      if (!child) {
        child = std::make_unique<Node>();
        child->is_hash = word == "#";
        if (word == "#") node->hash = child.get();
        if (word == "*") node->star = child.get();
        ++node_count_;
      }
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
  // matching patterns is emitted twice, so callers that need uniqueness deduplicate. Returns the
  // number of node visits the walk made: at most (words + 1) x node_count() (tests check it).
  template <typename Emit>
  size_t Match(std::string_view routing_key, Emit&& emit) const {
    const auto words = SplitTopicWords(routing_key);
    std::vector<const Node*> active;
    std::vector<const Node*> next;
    size_t visits = 0;
    uint64_t stamp = ++stamp_;
    // Puts `node` in `into` unless it is there already this step, and with it its chain of '#'
    // children (each may match zero words). A marked node's '#' child was marked with it.
    auto enter = [&visits, &stamp](const Node* node, std::vector<const Node*>& into) {
      for (; node != nullptr && node->stamp != stamp; node = node->hash) {
        node->stamp = stamp;
        into.push_back(node);
        ++visits;
      }
    };
    enter(&root_, active);
    for (std::string_view word : words) {
      if (active.empty()) break;
      stamp = ++stamp_;
      next.clear();
      // "*" and "#" children are wildcards, so a key word spelled "*" or "#" only reaches them
      // through the wildcard paths, never as a literal.
      const bool literal = word != "*" && word != "#";
      for (const Node* node : active) {
        if (node->is_hash) enter(node, next);  // '#' swallows this word too
        if (literal && node->HasLiterals()) enter(node->Child(word), next);
        enter(node->star, next);
      }
      active.swap(next);
    }
    for (const Node* node : active) {
      for (const T& value : node->values) emit(value);
    }
    return visits;
  }

  size_t size() const { return size_; }
  // Trie nodes, the root included: the bound on the nodes a match visits per word.
  size_t node_count() const { return node_count_; }

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
    Node* hash = nullptr;        // children["#"], if any
    Node* star = nullptr;        // children["*"], if any
    bool is_hash = false;        // this node is a pattern's '#' word
    mutable uint64_t stamp = 0;  // the Match step that last entered it
    bool Empty() const { return children.empty() && values.empty(); }
    bool HasLiterals() const { return children.size() > (hash ? 1u : 0u) + (star ? 1u : 0u); }
    const Node* Child(std::string_view word) const {
      auto it = children.find(word);
      return it == children.end() ? nullptr : it->second.get();
    }
  };

  bool RemoveAt(Node* node, const std::vector<std::string_view>& words, size_t i, const T& value) {
    if (i == words.size()) {
      auto it = std::find(node->values.begin(), node->values.end(), value);
      if (it == node->values.end()) return false;
      node->values.erase(it);
      return true;
    }
    auto child = node->children.find(words[i]);
    if (child == node->children.end()) return false;
    if (!RemoveAt(child->second.get(), words, i + 1, value)) return false;
    if (child->second->Empty()) {
      if (child->second.get() == node->hash) node->hash = nullptr;
      if (child->second.get() == node->star) node->star = nullptr;
      node->children.erase(child);
      --node_count_;
    }
    return true;
  }

  Node root_;
  size_t size_ = 0;
  size_t node_count_ = 1;       // the root
  mutable uint64_t stamp_ = 0;  // one per Match step; never wraps in practice
};

}  // namespace wharf::broker
