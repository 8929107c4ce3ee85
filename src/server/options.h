// server/options.h
//
// ServerOptions is everything wharfd can be told: built-in defaults, overridden by the TOML
// config file, overridden by command-line flags. config/wharfd.toml documents every key.
//
// Thread safety: a plain value; built once at start-up, then read-only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "net/tls.h"
#include "wharf/result.h"
#include "wharf/types.h"

namespace wharf::server {

inline constexpr uint16_t kDefaultPort = 5680;
inline constexpr uint16_t kDefaultAmqpPort = 5672;

// [amqp]: the AMQP 0-9-1 listener (docs/amqp.md). Defaults are RabbitMQ's.
struct AmqpOptions {
  bool enabled = true;  // listen = "off" (or --amqp-listen off) turns it off
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = kDefaultAmqpPort;  // 0 = any free port (tests)
  uint32_t frame_max = 131'072;             // proposed in connection.tune; 4096 .. 1 MiB
  uint16_t channel_max = 2'047;
  uint16_t heartbeat_s = 60;  // proposed; 0 = none. A peer silent for 2 intervals is closed
  // RabbitMQ's consumer_timeout: a channel whose oldest unacknowledged delivery is older is
  // closed with 406 (its deliveries requeued). 0 = never.
  uint32_t consumer_timeout_ms = 1'800'000;
  // What connection.start says the server is: clients (kombu, amqp091-go, amqplib) change
  // behaviour on product; Wharf's own name goes in "information" and "platform".
  std::string server_product = "RabbitMQ";
  std::string server_version = "3.13.7";
};

inline constexpr uint16_t kDefaultTlsPort = 5681;
inline constexpr uint16_t kDefaultAmqpsPort = 5671;

// [tls]: the TLS listeners (docs/security.md, "TLS"), both off by default, and the certificate,
// key, CA and settings they share. SIGHUP reads the files again for new connections.
struct TlsOptions {
  net::TlsServerSettings settings;
  bool native_enabled = false;  // listen: the native protocol over TLS
  std::string native_host = "127.0.0.1";
  uint16_t native_port = kDefaultTlsPort;
  bool amqp_enabled = false;  // amqp_listen: AMQP 0-9-1 over TLS (AMQPS)
  std::string amqp_host = "127.0.0.1";
  uint16_t amqp_port = kDefaultAmqpsPort;
  bool metrics_enabled = false;  // metrics_listen: /metrics and /healthz over HTTPS
  std::string metrics_host = "127.0.0.1";
  uint16_t metrics_port = 0;
  // Logins with the client certificate (SASL EXTERNAL, RabbitMQ's rabbitmq_auth_mechanism_ssl):
  // the user is the certificate's subject, whole (RFC 2253) or its common name. Off: EXTERNAL
  // is not offered and a client certificate is only a gate before the password login.
  enum class CertLogin { kOff, kCommonName, kDistinguishedName };
  CertLogin cert_login = CertLogin::kOff;
  bool any() const { return native_enabled || amqp_enabled || metrics_enabled; }
};

struct ServerOptions {
  bool listen_enabled = true;  // [server] listen = "off" turns the plain native listener off
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = kDefaultPort;  // 0 = any free port (tests)
  // The HTTP listener for /metrics and /healthz (server/metrics_server.h); off by default.
  bool metrics_enabled = false;
  std::string metrics_host = "127.0.0.1";
  uint16_t metrics_port = 0;     // 0 = any free port
  uint32_t metrics_threads = 4;  // [server] metrics_threads: HTTP workers (per listener)
  // [server] metrics_auth: /metrics and /healthz (on both HTTP listeners) answer only requests
  // with a broker user's credentials (HTTP Basic, or a client certificate with [tls]
  // cert_login); server/http_auth.h.
  bool metrics_auth = false;
  std::string data_dir = "./data";
  std::string log_level = "info";
  // [log]: where the log goes (stderr when empty), rotated at max_bytes (0 = never) keeping
  // max_files old files; SIGHUP reopens it (docs/operations.md).
  std::string log_file;
  uint64_t log_max_bytes = 100u << 20;
  uint32_t log_max_files = 5;
  // [log] format: "text" or "json" (server/log_format.h).
  std::string log_format = "text";
  uint32_t io_threads = 0;  // 0 = one per core beyond the broker thread, at least 2
  // [limits] max_message_bytes: a message's body plus its header names and values;
  // max_headers: headers per message (0: none allowed). Beyond either: MESSAGE_TOO_LARGE.
  // Too many headers are refused before the frame is parsed: parsed, a header takes ~150
  // bytes of RAM whatever its size on the wire.
  uint64_t max_message_bytes = 16u << 20;
  uint32_t max_headers = 10'000;
  uint32_t max_connections = 10'000;
  // [limits] max_consumers_per_channel: consumers on one AMQP channel, or one native connection
  // (RabbitMQ's consumer_max_per_channel); 0 = no limit. Each costs broker memory.
  uint32_t max_consumers_per_channel = 65'535;
  // [limits] reserved_fds: file descriptors kept for the store, logs and metrics. A connection
  // accepted while the process has RLIMIT_NOFILE - reserved_fds descriptors open is refused
  // (RESOURCE_EXHAUSTED), so idle sockets can never take the files RocksDB needs.
  uint32_t reserved_fds = 128;
  // A connection that has not logged in within this time is closed (HANDSHAKE_TIMEOUT), so idle
  // sockets cannot hold file descriptors forever.
  uint32_t handshake_timeout_ms = 10'000;
  // [limits] partial frames (docs/operations.md, "Partial frames"; server/frame_budget.h): the
  // memory all connections together may hold for frames larger than one read (64 KiB) while
  // they arrive. A frame that does not fit waits, unread, for its turn. kPartialFrameAuto:
  // 256 MiB, or a quarter of the memory watermark when that is lower, worked out at start.
  static constexpr uint64_t kPartialFrameAuto = UINT64_MAX;
  uint64_t partial_frame_bytes = kPartialFrameAuto;
  // A frame must be complete within this time of reading it (time the broker itself does not
  // read, e.g. while the frame waits for the budget or flow control holds the connection, does
  // not count); else the connection is closed (FRAME_TIMEOUT).
  uint32_t frame_timeout_ms = 60'000;
  // [store]: the message store (docs/storage.md).
  uint64_t store_memtable_bytes = 64u << 20;     // RocksDB memtables, all column families
  uint64_t store_block_cache_bytes = 32u << 20;  // RocksDB blocks (index, filters too)
  uint64_t store_min_blob_bytes = 0;             // bodies this large go to blob files; 0 = off
  uint64_t page_max_messages = 50'000;           // per durable queue in RAM, then it pages
  uint64_t page_max_bytes = 32u << 20;  // per durable queue in RAM: whole messages, headers too
  // A full disk (docs/storage.md): no new message is stored while the data directory's disk
  // has less than disk_reserve_bytes free (always on, unlike the [flow] watermark); a ballast
  // file <data_dir>/ballast of ballast_bytes (0 = none) is deleted when the disk fills anyway.
  uint64_t store_disk_reserve_bytes = 64u << 20;
  uint64_t store_ballast_bytes = 64u << 20;
  // Verify every table's block checksums at start (docs/storage.md, "Corruption"): a damaged
  // table refuses the start; costs a read of the whole store.
  bool store_verify_checksums = false;
  // [scheduler]: delayed messages (docs/scheduler.md).
  uint32_t release_per_second = 100'000;  // most delayed messages that fall due per second
  uint32_t redrive_rate = 1'000;          // messages per second of a redrive that names no rate
  uint64_t delay_ram_messages = 10'000;   // per durable queue: the nearest kept in RAM
  uint64_t delay_ram_bytes = 8u << 20;
  uint64_t max_delay_ms = 0;  // longer delays are refused; 0 = no limit
  // [flow]: publishing is blocked while wharfd's resident memory is above memory_high_bytes,
  // or the data directory's free disk below disk_free_low_bytes (0 = that check is off).
  // kMemoryHighDefault: 40% of the machine's RAM, worked out at start.
  static constexpr uint64_t kMemoryHighDefault = UINT64_MAX;
  uint64_t memory_high_bytes = kMemoryHighDefault;
  uint64_t disk_free_low_bytes = 512u << 20;
  // Users allowed to log in: name -> PBKDF2 hash (common/password.h). Never plaintext.
  std::map<std::string, std::string> users;
  // Their limits ([[auth.users]] max_connections, max_channels), for those that have any.
  std::map<std::string, UserLimits> user_limits;
  // Their tags and permissions ([[auth.users]] tags, permissions); a user that names neither
  // is an administrator with every permission on "/", as config users were before tags.
  std::map<std::string, std::vector<std::string>> user_tags;
  std::map<std::string, std::vector<UserPermission>> user_permissions;
  // The built-in user guest/guest, accepted from loopback addresses only (like RabbitMQ's).
  bool loopback_guest = true;
  // [auth] logins (docs/operations.md, "Logins"). Passwords are hashed on login_threads
  // threads, never on an I/O thread; at most login_queue logins wait for them, later ones are
  // refused (RESOURCE_EXHAUSTED). A hash asking for more than max_hash_iterations is refused
  // in the config file and at PutUser (wharfctl hash-password uses 20,000).
  uint32_t login_threads = 1;
  uint32_t login_queue = 64;
  uint32_t max_hash_iterations = 1'000'000;
  // After a failed login from an address, its next login waits failure_delay_ms, doubled per
  // further failure up to failure_delay_max_ms; a success forgets the failures. At most
  // throttle_addresses addresses are remembered (the least recently failed is forgotten).
  uint32_t login_failure_delay_ms = 100;
  uint32_t login_failure_delay_max_ms = 5'000;
  uint32_t login_throttle_addresses = 10'000;
  // When set, wharfd writes "host:port" here once it is listening (for tests and scripts).
  std::string ready_file;
  // When set (--definitions), wharfd imports this definitions file (docs/definitions.md) after
  // recovering its store and before it accepts a connection; one it cannot read or apply whole
  // stops the start.
  std::string definitions_file;
  AmqpOptions amqp;
  TlsOptions tls;

