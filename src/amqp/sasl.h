// amqp/sasl.h
//
// The credentials in connection.start-ok's response, for the two mechanisms Wharf offers.
//
//   PLAIN (RFC 4616): [authzid] NUL authcid NUL passwd. Exactly two NULs. An authorization
//     identity is accepted only when it is empty or names the authenticating user itself:
//     Wharf cannot act for another user, and RFC 4616 says a server that cannot must fail.
//     (RabbitMQ accepts only an empty one: "\0user\0pass", what every client sends.)
//   AMQPLAIN (RabbitMQ's): a field table WITHOUT its 4-byte length prefix (py-amqp and
//     kombu's encoding), holding LOGIN and PASSWORD as longstrs (S), as RabbitMQ requires.
//     Other entries are ignored.
//
// User and password are returned as bytes; an empty one is not an error here (the login
// check refuses it). Errors are StatusCode::kAuthenticationFailed (RabbitMQ: 403
// ACCESS_REFUSED, "... invalid"), with a message that never contains the password.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "wharf/status.h"

namespace wharf::amqp {

struct Credentials {
  std::string user;
  std::string password;
};

Status ParsePlain(std::string_view response, Credentials* out);
Status ParseAmqplain(std::string_view response, Credentials* out);

}  // namespace wharf::amqp
