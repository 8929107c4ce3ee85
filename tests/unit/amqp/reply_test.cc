// Unit tests for amqp/reply.h: reply codes, names and hardness, against rabbitmq-c's table.
#include "amqp/reply.h"

#include <gtest/gtest.h>

#include <string>

#include "unit/amqp/amqp_test_util.h"

namespace wharf::amqp {
namespace {

constexpr uint16_t kAll[] = {
    kReplySuccess,  kContentTooLarge, kNoRoute,        kNoConsumers,    kConnectionForced,
    kInvalidPath,   kAccessRefused,   kNotFound,       kResourceLocked, kPreconditionFailed,
    kFrameError,    kSyntaxError,     kCommandInvalid, kChannelError,   kUnexpectedFrame,
    kResourceError, kNotAllowed,      kNotImplemented, kInternalError};

TEST(AmqpReply, NamesAndHardnessMatchRabbitMqC) {
  for (uint16_t code : kAll) {
    EXPECT_EQ("AMQP_" + std::string(ReplyName(code)), amqp_constant_name(code)) << code;
    EXPECT_EQ(IsHardError(code), amqp_constant_is_hard_error(code) != 0) << code;
  }
}

TEST(AmqpReply, Values) {
  EXPECT_EQ(kNotFound, 404);
  EXPECT_EQ(kPreconditionFailed, 406);
  EXPECT_EQ(kFrameError, 501);
  EXPECT_EQ(kNotAllowed, 530);
  EXPECT_EQ(ReplyName(kNotFound), "NOT_FOUND");
  EXPECT_EQ(ReplyName(kPreconditionFailed), "PRECONDITION_FAILED");
  EXPECT_EQ(ReplyName(0), "UNKNOWN");
  EXPECT_EQ(ReplyName(999), "UNKNOWN");
}

TEST(AmqpReply, HardErrors) {
  for (uint16_t code : {320, 402, 501, 502, 503, 504, 505, 506, 530, 540, 541}) {
    EXPECT_TRUE(IsHardError(code)) << code;
  }
  for (uint16_t code : {200, 311, 312, 313, 403, 404, 405, 406, 0, 999}) {
    EXPECT_FALSE(IsHardError(code)) << code;
  }
}

TEST(AmqpReply, CodecErrors) {
  EXPECT_EQ(CodecErrorReply(StatusCode::kMalformedFrame), kFrameError);
  EXPECT_EQ(CodecErrorReply(StatusCode::kFrameTooLarge), kFrameError);
  EXPECT_EQ(CodecErrorReply(StatusCode::kUnexpectedFrame), kUnexpectedFrame);
  EXPECT_EQ(CodecErrorReply(StatusCode::kInvalidArgument), kCommandInvalid);
  EXPECT_EQ(CodecErrorReply(StatusCode::kAuthenticationFailed), kAccessRefused);
  EXPECT_EQ(CodecErrorReply(StatusCode::kPreconditionFailed), kPreconditionFailed);
  EXPECT_EQ(CodecErrorReply(StatusCode::kInternal), kInternalError);
}

}  // namespace
}  // namespace wharf::amqp
