// fuzz/config_fuzzer.cc
//
// wharfd's config file (server/options.h): the TOML parser (toml11), every section's keys,
// ranges and addresses, the TLS settings' names (not their files), the [[auth.users]] password
// hashes, then ValidateOptions. A bad file must give wharfd a clear error, never a crash.
#include <cstdint>
#include <string>
#include <string_view>

#include "server/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  wharf::server::ServerOptions options;
  if (!wharf::server::ParseConfigText(text, "fuzz.toml", &options).ok()) return 0;
  (void)wharf::server::ValidateOptions(options);
  return 0;
}
