// net/address.h
//
// Whether a peer's address is a loopback one: the built-in guest may log in only from such an
// address (server/login.h, server/http_auth.h), as RabbitMQ's loopback_users. An IPv4 address
// mapped into IPv6 (::ffff:127.0.0.1, what a dual-stack socket reports) counts as its IPv4 self.
//
// Thread safety: pure functions.
#pragma once

#include <asio/ip/address.hpp>
#include <string>

namespace wharf::net {

bool IsLoopback(const asio::ip::address& address);
// `text` as printed by an address's to_string(); false when it is not an address.
bool IsLoopback(const std::string& text);

}  // namespace wharf::net
