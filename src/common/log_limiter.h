// common/log_limiter.h
//
// LogLimiter lets a repeated log line through at most once per interval and counts the ones it
// held back, so a flood (refused connections, failed accepts, slow senders, publishes a failing
// store could not confirm) costs one line per interval that says how many it stands for.
//
// Thread safety: none; each user keeps its own, on one thread or under its own lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace wharf {

class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::steady_clock::duration interval) : interval_(interval) {}

  // True when a line may be written now (the first time, then once per interval); `*held`
  // then gets how many calls were held back since the last line that went through.
  bool Allow(std::chrono::steady_clock::time_point now, uint64_t* held = nullptr) {
    if (last_ && now - *last_ < interval_) {
      ++held_;
      return false;
    }
    last_ = now;
    if (held) *held = held_;
    held_ = 0;
    return true;
  }

 private:
  const std::chrono::steady_clock::duration interval_;
  std::optional<std::chrono::steady_clock::time_point> last_;
  uint64_t held_ = 0;
};

}  // namespace wharf
