// Unit tests for server/credential_cache.h: what passed is remembered a minute, for the same
// user, password and stored hash only, and the cache stays bounded.
#include "server/credential_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace wharf::server {
namespace {

using Clock = CredentialCache::Clock;

TEST(CredentialCache, RemembersWhatPassedForTheSameUserPasswordAndHash) {
  CredentialCache cache;
  const Clock::time_point t0 = Clock::now();
  EXPECT_FALSE(cache.Verified("alice", "pw", "hash-1", t0));
  cache.Remember("alice", "pw", "hash-1", t0);
  EXPECT_TRUE(cache.Verified("alice", "pw", "hash-1", t0 + std::chrono::seconds(59)));
  EXPECT_FALSE(cache.Verified("alice", "other", "hash-1", t0));
  EXPECT_FALSE(cache.Verified("bob", "pw", "hash-1", t0));
  // A changed password (a new stored hash) misses at once.
  EXPECT_FALSE(cache.Verified("alice", "pw", "hash-2", t0));
  // The parts cannot be shifted into one another.
  cache.Remember("ab", "c", "hash", t0);
  EXPECT_FALSE(cache.Verified("a", "bc", "hash", t0));
}

TEST(CredentialCache, ForgetsAfterItsTtl) {
  CredentialCache cache;
  const Clock::time_point t0 = Clock::now();
  cache.Remember("alice", "pw", "hash", t0);
  EXPECT_FALSE(cache.Verified("alice", "pw", "hash", t0 + CredentialCache::kTtl));
  EXPECT_EQ(cache.size(), 0u);  // an expired entry that is looked up goes
}

TEST(CredentialCache, AUserWithoutAHashIsNeverRemembered) {
  CredentialCache cache;
  const Clock::time_point t0 = Clock::now();
  cache.Remember("nopass", "", "", t0);
  EXPECT_FALSE(cache.Verified("nopass", "", "", t0));
  EXPECT_EQ(cache.size(), 0u);
}

TEST(CredentialCache, StaysBoundedDroppingTheOldestFirst) {
  CredentialCache cache;
  const Clock::time_point t0 = Clock::now();
  for (size_t i = 0; i < CredentialCache::kMaxEntries; ++i) {
    cache.Remember("user" + std::to_string(i), "pw", "hash", t0 + std::chrono::milliseconds(i));
  }
  EXPECT_EQ(cache.size(), CredentialCache::kMaxEntries);
  const Clock::time_point later = t0 + std::chrono::seconds(10);
  cache.Remember("newcomer", "pw", "hash", later);
  EXPECT_EQ(cache.size(), CredentialCache::kMaxEntries);
  EXPECT_TRUE(cache.Verified("newcomer", "pw", "hash", later));
  EXPECT_FALSE(cache.Verified("user0", "pw", "hash", later));  // the oldest went
  EXPECT_TRUE(cache.Verified("user1", "pw", "hash", later));
  // Once they expire, the expired go rather than anyone fresh.
  const Clock::time_point much_later = t0 + CredentialCache::kTtl + std::chrono::seconds(5);
  cache.Remember("another", "pw", "hash", much_later);
  EXPECT_EQ(cache.size(), 2u);  // the newcomer (checked at 10 s) and this one
  EXPECT_TRUE(cache.Verified("newcomer", "pw", "hash", much_later));
}

}  // namespace
}  // namespace wharf::server
