// common/base64.h
//
// Base64 (RFC 4648, standard alphabet, padded) by OpenSSL's EVP_EncodeBlock/EVP_DecodeBlock:
// wharfctl's JSON carries binary bodies and header values in it, and HTTP Basic credentials
// arrive in it (server/http_auth.h).
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace wharf {

std::string Base64Encode(std::string_view bytes);
// nullopt when `text` is not whole padded base64 (no line breaks, no spaces).
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace wharf
