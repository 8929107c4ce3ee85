// net/tls.h
//
// TLS contexts for the listeners (server side) and the C++ client (client side), built from
// files named in the config or on the command line: certificate chain, private key, CA
// certificates, whether and how the peer's certificate is checked, the lowest protocol version
// and the cipher lists (docs/security.md, "TLS"). Everything is OpenSSL's through asio; what is
// here is only the mapping of Wharf's settings onto it and errors that name the file and the
// problem.
//
// Thread safety: the functions are; a context, once built, is only read (shared by the
// connections made with it).
#pragma once

#include <asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "wharf/result.h"

namespace wharf::net {

// How a server treats client certificates.
enum class PeerVerify {
  kNone,      // not asked for
  kOptional,  // asked for; one sent must verify against the CA file, none is fine
  kRequired,  // asked for and must be sent and verify (mutual TLS)
};

struct TlsServerSettings {
  std::string cert_file;  // PEM: the server's certificate, then its chain
  std::string key_file;   // PEM: its private key (unencrypted)
  std::string ca_file;    // PEM: CAs that client certificates must chain to (kOptional/kRequired)
  PeerVerify verify = PeerVerify::kNone;
  std::string min_version = "1.2";  // "1.2" or "1.3"
  std::string ciphers;              // TLS 1.2 cipher list (OpenSSL syntax); "" = OpenSSL's
  std::string ciphersuites;         // TLS 1.3 suites (OpenSSL syntax); "" = OpenSSL's
};

struct TlsClientSettings {
  std::string ca_file;    // PEM: CAs the server's certificate must chain to; "" = the system's
  std::string cert_file;  // PEM: this client's certificate (mutual TLS); "" = none
  std::string key_file;   // its private key
  bool verify = true;     // false: any server certificate is taken (tests only; says so)
};

// "none", "optional", "required"; kInvalidConfig otherwise.
Result<PeerVerify> ParsePeerVerify(const std::string& text);

// kInvalidConfig naming the file or setting at fault: a missing or unreadable file, a key that
// does not match the certificate, an unknown version, a cipher list OpenSSL takes none of.
Result<std::shared_ptr<asio::ssl::context>> MakeServerTlsContext(const TlsServerSettings& s);
Result<std::shared_ptr<asio::ssl::context>> MakeClientTlsContext(const TlsClientSettings& s);

// The peer's certificate subject after a handshake, as one line in RFC 2253 form, most
// specific part first ("O=Example,CN=alice"); "" when it sent none.
std::string PeerSubject(SSL* ssl);
// The common name (CN) of the peer's certificate subject, UTF-8 ("" when none).
std::string PeerCommonName(SSL* ssl);

}  // namespace wharf::net
