#include "wharf/status.h"

#include <string>

namespace wharf {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kIoError:
      return "IO_ERROR";
    case StatusCode::kInvalidConfig:
      return "INVALID_CONFIG";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kMalformedFrame:
      return "MALFORMED_FRAME";
    case StatusCode::kFrameTooLarge:
      return "FRAME_TOO_LARGE";
    case StatusCode::kFrameTruncated:
      return "FRAME_TRUNCATED";
    case StatusCode::kUnexpectedFrame:
      return "UNEXPECTED_FRAME";
    case StatusCode::kUnsupportedVersion:
      return "UNSUPPORTED_VERSION";
    case StatusCode::kHandshakeTimeout:
      return "HANDSHAKE_TIMEOUT";
    case StatusCode::kFrameTimeout:
      return "FRAME_TIMEOUT";
    case StatusCode::kEmptyRequest:
      return "EMPTY_REQUEST";
    case StatusCode::kAuthenticationFailed:
      return "AUTHENTICATION_FAILED";
    case StatusCode::kAccessRefused:
      return "ACCESS_REFUSED";
    case StatusCode::kQueueNotFound:
      return "QUEUE_NOT_FOUND";
    case StatusCode::kExchangeNotFound:
      return "EXCHANGE_NOT_FOUND";
    case StatusCode::kPreconditionFailed:
      return "PRECONDITION_FAILED";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kMessageTooLarge:
      return "MESSAGE_TOO_LARGE";
    case StatusCode::kResourceLocked:
      return "RESOURCE_LOCKED";
    case StatusCode::kConsumerTagInUse:
      return "CONSUMER_TAG_IN_USE";
    case StatusCode::kConsumerNotFound:
      return "CONSUMER_NOT_FOUND";
    case StatusCode::kUnknownDeliveryTag:
      return "UNKNOWN_DELIVERY_TAG";
    case StatusCode::kLeaseExpired:
      return "LEASE_EXPIRED";
    case StatusCode::kQueueFull:
      return "QUEUE_FULL";
    case StatusCode::kVhostNotFound:
      return "VHOST_NOT_FOUND";
    case StatusCode::kPolicyNotFound:
      return "POLICY_NOT_FOUND";
    case StatusCode::kReservedName:
      return "RESERVED_NAME";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kShuttingDown:
      return "SHUTTING_DOWN";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kStoreUnavailable:
      return "STORE_UNAVAILABLE";
    case StatusCode::kStoreFull:
      return "STORE_FULL";
    case StatusCode::kNoRoute:
      return "NO_ROUTE";
  }
  return "UNKNOWN";
}

Status::Status(StatusCode code, std::string_view message) {
  if (code != StatusCode::kOk) {
    state_ = std::make_shared<const State>(State{code, std::string(message)});
  }
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code()));
  out += ": ";
  out += message();
  return out;
}

}  // namespace wharf
