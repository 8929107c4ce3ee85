// common/utf8.h
//
// UTF-8 validation: text a peer or a file must give as UTF-8. wharfd's config file (TOML is
// UTF-8; checked before toml11 sees it, server/options.cc), and AMQP text: RabbitMQ rejects (501
// FRAME_ERROR, "Malformed UTF-8 in shortstr") the short strings of most client methods that are not
// valid UTF-8: queue and exchange names, consumer tags, the mechanism, reply texts (methods.h lists
// which); and a header value of type S is text for Wharf's native clients only when it is valid
// UTF-8 (message_map.h).
//
// Valid means RFC 3629: shortest encodings only, no surrogates (U+D800..U+DFFF), nothing above
// U+10FFFF. NUL is valid.
//
// Thread safety: a pure function.
#pragma once

#include <string_view>

namespace wharf {

bool IsValidUtf8(std::string_view text);

}  // namespace wharf
