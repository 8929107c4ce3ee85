// net/stream.cc: what a Stream says about its TLS session (net/stream.h).
#include "net/stream.h"

#include <openssl/ssl.h>

namespace wharf::net {

std::string Stream::TlsDescription() {
  Tls* t = tls_stream();
  if (!t) return "";
  SSL* ssl = t->native_handle();
  std::string text = SSL_get_version(ssl);
  if (const char* cipher = SSL_get_cipher_name(ssl)) text += std::string(" ") + cipher;
  return text;
}

}  // namespace wharf::net
