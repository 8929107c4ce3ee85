#include "server/frame_budget.h"

#include <spdlog/spdlog.h>

#include <vector>

namespace wharf::server {

bool FrameBudget::Reserve(uint64_t id, uint64_t bytes, std::function<void()> granted) {
  bool log = false;
  size_t waiting = 0;
  uint64_t reserved = 0;
  {
    std::lock_guard lock(mu_);
    // First come, first served: nobody overtakes a connection that waits.
    if (waiters_.empty() && Fits(bytes)) {
      reserved_ += bytes;
      return true;
    }
    waiters_.push_back(Waiter{id, bytes, std::move(granted)});
    log = queue_log_.Allow(std::chrono::steady_clock::now());
    waiting = waiters_.size();
    reserved = reserved_;
  }
  if (log) {
    spdlog::warn(
        "conn={} waits to receive a frame of {} bytes: {} of the {} bytes for partial frames "
        "([limits] partial_frame_bytes) are reserved; {} connections wait, unread, for their "
        "turn",
        id, bytes, reserved, limit_, waiting);
  } else {
    spdlog::debug("conn={} waits to receive a frame of {} bytes ({} connections wait)", id, bytes,
                  waiting);
  }
  return false;
}

std::vector<std::function<void()>> FrameBudget::GrantFitting() {
  std::vector<std::function<void()>> granted;
  while (!waiters_.empty() && Fits(waiters_.front().bytes)) {
    reserved_ += waiters_.front().bytes;
    granted.push_back(std::move(waiters_.front().granted));
    waiters_.pop_front();
  }
  return granted;
}

void FrameBudget::Release(uint64_t bytes) {
  if (bytes == 0) return;
  std::vector<std::function<void()>> granted;
  {
    std::lock_guard lock(mu_);
    reserved_ -= std::min(bytes, reserved_);
    granted = GrantFitting();
  }
  for (auto& fn : granted) fn();
}

bool FrameBudget::CancelWait(uint64_t id) {
  std::vector<std::function<void()>> granted;
  bool found = false;
  {
    std::lock_guard lock(mu_);
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->id == id) {
        waiters_.erase(it);
        found = true;
        break;
      }
    }
    // The one that left may have been the head that did not fit: those behind it that do now
    // go at once, not at the next release.
    if (found) granted = GrantFitting();
  }
  for (auto& fn : granted) fn();
  return found;
}

bool FrameBudget::CountTimeout(std::chrono::steady_clock::time_point now, uint64_t* unlogged) {
  timeouts_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  return timeout_log_.Allow(now, unlogged);
}

FrameBudgetMetrics FrameBudget::Metrics() const {
  FrameBudgetMetrics m;
  m.limit_bytes = limit_;
  m.held_bytes = held_.load(std::memory_order_relaxed);
  m.timeouts_total = timeouts_.load(std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  m.reserved_bytes = reserved_;
  m.waiting = waiters_.size();
  return m;
}

}  // namespace wharf::server
