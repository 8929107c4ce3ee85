#include "server/login_throttle.h"

#include <algorithm>

namespace wharf::server {

std::chrono::milliseconds LoginThrottle::DelayAfter(uint32_t failures) const {
  if (failures == 0 || limits_.base_delay.count() == 0) return std::chrono::milliseconds(0);
  // Doubling from base_delay; 2^30 times any base is past every cap.
  auto delay = limits_.base_delay * (int64_t{1} << std::min<uint32_t>(failures - 1, 30));
  return std::min(delay, limits_.max_delay);
}

bool LoginThrottle::Expired(std::unordered_map<std::string, Entry>::iterator it, SteadyTime now) {
  if (now - it->second.last_failure < kForgetAfter) return false;
  lru_.erase(it->second.lru);
  entries_.erase(it);
  return true;
}

std::optional<std::chrono::milliseconds> LoginThrottle::Admit(const std::string& address,
                                                              SteadyTime now,
                                                              std::chrono::milliseconds max_wait) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(address);
  if (it == entries_.end() || Expired(it, now)) return std::chrono::milliseconds(0);
  Entry& entry = it->second;
  SteadyTime at = std::max(now, entry.next);
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(at - now);
  if (wait > max_wait) return std::nullopt;
  // The login after this one waits a full delay after it, whatever it turns out to be.
  entry.next = at + DelayAfter(entry.failures);
  return wait;
}

void LoginThrottle::Failed(const std::string& address, SteadyTime now) {
  if (limits_.base_delay.count() == 0) return;
  std::lock_guard lock(mu_);
  auto it = entries_.find(address);
  if (it != entries_.end() && Expired(it, now)) it = entries_.end();
  if (it == entries_.end()) {
    lru_.push_front(address);
    it = entries_.emplace(address, Entry{}).first;
    it->second.lru = lru_.begin();
    it->second.next = now;
    if (entries_.size() > limits_.max_addresses) {
      entries_.erase(lru_.back());
      lru_.pop_back();
    }
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  Entry& entry = it->second;
  ++entry.failures;
  entry.last_failure = now;
  entry.next = std::max(entry.next, now + DelayAfter(entry.failures));
}

void LoginThrottle::Succeeded(const std::string& address) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(address);
  if (it == entries_.end()) return;
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

size_t LoginThrottle::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace wharf::server
