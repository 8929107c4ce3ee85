// server/user_usage.h
//
// UserUsage counts what each user has open across all connections: connections (both
// protocols) and AMQP channels, against the user's limits (UserLimits: RabbitMQ's per-user
// max-connections and max-channels). A connection or channel takes a Slot when it opens and
// gives it back when the Slot is destroyed, so every way a connection or channel ends (close,
// error, a dropped socket, shutdown) returns it. Refusals use RabbitMQ's words: the AMQP codec
// sends them as 530 NOT_ALLOWED, the native protocol as RESOURCE_EXHAUSTED.
//
// Limits are read when a slot is taken: a lowered limit refuses new connections and channels
// and leaves those open alone, as in RabbitMQ.
//
// Thread safety: thread-safe; I/O threads take and return slots. One mutex, a leaf lock.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "wharf/result.h"

namespace wharf::server {

class UserUsage {
 public:
  enum class Kind { kConnection, kChannel };

  // One connection or channel of a user; given back when destroyed. Movable.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }

    bool held() const { return owner_ != nullptr; }
    void Release();

   private:
    friend class UserUsage;
    UserUsage* owner_ = nullptr;
    Kind kind_ = Kind::kConnection;
    std::string user_;
  };

  // A slot for `user` when it has fewer than `limit` of that kind open (a negative limit is no
  // limit); kResourceExhausted with RabbitMQ's text otherwise.
  Result<Slot> Take(Kind kind, const std::string& user, int64_t limit);

  // What `user` has open now (tests, listings).
  uint64_t Count(Kind kind, const std::string& user) const;

 private:
  struct Counts {
    uint64_t connections = 0;
    uint64_t channels = 0;
  };
  void Give(Kind kind, const std::string& user);

  mutable std::mutex mu_;
  std::unordered_map<std::string, Counts> counts_;  // users with something open only
};

}  // namespace wharf::server
