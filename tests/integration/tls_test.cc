// TLS on the native listener and the HTTPS metrics listener, and credentials on the metrics
// listeners (issue 18, "TLS"; docs/security.md): the real wharfd with [tls] listeners and
// throw-away certificates (tests/integration/tls/make-certs.sh), driven by the C++ client,
// wharfctl and cpp-httplib's client. AMQPS with pika and openssl s_client: tls_test.py.
#include <gtest/gtest.h>
#include <httplib.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/test_server.h"

namespace wharf {
namespace {

class Tls : public ::testing::Test {
 public:
  // A certificate or key file the suite made (tests/integration/tls/make-certs.sh).
  static std::string Cert(const std::string& name) { return *certs_ + "/" + name; }

 protected:
  static void SetUpTestSuite() {
    certs_ = new std::string(testing::MakeTempDir("wharf-tls-certs"));
    int code = 0;
    std::string out =
        testing::RunCommand(std::string(WHARF_TLS_CERTS_SCRIPT) + " " + *certs_ + " 2>&1", &code);
    ASSERT_EQ(code, 0) << out;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove_all(*certs_, ec);
    delete certs_;
    certs_ = nullptr;
  }

  // A config with a native TLS listener on a free port using `cert`/`key`, plus `extra` lines
  // in [tls]; in its own directory (returned path).
  std::string WriteConfig(const std::string& cert = "server", const std::string& extra = "") {
    if (dir_.empty()) dir_ = testing::MakeTempDir("wharf-tls");
    std::string path = dir_ + "/wharfd.toml";
    std::ofstream out(path);
    out << "[tls]\nlisten = \"127.0.0.1:0\"\ncert = \"" << Cert(cert + ".pem") << "\"\nkey = \""
        << Cert(cert + ".key") << "\"\n"
        << extra << "\n";
    return path;
  }

  static ClientOptions TlsOptions(const testing::TestServer& server,
                                  const std::string& ca = "ca.pem") {
    ClientOptions o = server.Options();
    o.port = server.tls_port();
    o.tls.enabled = true;
    o.tls.ca_file = Cert(ca);
    return o;
  }

  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  static std::string* certs_;
  std::string dir_;
};

std::string* Tls::certs_ = nullptr;

// One persistent message through `client`: confirmed, then received and acked.
void RoundTrip(Client& client, const std::string& queue) {
  QueueSpec spec;
  spec.name = queue;
  spec.durable = true;
  ASSERT_TRUE(client.DeclareQueue(spec).ok());
  Message m;
  m.body = std::string(100'000, 'x') + "end";  // many TLS records
  m.persistent = true;
  auto confirmed = client.Publish("", queue, m);
  ASSERT_TRUE(confirmed.ok()) << confirmed.status().ToString();
  auto got = client.Receive(queue, 1, std::chrono::seconds(5));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].message.body, m.body);
  EXPECT_TRUE(client.AckSync((*got)[0].delivery_tag).ok());
}

TEST_F(Tls, ClientPublishesAndConsumesOverTlsBesideThePlainListener) {
  testing::TestServer server({"--config", WriteConfig()});
  ASSERT_NE(server.tls_port(), 0);
  ASSERT_NE(server.port(), 0);
  auto client = Client::Connect(TlsOptions(server));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  RoundTrip(**client, "over-tls");
  // The name in the certificate, not the address, when asked for it.
  ClientOptions by_name = TlsOptions(server);
  by_name.tls.server_name = "localhost";
  auto named = Client::Connect(by_name);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  // The plain listener serves as before.
  auto plain = server.Connect();
  ASSERT_NE(plain, nullptr);
  RoundTrip(*plain, "plain");
  EXPECT_NE(server.Log().find("TLS: TLSv1.3"), std::string::npos) << server.Log();
}

TEST_F(Tls, AWrongCaAWrongNameAndAnExpiredCertificateAreRefused) {
  {
    testing::TestServer server({"--config", WriteConfig()});
    auto other_ca = Client::Connect(TlsOptions(server, "other-ca.pem"));
    ASSERT_FALSE(other_ca.ok());
    EXPECT_NE(other_ca.status().ToString().find("certificate verify failed"), std::string::npos)
        << other_ca.status().ToString();
    ClientOptions wrong_name = TlsOptions(server);
    wrong_name.tls.server_name = "broker.example.com";
    auto named = Client::Connect(wrong_name);
    ASSERT_FALSE(named.ok());
    EXPECT_NE(named.status().ToString().find("certificate verify failed"), std::string::npos)
        << named.status().ToString();
    // Without verification the same connection works (and nothing checks who answered).
    wrong_name.tls.verify = false;
    wrong_name.tls.ca_file.clear();
    auto unverified = Client::Connect(wrong_name);
    EXPECT_TRUE(unverified.ok()) << unverified.status().ToString();
    // The refused handshakes cost the broker nothing: it logs them and serves on.
    EXPECT_NE(server.Log().find("TLS handshake failed"), std::string::npos) << server.Log();
    auto again = Client::Connect(TlsOptions(server));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    RoundTrip(**again, "after-refusals");
  }
  testing::TestServer expired({"--config", WriteConfig("expired")});
  auto refused = Client::Connect(TlsOptions(expired));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("certificate verify failed"), std::string::npos)
      << refused.status().ToString();
}

