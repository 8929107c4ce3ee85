// protocol/codec.h
//
// Conversions between the wire types (wharf.wire.v1, generated from proto/) and Wharf's own
// types (include/wharf/), plus frame encoding. Pure functions, no I/O. Shared by the server
// and the client library.
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "wharf/message.h"
#include "wharf/result.h"
#include "wharf/status.h"
#include "wharf/types.h"
#include "wharf/wire/v1/frame.pb.h"

namespace wharf::protocol {

namespace wire = ::wharf::wire::v1;

inline constexpr uint32_t kProtocolVersion = 1;

// Serializes `frame` with its length prefix onto `out`.
void AppendFrame(const wire::Frame& frame, std::string* out);

// Message <-> wire. ToWire copies; MoveFromWire steals the body and strings.
void ToWire(const Message& message, wire::Message* out);
Message MoveFromWire(wire::Message* in);

void ToWire(const Headers& headers, google::protobuf::Map<std::string, wire::HeaderValue>* out);
// kInvalidArgument when a header value has no kind set.
Status FromWire(const google::protobuf::Map<std::string, wire::HeaderValue>& in, Headers* out);
// The same check without a copy: kInvalidArgument when a header value has no kind set.
Status CheckHeaderValues(const google::protobuf::Map<std::string, wire::HeaderValue>& in);

// What a serialized Frame says before it is parsed: its request id and, for a Publish, how
// many header entries and death records its message carries (every entry counted, duplicates
// too, so never fewer than parsing makes). Parsed, an entry costs far more RAM than its bytes
// on the wire (a 16 MB frame of a million small headers takes hundreds of MB; an empty death
// record is 2 bytes on the wire and hundreds in RAM), so a broker refuses too many of either
// from this count, without parsing them. What it cannot read counts nothing (the parser then
// rejects the frame).
struct FramePeek {
  uint64_t request_id = 0;
  uint64_t publish_headers = 0;
  uint64_t publish_deaths = 0;
};
FramePeek PeekFrame(std::string_view payload);

// Status <-> wire Error. The numeric codes are the same by design (wharf/status.h).
void ToWire(const Status& status, wire::Error* out);
Status FromWire(const wire::Error& error);

wire::ExchangeType ToWire(ExchangeType type);
// nullopt for EXCHANGE_TYPE_UNSPECIFIED or an unknown value.
std::optional<ExchangeType> FromWire(wire::ExchangeType type);

void ToWire(const QueueInfo& info, wire::QueueInfo* out);
QueueInfo FromWire(const wire::QueueInfo& in);
void ToWire(const DelayedInfo& info, wire::DelayedMessage* out);
Result<DelayedInfo> FromWire(const wire::DelayedMessage& in);
void ToWire(const PeekedMessage& info, wire::PeekedMessage* out);
Result<PeekedMessage> FromWire(const wire::PeekedMessage& in);
void ToWire(const RedriveInfo& info, wire::RedriveTask* out);
RedriveInfo FromWire(const wire::RedriveTask& in);
void ToWire(const ExchangeInfo& info, wire::ExchangeInfo* out);
ExchangeInfo FromWire(const wire::ExchangeInfo& in);
void ToWire(const BackupInfo& info, wire::BackupOk* out);
BackupInfo FromWire(const wire::BackupOk& in);

// Requests, both directions: the client writes them, the broker reads them. A declare's type is
// checked by the broker (a passive declare names no type); arguments fail on a malformed value.
void ToWire(const ExchangeSpec& spec, wire::DeclareExchange* out);
ExchangeSpec FromWire(const wire::DeclareExchange& in, std::optional<ExchangeType>* type);
void ToWire(const QueueSpec& spec, wire::DeclareQueue* out);
Result<QueueSpec> FromWire(const wire::DeclareQueue& in);
// Bind, Unbind, and each binding of ListBindingsOk.
void ToWire(const BindingSpec& spec, wire::Bind* out);
void ToWire(const BindingSpec& spec, wire::Unbind* out);
Result<BindingSpec> FromWire(const wire::Bind& in);
Result<BindingSpec> FromWire(const wire::Unbind& in);
void ToWire(const RedriveSpec& spec, wire::StartRedrive* out);
RedriveSpec FromWire(const wire::StartRedrive& in);

// Listings of connections, consumers and users.
void ToWire(const ConnectionInfo& info, wire::ConnectionInfo* out);
ConnectionInfo FromWire(const wire::ConnectionInfo& in);
void ToWire(const ConsumerInfo& info, wire::ConsumerInfo* out);
ConsumerInfo FromWire(const wire::ConsumerInfo& in);
void ToWire(const UserInfo& info, wire::UserInfo* out);
UserInfo FromWire(const wire::UserInfo& in);
void ToWire(const VhostInfo& info, wire::VhostInfo* out);
VhostInfo FromWire(const wire::VhostInfo& in);
// kInvalidArgument for a definition value of no known kind.
void ToWire(const PolicyInfo& info, wire::PolicyInfo* out);
Result<PolicyInfo> FromWire(const wire::PolicyInfo& in);

// A frame carrying only an Error, for replies to request `request_id`.
wire::Frame ErrorFrame(uint64_t request_id, const Status& status);

}  // namespace wharf::protocol
