// server/frame_budget.h
//
// FrameBudget bounds the memory that all connections together hold for frames larger than one
// read ([limits] partial_frame_bytes; docs/operations.md, "Partial frames"). Each connection
// may buffer a read's worth (64 KiB) of its own; a frame larger than that must first reserve
// the rest of its declared size here (net::FrameDecoder::WantedGrant), and is not read further
// until it has. The reservation is made once the frame's length prefix is in, for the whole
// frame, so every frame that is admitted can finish: connections never hold halves of frames
// that wait for each other. Memory is still taken only as bytes arrive (the decoder), and a
// sender that stalls is closed after [limits] frame_timeout_ms, which gives its reservation
// back.
//
// Connections that cannot reserve wait in one queue, first come first served (a large frame is
// not overtaken by smaller ones, so it cannot starve); a release grants as many of them, in
// order, as now fit. A frame larger than the whole budget is admitted when nothing else is
// reserved. The figures (for /metrics) are kept here too.
//
// Thread safety: every member may be called from any thread (each connection's I/O thread).
// The reservation and the queue are under mu_, a leaf lock, never held while calling out: a
// waiter's `granted` runs after it is released.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "common/log_limiter.h"

namespace wharf::server {

// What /metrics shows of partial frames.
struct FrameBudgetMetrics {
  uint64_t limit_bytes = 0;     // [limits] partial_frame_bytes
  uint64_t reserved_bytes = 0;  // reserved by frames being received
  uint64_t held_bytes = 0;      // memory the connections' buffers hold beyond their allowance
  uint64_t waiting = 0;         // connections waiting to reserve (not read meanwhile)
  uint64_t timeouts_total = 0;  // connections closed for a frame slower than frame_timeout_ms
};

class FrameBudget {
 public:
  explicit FrameBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}

  FrameBudget(const FrameBudget&) = delete;
  FrameBudget& operator=(const FrameBudget&) = delete;

  uint64_t limit() const { return limit_; }

  // Reserves `bytes` for connection `id`: true when they are reserved now. Otherwise the
  // connection joins the queue (behind everyone already waiting) and false is returned; once
  // the bytes are reserved for it, `granted` is called on the thread that released them.
  bool Reserve(uint64_t id, uint64_t bytes, std::function<void()> granted);
  // Gives `bytes` back and grants the waiters that now fit, in order.
  void Release(uint64_t bytes);
  // Connection `id` no longer waits (it is closing). True when it was in the queue; false when
  // it was not, e.g. its grant is already on its way (and must be released by its receiver).
  bool CancelWait(uint64_t id);

  // The memory actually held beyond the connections' allowances (a gauge).
  void AddHeld(int64_t delta) {
    held_.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed);
  }
  // A connection was closed for a slow frame. Returns true when that deserves a log line: the
  // first one, then at most one per kLogInterval; `*unlogged` is the number since the last line.
  bool CountTimeout(std::chrono::steady_clock::time_point now, uint64_t* unlogged);

  FrameBudgetMetrics Metrics() const;

  static constexpr std::chrono::seconds kLogInterval{10};

 private:
  struct Waiter {
    uint64_t id;
    uint64_t bytes;
    std::function<void()> granted;
  };
  // Under mu_: reserves for the waiters at the front that fit now and returns their grants,
  // to be called once mu_ is released.
  std::vector<std::function<void()>> GrantFitting();
  // Under mu_: whether `bytes` may be reserved beside what is.
  bool Fits(uint64_t bytes) const {
    return reserved_ == 0 || (reserved_ <= limit_ && bytes <= limit_ - reserved_);
  }

  const uint64_t limit_;
  mutable std::mutex mu_;  // a leaf
  uint64_t reserved_ = 0;
  std::deque<Waiter> waiters_;
  LogLimiter queue_log_{kLogInterval};
  LogLimiter timeout_log_{kLogInterval};
  // Gauges, read without the lock.
  std::atomic<uint64_t> held_{0};
  std::atomic<uint64_t> timeouts_{0};
};

}  // namespace wharf::server
