// include/wharf/status.h
//
// Status is the outcome of an operation that can fail for reasons the caller is expected to
// handle: bad input, a missing queue, a refused login, a peer that went away. It is cheap when
// OK. Programming errors are not Statuses.
//
// The numeric values of StatusCode are the stable wire error codes of the native protocol
// (proto/wharf/wire/v1/error.proto, docs/errors.md), so a client sees exactly the code the broker
// sent. Codes below 100 are local to a process (a client that cannot reach the broker, a timeout)
// and never cross the wire.
//
// Thread safety: a Status is an immutable value once built; share freely.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace wharf {

enum class StatusCode : uint16_t {
  kOk = 0,
  // Local to this process.
  kUnavailable = 1,       // not connected, connection lost
  kDeadlineExceeded = 2,  // a local wait timed out
  kIoError = 3,
  kInvalidConfig = 4,
  kFailedPrecondition = 5,  // a call made where it cannot work (e.g. blocking on the I/O thread)
  // Wire codes (error.proto).
  kMalformedFrame = 100,
  kFrameTooLarge = 101,
  kFrameTruncated = 102,
  kUnexpectedFrame = 103,
  kUnsupportedVersion = 104,
  kEmptyRequest = 105,
  kHandshakeTimeout = 106,
  kFrameTimeout = 107,
  kAuthenticationFailed = 200,
  kAccessRefused = 201,
  kQueueNotFound = 300,
  kExchangeNotFound = 301,
  kPreconditionFailed = 302,
  kInvalidArgument = 303,
  kMessageTooLarge = 304,
  kResourceLocked = 305,
  kConsumerTagInUse = 306,
  kConsumerNotFound = 307,
  kUnknownDeliveryTag = 308,
  kReservedName = 309,
  kLeaseExpired = 310,
  kQueueFull = 311,
  kVhostNotFound = 312,
  kPolicyNotFound = 313,
  kInternal = 500,
  kShuttingDown = 501,
  kResourceExhausted = 502,
  kStoreUnavailable = 503,
  kStoreFull = 504,
  kNoRoute = 600,
};

// "QUEUE_NOT_FOUND" etc.; "UNKNOWN" for values outside the table.
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string_view message);

  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  std::string_view message() const { return state_ ? std::string_view(state_->message) : ""; }
  // "QUEUE_NOT_FOUND: queue 'orders' not found", or "OK".
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;  // null when OK
};

#define WHARF_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::wharf::Status wharf_status_ = (expr);        \
    if (!wharf_status_.ok()) return wharf_status_; \
  } while (0)

}  // namespace wharf
