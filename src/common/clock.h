// common/clock.h
//
// Clock is the broker's only source of time, so that tests can drive timers by hand.
// SystemClock reads std::chrono::steady_clock (deadlines) and system_clock (wall time).
//
// Thread safety: SystemClock is thread-safe. ManualClock is not; tests drive it from one thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace wharf {

using SteadyTime = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime Now() const = 0;      // for deadlines
  virtual int64_t WallMillis() const = 0;  // Unix milliseconds, for timestamps
  virtual int64_t WallMicros() const = 0;  // Unix microseconds (due times are rounded up)
};

class SystemClock final : public Clock {
 public:
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
  int64_t WallMillis() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int64_t WallMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

class ManualClock final : public Clock {
 public:
  SteadyTime Now() const override { return now_; }
  int64_t WallMillis() const override {
    return 1'700'000'000'000 + wall_offset_ms_ +
           std::chrono::duration_cast<std::chrono::milliseconds>(now_.time_since_epoch()).count();
  }
  int64_t WallMicros() const override { return WallMillis() * 1000; }
  void Advance(std::chrono::milliseconds d) { now_ += d; }
  // Steps the wall clock alone (an operator or NTP setting the time); steady time is unmoved.
  void StepWall(std::chrono::milliseconds d) { wall_offset_ms_ += d.count(); }

 private:
  SteadyTime now_{};
  int64_t wall_offset_ms_ = 0;
};

}  // namespace wharf