  // Frames carry a body plus headers and properties; this is the largest frame payload taken.
  uint64_t max_frame_bytes() const { return max_message_bytes + (1u << 20); }
};

// Reads a TOML config file over `options`. kInvalidConfig names the file, key and problem.
Status LoadConfigFile(const std::string& path, ServerOptions* options);
// The same for a config's text; `name` stands for the file in errors (fuzz/config_fuzzer.cc).
Status ParseConfigText(std::string_view text, const std::string& name, ServerOptions* options);

// Parses "host:port" (IPv6 as "[::1]:5680"). kInvalidConfig on error.
Status ParseHostPort(const std::string& text, std::string* host, uint16_t* port);
// Into the listen fields.
Status ParseListenAddress(const std::string& text, ServerOptions* options);
// Into the metrics fields, and turns the metrics listener on.
Status ParseMetricsAddress(const std::string& text, ServerOptions* options);
// Into the [amqp] listen fields; "off" turns the AMQP listener off.
Status ParseAmqpAddress(const std::string& text, ServerOptions* options);
// "off", or HOST:PORT turning the listener on: [tls] listen and amqp_listen.
Status ParseOptionalAddress(const std::string& text, bool* enabled, std::string* host,
                            uint16_t* port);

// The log levels log_level may name: trace, debug, info, warn, error, critical, off.
const std::vector<std::string>& LogLevelNames();

// Checks values that are bad whatever their source (a zero limit, an unknown log level).
Status ValidateOptions(const ServerOptions& options);

}  // namespace wharf::server