TEST_F(Tls, PlainBytesToTheTlsPortAndTlsToThePlainPortFailCleanly) {
  testing::TestServer server({"--config", WriteConfig()});
  // A native client speaking clear text to the TLS port: the handshake fails, the broker
  // closes that socket and keeps serving.
  ClientOptions plain_to_tls = server.Options();
  plain_to_tls.port = server.tls_port();
  plain_to_tls.connect_timeout = std::chrono::seconds(3);
  plain_to_tls.request_timeout = std::chrono::seconds(3);
  auto confused = Client::Connect(plain_to_tls);
  EXPECT_FALSE(confused.ok());
  // TLS to the plain port: the broker reads a ClientHello as a frame and refuses it.
  ClientOptions tls_to_plain = TlsOptions(server);
  tls_to_plain.port = server.port();
  tls_to_plain.connect_timeout = std::chrono::seconds(3);
  auto wrong = Client::Connect(tls_to_plain);
  EXPECT_FALSE(wrong.ok());
  auto fine = Client::Connect(TlsOptions(server));
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  RoundTrip(**fine, "after-confusion");
  EXPECT_TRUE(server.running());
}

TEST_F(Tls, RequiredClientCertificatesRefuseClientsWithoutOne) {
  testing::TestServer server({"--config", WriteConfig("server", "verify = \"required\"\nca = \"" +
                                                                    Cert("ca.pem") + "\"")});
  auto anonymous = Client::Connect(TlsOptions(server));
  EXPECT_FALSE(anonymous.ok());
  ClientOptions with_cert = TlsOptions(server);
  with_cert.tls.cert_file = Cert("client.pem");
  with_cert.tls.key_file = Cert("client.key");
  auto client = Client::Connect(with_cert);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  RoundTrip(**client, "mutual");
  // A certificate from another CA is refused like none.
  ClientOptions foreign = with_cert;
  foreign.tls.cert_file = Cert("other-server.pem");
  foreign.tls.key_file = Cert("other-server.key");
  EXPECT_FALSE(Client::Connect(foreign).ok());
}

// Rewrites `config` with a TLS listener on `cert` and `key`, sends SIGHUP, and waits (4 s at
// most) for the log to say `logged`.
bool Reload(testing::TestServer& server, const std::string& config, const std::string& cert,
            const std::string& key, const std::string& logged) {
  {
    std::ofstream out(config, std::ios::trunc);
    out << "[tls]\nlisten = \"127.0.0.1:0\"\ncert = \"" << Tls::Cert(cert) << "\"\nkey = \""
        << Tls::Cert(key) << "\"\n";
  }
  server.Signal(SIGHUP);
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (server.Log().find(logged) != std::string::npos) return true;
  }
  return false;
}

