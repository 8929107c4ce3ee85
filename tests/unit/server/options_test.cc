// Unit tests for server/options.h: listen addresses, the TOML config file and validation.
#include "server/options.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "common/password.h"

namespace wharf::server {
namespace {

namespace fs = std::filesystem;

// --- ParseListenAddress -------------------------------------------------------------------------

TEST(ParseListenAddress, ReadsHostAndPort) {
  ServerOptions options;
  Status s = ParseListenAddress("0.0.0.0:6000", &options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(options.listen_host, "0.0.0.0");
  EXPECT_EQ(options.listen_port, 6000);
}

TEST(ParseListenAddress, ReadsHostNameAndPortZero) {
  ServerOptions options;
  ASSERT_TRUE(ParseListenAddress("localhost:0", &options).ok());
  EXPECT_EQ(options.listen_host, "localhost");
  EXPECT_EQ(options.listen_port, 0);
}

TEST(ParseListenAddress, ReadsHighestPort) {
  ServerOptions options;
  ASSERT_TRUE(ParseListenAddress("h:65535", &options).ok());
  EXPECT_EQ(options.listen_port, 65535);
}

TEST(ParseListenAddress, ReadsBracketedIpv6) {
  ServerOptions options;
  Status s = ParseListenAddress("[::1]:5680", &options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(options.listen_host, "::1");
  EXPECT_EQ(options.listen_port, 5680);
  ASSERT_TRUE(ParseListenAddress("[fe80::1:2]:7", &options).ok());
  EXPECT_EQ(options.listen_host, "fe80::1:2");
  EXPECT_EQ(options.listen_port, 7);
}

TEST(ParseListenAddress, RejectsBadFormsAndLeavesOptionsAlone) {
  for (const std::string& bad : {
           std::string(""),
           std::string("5680"),             // no host
           std::string("localhost"),        // no port
           std::string("localhost:"),       // empty port
           std::string(":5680"),            // empty host
           std::string("localhost:65536"),  // port out of range
           std::string("localhost:99999999999"),
           std::string("localhost:-1"),
           std::string("localhost:+80"),
           std::string("localhost:80x"),
           std::string("localhost: 80"),
           std::string("localhost:http"),
           std::string("[::1]5680"),  // no "]:"
           std::string("[::1]"),
           std::string("[::1]:"),
           std::string("[]:5680"),
       }) {
    ServerOptions options;
    Status s = ParseListenAddress(bad, &options);
    EXPECT_EQ(s.code(), StatusCode::kInvalidConfig) << "'" << bad << "'";
    EXPECT_EQ(options.listen_host, ServerOptions{}.listen_host) << "'" << bad << "'";
    EXPECT_EQ(options.listen_port, kDefaultPort) << "'" << bad << "'";
  }
}

// --- LoadConfigFile -----------------------------------------------------------------------------

// A temporary directory for config files, removed at the end of each test.
class LoadConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "wharf-options-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  std::string Write(const std::string& contents, const std::string& name = "wharfd.toml") {
    std::string path = (fs::path(dir_) / name).string();
    std::ofstream out(path, std::ios::binary);
    out << contents;
    EXPECT_TRUE(out.good()) << path;
    return path;
  }

  // Loads `contents` into `options`; returns the status.
  Status Load(const std::string& contents, ServerOptions* options) {
    return LoadConfigFile(Write(contents), options);
  }

  // Expects `contents` to be refused with a message containing `needle`.
  void ExpectRejected(const std::string& contents, const std::string& needle) {
    ServerOptions options;
    std::string path = Write(contents);
    Status s = LoadConfigFile(path, &options);
    EXPECT_EQ(s.code(), StatusCode::kInvalidConfig) << contents;
    EXPECT_NE(s.message().find(needle), std::string_view::npos)
        << "message '" << s.message() << "' should mention '" << needle << "'";
    EXPECT_NE(s.message().find(path), std::string_view::npos)
        << "message '" << s.message() << "' should name the file";
  }

  std::string dir_;
};

TEST_F(LoadConfigFileTest, ReadsEveryKey) {
  std::string alice = HashPassword("alice-pw", 1000);
  std::string bob = HashPassword("bob-pw", 1000);
  ServerOptions options;
  Status s = Load(R"(
[server]
listen = "0.0.0.0:6001"
data_dir = "/var/lib/wharf"
log_level = "debug"
io_threads = 4

[limits]
max_message_bytes = 1048576
max_headers = 250
max_connections = 500
handshake_timeout_ms = 2500
partial_frame_bytes = 67108864
frame_timeout_ms = 15000

[auth]
loopback_guest = false

[[auth.users]]
name = "alice"
password_hash = ")" + alice +
                      R"("

[[auth.users]]
name = "bob"
password_hash = ")" + bob +
                      R"("
tags = ["monitoring"]
permissions = [{vhost = "/", configure = "^bob\\.", write = "", read = ".*"}]
)",
                  &options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(options.listen_host, "0.0.0.0");
  EXPECT_EQ(options.listen_port, 6001);
  EXPECT_EQ(options.data_dir, "/var/lib/wharf");
  EXPECT_EQ(options.log_level, "debug");
  EXPECT_EQ(options.io_threads, 4u);
  EXPECT_EQ(options.max_message_bytes, 1048576u);
  EXPECT_EQ(options.max_frame_bytes(), 1048576u + (1u << 20));
  EXPECT_EQ(options.max_headers, 250u);
  EXPECT_EQ(options.max_connections, 500u);
  EXPECT_EQ(options.handshake_timeout_ms, 2500u);
  EXPECT_EQ(options.partial_frame_bytes, 64u << 20);
  EXPECT_EQ(options.frame_timeout_ms, 15'000u);
  EXPECT_FALSE(options.loopback_guest);
  ASSERT_EQ(options.users.size(), 2u);
  EXPECT_EQ(options.users.at("alice"), alice);
  EXPECT_EQ(options.users.at("bob"), bob);
  // Without tags and permissions, a config user is an administrator with every permission.
  EXPECT_EQ(options.user_tags.at("alice"), std::vector<std::string>{"administrator"});
  EXPECT_EQ(options.user_permissions.at("alice"),
            (std::vector<UserPermission>{{"/", ".*", ".*", ".*"}}));
  EXPECT_EQ(options.user_tags.at("bob"), std::vector<std::string>{"monitoring"});
  EXPECT_EQ(options.user_permissions.at("bob"),
            (std::vector<UserPermission>{{"/", "^bob\\.", "", ".*"}}));
  EXPECT_TRUE(ValidateOptions(options).ok());
}

TEST_F(LoadConfigFileTest, ReadsTheStoreSection) {
  ServerOptions options;
  Status s = Load(R"(
[store]
memtable_bytes = 16777216
block_cache_bytes = 8388608
min_blob_bytes = 0
page_max_messages = 100
page_max_bytes = 65536
)",
                  &options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(options.store_memtable_bytes, 16u << 20);
  EXPECT_EQ(options.store_block_cache_bytes, 8u << 20);
  EXPECT_EQ(options.store_min_blob_bytes, 0u);
  EXPECT_EQ(options.page_max_messages, 100u);
  EXPECT_EQ(options.page_max_bytes, 65536u);
  ServerOptions small;
  Status refused = Load("[store]\nmemtable_bytes = 1024\n", &small);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(refused.message().find("memtable_bytes"), std::string_view::npos) << refused.ToString();
}

TEST_F(LoadConfigFileTest, ReadsTheSchedulerSection) {
  ServerOptions options;
  Status s = Load(R"(
[scheduler]
release_per_second = 5000
ram_messages = 1000
ram_bytes = 1048576
max_delay_ms = 86400000
)",
                  &options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(options.release_per_second, 5000u);
  EXPECT_EQ(options.delay_ram_messages, 1000u);
  EXPECT_EQ(options.delay_ram_bytes, 1u << 20);
  EXPECT_EQ(options.max_delay_ms, 86'400'000u);
  ServerOptions zero;
  Status refused = Load("[scheduler]\nrelease_per_second = 0\n", &zero);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(refused.message().find("release_per_second"), std::string_view::npos);
}

TEST_F(LoadConfigFileTest, ReadsLogMetricsAndRedriveKeys) {
  ServerOptions options;
  Status s = Load(R"([server]
metrics_listen = "127.0.0.1:9568"
metrics_auth = true
[log]
file = "/var/log/wharf/wharfd.log"
max_bytes = 1048576
max_files = 3
[scheduler]
redrive_rate = 250
[flow]
memory_high_bytes = 1073741824
disk_free_low_bytes = 0
)",
                  &options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(options.metrics_enabled);
  EXPECT_EQ(options.metrics_host, "127.0.0.1");
  EXPECT_EQ(options.metrics_port, 9568);
  EXPECT_TRUE(options.metrics_auth);
  EXPECT_EQ(options.log_file, "/var/log/wharf/wharfd.log");
  EXPECT_EQ(options.log_max_bytes, 1u << 20);
  EXPECT_EQ(options.log_max_files, 3u);
  EXPECT_EQ(options.redrive_rate, 250u);
  EXPECT_EQ(options.memory_high_bytes, 1u << 30);
  EXPECT_EQ(options.disk_free_low_bytes, 0u);
  ServerOptions defaults;
  EXPECT_FALSE(defaults.metrics_enabled) << "off unless asked for";
  EXPECT_FALSE(defaults.metrics_auth) << "as RabbitMQ's Prometheus endpoint";
  EXPECT_EQ(defaults.memory_high_bytes, ServerOptions::kMemoryHighDefault) << "40% of RAM";
  EXPECT_EQ(defaults.disk_free_low_bytes, 512u << 20);
  ServerOptions bad;
  Status refused = Load("[server]\nmetrics_listen = \"9568\"\n", &bad);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(refused.message().find("HOST:PORT"), std::string_view::npos);
}

TEST_F(LoadConfigFileTest, ReadsTheTlsSection) {
  ServerOptions options;
  EXPECT_FALSE(options.tls.any());
  Status s = Load(R"(
[server]
listen = "off"
[tls]
listen = "0.0.0.0:6681"
amqp_listen = "127.0.0.1:6671"
metrics_listen = "0.0.0.0:9569"
cert = "/etc/wharf/server.pem"
key = "/etc/wharf/server.key"
ca = "/etc/wharf/ca.pem"
verify = "required"
min_version = "1.3"
ciphers = "ECDHE+AESGCM"
ciphersuites = "TLS_AES_256_GCM_SHA384"
cert_login = "distinguished_name"
)",
                  &options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(options.listen_enabled);
  const TlsOptions& t = options.tls;
  EXPECT_TRUE(t.native_enabled);
  EXPECT_EQ(t.native_host, "0.0.0.0");
  EXPECT_EQ(t.native_port, 6681);
  EXPECT_TRUE(t.amqp_enabled);
  EXPECT_EQ(t.amqp_port, 6671);
  EXPECT_TRUE(t.metrics_enabled);
  EXPECT_EQ(t.metrics_host, "0.0.0.0");
  EXPECT_EQ(t.metrics_port, 9569);
  EXPECT_EQ(t.settings.cert_file, "/etc/wharf/server.pem");
  EXPECT_EQ(t.settings.key_file, "/etc/wharf/server.key");
  EXPECT_EQ(t.settings.ca_file, "/etc/wharf/ca.pem");
  EXPECT_EQ(t.settings.verify, net::PeerVerify::kRequired);
  EXPECT_EQ(t.settings.min_version, "1.3");
  EXPECT_EQ(t.settings.ciphers, "ECDHE+AESGCM");
  EXPECT_EQ(t.settings.ciphersuites, "TLS_AES_256_GCM_SHA384");
  EXPECT_EQ(t.cert_login, TlsOptions::CertLogin::kDistinguishedName);
  EXPECT_TRUE(ValidateOptions(options).ok());
  // "off" turns a TLS listener off again.
  ASSERT_TRUE(Load("[tls]\nlisten = \"off\"\nmetrics_listen = \"off\"\n", &options).ok());
  EXPECT_FALSE(options.tls.native_enabled);
  EXPECT_FALSE(options.tls.metrics_enabled);
}

TEST_F(LoadConfigFileTest, RejectsBadTlsKeys) {
  ExpectRejected("[tls]\ncertificate = \"x\"\n", "unknown key 'certificate' in [tls]");
  ExpectRejected("[tls]\nverify = \"maybe\"\n", "verify must be");
  ExpectRejected("[tls]\nlisten = \"nowhere\"\n", "[tls] listen");
  ExpectRejected("[tls]\namqp_listen = 5671\n", "amqp_listen must be a string");
  ExpectRejected("[tls]\ncert_login = \"email\"\n", "cert_login must be");
}

TEST(ValidateOptions, NoNativeListenerAtAllIsInvalidConfig) {
  ServerOptions options;
  options.listen_enabled = false;
  Status s = ValidateOptions(options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(s.message().find("needs [tls] listen"), std::string_view::npos) << s.ToString();
  options.tls.native_enabled = true;
  EXPECT_TRUE(ValidateOptions(options).ok());
}

TEST(ValidateOptions, CertLoginNeedsClientCertificatesAskedFor) {
  ServerOptions options;
  options.tls.cert_login = TlsOptions::CertLogin::kCommonName;
  Status s = ValidateOptions(options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(s.message().find("cert_login needs verify"), std::string_view::npos) << s.ToString();
  options.tls.settings.verify = net::PeerVerify::kOptional;
  EXPECT_TRUE(ValidateOptions(options).ok());
}

TEST_F(LoadConfigFileTest, EmptyFileKeepsDefaults) {
  ServerOptions options;
  ASSERT_TRUE(Load("# nothing here\n", &options).ok());
  ServerOptions defaults;
  EXPECT_EQ(options.listen_host, defaults.listen_host);
  EXPECT_EQ(options.listen_port, defaults.listen_port);
  EXPECT_EQ(options.data_dir, defaults.data_dir);
  EXPECT_EQ(options.log_level, defaults.log_level);
  EXPECT_EQ(options.io_threads, defaults.io_threads);
  EXPECT_EQ(options.max_message_bytes, defaults.max_message_bytes);
  EXPECT_EQ(options.max_headers, 10'000u);
  EXPECT_EQ(options.max_connections, defaults.max_connections);
  EXPECT_EQ(options.loopback_guest, defaults.loopback_guest);
  EXPECT_TRUE(options.users.empty());
}

TEST_F(LoadConfigFileTest, FileOverridesOnlyTheKeysItSets) {
  ServerOptions options;
  options.data_dir = "/from/flags";
  options.listen_port = 1234;
  ASSERT_TRUE(Load("[server]\nlog_level = \"warn\"\n", &options).ok());
  EXPECT_EQ(options.log_level, "warn");
  EXPECT_EQ(options.data_dir, "/from/flags");
  EXPECT_EQ(options.listen_port, 1234);
}

TEST_F(LoadConfigFileTest, ReadsIpv6Listen) {
  ServerOptions options;
  ASSERT_TRUE(Load("[server]\nlisten = \"[::1]:5999\"\n", &options).ok());
  EXPECT_EQ(options.listen_host, "::1");
  EXPECT_EQ(options.listen_port, 5999);
}

TEST_F(LoadConfigFileTest, ReadsTheLoginKeys) {
  ServerOptions options;
  ASSERT_TRUE(Load(R"([auth]
hash_threads = 2
hash_queue = 16
max_hash_iterations = 50000
failure_delay_ms = 20
failure_delay_max_ms = 800
throttle_addresses = 100
)",
                   &options)
                  .ok());
  EXPECT_EQ(options.login_threads, 2u);
  EXPECT_EQ(options.login_queue, 16u);
  EXPECT_EQ(options.max_hash_iterations, 50'000u);
  EXPECT_EQ(options.login_failure_delay_ms, 20u);
  EXPECT_EQ(options.login_failure_delay_max_ms, 800u);
  EXPECT_EQ(options.login_throttle_addresses, 100u);
  EXPECT_TRUE(ValidateOptions(options).ok());
  ExpectRejected("[auth]\nhash_threads = 0\n", "hash_threads");
  options.login_failure_delay_max_ms = 10;
  EXPECT_EQ(ValidateOptions(options).code(), StatusCode::kInvalidConfig);
}

TEST_F(LoadConfigFileTest, AUserHashAboveMaxHashIterationsIsRefused) {
  const std::string user = "[[auth.users]]\nname = \"slow\"\npassword_hash = \"pbkdf2-sha256$" +
                           std::string("10000000$00$") + std::string(64, '0') + "\"\n";
  ExpectRejected("[auth]\n" + user, "max_hash_iterations");
  ServerOptions options;
  EXPECT_TRUE(Load("[auth]\nmax_hash_iterations = 10000000\n" + user, &options).ok());
}

TEST_F(LoadConfigFileTest, UnknownKeyIsRejectedWithTheKeyNamed) {
  ExpectRejected("bogus = 1\n", "bogus");
  ExpectRejected("[server]\nlisten_address = \"h:1\"\n", "listen_address");
  ExpectRejected("[limits]\nmax_queues = 5\n", "max_queues");
  ExpectRejected("[auth]\nguest = true\n", "guest");
  ExpectRejected("[logging]\nlevel = \"info\"\n", "logging");
  ExpectRejected("[[auth.users]]\nname = \"a\"\npassword = \"plaintext\"\npassword_hash = \"" +
                     HashPassword("x", 1000) + "\"\n",
                 "password");
}

TEST_F(LoadConfigFileTest, WrongTypeIsRejected) {
  ExpectRejected("[server]\nio_threads = \"4\"\n", "io_threads");
  ExpectRejected("[server]\nlog_level = 3\n", "log_level");
  ExpectRejected("[server]\nlisten = 5680\n", "listen");
  ExpectRejected("[server]\ndata_dir = [\"a\"]\n", "data_dir");
  ExpectRejected("[limits]\nmax_message_bytes = 1.5\n", "max_message_bytes");
  ExpectRejected("[limits]\nmax_connections = true\n", "max_connections");
  ExpectRejected("[auth]\nloopback_guest = \"yes\"\n", "loopback_guest");
  ExpectRejected("server = 5\n", "server");
  ExpectRejected("[auth]\nusers = \"alice\"\n", "auth.users");
  ExpectRejected("[auth]\nusers = [1, 2]\n", "auth.users");
  ExpectRejected("[[auth.users]]\nname = 7\n", "name");
}

TEST_F(LoadConfigFileTest, OutOfRangeIntegerIsRejected) {
  ExpectRejected("[server]\nio_threads = 65\n", "io_threads");
  ExpectRejected("[server]\nio_threads = -1\n", "io_threads");
  ExpectRejected("[limits]\nmax_message_bytes = 0\n", "max_message_bytes");
  ExpectRejected("[limits]\nmax_message_bytes = 536870913\n", "max_message_bytes");
  ExpectRejected("[limits]\nmax_connections = 0\n", "max_connections");
  ExpectRejected("[limits]\nhandshake_timeout_ms = 0\n", "handshake_timeout_ms");
  ExpectRejected("[limits]\npartial_frame_bytes = 1048575\n", "partial_frame_bytes");
  ExpectRejected("[limits]\nframe_timeout_ms = 0\n", "frame_timeout_ms");
  ExpectRejected("[limits]\nmax_connections = 1000001\n", "max_connections");
  ExpectRejected("[limits]\nmax_headers = 1000001\n", "max_headers");
  ExpectRejected("[limits]\nmax_headers = -1\n", "max_headers");
}

TEST_F(LoadConfigFileTest, IntegerLimitsAreInclusive) {
  ServerOptions options;
  ASSERT_TRUE(Load("[server]\nio_threads = 64\n[limits]\nmax_message_bytes = 536870912\n"
                   "max_connections = 1000000\n",
                   &options)
                  .ok());
  EXPECT_EQ(options.io_threads, 64u);
  EXPECT_EQ(options.max_message_bytes, 536870912u);
  EXPECT_EQ(options.max_connections, 1'000'000u);
}

TEST_F(LoadConfigFileTest, BadListenIsRejected) {
  ExpectRejected("[server]\nlisten = \"no-port\"\n", "no-port");
}

TEST_F(LoadConfigFileTest, BadPasswordHashIsRejectedWithTheUserNamed) {
  ExpectRejected("[[auth.users]]\nname = \"mallory\"\npassword_hash = \"plaintext\"\n", "mallory");
  ExpectRejected("[[auth.users]]\nname = \"nohash\"\n", "nohash");
  std::string truncated = HashPassword("x", 1000);
  truncated.pop_back();
  ExpectRejected("[[auth.users]]\nname = \"trunc\"\npassword_hash = \"" + truncated + "\"\n",
                 "trunc");
}

TEST_F(LoadConfigFileTest, DuplicateUserIsRejected) {
  std::string hash = HashPassword("x", 1000);
  ExpectRejected("[[auth.users]]\nname = \"alice\"\npassword_hash = \"" + hash +
                     "\"\n[[auth.users]]\nname = \"alice\"\npassword_hash = \"" + hash + "\"\n",
                 "alice");
}

TEST_F(LoadConfigFileTest, UserWithoutNameIsRejected) {
  ExpectRejected("[[auth.users]]\npassword_hash = \"" + HashPassword("x", 1000) + "\"\n", "name");
}

TEST_F(LoadConfigFileTest, SyntaxErrorIsInvalidConfig) {
  ServerOptions options;
  std::string path = Write("[server\nlisten = \n");
  Status s = LoadConfigFile(path, &options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(s.message().find(path), std::string_view::npos) << s.ToString();
}

// Regression: toml11 3.7 read past its buffer reporting a quoted key that is not UTF-8
// (fuzz/config_fuzzer; the input is in fuzz/regressions/config). The text is checked first.
TEST_F(LoadConfigFileTest, TextThatIsNotUtf8IsRefusedNamingTheLine) {
  ExpectRejected("[server]\n'\xd3\xd3.'\xd3 = 1\n", "line 2 is not valid UTF-8");
  ExpectRejected("# \xff\n", "line 1 is not valid UTF-8");
}

TEST_F(LoadConfigFileTest, ADirectoryIsInvalidConfig) {
  ServerOptions options;
  Status s = LoadConfigFile(dir_, &options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(s.message().find("is a directory"), std::string_view::npos) << s.ToString();
}

TEST_F(LoadConfigFileTest, MissingFileIsInvalidConfig) {
  ServerOptions options;
  std::string path = (fs::path(dir_) / "absent.toml").string();
  Status s = LoadConfigFile(path, &options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(s.message().find(path), std::string_view::npos) << s.ToString();
}

// --- ValidateOptions ----------------------------------------------------------------------------

TEST(ValidateOptions, DefaultsAreValid) {
  Status s = ValidateOptions(ServerOptions{});
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(ValidateOptions, AcceptsEveryLogLevel) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    ServerOptions options;
    options.log_level = level;
    EXPECT_TRUE(ValidateOptions(options).ok()) << level;
  }
}

TEST(ValidateOptions, BadLogLevelIsInvalidConfig) {
  for (const char* level : {"verbose", "INFO", "", "warning"}) {
    ServerOptions options;
    options.log_level = level;
    Status s = ValidateOptions(options);
    EXPECT_EQ(s.code(), StatusCode::kInvalidConfig) << level;
    EXPECT_NE(s.message().find("log_level"), std::string_view::npos) << s.ToString();
  }
}

TEST(ValidateOptions, EmptyDataDirIsInvalidConfig) {
  ServerOptions options;
  options.data_dir = "";
  EXPECT_EQ(ValidateOptions(options).code(), StatusCode::kInvalidConfig);
}

TEST(ValidateOptions, ZeroMaxMessageBytesIsInvalidConfig) {
  ServerOptions options;
  options.max_message_bytes = 0;
  EXPECT_EQ(ValidateOptions(options).code(), StatusCode::kInvalidConfig);
}

// --- The shipped config files -------------------------------------------------------------------

TEST(ConfigDir, EveryTomlFileLoadsAndValidates) {
  // Finding no file is fine (the directory may not have any yet); every file found must load.
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(WHARF_CONFIG_DIR, ec)) {
    for (const auto& entry : fs::directory_iterator(WHARF_CONFIG_DIR, ec)) {
      if (entry.is_regular_file() && entry.path().extension() == ".toml") {
        files.push_back(entry.path());
      }
    }
  }
  for (const fs::path& file : files) {
    ServerOptions options;
    Status loaded = LoadConfigFile(file.string(), &options);
    EXPECT_TRUE(loaded.ok()) << loaded.ToString();
    if (!loaded.ok()) continue;
    Status valid = ValidateOptions(options);
    EXPECT_TRUE(valid.ok()) << file << ": " << valid.ToString();
  }
  RecordProperty("config_files", static_cast<int>(files.size()));
}

TEST(ParseConfigText, AConfigUsersBadPermissionsAreRefusedAtStart) {
  const std::string hash = HashPassword("x", 1000);
  auto load = [&](const std::string& extra) {
    ServerOptions options;
    return ParseConfigText(
        "[[auth.users]]\nname = \"u\"\npassword_hash = \"" + hash + "\"\n" + extra, "test.toml",
        &options);
  };
  Status bad = load("permissions = [{vhost = \"/\", configure = \"(\"}]\n");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(bad.message().find("invalid regular expression '('"), std::string_view::npos)
      << bad.message();
  // A vhost need not exist yet (its permissions apply once it is made); its name must be one.
  EXPECT_TRUE(load("permissions = [{vhost = \"other\"}]\n").ok());
  EXPECT_NE(load("permissions = [{vhost = \"bad\\nname\"}]\n").message().find("control character"),
            std::string_view::npos);
  EXPECT_NE(load("permissions = [{vhost = \"/\", reed = \".*\"}]\n").message().find("reed"),
            std::string_view::npos);
  EXPECT_NE(load("tags = \"administrator\"\n").message().find("tags must be an array"),
            std::string_view::npos);
  EXPECT_TRUE(load("tags = []\npermissions = []\n").ok());
}

}  // namespace
}  // namespace wharf::server
