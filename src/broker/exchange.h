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

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "broker/headers_match.h"
#include "broker/policy.h"
#include "broker/topic_trie.h"
#include "wharf/status.h"
#include "wharf/types.h"

namespace wharf::broker {

class Queue;
class Exchange;

// What a binding points at: a queue, or another exchange (exchange-to-exchange binding).
// Exactly one of the two is set.
struct Destination {
  Queue* queue = nullptr;
  Exchange* exchange = nullptr;
  friend auto operator<=>(const Destination&, const Destination&) = default;
};

class Exchange {
 public:
  // An empty spec.vhost is the default vhost.
  explicit Exchange(ExchangeSpec spec);

  const ExchangeSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  const std::string& vhost() const { return spec_.vhost; }
  size_t binding_count() const { return bindings_.size(); }
  // Where unroutable messages go: the declared alternate exchange, else the policy's
  // (broker/policy.h); "" = nowhere.
  const std::string& alternate_exchange() const { return alternate_exchange_; }
  // A policy applies from now on (Broker::ApplyPolicy); "" and {} = none.
  void SetPolicy(std::string name, Headers definition);
  const std::string& applied_policy() const { return applied_policy_; }

  // Adds a binding; binding the same (destination, key, arguments) again is a no-op that
  // returns OK with *added = false. kInvalidArgument for a bad headers x-match value.
  Status Bind(Destination destination, const std::string& routing_key, const Headers& arguments,
              bool* added);
  Status Bind(Queue* queue, const std::string& routing_key, const Headers& arguments, bool* added) {
    return Bind(Destination{queue, nullptr}, routing_key, arguments, added);
  }
  // Returns false when no such binding existed.
  bool Unbind(Destination destination, const std::string& routing_key, const Headers& arguments);
  bool Unbind(Queue* queue, const std::string& routing_key, const Headers& arguments) {
    return Unbind(Destination{queue, nullptr}, routing_key, arguments);
  }
  // Drops every binding to `destination` (used when it is deleted).
  void UnbindDestination(Destination destination);
  void UnbindQueue(Queue* queue) { UnbindDestination(Destination{queue, nullptr}); }

  // Appends the matching destinations to `out`, each at most once per call. Does not follow
  // exchange-to-exchange bindings: the broker does, with a guard against cycles.
  void Route(const std::string& routing_key, const Headers& headers,
             std::vector<Destination>* out) const;
  // The queues bound directly, for callers that need nothing else (tests, benchmarks).
  void Route(const std::string& routing_key, const Headers& headers,
             std::vector<Queue*>* out) const;

  ExchangeInfo Info() const;
  // Every binding from this exchange, in a stable order.
  std::vector<BindingSpec> Bindings() const;

  // The exact identity of an arguments table (doubles by their bits), as bindings compare it.
  static std::string Canonical(const Headers& arguments);

 private:
  // Identity of a binding: the arguments are in a canonical text form.
  using BindingKey = std::tuple<Destination, std::string, std::string>;
  struct HeadersBinding {
    Destination queue;
    Headers arguments;
    HeadersMatchMode mode;
    std::string canonical;
  };

  ExchangeSpec spec_;
  std::string alternate_exchange_;
  std::string applied_policy_;
  Headers policy_definition_;
  std::map<BindingKey, Headers> bindings_;  // every binding with its arguments
  std::unordered_map<std::string, std::vector<Destination>> direct_;
  std::vector<Destination> fanout_;
  TopicTrie<Destination> topic_;
  std::vector<HeadersBinding> headers_;
};

// What a declaration's type and arguments make of `spec`, as RabbitMQ takes them (AMQP's
// exchange.declare and the HTTP API alike): a type of direct, fanout, topic or headers; or
// x-delayed-message (RabbitMQ's delayed-message plugin), routing as arguments["x-delayed-type"]
// says; and the alternate exchange arguments["alternate-exchange"] names. Sets spec->type,
// spec->delayed and spec->alternate_exchange. kInvalidArgument ("unknown exchange type 'x'") for
// another type; kPreconditionFailed with RabbitMQ's text for a bad x-delayed-type.
Status ApplyDeclaredType(std::string_view type, ExchangeSpec* spec);

}  // namespace wharf::broker
