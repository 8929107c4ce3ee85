// net/tls.cc: TLS contexts from Wharf's settings (net/tls.h).
#include "net/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <filesystem>
#include <fstream>

namespace wharf::net {

namespace {

Status Invalid(const std::string& what) { return Status(StatusCode::kInvalidConfig, what); }

// OpenSSL's own reason for the last failure ("" when it left none), and its queue cleared.
std::string OpenSslReason() {
  std::string reason;
  while (unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    reason = text;  // the last is the most specific
  }
  return reason;
}

// A file that must exist and be readable, named by `setting`.
Status CheckReadable(const std::string& setting, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Invalid(setting + " '" + path + "': no such file");
  }
  if (!std::ifstream(path)) return Invalid(setting + " '" + path + "': cannot be read");
  return Status::Ok();
}

// True when `path` holds a private key OpenSSL can read without a passphrase.
bool IsPemPrivateKey(const std::string& path) {
  BIO* bio = BIO_new_file(path.c_str(), "r");
  if (!bio) return false;
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, const_cast<char*>(""));
  BIO_free(bio);
  const bool read = key != nullptr;
  EVP_PKEY_free(key);
  OpenSslReason();
  return read;
}

Status LoadChainAndKey(asio::ssl::context& context, const std::string& what,
                       const std::string& cert_file, const std::string& key_file) {
  WHARF_RETURN_IF_ERROR(CheckReadable(what + " certificate", cert_file));
  WHARF_RETURN_IF_ERROR(CheckReadable(what + " key", key_file));
  asio::error_code ec;
  context.use_certificate_chain_file(cert_file, ec);
  if (ec) {
    return Invalid(what + " certificate '" + cert_file +
                   "' is not a PEM certificate chain: " + ec.message());
  }
  context.use_private_key_file(key_file, asio::ssl::context::pem, ec);
  if (ec && !IsPemPrivateKey(key_file)) {
    return Invalid(what + " key '" + key_file +
                   "' is not an unencrypted PEM private key: " + ec.message());
  }
  // OpenSSL refuses a key for another certificate as it loads it ("key values mismatch").
  if (ec || SSL_CTX_check_private_key(context.native_handle()) != 1) {
    OpenSslReason();
    return Invalid(what + " key '" + key_file + "' does not match the certificate '" + cert_file +
                   "'");
  }
  return Status::Ok();
}

Status LoadCa(asio::ssl::context& context, const std::string& setting, const std::string& path) {
  WHARF_RETURN_IF_ERROR(CheckReadable(setting, path));
  asio::error_code ec;
  context.load_verify_file(path, ec);
  if (ec) return Invalid(setting + " '" + path + "' holds no PEM certificate: " + ec.message());
  return Status::Ok();
}

}  // namespace

Result<PeerVerify> ParsePeerVerify(const std::string& text) {
  if (text == "none") return PeerVerify::kNone;
  if (text == "optional") return PeerVerify::kOptional;
  if (text == "required") return PeerVerify::kRequired;
  return Invalid("[tls] verify must be \"none\", \"optional\" or \"required\", not '" + text + "'");
}

Result<std::shared_ptr<asio::ssl::context>> MakeServerTlsContext(const TlsServerSettings& s) {
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  SSL_CTX* ctx = context->native_handle();
  // Never below TLS 1.2; no compression, no renegotiation (CRIME, renegotiation attacks).
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1 | asio::ssl::context::no_compression |
                       SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  int min = 0;
  if (s.min_version == "1.2") {
    min = TLS1_2_VERSION;
  } else if (s.min_version == "1.3") {
    min = TLS1_3_VERSION;
  } else {
    return Invalid("[tls] min_version must be \"1.2\" or \"1.3\", not '" + s.min_version + "'");
  }
  SSL_CTX_set_min_proto_version(ctx, min);
  if (!s.ciphers.empty() && SSL_CTX_set_cipher_list(ctx, s.ciphers.c_str()) != 1) {
    OpenSslReason();
    return Invalid("[tls] ciphers '" + s.ciphers + "': OpenSSL knows none of these ciphers");
  }
  if (!s.ciphersuites.empty() && SSL_CTX_set_ciphersuites(ctx, s.ciphersuites.c_str()) != 1) {
    OpenSslReason();
    return Invalid("[tls] ciphersuites '" + s.ciphersuites +
                   "': OpenSSL knows none of these TLS 1.3 suites");
  }
  if (s.cert_file.empty() || s.key_file.empty()) {
    return Invalid("[tls] cert and key are needed for a TLS listener");
  }
  WHARF_RETURN_IF_ERROR(LoadChainAndKey(*context, "[tls] cert/key:", s.cert_file, s.key_file));
  if (s.verify != PeerVerify::kNone) {
    if (s.ca_file.empty()) {
      return Invalid("[tls] verify = \"optional\" or \"required\" needs [tls] ca");
    }
    WHARF_RETURN_IF_ERROR(LoadCa(*context, "[tls] ca", s.ca_file));
    // The CAs' names go in the certificate request, so that clients pick the right one.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(s.ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(ctx, names);
    }
    context->set_verify_mode(s.verify == PeerVerify::kRequired
                                 ? asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert
                                 : asio::ssl::verify_peer);
    // Sessions resumed with a verified client certificate stay tied to this server.
    static constexpr unsigned char kSessionContext[] = "wharfd";
    SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
  } else {
    context->set_verify_mode(asio::ssl::verify_none);
  }
  OpenSslReason();  // nothing left over for the connections to misreport
  return context;
}

