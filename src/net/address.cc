#include "net/address.h"

namespace wharf::net {

bool IsLoopback(const asio::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).is_loopback();
  }
  return address.is_loopback();
}

bool IsLoopback(const std::string& text) {
  asio::error_code ec;
  auto address = asio::ip::make_address(text, ec);
  return !ec && IsLoopback(address);
}

}  // namespace wharf::net
