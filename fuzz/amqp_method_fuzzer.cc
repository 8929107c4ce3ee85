// fuzz/amqp_method_fuzzer.cc
//
// amqp::DecodeMethod on a method frame's payload (class-id, method-id, arguments): every
// method of the spec, field tables inside arguments included. Checked besides "no crash": a
// decoded method encodes to bytes that decode and encode to the same bytes again, and its
// name and content flag are known for it.
#include <cstdint>
#include <string>
#include <string_view>

#include "amqp/methods.h"
#include "amqp_checks.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using wharf::fuzz::Check;
  namespace amqp = wharf::amqp;
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  amqp::Method method;
  if (!amqp::DecodeMethod(payload, &method).ok()) return 0;
  const auto [class_id, method_id] = amqp::MethodId(method);
  Check(amqp::MethodName(class_id, method_id) != "unknown", "a decoded method has a name");
  Check(amqp::HasContent(method) == amqp::HasContent(class_id, method_id),
        "HasContent agrees for the method and its ids");
  wharf::fuzz::CheckMethodEncoding(method);
  return 0;
}
