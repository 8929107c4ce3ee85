// amqp/reply.h
//
// AMQP 0-9-1 reply codes (spec 1.2's constants), their names as RabbitMQ writes them at the
// start of a reply text ("NOT_FOUND - no queue 'q' in vhost '/'"), and which are hard errors:
// a hard error closes the connection (connection.close), a soft one the channel
// (channel.close). Per the spec: 320, 402, 501-506, 530, 540 and 541 are hard; 311-313 and
// 403-406 soft.
//
// CodecErrorReply maps the StatusCodes this module's decoders return to the reply RabbitMQ
// sends for the same input: kMalformedFrame (and kFrameTooLarge / kFrameTruncated) -> 501
// FRAME_ERROR, kUnexpectedFrame -> 505, kInvalidArgument (an unknown method) -> 503
// COMMAND_INVALID, kAuthenticationFailed (SASL) -> 403, kPreconditionFailed (expiration)
// -> 406; anything else -> 541 INTERNAL_ERROR.
//
// Thread safety: constants and pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "wharf/status.h"

namespace wharf::amqp {

inline constexpr uint16_t kReplySuccess = 200;
inline constexpr uint16_t kContentTooLarge = 311;
inline constexpr uint16_t kNoRoute = 312;
inline constexpr uint16_t kNoConsumers = 313;
inline constexpr uint16_t kConnectionForced = 320;
inline constexpr uint16_t kInvalidPath = 402;
inline constexpr uint16_t kAccessRefused = 403;
inline constexpr uint16_t kNotFound = 404;
inline constexpr uint16_t kResourceLocked = 405;
inline constexpr uint16_t kPreconditionFailed = 406;
inline constexpr uint16_t kFrameError = 501;
inline constexpr uint16_t kSyntaxError = 502;
inline constexpr uint16_t kCommandInvalid = 503;
inline constexpr uint16_t kChannelError = 504;
inline constexpr uint16_t kUnexpectedFrame = 505;
inline constexpr uint16_t kResourceError = 506;
inline constexpr uint16_t kNotAllowed = 530;
inline constexpr uint16_t kNotImplemented = 540;
inline constexpr uint16_t kInternalError = 541;

// "NOT_FOUND", "PRECONDITION_FAILED", ...; "UNKNOWN" for other codes.
std::string_view ReplyName(uint16_t code);

bool IsHardError(uint16_t code);

uint16_t CodecErrorReply(StatusCode code);

}  // namespace wharf::amqp
