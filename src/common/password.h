// common/password.h
//
// Salted password hashes for the users in the config file. Format (one string):
//
//   pbkdf2-sha256$<iterations>$<salt, hex>$<derived key, hex>
//
// PBKDF2-HMAC-SHA256 from OpenSSL, 16-byte random salt, 32-byte key. `wharfctl hash-password`
// prints one. Verification compares in constant time.
//
// RabbitMQ's hashes are verified too, so that its users log in to Wharf with their passwords
// once its definitions are imported (docs/security.md, "RabbitMQ's password hashes"):
//
//   rabbit-sha256$<base64 of a 4-byte salt and SHA-256(salt + password)>
//   rabbit-sha512$<the same with SHA-512>
//   rabbit-md5$<the same with MD5>
//
// the base64 being a definitions file's `password_hash` as it is, under its
// `hashing_algorithm` rabbit_password_hashing_sha256, _sha512 or _md5. They are one unsalted-
// iteration hash each, far cheaper to attack than PBKDF2: a migrated user should be given a
// new password (which is hashed Wharf's way).
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

// RabbitMQ's hashing_algorithm names and Wharf's scheme for each: "rabbit_password_hashing_sha256"
// <-> "rabbit-sha256" (and _sha512, _md5). Empty when unknown.
std::string_view RabbitMqHashScheme(std::string_view hashing_algorithm);
std::string_view RabbitMqHashingAlgorithm(std::string_view encoded);

}  // namespace wharf