TEST_F(Tls, SighupReloadsTheCertificateForNewConnectionsAndKeepsOpenOnes) {
  std::string config = WriteConfig();
  testing::TestServer server({"--config", config});
  auto before = Client::Connect(TlsOptions(server));
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_FALSE(Client::Connect(TlsOptions(server, "other-ca.pem")).ok());
  // The operator replaces the certificate with one from the other CA and sends SIGHUP.
  ASSERT_TRUE(Reload(server, config, "other-server.pem", "other-server.key", "and the TLS files"))
      << server.Log();
  auto after = Client::Connect(TlsOptions(server, "other-ca.pem"));
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  RoundTrip(**after, "after-reload");
  // The connection made before the reload was not dropped.
  RoundTrip(**before, "before-reload");
  // A broken file on the next SIGHUP keeps the files in use.
  ASSERT_TRUE(Reload(server, config, "other-server.pem", "server.key", "TLS files not reloaded"))
      << server.Log();
  EXPECT_NE(server.Log().find("does not match the certificate"), std::string::npos);
  EXPECT_TRUE(Client::Connect(TlsOptions(server, "other-ca.pem")).ok());
}

TEST_F(Tls, ThePlainListenerCanBeTurnedOffAndWharfctlConnectsOverTls) {
  testing::TestServer server({"--config", WriteConfig(), "--listen", "off"});
  EXPECT_EQ(server.port(), 0);
  ASSERT_NE(server.tls_port(), 0);
  auto client = Client::Connect(TlsOptions(server));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  RoundTrip(**client, "tls-only");
  int code = 0;
  std::string server_flag = " --server 127.0.0.1:" + std::to_string(server.tls_port());
  std::string out = testing::RunCommand(
      std::string(WHARFCTL_PATH) + server_flag + " --ca " + Cert("ca.pem") + " queues 2>&1", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("tls-only"), std::string::npos) << out;
  // Without --tls, wharfctl cannot talk to a TLS port: a connection error, not a hang.
  out = testing::RunCommand(std::string(WHARFCTL_PATH) + server_flag + " queues 2>&1", &code);
  EXPECT_EQ(code, 3) << out;
}

// alice / change-me, the example user of config/wharfd.toml.
constexpr const char* kAliceUser =
    "[[auth.users]]\nname = \"alice\"\npassword_hash = \"pbkdf2-sha256$20000$"
    "e3fa77b999ab7bd3855a8760414e6e90$"
    "7746c2f4b069aeaf971bbae63e7a3c76b5c4694c1bbe1df14c7d616e6980c4d9\"\n";

TEST_F(Tls, AClientCertificateLogsInAsTheUserItNames) {
  std::string gate = "verify = \"required\"\nca = \"" + Cert("ca.pem") + "\"\n";
  testing::TestServer server(
      {"--config", WriteConfig("server", gate + "cert_login = \"common_name\"\n" + kAliceUser)});
  ClientOptions alice = TlsOptions(server);
  alice.tls.cert_file = Cert("client.pem");  // CN=alice, O=Wharf Tests
  alice.tls.key_file = Cert("client.key");
  alice.tls.certificate_login = true;
  auto client = Client::Connect(alice);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  RoundTrip(**client, "by-certificate");
  EXPECT_NE(server.Log().find("user=\"alice\" connection opened"), std::string::npos)
      << server.Log();
  // wharfctl logs in the same way and sees itself as alice.
  int code = 0;
  std::string out = testing::RunCommand(
      std::string(WHARFCTL_PATH) + " --server 127.0.0.1:" + std::to_string(server.tls_port()) +
          " --ca " + Cert("ca.pem") + " --cert " + Cert("client.pem") + " --key " +
          Cert("client.key") + " --cert-login connections 2>&1",
      &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("alice"), std::string::npos) << out;
  // The same certificate with a password login still works (the certificate as a gate).
  ClientOptions with_password = alice;
  with_password.tls.certificate_login = false;
  with_password.user = "alice";
  with_password.password = "change-me";
  EXPECT_TRUE(Client::Connect(with_password).ok());
  // The clear-text port has no certificate: EXTERNAL is not offered there.
  ClientOptions plain = server.Options();
  plain.tls.certificate_login = true;
  auto refused = Client::Connect(plain);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("does not offer"), std::string::npos)
      << refused.status().ToString();

  // The whole subject as the user name: no user has it here, and the refusal says which.
  testing::TestServer by_dn({"--config", WriteConfig("server", gate +
                                                                   "cert_login = "
                                                                   "\"distinguished_name\"\n" +
                                                                   kAliceUser)});
  ClientOptions dn = alice;
  dn.port = by_dn.tls_port();
  auto unknown = Client::Connect(dn);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kAuthenticationFailed);
  EXPECT_NE(unknown.status().ToString().find("'O=Wharf Tests,CN=alice', which is not a user"),
            std::string::npos)
      << unknown.status().ToString();
}

