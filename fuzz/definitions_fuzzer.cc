// fuzz/definitions_fuzzer.cc
//
// A definitions document (json/definitions.h) as `wharfctl import`, POST /api/definitions and
// `wharfd --definitions` read it: the nesting check, nlohmann-json's parser, then every
// section, user hash, policy and argument read into Wharf's types. A bad document must give an
// error naming the item, never a crash.
//
// Checked besides "no crash": what reads writes back (DefinitionsJson) a document that reads
// again with as many items of each kind.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "json/definitions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using wharf::json::Json;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (wharf::json::NestedDeeperThan(text, 32)) return 0;  // refused before parsing, as wharfd does
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::exception&) {
    return 0;
  }
  // The first byte picks a per-vhost import or a whole one.
  auto read = wharf::json::DefinitionsFromJson(
      doc, size > 0 && data[0] % 2 == 0 ? std::optional<std::string_view>("v") : std::nullopt);
  if (!read.ok()) return 0;
  auto again = wharf::json::DefinitionsFromJson(
      Json::parse(wharf::json::Dump(wharf::json::DefinitionsJson(*read, "fuzz"))));
  wharf::fuzz::Check(again.ok(), "a document Wharf writes reads back");
  wharf::fuzz::Check(again->users.size() == read->users.size() &&
                         again->policies.size() == read->policies.size() &&
                         again->queues.size() == read->queues.size() &&
                         again->exchanges.size() == read->exchanges.size() &&
                         again->bindings.size() == read->bindings.size() &&
                         again->permissions.size() == read->permissions.size(),
                     "a document Wharf writes reads back with every item");
  return 0;
}
