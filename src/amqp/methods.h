// amqp/methods.h
//
// Every method of RabbitMQ's AMQP 0-9-1 (amqp0-9-1.xml plus RabbitMQ's extensions:
// connection.blocked/unblocked/update-secret, exchange.bind/unbind, basic.nack,
// confirm.select), in both directions, one struct each. Fields are named as in the XML with
// '-' -> '_'. Reserved fields (tickets, connection.open's capabilities and insist,
// connection.open-ok's known-hosts, channel.open's out-of-band, channel.open-ok's channel-id,
// basic.get-empty's cluster-id) are not in the structs: they are written as 0 / empty and
// skipped on read. RabbitMQ's AMQP 1.0 shims basic.credit / credit-ok / credit-drained are
// not here (no 0-9-1 client sends them); they decode as unknown methods.
//
// A method frame's payload is class-id (short), method-id (short), then the arguments.
//
// DecodeMethod follows RabbitMQ's generated parser (rabbit_framing_amqp_0_9_1), which
// matches each method's arguments exactly:
//   - truncated arguments, and trailing bytes after the last argument, are errors
//     (StatusCode::kMalformedFrame; RabbitMQ: 501 FRAME_ERROR "cannot decode ...");
//   - a shortstr that RabbitMQ asserts to be UTF-8 and is not is an error too (kMalformedFrame;
//     RabbitMQ: 501 "Malformed UTF-8 in shortstr"). The checked fields, as RabbitMQ checks
//     them: every shortstr of connection.start-ok (mechanism, locale), connection.open and
//     open-ok, connection.close, connection.blocked, connection.update-secret's reason,
//     channel.open, channel.close, access.request, exchange.declare/delete/bind/unbind,
//     queue.declare/declare-ok/bind/purge/delete/unbind, basic.consume/consume-ok/cancel/
//     cancel-ok/get/get-empty. basic.publish, basic.return, basic.deliver and basic.get-ok
//     are not checked (RabbitMQ does not check them);
//   - unused bits of a bit octet are ignored;
//   - an unknown class or method id is StatusCode::kInvalidArgument, its message naming both
//     ids (reply.h's CodecErrorReply maps it to 503 COMMAND_INVALID, a connection error).
//   A field table argument is decoded as field_table.h says (its errors are kMalformedFrame).
//
// EncodeMethod never fails; a shortstr longer than 255 bytes is cut (wire.h).
//
// Thread safety: value types, not synchronised; the functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "amqp/field_table.h"
#include "wharf/status.h"

