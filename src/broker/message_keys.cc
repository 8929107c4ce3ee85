#include "broker/message_keys.h"

#include <openssl/evp.h>

#include <variant>

#include "broker/queue_policy.h"
#include "store/message_store.h"

namespace wharf::broker {
namespace {

// The header's value as a key: a string, bytes or an integer (its decimal text) of 1 to
// `max_bytes` bytes; "" when the header is absent.
Result<std::string> HeaderKeyOf(const Message& message, std::string_view header, size_t max_bytes) {
  auto it = message.headers.find(header);
  if (it == message.headers.end()) return std::string();
  std::string key;
  if (const auto* text = std::get_if<std::string>(&it->second)) {
    key = *text;
  } else if (const auto* bytes = std::get_if<Bytes>(&it->second)) {
    key = bytes->data;
  } else if (const auto* number = std::get_if<int64_t>(&it->second)) {
    key = std::to_string(*number);
  } else {
    return Status(StatusCode::kInvalidArgument,
                  "message header '" + std::string(header) + "' must be a string or an integer");
  }
  if (key.empty() || key.size() > max_bytes) {
    return Status(StatusCode::kInvalidArgument,
                  "message header '" + std::string(header) + "' must hold 1 to " +
                      std::to_string(max_bytes) + " bytes, not " + std::to_string(key.size()));
  }
  return key;
}

}  // namespace

Result<std::string> DedupKeyOf(const Message& message, bool by_body, std::string_view publish_id) {
  if (by_body) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_Digest(message.body.data(), message.body.size(), digest, &size, EVP_sha256(),
                   nullptr) != 1) {
      return Status(StatusCode::kInternal, "cannot hash the message body (SHA-256)");
    }
    return std::string(reinterpret_cast<const char*>(digest), size);
  }
  if (!publish_id.empty()) return std::string(publish_id);  // wins over the header
  return HeaderKeyOf(message, kDedupHeader, store::kMaxDedupKeyBytes);
}

Status CheckDedupId(std::string_view id) {
  if (id.size() <= store::kMaxDedupKeyBytes) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, "deduplication_id must hold 1 to " +
                                                  std::to_string(store::kMaxDedupKeyBytes) +
                                                  " bytes, not " + std::to_string(id.size()));
}

Result<std::string> GroupKeyOf(const Message& message) {
  return HeaderKeyOf(message, kGroupHeader, kMaxGroupKeyBytes);
}

std::string_view GroupKeyView(const Message& message, std::string& scratch) {
  auto it = message.headers.find(kGroupHeader);
  if (it == message.headers.end()) return {};
  if (const auto* text = std::get_if<std::string>(&it->second)) return *text;
  if (const auto* bytes = std::get_if<Bytes>(&it->second)) return bytes->data;
  if (const auto* number = std::get_if<int64_t>(&it->second)) {
    scratch = std::to_string(*number);
    return scratch;
  }
  return {};
}

}  // namespace wharf::broker