// An HTTPS client for the metrics listener trusting `ca`, with a client certificate when given.
std::unique_ptr<httplib::SSLClient> Https(uint16_t port, const std::string& ca,
                                          const std::string& cert = "",
                                          const std::string& key = "") {
  auto client = cert.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
                             : std::make_unique<httplib::SSLClient>("127.0.0.1", port, cert, key);
  client->set_ca_cert_path(ca.c_str());
  client->enable_server_certificate_verification(true);
  client->set_connection_timeout(5);
  client->set_read_timeout(5);
  return client;
}

// The status of GET `path`, or -1 when no response came (refused handshake, broken connection).
template <typename HttpClient>
int StatusOf(HttpClient& client, const std::string& path) {
  auto res = client.Get(path.c_str());
  return res ? res->status : -1;
}

TEST_F(Tls, MetricsOverHttpsFollowTheCertificateAcrossReloads) {
  std::string config = WriteConfig("server", "metrics_listen = \"127.0.0.1:0\"\n");
  testing::TestServer server({"--config", config, "--metrics-listen", "127.0.0.1:0"});
  ASSERT_NE(server.https_port(), 0) << server.Log();
  auto https = Https(server.https_port(), Cert("ca.pem"));
  auto res = https->Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("wharf_"), std::string::npos);
  EXPECT_EQ(StatusOf(*https, "/healthz"), 200);
  // The clear-text listener beside it still answers; clear text to the HTTPS port does not get
  // an answer, nor does a client that trusts another CA.
  httplib::Client plain_to_https("127.0.0.1", server.https_port());
  plain_to_https.set_read_timeout(5);
  EXPECT_EQ(StatusOf(plain_to_https, "/metrics"), -1);
  httplib::Client plain("127.0.0.1", server.metrics_port());
  EXPECT_EQ(StatusOf(plain, "/metrics"), 200);
  EXPECT_EQ(StatusOf(*Https(server.https_port(), Cert("other-ca.pem")), "/metrics"), -1);
  EXPECT_NE(server.Log().find("metrics on https://127.0.0.1:"), std::string::npos);

  // SIGHUP with the certificate from the other CA: the HTTPS listener serves it from then on.
  ASSERT_TRUE(Reload(server, config, "other-server.pem", "other-server.key", "and the TLS files"))
      << server.Log();
  EXPECT_EQ(StatusOf(*Https(server.https_port(), Cert("other-ca.pem")), "/metrics"), 200);
  EXPECT_EQ(StatusOf(*Https(server.https_port(), Cert("ca.pem")), "/metrics"), -1);
}