namespace wharf::amqp {

// The connection class (10). connection.open's reserved capabilities (shortstr) and insist
// (bit), and connection.open-ok's reserved known-hosts (shortstr), are written empty / 0.
struct ConnectionStart {
  static constexpr uint16_t kClassId = 10, kMethodId = 10;
  static constexpr std::string_view kName = "connection.start";
  uint8_t version_major = 0;
  uint8_t version_minor = 9;
  FieldTable server_properties{};
  std::string mechanisms{};
  std::string locales{};
  friend bool operator==(const ConnectionStart&, const ConnectionStart&) = default;
};

struct ConnectionStartOk {
  static constexpr uint16_t kClassId = 10, kMethodId = 11;
  static constexpr std::string_view kName = "connection.start-ok";
  FieldTable client_properties{};
  std::string mechanism{};
  std::string response{};
  std::string locale{};
  friend bool operator==(const ConnectionStartOk&, const ConnectionStartOk&) = default;
};

struct ConnectionSecure {
  static constexpr uint16_t kClassId = 10, kMethodId = 20;
  static constexpr std::string_view kName = "connection.secure";
  std::string challenge{};
  friend bool operator==(const ConnectionSecure&, const ConnectionSecure&) = default;
};

struct ConnectionSecureOk {
  static constexpr uint16_t kClassId = 10, kMethodId = 21;
  static constexpr std::string_view kName = "connection.secure-ok";
  std::string response{};
  friend bool operator==(const ConnectionSecureOk&, const ConnectionSecureOk&) = default;
};

struct ConnectionTune {
  static constexpr uint16_t kClassId = 10, kMethodId = 30;
  static constexpr std::string_view kName = "connection.tune";
  uint16_t channel_max = 0;
  uint32_t frame_max = 0;
  uint16_t heartbeat = 0;
  friend bool operator==(const ConnectionTune&, const ConnectionTune&) = default;
};

struct ConnectionTuneOk {
  static constexpr uint16_t kClassId = 10, kMethodId = 31;
  static constexpr std::string_view kName = "connection.tune-ok";
  uint16_t channel_max = 0;
  uint32_t frame_max = 0;
  uint16_t heartbeat = 0;
  friend bool operator==(const ConnectionTuneOk&, const ConnectionTuneOk&) = default;
};

struct ConnectionOpen {
  static constexpr uint16_t kClassId = 10, kMethodId = 40;
  static constexpr std::string_view kName = "connection.open";
  std::string virtual_host{};
  friend bool operator==(const ConnectionOpen&, const ConnectionOpen&) = default;
};

struct ConnectionOpenOk {
  static constexpr uint16_t kClassId = 10, kMethodId = 41;
  static constexpr std::string_view kName = "connection.open-ok";
  friend bool operator==(const ConnectionOpenOk&, const ConnectionOpenOk&) = default;
};

struct ConnectionClose {
  static constexpr uint16_t kClassId = 10, kMethodId = 50;
  static constexpr std::string_view kName = "connection.close";
  uint16_t reply_code = 0;
  std::string reply_text{};
  uint16_t class_id = 0;
  uint16_t method_id = 0;
  friend bool operator==(const ConnectionClose&, const ConnectionClose&) = default;
};

struct ConnectionCloseOk {
  static constexpr uint16_t kClassId = 10, kMethodId = 51;
  static constexpr std::string_view kName = "connection.close-ok";
  friend bool operator==(const ConnectionCloseOk&, const ConnectionCloseOk&) = default;
};

struct ConnectionBlocked {
  static constexpr uint16_t kClassId = 10, kMethodId = 60;
  static constexpr std::string_view kName = "connection.blocked";
  std::string reason{};
  friend bool operator==(const ConnectionBlocked&, const ConnectionBlocked&) = default;
};

struct ConnectionUnblocked {
  static constexpr uint16_t kClassId = 10, kMethodId = 61;
  static constexpr std::string_view kName = "connection.unblocked";
  friend bool operator==(const ConnectionUnblocked&, const ConnectionUnblocked&) = default;
};

struct ConnectionUpdateSecret {
  static constexpr uint16_t kClassId = 10, kMethodId = 70;
  static constexpr std::string_view kName = "connection.update-secret";
  std::string new_secret{};
  std::string reason{};
  friend bool operator==(const ConnectionUpdateSecret&, const ConnectionUpdateSecret&) = default;
};

struct ConnectionUpdateSecretOk {
  static constexpr uint16_t kClassId = 10, kMethodId = 71;
  static constexpr std::string_view kName = "connection.update-secret-ok";
  friend bool operator==(const ConnectionUpdateSecretOk&,
                         const ConnectionUpdateSecretOk&) = default;
};

// The channel class (20). channel.open's reserved out-of-band (shortstr) and channel.open-ok's
// reserved channel-id (longstr) are written empty.
struct ChannelOpen {
  static constexpr uint16_t kClassId = 20, kMethodId = 10;
  static constexpr std::string_view kName = "channel.open";
  friend bool operator==(const ChannelOpen&, const ChannelOpen&) = default;
};

struct ChannelOpenOk {
  static constexpr uint16_t kClassId = 20, kMethodId = 11;
  static constexpr std::string_view kName = "channel.open-ok";
  friend bool operator==(const ChannelOpenOk&, const ChannelOpenOk&) = default;
};

struct ChannelFlow {
  static constexpr uint16_t kClassId = 20, kMethodId = 20;
  static constexpr std::string_view kName = "channel.flow";
  bool active = false;
  friend bool operator==(const ChannelFlow&, const ChannelFlow&) = default;
};

struct ChannelFlowOk {
  static constexpr uint16_t kClassId = 20, kMethodId = 21;
  static constexpr std::string_view kName = "channel.flow-ok";
  bool active = false;
  friend bool operator==(const ChannelFlowOk&, const ChannelFlowOk&) = default;
};

struct ChannelClose {
  static constexpr uint16_t kClassId = 20, kMethodId = 40;
  static constexpr std::string_view kName = "channel.close";
  uint16_t reply_code = 0;
  std::string reply_text{};
  uint16_t class_id = 0;
  uint16_t method_id = 0;
  friend bool operator==(const ChannelClose&, const ChannelClose&) = default;
};

struct ChannelCloseOk {
  static constexpr uint16_t kClassId = 20, kMethodId = 41;
  static constexpr std::string_view kName = "channel.close-ok";
  friend bool operator==(const ChannelCloseOk&, const ChannelCloseOk&) = default;
};

// The access class (30): obsolete; RabbitMQ still answers access.request.
struct AccessRequest {
  static constexpr uint16_t kClassId = 30, kMethodId = 10;
  static constexpr std::string_view kName = "access.request";
  std::string realm{};
  bool exclusive = false;
  bool passive = false;
  bool active = false;
  bool write = false;
  bool read = false;
  friend bool operator==(const AccessRequest&, const AccessRequest&) = default;
};

// The ticket is an obsolete access ticket; RabbitMQ answers 1 (rabbit_channel), hence the
// default.
struct AccessRequestOk {
  static constexpr uint16_t kClassId = 30, kMethodId = 11;
  static constexpr std::string_view kName = "access.request-ok";
  uint16_t ticket = 1;
  friend bool operator==(const AccessRequestOk&, const AccessRequestOk&) = default;
};

// The exchange class (40). The reserved ticket (short) of every client method of the
// exchange, queue and basic classes is written 0 and skipped on read.
struct ExchangeDeclare {
  static constexpr uint16_t kClassId = 40, kMethodId = 10;
  static constexpr std::string_view kName = "exchange.declare";
  std::string exchange{};
  std::string type{};
  bool passive = false;
  bool durable = false;
  bool auto_delete = false;
  bool internal = false;
  bool no_wait = false;
  FieldTable arguments{};
  friend bool operator==(const ExchangeDeclare&, const ExchangeDeclare&) = default;
};

struct ExchangeDeclareOk {
  static constexpr uint16_t kClassId = 40, kMethodId = 11;
  static constexpr std::string_view kName = "exchange.declare-ok";
  friend bool operator==(const ExchangeDeclareOk&, const ExchangeDeclareOk&) = default;
};

struct ExchangeDelete {
  static constexpr uint16_t kClassId = 40, kMethodId = 20;
  static constexpr std::string_view kName = "exchange.delete";
  std::string exchange{};
  bool if_unused = false;
  bool no_wait = false;
  friend bool operator==(const ExchangeDelete&, const ExchangeDelete&) = default;
};

struct ExchangeDeleteOk {
  static constexpr uint16_t kClassId = 40, kMethodId = 21;
  static constexpr std::string_view kName = "exchange.delete-ok";
  friend bool operator==(const ExchangeDeleteOk&, const ExchangeDeleteOk&) = default;
};

struct ExchangeBind {
  static constexpr uint16_t kClassId = 40, kMethodId = 30;
  static constexpr std::string_view kName = "exchange.bind";
  std::string destination{};
  std::string source{};
  std::string routing_key{};
  bool no_wait = false;
  FieldTable arguments{};
  friend bool operator==(const ExchangeBind&, const ExchangeBind&) = default;
};

struct ExchangeBindOk {
  static constexpr uint16_t kClassId = 40, kMethodId = 31;
  static constexpr std::string_view kName = "exchange.bind-ok";
  friend bool operator==(const ExchangeBindOk&, const ExchangeBindOk&) = default;
};

struct ExchangeUnbind {
  static constexpr uint16_t kClassId = 40, kMethodId = 40;
  static constexpr std::string_view kName = "exchange.unbind";
  std::string destination{};
  std::string source{};
  std::string routing_key{};
  bool no_wait = false;
  FieldTable arguments{};
  friend bool operator==(const ExchangeUnbind&, const ExchangeUnbind&) = default;
};

// Method 51 (not 41), as RabbitMQ numbers it.
struct ExchangeUnbindOk {
  static constexpr uint16_t kClassId = 40, kMethodId = 51;
  static constexpr std::string_view kName = "exchange.unbind-ok";
  friend bool operator==(const ExchangeUnbindOk&, const ExchangeUnbindOk&) = default;
};

// The queue class (50).
struct QueueDeclare {
  static constexpr uint16_t kClassId = 50, kMethodId = 10;
  static constexpr std::string_view kName = "queue.declare";
  std::string queue{};
  bool passive = false;
  bool durable = false;
  bool exclusive = false;
  bool auto_delete = false;
  bool no_wait = false;
  FieldTable arguments{};
  friend bool operator==(const QueueDeclare&, const QueueDeclare&) = default;
};

struct QueueDeclareOk {
  static constexpr uint16_t kClassId = 50, kMethodId = 11;
  static constexpr std::string_view kName = "queue.declare-ok";
  std::string queue{};
  uint32_t message_count = 0;
  uint32_t consumer_count = 0;
  friend bool operator==(const QueueDeclareOk&, const QueueDeclareOk&) = default;
};

struct QueueBind {
  static constexpr uint16_t kClassId = 50, kMethodId = 20;
  static constexpr std::string_view kName = "queue.bind";
  std::string queue{};
  std::string exchange{};
  std::string routing_key{};
  bool no_wait = false;
  FieldTable arguments{};
  friend bool operator==(const QueueBind&, const QueueBind&) = default;
};

struct QueueBindOk {
  static constexpr uint16_t kClassId = 50, kMethodId = 21;
  static constexpr std::string_view kName = "queue.bind-ok";
  friend bool operator==(const QueueBindOk&, const QueueBindOk&) = default;
};

struct QueuePurge {
  static constexpr uint16_t kClassId = 50, kMethodId = 30;
  static constexpr std::string_view kName = "queue.purge";
  std::string queue{};
  bool no_wait = false;
  friend bool operator==(const QueuePurge&, const QueuePurge&) = default;
};

struct QueuePurgeOk {
  static constexpr uint16_t kClassId = 50, kMethodId = 31;
  static constexpr std::string_view kName = "queue.purge-ok";
  uint32_t message_count = 0;
  friend bool operator==(const QueuePurgeOk&, const QueuePurgeOk&) = default;
};

struct QueueDelete {
  static constexpr uint16_t kClassId = 50, kMethodId = 40;
  static constexpr std::string_view kName = "queue.delete";
  std::string queue{};
  bool if_unused = false;
  bool if_empty = false;
  bool no_wait = false;
  friend bool operator==(const QueueDelete&, const QueueDelete&) = default;
};

struct QueueDeleteOk {
  static constexpr uint16_t kClassId = 50, kMethodId = 41;
  static constexpr std::string_view kName = "queue.delete-ok";
  uint32_t message_count = 0;
  friend bool operator==(const QueueDeleteOk&, const QueueDeleteOk&) = default;
};

struct QueueUnbind {
  static constexpr uint16_t kClassId = 50, kMethodId = 50;
  static constexpr std::string_view kName = "queue.unbind";
  std::string queue{};
  std::string exchange{};
  std::string routing_key{};
  FieldTable arguments{};
  friend bool operator==(const QueueUnbind&, const QueueUnbind&) = default;
};

struct QueueUnbindOk {
  static constexpr uint16_t kClassId = 50, kMethodId = 51;
  static constexpr std::string_view kName = "queue.unbind-ok";
  friend bool operator==(const QueueUnbindOk&, const QueueUnbindOk&) = default;
};

// The basic class (60).
struct BasicQos {
  static constexpr uint16_t kClassId = 60, kMethodId = 10;
  static constexpr std::string_view kName = "basic.qos";
  uint32_t prefetch_size = 0;
  uint16_t prefetch_count = 0;
  bool global = false;
  friend bool operator==(const BasicQos&, const BasicQos&) = default;
};

struct BasicQosOk {
  static constexpr uint16_t kClassId = 60, kMethodId = 11;
  static constexpr std::string_view kName = "basic.qos-ok";
  friend bool operator==(const BasicQosOk&, const BasicQosOk&) = default;
};

struct BasicConsume {
  static constexpr uint16_t kClassId = 60, kMethodId = 20;
  static constexpr std::string_view kName = "basic.consume";
  std::string queue{};
  std::string consumer_tag{};
  bool no_local = false;
  bool no_ack = false;
  bool exclusive = false;
  bool no_wait = false;
  FieldTable arguments{};
  friend bool operator==(const BasicConsume&, const BasicConsume&) = default;
};

struct BasicConsumeOk {
  static constexpr uint16_t kClassId = 60, kMethodId = 21;
  static constexpr std::string_view kName = "basic.consume-ok";
  std::string consumer_tag{};
  friend bool operator==(const BasicConsumeOk&, const BasicConsumeOk&) = default;
};

struct BasicCancel {
  static constexpr uint16_t kClassId = 60, kMethodId = 30;
  static constexpr std::string_view kName = "basic.cancel";
  std::string consumer_tag{};
  bool no_wait = false;
  friend bool operator==(const BasicCancel&, const BasicCancel&) = default;
};

struct BasicCancelOk {
  static constexpr uint16_t kClassId = 60, kMethodId = 31;
  static constexpr std::string_view kName = "basic.cancel-ok";
  std::string consumer_tag{};
  friend bool operator==(const BasicCancelOk&, const BasicCancelOk&) = default;
};

struct BasicPublish {
  static constexpr uint16_t kClassId = 60, kMethodId = 40;
  static constexpr std::string_view kName = "basic.publish";
  std::string exchange{};
  std::string routing_key{};
  bool mandatory = false;
  bool immediate = false;
  friend bool operator==(const BasicPublish&, const BasicPublish&) = default;
};

struct BasicReturn {
  static constexpr uint16_t kClassId = 60, kMethodId = 50;
  static constexpr std::string_view kName = "basic.return";
  uint16_t reply_code = 0;
  std::string reply_text{};
  std::string exchange{};
  std::string routing_key{};
  friend bool operator==(const BasicReturn&, const BasicReturn&) = default;
};

struct BasicDeliver {
  static constexpr uint16_t kClassId = 60, kMethodId = 60;
  static constexpr std::string_view kName = "basic.deliver";
  std::string consumer_tag{};
  uint64_t delivery_tag = 0;
  bool redelivered = false;
  std::string exchange{};
  std::string routing_key{};
  friend bool operator==(const BasicDeliver&, const BasicDeliver&) = default;
};

struct BasicGet {
  static constexpr uint16_t kClassId = 60, kMethodId = 70;
  static constexpr std::string_view kName = "basic.get";
  std::string queue{};
  bool no_ack = false;
  friend bool operator==(const BasicGet&, const BasicGet&) = default;
};

struct BasicGetOk {
  static constexpr uint16_t kClassId = 60, kMethodId = 71;
  static constexpr std::string_view kName = "basic.get-ok";
  uint64_t delivery_tag = 0;
  bool redelivered = false;
  std::string exchange{};
  std::string routing_key{};
  uint32_t message_count = 0;
  friend bool operator==(const BasicGetOk&, const BasicGetOk&) = default;
};

// Its reserved cluster-id (shortstr) is written empty.
struct BasicGetEmpty {
  static constexpr uint16_t kClassId = 60, kMethodId = 72;
  static constexpr std::string_view kName = "basic.get-empty";
  friend bool operator==(const BasicGetEmpty&, const BasicGetEmpty&) = default;
};

struct BasicAck {
  static constexpr uint16_t kClassId = 60, kMethodId = 80;
  static constexpr std::string_view kName = "basic.ack";
  uint64_t delivery_tag = 0;
  bool multiple = false;
  friend bool operator==(const BasicAck&, const BasicAck&) = default;
};

struct BasicReject {
  static constexpr uint16_t kClassId = 60, kMethodId = 90;
  static constexpr std::string_view kName = "basic.reject";
  uint64_t delivery_tag = 0;
  bool requeue = false;
  friend bool operator==(const BasicReject&, const BasicReject&) = default;
};

struct BasicRecoverAsync {
  static constexpr uint16_t kClassId = 60, kMethodId = 100;
  static constexpr std::string_view kName = "basic.recover-async";
  bool requeue = false;
  friend bool operator==(const BasicRecoverAsync&, const BasicRecoverAsync&) = default;
};

struct BasicRecover {
  static constexpr uint16_t kClassId = 60, kMethodId = 110;
  static constexpr std::string_view kName = "basic.recover";
  bool requeue = false;
  friend bool operator==(const BasicRecover&, const BasicRecover&) = default;
};

struct BasicRecoverOk {
  static constexpr uint16_t kClassId = 60, kMethodId = 111;
  static constexpr std::string_view kName = "basic.recover-ok";
  friend bool operator==(const BasicRecoverOk&, const BasicRecoverOk&) = default;
};

struct BasicNack {
  static constexpr uint16_t kClassId = 60, kMethodId = 120;
  static constexpr std::string_view kName = "basic.nack";
  uint64_t delivery_tag = 0;
  bool multiple = false;
  bool requeue = false;
  friend bool operator==(const BasicNack&, const BasicNack&) = default;
};

// The confirm class (85; RabbitMQ's extension). Its flag is "nowait" in RabbitMQ's XML.
struct ConfirmSelect {
  static constexpr uint16_t kClassId = 85, kMethodId = 10;
  static constexpr std::string_view kName = "confirm.select";
  bool nowait = false;
  friend bool operator==(const ConfirmSelect&, const ConfirmSelect&) = default;
};

struct ConfirmSelectOk {
  static constexpr uint16_t kClassId = 85, kMethodId = 11;
  static constexpr std::string_view kName = "confirm.select-ok";
  friend bool operator==(const ConfirmSelectOk&, const ConfirmSelectOk&) = default;
};

// The tx class (90).
struct TxSelect {
  static constexpr uint16_t kClassId = 90, kMethodId = 10;
  static constexpr std::string_view kName = "tx.select";
  friend bool operator==(const TxSelect&, const TxSelect&) = default;
};

struct TxSelectOk {
  static constexpr uint16_t kClassId = 90, kMethodId = 11;
  static constexpr std::string_view kName = "tx.select-ok";
  friend bool operator==(const TxSelectOk&, const TxSelectOk&) = default;
};

struct TxCommit {
  static constexpr uint16_t kClassId = 90, kMethodId = 20;
  static constexpr std::string_view kName = "tx.commit";
  friend bool operator==(const TxCommit&, const TxCommit&) = default;
};

struct TxCommitOk {
  static constexpr uint16_t kClassId = 90, kMethodId = 21;
  static constexpr std::string_view kName = "tx.commit-ok";
  friend bool operator==(const TxCommitOk&, const TxCommitOk&) = default;
};

struct TxRollback {
  static constexpr uint16_t kClassId = 90, kMethodId = 30;
  static constexpr std::string_view kName = "tx.rollback";
  friend bool operator==(const TxRollback&, const TxRollback&) = default;
};

struct TxRollbackOk {
  static constexpr uint16_t kClassId = 90, kMethodId = 31;
  static constexpr std::string_view kName = "tx.rollback-ok";
  friend bool operator==(const TxRollbackOk&, const TxRollbackOk&) = default;
};
using Method = std::variant<
    ConnectionStart, ConnectionStartOk, ConnectionSecure, ConnectionSecureOk, ConnectionTune,
    ConnectionTuneOk, ConnectionOpen, ConnectionOpenOk, ConnectionClose, ConnectionCloseOk,
    ConnectionBlocked, ConnectionUnblocked, ConnectionUpdateSecret, ConnectionUpdateSecretOk,
    ChannelOpen, ChannelOpenOk, ChannelFlow, ChannelFlowOk, ChannelClose, ChannelCloseOk,
    AccessRequest, AccessRequestOk, ExchangeDeclare, ExchangeDeclareOk, ExchangeDelete,
    ExchangeDeleteOk, ExchangeBind, ExchangeBindOk, ExchangeUnbind, ExchangeUnbindOk, QueueDeclare,
    QueueDeclareOk, QueueBind, QueueBindOk, QueuePurge, QueuePurgeOk, QueueDelete, QueueDeleteOk,
    QueueUnbind, QueueUnbindOk, BasicQos, BasicQosOk, BasicConsume, BasicConsumeOk, BasicCancel,
    BasicCancelOk, BasicPublish, BasicReturn, BasicDeliver, BasicGet, BasicGetOk, BasicGetEmpty,
    BasicAck, BasicReject, BasicRecoverAsync, BasicRecover, BasicRecoverOk, BasicNack,
    ConfirmSelect, ConfirmSelectOk, TxSelect, TxSelectOk, TxCommit, TxCommitOk, TxRollback,
    TxRollbackOk>;

// Decodes a method frame's payload (class-id, method-id, arguments). On error, *out is
// unchanged.
Status DecodeMethod(std::string_view payload, Method* out);

// Appends class-id, method-id and the arguments.
void EncodeMethod(const Method& method, std::string* payload);

// {class-id, method-id}.
std::pair<uint16_t, uint16_t> MethodId(const Method& m);

// "queue.declare", "basic.get-ok", ... as the XML spells them; "unknown" for other ids.
std::string_view MethodName(uint16_t class_id, uint16_t method_id);
std::string_view MethodName(const Method& m);

// True for the methods followed by content (a header frame and body frames): basic.publish,
// basic.return, basic.deliver, basic.get-ok.
bool HasContent(const Method& m);
bool HasContent(uint16_t class_id, uint16_t method_id);

}  // namespace wharf::amqp
