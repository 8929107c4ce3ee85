// fuzz/amqp_field_table_fuzzer.cc
//
// amqp::DecodeTable (a field table's bytes after its length), the table's conversion to
// Wharf headers (what a published message's headers become), the Erlang type names RabbitMQ's
// error texts quote, and the SASL responses a login reads: AMQPLAIN (a field table) and PLAIN.
// Checked besides "no crash": a decoded table encodes to bytes that decode and encode to the
// same bytes again.
#include <cstdint>
#include <string>
#include <string_view>

#include "amqp/erlang_text.h"
#include "amqp/field_table.h"
#include "amqp/message_map.h"
#include "amqp/sasl.h"
#include "common/utf8.h"
#include "fuzz_check.h"

namespace {

void Visit(const wharf::amqp::FieldTable& table) {
  for (const auto& [key, value] : table.entries) {
    (void)wharf::IsValidUtf8(key);
    (void)wharf::amqp::ErlangTypeName(value);
    if (const auto* nested = std::get_if<wharf::amqp::FieldTable>(&value.value)) Visit(*nested);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using wharf::fuzz::Check;
  namespace amqp = wharf::amqp;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  amqp::Credentials credentials;
  (void)amqp::ParsePlain(bytes, &credentials);
  (void)amqp::ParseAmqplain(bytes, &credentials);
  (void)amqp::ErlangBinaryP(bytes);
  (void)amqp::ErlangBinaryW(bytes);
  amqp::FieldTable table;
  if (!amqp::DecodeTable(bytes, &table).ok()) return 0;
  Visit(table);
  (void)amqp::ToWharfHeaders(table);
  std::string once;
  amqp::AppendTable(table, &once);
  // AppendTable writes the 4-byte length first; DecodeTable takes what follows it.
  Check(once.size() >= 4, "an encoded table has its length");
  amqp::FieldTable again;
  Check(amqp::DecodeTable(std::string_view(once).substr(4), &again).ok(),
        "an encoded table decodes");
  std::string twice;
  amqp::AppendTable(again, &twice);
  Check(once == twice, "a table's encoding is stable");
  return 0;
}