TEST_F(Tls, MetricsAuthAsksEveryRequestForABrokerUserOnBothListeners) {
  std::string tls = "metrics_listen = \"127.0.0.1:0\"\nverify = \"optional\"\nca = \"" +
                    Cert("ca.pem") + "\"\ncert_login = \"common_name\"\n";
  testing::TestServer server(
      {"--config",
       WriteConfig(
           "server",
           tls + "[server]\nmetrics_auth = true\n[auth]\nfailure_delay_ms = 1000\n" + kAliceUser),
       "--metrics-listen", "127.0.0.1:0"});
  ASSERT_NE(server.https_port(), 0) << server.Log();
  httplib::Client plain("127.0.0.1", server.metrics_port());
  auto https = Https(server.https_port(), Cert("ca.pem"));
  for (const char* path : {"/metrics", "/healthz"}) {
    // No credentials: 401 with the challenge, on both listeners.
    auto res = plain.Get(path);
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 401) << path;
    EXPECT_EQ(res->get_header_value("WWW-Authenticate"), "Basic realm=\"wharf\"");
    EXPECT_NE(res->body.find("credentials required"), std::string::npos) << res->body;
    EXPECT_EQ(StatusOf(*https, path), 401) << path;
    // A broker user's password: served.
    plain.set_basic_auth("alice", "change-me");
    https->set_basic_auth("alice", "change-me");
    EXPECT_EQ(StatusOf(plain, path), 200) << path;
    EXPECT_EQ(StatusOf(*https, path), 200) << path;
    plain.set_basic_auth("", "");
    https = Https(server.https_port(), Cert("ca.pem"));
  }
  // The built-in guest works from loopback, as for the protocols.
  plain.set_basic_auth("guest", "guest");
  EXPECT_EQ(StatusOf(plain, "/metrics"), 200);
  // Not Basic, or not base64 of user:password: 401 saying so.
  httplib::Headers bearer{{"Authorization", "Bearer abc"}};
  auto res = httplib::Client("127.0.0.1", server.metrics_port()).Get("/metrics", bearer);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_NE(res->body.find("only HTTP Basic"), std::string::npos) << res->body;
  // A wrong password: 401, and the address is throttled as after a failed protocol login; a
  // request in the next second gets 429 even with the right password, then it is served.
  plain.set_basic_auth("alice", "wrong");
  EXPECT_EQ(StatusOf(plain, "/metrics"), 401);
  plain.set_basic_auth("alice", "change-me");
  res = plain.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429);
  EXPECT_NE(res->body.find("too many failed logins from 127.0.0.1"), std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(1'200));
  EXPECT_EQ(StatusOf(plain, "/metrics"), 200);
  EXPECT_NE(server.Log().find("user=\"alice\" GET \"/metrics\" refused (401): \"wrong user "
                              "name or password\""),
            std::string::npos)
      << server.Log();
  // A client certificate naming a user (CN=alice) stands in for the password over HTTPS.
  auto by_certificate =
      Https(server.https_port(), Cert("ca.pem"), Cert("client.pem"), Cert("client.key"));
  EXPECT_EQ(StatusOf(*by_certificate, "/metrics"), 200);
}

TEST_F(Tls, BadTlsSettingsStopTheStartWithTheFileNamed) {
  struct Case {
    std::string cert;
    std::string extra;
    std::string says;
  };
  for (const Case& c : {
           Case{"server", "min_version = \"1.1\"", "min_version must be \"1.2\" or \"1.3\""},
           Case{"server", "verify = \"sometimes\"", "verify must be"},
           Case{"server", "verify = \"required\"", "needs [tls] ca"},
           Case{"server", "ciphers = \"NO-SUCH-CIPHER\"", "knows none of these ciphers"},
           Case{"missing", "", "missing.pem': no such file"},
           Case{"server", "ca = \"" + Cert("server.key") + "\"\nverify = \"optional\"",
                "holds no PEM certificate"},
           Case{"server", "cert_login = \"common_name\"", "cert_login needs verify"},
       }) {
    std::string config = WriteConfig(c.cert, c.extra);
    int code = 0;
    // A start that wrongly succeeds is ended by timeout (exit 124), which fails below.
    std::string out = testing::RunCommand(
        "timeout 20 " + std::string(WHARFD_PATH_FOR_TESTS) + " --config " + config +
            " --listen 127.0.0.1:0 --amqp-listen off --data-dir " + dir_ + "/data 2>&1",
        &code);
    EXPECT_NE(code, 0) << c.extra;
    EXPECT_NE(code, 124) << c.extra << ": " << out;
    EXPECT_NE(out.find(c.says), std::string::npos) << c.extra << ": " << out;
  }
}

}  // namespace
}  // namespace wharf