Result<std::shared_ptr<asio::ssl::context>> MakeClientTlsContext(const TlsClientSettings& s) {
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1 | asio::ssl::context::no_compression);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  if (s.verify) {
    if (s.ca_file.empty()) {
      asio::error_code ec;
      context->set_default_verify_paths(ec);
      if (ec) return Invalid("the system's CA certificates cannot be loaded: " + ec.message());
    } else {
      WHARF_RETURN_IF_ERROR(LoadCa(*context, "CA file", s.ca_file));
    }
    context->set_verify_mode(asio::ssl::verify_peer);
  } else {
    context->set_verify_mode(asio::ssl::verify_none);
  }
  if (!s.cert_file.empty() || !s.key_file.empty()) {
    if (s.cert_file.empty() || s.key_file.empty()) {
      return Invalid("a client certificate needs both the certificate and its key");
    }
    WHARF_RETURN_IF_ERROR(LoadChainAndKey(*context, "client", s.cert_file, s.key_file));
  }
  OpenSslReason();
  return context;
}

namespace {

// SSL_CTX_set_client_hello_cb's callback: the handshake moves onto the current context.
int OnClientHello(SSL* ssl, int* alert, void* arg) {
  const auto* source = static_cast<const ServerTlsSource*>(arg);
  ServerTls now = (*source)();  // holds the context while the handshake takes it over
  if (!now.context) {
    *alert = SSL_AD_INTERNAL_ERROR;
    return SSL_CLIENT_HELLO_ERROR;
  }
  SSL_CTX* ctx = now.context->native_handle();
  // The certificate, its chain and key, and the CAs the peer's certificate is checked against
  // (the SSL holds a reference to ctx from here on).
  if (SSL_set_SSL_CTX(ssl, ctx) != ctx) {
    *alert = SSL_AD_INTERNAL_ERROR;
    return SSL_CLIENT_HELLO_ERROR;
  }
  // What SSL_new copied from the base context, and SSL_set_SSL_CTX does not.
  SSL_set_verify(ssl, SSL_CTX_get_verify_mode(ctx), nullptr);
  SSL_set_options(ssl, SSL_CTX_get_options(ctx));
  if (SSL_set_min_proto_version(ssl, SSL_CTX_get_min_proto_version(ctx)) != 1 ||
      (!now.settings.ciphers.empty() &&
       SSL_set_cipher_list(ssl, now.settings.ciphers.c_str()) != 1) ||
      (!now.settings.ciphersuites.empty() &&
       SSL_set_ciphersuites(ssl, now.settings.ciphersuites.c_str()) != 1)) {
    *alert = SSL_AD_INTERNAL_ERROR;
    return SSL_CLIENT_HELLO_ERROR;
  }
  return SSL_CLIENT_HELLO_SUCCESS;
}

}  // namespace

void FollowServerTls(SSL_CTX* base, const ServerTlsSource* source) {
  SSL_CTX_set_client_hello_cb(base, OnClientHello, const_cast<ServerTlsSource*>(source));
}

std::string PeerCommonName(const SSL* ssl) {
  if (!ssl) return "";
  X509* peer = SSL_get1_peer_certificate(ssl);
  if (!peer) return "";
  std::string name;
  X509_NAME* subject = X509_get_subject_name(peer);
  int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at >= 0) {
    unsigned char* utf8 = nullptr;
    int size =
        ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at)));
    if (size > 0) name.assign(reinterpret_cast<char*>(utf8), static_cast<size_t>(size));
    OPENSSL_free(utf8);
  }
  X509_free(peer);
  return name;
}

std::string PeerSubject(const SSL* ssl) {
  if (!ssl) return "";
  X509* peer = SSL_get1_peer_certificate(ssl);
  if (!peer) return "";
  std::string subject;
  if (BIO* bio = BIO_new(BIO_s_mem())) {
    if (X509_NAME_print_ex(bio, X509_get_subject_name(peer), 0,
                           XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) >= 0) {
      char* data = nullptr;
      long size = BIO_get_mem_data(bio, &data);
      if (data && size > 0) subject.assign(data, static_cast<size_t>(size));
    }
    BIO_free(bio);
  }
  X509_free(peer);
  return subject;
}

}  // namespace wharf::net
