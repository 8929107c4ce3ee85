// fuzz/amqp_checks.h
//
// The AMQP targets' shared properties: what decoded encodes to bytes that decode and encode
// to the same bytes again (CheckStableEncoding in fuzz_check.h), for methods and properties.
#pragma once

#include <string>
#include <string_view>

#include "amqp/methods.h"
#include "amqp/properties.h"
#include "fuzz_check.h"

namespace wharf::fuzz {

inline void CheckMethodEncoding(const amqp::Method& method) {
  CheckStableEncoding(
      method, [](const amqp::Method& m, std::string* out) { amqp::EncodeMethod(m, out); },
      [](std::string_view bytes, amqp::Method* out) { return amqp::DecodeMethod(bytes, out).ok(); },
      "a method's encoding is stable");
}

inline void CheckPropertiesEncoding(const amqp::BasicProperties& properties) {
  CheckStableEncoding(
      properties,
      [](const amqp::BasicProperties& p, std::string* out) { amqp::EncodeProperties(p, out); },
      [](std::string_view bytes, amqp::BasicProperties* out) {
        return amqp::DecodeProperties(bytes, out).ok();
      },
      "the properties' encoding is stable");
}

}  // namespace wharf::fuzz
