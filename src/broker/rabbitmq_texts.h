// broker/rabbitmq_texts.h
//
// RabbitMQ's words for the errors of AMQP sessions. The broker answers native clients in its
// own words (docs/errors.md) and AMQP clients as RabbitMQ 3.10 does: the reply text after
// "CODE - " in channel.close and connection.close, which client libraries show and their users
// match on. tests/compat/ records them from RabbitMQ itself and diffs Wharf's against them.
//
// Values are shown as RabbitMQ's val/1 shows them: a bare value as 'v', a missing one as
// none, one that only one side has as "the value 'v' of type 't'". Wharf keeps argument
// values without their AMQP wire type (integers of every width are int64), so TypeName names
// the type clients send for such a value: an integer that fits 32 bits is 'signedint' (pika,
// py-amqp, the Java and Go clients encode it so), a larger one 'long'.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "wharf/message.h"

namespace wharf::broker::rabbitmq {

// "queue 'q' in vhost '/'" (RabbitMQ's rs/1).
std::string Resource(std::string_view kind, std::string_view name, std::string_view vhost);
// 'v': a value as RabbitMQ's format ~s / ~p shows it.
std::string Bare(const HeaderValue& value);
std::string Bare(bool value);
// "none", or "the value 'v' of type 't'".
std::string Typed(const HeaderValue* value);
std::string_view TypeName(const HeaderValue& value);
// "inequivalent arg 'K' for queue 'q' in vhost '/': received R but current is C".
std::string Inequivalent(std::string_view key, std::string_view resource, std::string_view received,
                         std::string_view current);
// "invalid arg 'K' for queue 'q' in vhost '/': REASON".
std::string InvalidArg(std::string_view key, std::string_view queue, std::string_view vhost,
                       std::string_view reason);
// "queue name 'amq.x' contains reserved prefix 'amq.*'".
std::string ReservedName(std::string_view kind, std::string_view name);
// Another connection's exclusive queue (RabbitMQ's check_exclusive_access).
std::string Locked(std::string_view queue, std::string_view vhost);
// "no queue 'q' in vhost '/'".
std::string NotFound(std::string_view kind, std::string_view name, std::string_view vhost);

}  // namespace wharf::broker::rabbitmq
