// amqp/utf8.h
//
// UTF-8 validation for AMQP text. RabbitMQ rejects (501 FRAME_ERROR, "Malformed UTF-8 in
// shortstr") the short strings of most client methods that are not valid UTF-8: queue and
// exchange names, consumer tags, the mechanism, reply texts (methods.h lists which); and a
// header value of type S is text for Wharf's native clients only when it is valid UTF-8
// (message_map.h).
//
// Valid means RFC 3629: shortest encodings only, no surrogates (U+D800..U+DFFF), nothing above
// U+10FFFF. NUL is valid.
//
// Thread safety: a pure function.
#pragma once

#include <string_view>

namespace wharf::amqp {

bool IsValidUtf8(std::string_view text);

}  // namespace wharf::amqp
