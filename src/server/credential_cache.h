// server/credential_cache.h
//
// CredentialCache remembers, for a short while, the HTTP Basic credentials that passed their
// password check (server/http_auth.h), so that a console or a dashboard polling the HTTP API
// every few seconds costs one PBKDF2 check per user and minute, not one per request.
//
// What is kept is a SHA-256 of the user, the password and the user's stored hash, never the
// password: an entry only matches while the user's hash is the one it was checked against, so
// a changed password or a deleted user (who has none) misses at once, and the next request is
// checked again. Only successes are kept; a wrong password is always checked (and throttled).
// Entries live kTtl from their check, at most kMaxEntries of them (the oldest go first).
//
// Thread safety: thread-safe (one mutex, a leaf, held for a map lookup).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>

namespace wharf::server {

class CredentialCache {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kTtl{60};
  static constexpr size_t kMaxEntries = 4096;

  // Whether `user` with `password` passed a check against `stored_hash` less than kTtl ago.
  bool Verified(std::string_view user, std::string_view password, std::string_view stored_hash,
                Clock::time_point now);
  // Notes that they passed, at `now`.
  void Remember(std::string_view user, std::string_view password, std::string_view stored_hash,
                Clock::time_point now);
  size_t size() const;

 private:
  using Key = std::array<uint8_t, 32>;
  static Key KeyOf(std::string_view user, std::string_view password, std::string_view stored_hash);

  mutable std::mutex mu_;
  std::map<Key, Clock::time_point> checked_;  // GUARDED_BY(mu_): when each passed
};

}  // namespace wharf::server
