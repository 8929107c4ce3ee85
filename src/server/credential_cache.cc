#include "server/credential_cache.h"

#include <openssl/evp.h>

#include <algorithm>
#include <string>

namespace wharf::server {

CredentialCache::Key CredentialCache::KeyOf(std::string_view user, std::string_view password,
                                            std::string_view stored_hash) {
  // Lengths first: no two different triples hash the same input.
  std::string input;
  input.reserve(user.size() + password.size() + stored_hash.size() + 24);
  for (std::string_view part : {user, password, stored_hash}) {
    input += std::to_string(part.size());
    input += ':';
    input += part;
  }
  Key key{};
  unsigned int length = 0;
  EVP_Digest(input.data(), input.size(), key.data(), &length, EVP_sha256(), nullptr);
  std::fill(input.begin(), input.end(), '\0');  // it held the password
  return key;
}

bool CredentialCache::Verified(std::string_view user, std::string_view password,
                               std::string_view stored_hash, Clock::time_point now) {
  if (stored_hash.empty()) return false;  // no password to match
  const Key key = KeyOf(user, password, stored_hash);
  std::lock_guard lock(mu_);
  auto it = checked_.find(key);
  if (it == checked_.end()) return false;
  if (now - it->second >= kTtl) {
    checked_.erase(it);
    return false;
  }
  return true;
}

void CredentialCache::Remember(std::string_view user, std::string_view password,
                               std::string_view stored_hash, Clock::time_point now) {
  if (stored_hash.empty()) return;
  const Key key = KeyOf(user, password, stored_hash);
  std::lock_guard lock(mu_);
  if (checked_.size() >= kMaxEntries && !checked_.contains(key)) {
    // Full: the expired go, and if none had, the oldest.
    std::erase_if(checked_, [&](const auto& entry) { return now - entry.second >= kTtl; });
    if (checked_.size() >= kMaxEntries) {
      auto oldest =
          std::min_element(checked_.begin(), checked_.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      checked_.erase(oldest);
    }
  }
  checked_[key] = now;
}

size_t CredentialCache::size() const {
  std::lock_guard lock(mu_);
  return checked_.size();
}

}  // namespace wharf::server
