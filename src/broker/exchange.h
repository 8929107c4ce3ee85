// broker/exchange.h
//
// Exchange holds the bindings of one exchange and routes a message to the queues they select:
//   direct  - the routing key equals the binding key (hash lookup);
//   fanout  - every bound queue;
//   topic   - AMQP patterns (topic_trie.h);
//   headers - the binding's match table against the message headers (headers_match.h).
// A queue bound twice with different keys that both match receives one copy (Route dedups).
//
// Thread safety: confined to the broker thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "broker/headers_match.h"
#include "broker/topic_trie.h"
#include "wharf/status.h"
#include "wharf/types.h"

namespace wharf::broker {

class Queue;

class Exchange {
 public:
  explicit Exchange(ExchangeSpec spec) : spec_(std::move(spec)) {}

  const ExchangeSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  size_t binding_count() const { return bindings_.size(); }

  // Adds a binding; binding the same (queue, key, arguments) again is a no-op that returns OK
  // with *added = false. kInvalidArgument for a bad headers x-match value.
  Status Bind(Queue* queue, const std::string& routing_key, const Headers& arguments, bool* added);
  // Returns false when no such binding existed.
  bool Unbind(Queue* queue, const std::string& routing_key, const Headers& arguments);
  // Drops every binding to `queue` (used when the queue is deleted).
  void UnbindQueue(Queue* queue);

  // Appends the matching queues to `out`, each at most once per call.
  void Route(const std::string& routing_key, const Headers& headers,
             std::vector<Queue*>* out) const;

  ExchangeInfo Info() const;

  // The exact identity of an arguments table (doubles by their bits), as bindings compare it.
  static std::string Canonical(const Headers& arguments);

 private:
  // Identity of a binding: the arguments are in a canonical text form.
  using BindingKey = std::tuple<Queue*, std::string, std::string>;
  struct HeadersBinding {
    Queue* queue;
    Headers arguments;
    HeadersMatchMode mode;
    std::string canonical;
  };

  ExchangeSpec spec_;
  std::map<BindingKey, Headers> bindings_;  // every binding with its arguments
  std::unordered_map<std::string, std::vector<Queue*>> direct_;
  std::vector<Queue*> fanout_;
  TopicTrie<Queue*> topic_;
  std::vector<HeadersBinding> headers_;
};

}  // namespace wharf::broker
