// common/password.h
//
// Salted password hashes for the users in the config file. Format (one string):
//
//   pbkdf2-sha256$<iterations>$<salt, hex>$<derived key, hex>
//
// PBKDF2-HMAC-SHA256 from OpenSSL, 16-byte random salt, 32-byte key. `wharfctl hash-password`
// prints one. Verification compares in constant time.
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "wharf/status.h"

namespace wharf {

inline constexpr uint32_t kDefaultPasswordIterations = 20000;
// No hash asking for more is ever parsed; a server may set a lower cap (ValidatePasswordHash).
inline constexpr uint32_t kMaxPasswordIterations = 10'000'000;

// Returns the encoded hash of `password` with a fresh random salt.
std::string HashPassword(std::string_view password,
                         uint32_t iterations = kDefaultPasswordIterations);

// kInvalidConfig when `encoded` is not in the format above, or when it asks for more than
// `max_iterations` PBKDF2 iterations (each login would cost that much CPU).
Status ValidatePasswordHash(std::string_view encoded,
                            uint32_t max_iterations = kMaxPasswordIterations);

// True when `password` matches `encoded`. False for a malformed `encoded`.
bool VerifyPassword(std::string_view password, std::string_view encoded);

}  // namespace wharf
