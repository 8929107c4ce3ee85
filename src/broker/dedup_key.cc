#include "broker/dedup_key.h"

#include <openssl/evp.h>

#include <variant>

#include "broker/queue_policy.h"
#include "store/message_store.h"

namespace wharf::broker {

Result<std::string> DedupKeyOf(const Message& message, bool by_body) {
  if (by_body) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_Digest(message.body.data(), message.body.size(), digest, &size, EVP_sha256(),
                   nullptr) != 1) {
      return Status(StatusCode::kInternal, "cannot hash the message body (SHA-256)");
    }
    return std::string(reinterpret_cast<const char*>(digest), size);
  }
  auto it = message.headers.find(kDedupHeader);
  if (it == message.headers.end()) return std::string();
  std::string key;
  if (const auto* text = std::get_if<std::string>(&it->second)) {
    key = *text;
  } else if (const auto* bytes = std::get_if<Bytes>(&it->second)) {
    key = bytes->data;
  } else if (const auto* number = std::get_if<int64_t>(&it->second)) {
    key = std::to_string(*number);
  } else {
    return Status(StatusCode::kInvalidArgument, std::string("message header '") +
                                                    std::string(kDedupHeader) +
                                                    "' must be a string or an integer");
  }
  if (key.empty() || key.size() > store::kMaxDedupKeyBytes) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("message header '") + std::string(kDedupHeader) +
                      "' must hold 1 to " + std::to_string(store::kMaxDedupKeyBytes) +
                      " bytes, not " + std::to_string(key.size()));
  }
  return key;
}

}  // namespace wharf::broker
