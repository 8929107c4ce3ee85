// tests/support/spec_builders.h: topology specs in one line, for tests (designated
// initialisers would leave fields out, which -Wmissing-field-initializers refuses).
#pragma once

#include <string>

#include "wharf/types.h"

namespace wharf::testing {

inline ExchangeSpec Ex(const std::string& name, ExchangeType type) {
  ExchangeSpec spec;
  spec.name = name;
  spec.type = type;
  return spec;
}

// To `queue`, or with `destination` to that exchange (queue "").
inline BindingSpec Bd(const std::string& queue, const std::string& exchange, const std::string& key,
                      const std::string& destination = "") {
  BindingSpec spec;
  spec.queue = queue;
  spec.exchange = exchange;
  spec.routing_key = key;
  spec.destination_exchange = destination;
  return spec;
}

}  // namespace wharf::testing
