#include "server/user_usage.h"

#include <utility>

#include "common/log_safe.h"

namespace wharf::server {

UserUsage::Slot::Slot(Slot&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      kind_(other.kind_),
      user_(std::move(other.user_)) {}

UserUsage::Slot& UserUsage::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    kind_ = other.kind_;
    user_ = std::move(other.user_);
  }
  return *this;
}

void UserUsage::Slot::Release() {
  if (owner_ == nullptr) return;
  std::exchange(owner_, nullptr)->Give(kind_, user_);
}

Result<UserUsage::Slot> UserUsage::Take(Kind kind, const std::string& user, int64_t limit) {
  {
    std::lock_guard lock(mu_);
    Counts& counts = counts_[user];
    uint64_t& count = kind == Kind::kConnection ? counts.connections : counts.channels;
    if (limit < 0 || count < static_cast<uint64_t>(limit)) {
      ++count;
      Slot slot;
      slot.owner_ = this;
      slot.kind_ = kind;
      slot.user_ = user;
      return slot;
    }
    if (counts.connections == 0 && counts.channels == 0) counts_.erase(user);
  }
  // RabbitMQ's words (rabbit_reader.erl).
  const std::string name = CutForDisplay(user);
  if (kind == Kind::kConnection) {
    return Status(StatusCode::kResourceExhausted, "connection refused for user '" + name +
                                                      "': user connection limit (" +
                                                      std::to_string(limit) + ") is reached");
  }
  return Status(StatusCode::kResourceExhausted,
                "number of channels opened for user '" + name +
                    "' has reached the maximum allowed user limit of (" + std::to_string(limit) +
                    ")");
}

uint64_t UserUsage::Count(Kind kind, const std::string& user) const {
  std::lock_guard lock(mu_);
  auto it = counts_.find(user);
  if (it == counts_.end()) return 0;
  return kind == Kind::kConnection ? it->second.connections : it->second.channels;
}

void UserUsage::Give(Kind kind, const std::string& user) {
  std::lock_guard lock(mu_);
  auto it = counts_.find(user);
  if (it == counts_.end()) return;
  uint64_t& count = kind == Kind::kConnection ? it->second.connections : it->second.channels;
  if (count > 0) --count;
  if (it->second.connections == 0 && it->second.channels == 0) counts_.erase(it);
}

}  // namespace wharf::server
