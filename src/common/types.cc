#include "wharf/types.h"

#include <cstdio>

#include "wharf/message.h"

namespace wharf {

std::string_view ExchangeTypeName(ExchangeType type) {
  switch (type) {
    case ExchangeType::kDirect:
      return "direct";
    case ExchangeType::kFanout:
      return "fanout";
    case ExchangeType::kTopic:
      return "topic";
    case ExchangeType::kHeaders:
      return "headers";
  }
  return "unknown";
}

std::string_view RedriveStateName(RedriveInfo::State state) {
  switch (state) {
    case RedriveInfo::State::kRunning:
      return "running";
    case RedriveInfo::State::kFinished:
      return "finished";
    case RedriveInfo::State::kCancelled:
      return "cancelled";
    case RedriveInfo::State::kFailed:
      return "failed";
  }
  return "unknown";
}

std::optional<ExchangeType> ParseExchangeType(std::string_view name) {
  if (name == "direct") return ExchangeType::kDirect;
  if (name == "fanout") return ExchangeType::kFanout;
  if (name == "topic") return ExchangeType::kTopic;
  if (name == "headers") return ExchangeType::kHeaders;
  return std::nullopt;
}

std::string HeaderValueToString(const HeaderValue& value) {
  struct Visitor {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", v);
      return buf;
    }
    std::string operator()(const std::string& v) const { return "\"" + v + "\""; }
    std::string operator()(const Bytes& v) const {
      static const char* kHex = "0123456789abcdef";
      std::string out = "0x";
      for (unsigned char c : v.data) {
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
      return out;
    }
  };
  return std::visit(Visitor{}, value);
}

}  // namespace wharf
