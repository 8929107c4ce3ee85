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
#include <functional>
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

// A server's TLS context as it is now, and the settings it was made from (SIGHUP replaces both
// together; the context is null when the server has no TLS).
struct ServerTls {
  std::shared_ptr<asio::ssl::context> context;
  TlsServerSettings settings;
};
using ServerTlsSource = std::function<ServerTls()>;

// For a library that makes every connection's SSL from one SSL_CTX of its own (cpp-httplib's
// SSLServer, server/metrics_server.h): sets `base` up so that each handshake, on its
// ClientHello, moves onto the context `source` gives at that moment, with its certificate and
// chain, CAs, client certificate checks, protocol versions, options and cipher lists. So a
// reload reaches such a listener as it reaches the asio ones: new connections get the new
// files, open ones keep theirs. A handshake is refused (internal_error) when `source` has no
// context. `source` must outlive `base`.
void FollowServerTls(SSL_CTX* base, const ServerTlsSource* source);

// The peer's certificate subject after a handshake, as one line in RFC 2253 form, most
// specific part first ("O=Example,CN=alice"); "" when it sent none.
std::string PeerSubject(const SSL* ssl);
// The common name (CN) of the peer's certificate subject, UTF-8 ("" when none).
std::string PeerCommonName(const SSL* ssl);

}  // namespace wharf::net
