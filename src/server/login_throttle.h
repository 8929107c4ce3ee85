// server/login_throttle.h
//
// LoginThrottle slows down password guessing from one source address. After a failed login
// from an address, its next login is checked no sooner than `base_delay` later, and the delay
// doubles with each further failure up to `max_delay`. Every login from a throttled address
// reserves the next slot, so parallel connections from one address are spaced out as well, not
// just consecutive attempts on one. A successful login forgets the address's failures.
//
// Memory is bounded: at most `max_addresses` addresses are remembered (the least recently
// failed is forgotten first), and an address without a failure for kForgetAfter is forgotten.
//
// Time is passed in, so tests need no clock.
//
// Thread safety: thread-safe. Every I/O thread calls it at login; one mutex, a leaf lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/clock.h"

namespace wharf::server {

class LoginThrottle {
 public:
  struct Limits {
    std::chrono::milliseconds base_delay{100};  // 0 turns the throttle off
    std::chrono::milliseconds max_delay{5000};
    size_t max_addresses = 10'000;
  };
  // Failures older than this are forgotten even while the map has room.
  static constexpr std::chrono::minutes kForgetAfter{15};

  explicit LoginThrottle(Limits limits) : limits_(limits) {}

  // A login from `address` arrives at `now`: returns how long it must wait before its password
  // is checked (zero for an address without recent failures), and reserves that slot. Returns
  // nullopt, reserving nothing, when the wait would be longer than `max_wait` (the caller
  // refuses the login rather than let it run into the handshake timeout).
  std::optional<std::chrono::milliseconds> Admit(const std::string& address, SteadyTime now,
                                                 std::chrono::milliseconds max_wait);
  // A login from `address` failed at `now`.
  void Failed(const std::string& address, SteadyTime now);
  // A login from `address` succeeded: its failures are forgotten.
  void Succeeded(const std::string& address);

  // Addresses remembered (for tests and metrics).
  size_t size() const;

 private:
  struct Entry {
    uint32_t failures = 0;
    SteadyTime next;  // no login from here is checked before this
    SteadyTime last_failure;
    std::list<std::string>::iterator lru;  // in lru_
  };

  std::chrono::milliseconds DelayAfter(uint32_t failures) const;
  // REQUIRES: mu_ held. Drops `it` when its failures are older than kForgetAfter.
  bool Expired(std::unordered_map<std::string, Entry>::iterator it, SteadyTime now);

  // Set at construction, then immutable.
  const Limits limits_;

  // Guarded by mu_.
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // front: the most recent failure
};

}  // namespace wharf::server
