#include "common/password.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <charconv>
#include <optional>
#include <vector>

#include "common/base64.h"

namespace wharf {
namespace {

constexpr std::string_view kScheme = "pbkdf2-sha256";
constexpr size_t kSaltBytes = 16;
constexpr size_t kKeyBytes = 32;

std::string ToHex(const unsigned char* data, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kHex[data[i] >> 4];
    out += kHex[data[i] & 15];
  }
  return out;
}

std::optional<std::vector<unsigned char>> FromHex(std::string_view hex) {
  if (hex.empty() || hex.size() % 2 != 0) return std::nullopt;
  std::vector<unsigned char> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    unsigned value = 0;
    auto [p, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, value, 16);
    if (ec != std::errc() || p != hex.data() + 2 * i + 2) return std::nullopt;
    out[i] = static_cast<unsigned char>(value);
  }
  return out;
}

struct Parsed {
  uint32_t iterations;
  std::vector<unsigned char> salt;
  std::vector<unsigned char> key;
};

std::optional<Parsed> Parse(std::string_view encoded) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = encoded.find('$', start);
    parts.push_back(encoded.substr(start, pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  if (parts.size() != 4 || parts[0] != kScheme) return std::nullopt;
  Parsed parsed{};
  auto [p, ec] =
      std::from_chars(parts[1].data(), parts[1].data() + parts[1].size(), parsed.iterations);
  if (ec != std::errc() || p != parts[1].data() + parts[1].size() || parsed.iterations == 0 ||
      parsed.iterations > kMaxPasswordIterations) {
    return std::nullopt;
  }
  auto salt = FromHex(parts[2]);
  auto key = FromHex(parts[3]);
  if (!salt || !key || key->size() != kKeyBytes) return std::nullopt;
  parsed.salt = std::move(*salt);
  parsed.key = std::move(*key);
  return parsed;
}

// RabbitMQ's schemes: a 4-byte salt, then a digest of salt + password (rabbit_password:hash).
struct RabbitScheme {
  std::string_view scheme;
  std::string_view algorithm;  // RabbitMQ's hashing_algorithm
  const EVP_MD* (*digest)();
};
constexpr size_t kRabbitSaltBytes = 4;
const RabbitScheme kRabbitSchemes[] = {
    {"rabbit-sha256", "rabbit_password_hashing_sha256", EVP_sha256},
    {"rabbit-sha512", "rabbit_password_hashing_sha512", EVP_sha512},
    {"rabbit-md5", "rabbit_password_hashing_md5", EVP_md5},
};

// The scheme and decoded salt + digest of a RabbitMQ hash, or nullopt.
std::optional<std::pair<const RabbitScheme*, std::string>> ParseRabbit(std::string_view encoded) {
  const size_t dollar = encoded.find('$');
  if (dollar == std::string_view::npos) return std::nullopt;
  for (const RabbitScheme& scheme : kRabbitSchemes) {
    if (encoded.substr(0, dollar) != scheme.scheme) continue;
    auto bytes = Base64Decode(encoded.substr(dollar + 1));
    const size_t digest = static_cast<size_t>(EVP_MD_size(scheme.digest()));
    if (!bytes || bytes->size() != kRabbitSaltBytes + digest) return std::nullopt;
    return std::make_pair(&scheme, std::move(*bytes));
  }
  return std::nullopt;
}

bool VerifyRabbit(std::string_view password, const RabbitScheme& scheme,
                  const std::string& stored) {
  std::string input = stored.substr(0, kRabbitSaltBytes);
  input.append(password);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(input.data(), input.size(), digest, &length, scheme.digest(), nullptr) != 1 ||
      length != stored.size() - kRabbitSaltBytes) {
    return false;
  }
  return CRYPTO_memcmp(digest, stored.data() + kRabbitSaltBytes, length) == 0;
}

bool Derive(std::string_view password, const unsigned char* salt, size_t salt_len,
            uint32_t iterations, unsigned char* out) {
  return PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), salt,
                           static_cast<int>(salt_len), static_cast<int>(iterations), EVP_sha256(),
                           static_cast<int>(kKeyBytes), out) == 1;
}

}  // namespace

std::string HashPassword(std::string_view password, uint32_t iterations) {
  unsigned char salt[kSaltBytes];
  unsigned char key[kKeyBytes];
  if (RAND_bytes(salt, sizeof salt) != 1 || !Derive(password, salt, sizeof salt, iterations, key)) {
    return "";
  }
  return std::string(kScheme) + "$" + std::to_string(iterations) + "$" + ToHex(salt, sizeof salt) +
         "$" + ToHex(key, sizeof key);
}

Status ValidatePasswordHash(std::string_view encoded, uint32_t max_iterations) {
  if (ParseRabbit(encoded)) return Status::Ok();
  if (auto parsed = Parse(encoded)) {
    if (parsed->iterations <= max_iterations) return Status::Ok();
    return Status(StatusCode::kInvalidConfig,
                  "password_hash asks for " + std::to_string(parsed->iterations) +
                      " PBKDF2 iterations, more than the " + std::to_string(max_iterations) +
                      " allowed ([auth] max_hash_iterations); make one with 'wharfctl "
                      "hash-password', which uses " +
                      std::to_string(kDefaultPasswordIterations));
  }
  return Status(StatusCode::kInvalidConfig,
                "password_hash is not 'pbkdf2-sha256$<iterations>$<salt hex>$<key hex>' "
                "(make one with 'wharfctl hash-password'), nor one of RabbitMQ's "
                "('rabbit-sha256$<base64>')");
}

bool VerifyPassword(std::string_view password, std::string_view encoded) {
  if (auto rabbit = ParseRabbit(encoded))
    return VerifyRabbit(password, *rabbit->first, rabbit->second);
  auto parsed = Parse(encoded);
  if (!parsed) return false;
  unsigned char key[kKeyBytes];
  if (!Derive(password, parsed->salt.data(), parsed->salt.size(), parsed->iterations, key)) {
    return false;
  }
  return CRYPTO_memcmp(key, parsed->key.data(), kKeyBytes) == 0;
}

std::string_view RabbitMqHashScheme(std::string_view hashing_algorithm) {
  for (const RabbitScheme& scheme : kRabbitSchemes) {
    if (scheme.algorithm == hashing_algorithm) return scheme.scheme;
  }
  return {};
}

std::string_view RabbitMqHashingAlgorithm(std::string_view encoded) {
  const std::string_view scheme = encoded.substr(0, encoded.find('$'));
  for (const RabbitScheme& known : kRabbitSchemes) {
    if (known.scheme == scheme) return known.algorithm;
  }
  return {};
}

}  // namespace wharf
