// Unit tests for common/password.h: PBKDF2 password hashes.
#include "common/password.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace wharf {
namespace {

// Low enough to keep the suite fast; the format and checks are the same at any count.
constexpr uint32_t kFastIterations = 1000;

std::vector<std::string> SplitDollar(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find('$', start);
    parts.push_back(s.substr(start, pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return parts;
}

TEST(Password, HashHasTheDocumentedFormat) {
  std::string hash = HashPassword("secret", kFastIterations);
  auto parts = SplitDollar(hash);
  ASSERT_EQ(parts.size(), 4u) << hash;
  EXPECT_EQ(parts[0], "pbkdf2-sha256");
  EXPECT_EQ(parts[1], "1000");
  EXPECT_EQ(parts[2].size(), 32u);  // 16-byte salt, hex
  EXPECT_EQ(parts[3].size(), 64u);  // 32-byte key, hex
  EXPECT_EQ(parts[2].find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(parts[3].find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_TRUE(ValidatePasswordHash(hash).ok());
}

TEST(Password, HashVerifies) {
  std::string hash = HashPassword("correct horse", kFastIterations);
  EXPECT_TRUE(VerifyPassword("correct horse", hash));
}

TEST(Password, WrongPasswordFails) {
  std::string hash = HashPassword("correct horse", kFastIterations);
  EXPECT_FALSE(VerifyPassword("correct horsE", hash));
  EXPECT_FALSE(VerifyPassword("correct horse ", hash));
  EXPECT_FALSE(VerifyPassword("", hash));
}

TEST(Password, EmptyPasswordHashesAndVerifies) {
  std::string hash = HashPassword("", kFastIterations);
  EXPECT_TRUE(VerifyPassword("", hash));
  EXPECT_FALSE(VerifyPassword("x", hash));
}

TEST(Password, PasswordWithNulBytesIsHashedWhole) {
  std::string with_nul("ab\0cd", 5);
  std::string hash = HashPassword(with_nul, kFastIterations);
  EXPECT_TRUE(VerifyPassword(with_nul, hash));
  EXPECT_FALSE(VerifyPassword("ab", hash));
}

TEST(Password, SaltsDiffer) {
  std::string a = HashPassword("same", kFastIterations);
  std::string b = HashPassword("same", kFastIterations);
  EXPECT_NE(a, b);
  EXPECT_NE(SplitDollar(a)[2], SplitDollar(b)[2]);
  EXPECT_TRUE(VerifyPassword("same", a));
  EXPECT_TRUE(VerifyPassword("same", b));
}

TEST(Password, KnownVectorVerifies) {
  // The widely published PBKDF2-HMAC-SHA256 vector ("password", salt "salt", 1 iteration,
  // 32 bytes): checks the derivation itself, not only that hashing agrees with verifying.
  std::string encoded =
      "pbkdf2-sha256$1$73616c74$120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b";
  ASSERT_TRUE(ValidatePasswordHash(encoded).ok());
  EXPECT_TRUE(VerifyPassword("password", encoded));
  EXPECT_FALSE(VerifyPassword("Password", encoded));
}

TEST(Password, TamperedKeyFails) {
  std::string hash = HashPassword("secret", kFastIterations);
  char& last = hash.back();
  last = last == '0' ? '1' : '0';
  ASSERT_TRUE(ValidatePasswordHash(hash).ok());
  EXPECT_FALSE(VerifyPassword("secret", hash));
}

TEST(Password, ChangedIterationCountFails) {
  std::string hash = HashPassword("secret", kFastIterations);
  auto parts = SplitDollar(hash);
  std::string changed = parts[0] + "$1001$" + parts[2] + "$" + parts[3];
  ASSERT_TRUE(ValidatePasswordHash(changed).ok());
  EXPECT_FALSE(VerifyPassword("secret", changed));
}

TEST(Password, MalformedHashesAreRejected) {
  const std::string salt = "00112233445566778899aabbccddeeff";
  const std::string key(64, 'a');
  const std::vector<std::string> bad = {
      "",
      "secret",                                                          // plaintext
      "pbkdf2-sha256",                                                   // scheme only
      "pbkdf2-sha256$1000$" + salt,                                      // three parts
      "pbkdf2-sha256$1000$" + salt + "$" + key + "$x",                   // five parts
      "pbkdf2-sha1$1000$" + salt + "$" + key,                            // other scheme
      "PBKDF2-SHA256$1000$" + salt + "$" + key,                          // scheme is case-sensitive
      "pbkdf2-sha256$$" + salt + "$" + key,                              // no iterations
      "pbkdf2-sha256$0$" + salt + "$" + key,                             // zero iterations
      "pbkdf2-sha256$-1$" + salt + "$" + key,                            // negative iterations
      "pbkdf2-sha256$10x$" + salt + "$" + key,                           // trailing junk
      "pbkdf2-sha256$99999999999$" + salt + "$" + key,                   // overflows uint32
      "pbkdf2-sha256$10000001$" + salt + "$" + key,                      // above the cap
      "pbkdf2-sha256$1000$$" + key,                                      // empty salt
      "pbkdf2-sha256$1000$abc$" + key,                                   // odd-length salt
      "pbkdf2-sha256$1000$zz$" + key,                                    // non-hex salt
      "pbkdf2-sha256$1000$" + salt + "$",                                // empty key
      "pbkdf2-sha256$1000$" + salt + "$" + std::string(62, 'a'),         // 31-byte key
      "pbkdf2-sha256$1000$" + salt + "$" + std::string(66, 'a'),         // 33-byte key
      "pbkdf2-sha256$1000$" + salt + "$" + std::string(63, 'a') + "g",   // non-hex key
      "pbkdf2-sha256$1000$" + salt + "$" + std::string(62, 'a') + "+f",  // sign in hex
  };
  for (const std::string& encoded : bad) {
    Status s = ValidatePasswordHash(encoded);
    EXPECT_EQ(s.code(), StatusCode::kInvalidConfig) << "'" << encoded << "'";
    EXPECT_FALSE(VerifyPassword("", encoded)) << "'" << encoded << "'";
    EXPECT_FALSE(VerifyPassword("secret", encoded)) << "'" << encoded << "'";
  }
}

TEST(Password, WellFormedHashIsAccepted) {
  const std::string good = "pbkdf2-sha256$1000$00112233445566778899aabbccddeeff$" +
                           std::string(64, 'A');  // upper-case hex is hex too
  EXPECT_TRUE(ValidatePasswordHash(good).ok());
  EXPECT_TRUE(ValidatePasswordHash("pbkdf2-sha256$10000000$00$" + std::string(64, '0')).ok());
}

TEST(Password, HashAboveTheIterationCapIsRefusedWithTheCountNamed) {
  const std::string key(64, '0');
  EXPECT_TRUE(ValidatePasswordHash("pbkdf2-sha256$1000000$00$" + key, 1'000'000).ok());
  Status s = ValidatePasswordHash("pbkdf2-sha256$1000001$00$" + key, 1'000'000);
  EXPECT_EQ(s.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(s.message().find("1000001"), std::string_view::npos) << s.message();
  EXPECT_NE(s.message().find("max_hash_iterations"), std::string_view::npos) << s.message();
  // What wharfctl hash-password makes passes the default cap.
  EXPECT_TRUE(ValidatePasswordHash(HashPassword("x"), 1'000'000).ok());
}

// RabbitMQ 3.10.8's own hashes, from a definitions file it exported (rabbitmqctl
// export_definitions; users made with these passwords over its HTTP API).
TEST(Password, RabbitMqSha256HashesVerify) {
  for (const auto& [hash, password] :
       {std::pair{"6+vDw3jaliAOnpHH0EgShcIAuPZo5tk8gSGneo2cM35a99Mv", "secret"},
        std::pair{"TY5/T046ay+2bp2/uKLC9Nx5R0w2HoAqd5A9ohIuwk7DdWls", "bobpw"},
        std::pair{"V1KSvvA6M+Cz+36Vtzcywqla40BtEh9riNggoZdrVhACn6jI", "c"}}) {
    const std::string encoded = std::string("rabbit-sha256$") + hash;
    EXPECT_TRUE(ValidatePasswordHash(encoded).ok()) << encoded;
    EXPECT_TRUE(VerifyPassword(password, encoded)) << password;
    EXPECT_FALSE(VerifyPassword(std::string(password) + "x", encoded)) << password;
    EXPECT_FALSE(VerifyPassword("", encoded));
    EXPECT_EQ(RabbitMqHashingAlgorithm(encoded), "rabbit_password_hashing_sha256");
  }
  EXPECT_EQ(RabbitMqHashScheme("rabbit_password_hashing_sha256"), "rabbit-sha256");
  EXPECT_EQ(RabbitMqHashScheme("rabbit_password_hashing_sha512"), "rabbit-sha512");
  EXPECT_EQ(RabbitMqHashScheme("rabbit_password_hashing_md5"), "rabbit-md5");
  EXPECT_EQ(RabbitMqHashScheme("bcrypt"), "");
  EXPECT_EQ(RabbitMqHashingAlgorithm(HashPassword("x")), "");
}

TEST(Password, MalformedRabbitMqHashesAreRejected) {
  // Not base64; a digest of the wrong length for its scheme; an unknown scheme.
  for (const char* bad :
       {"rabbit-sha256$!!!!", "rabbit-sha256$AAAA",
        "rabbit-sha512$6+vDw3jaliAOnpHH0EgShcIAuPZo5tk8gSGneo2cM35a99Mv",
        "rabbit-sha1$6+vDw3jaliAOnpHH0EgShcIAuPZo5tk8gSGneo2cM35a99Mv", "rabbit-sha256$"}) {
    EXPECT_FALSE(ValidatePasswordHash(bad).ok()) << bad;
    EXPECT_FALSE(VerifyPassword("secret", bad)) << bad;
  }
}

}  // namespace
}  // namespace wharf
