#include "server/options.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <toml.hpp>
#include <tuple>

#include "common/password.h"
#include "common/regex.h"
#include "common/utf8.h"
#include "common/vhost_name.h"
#include "server/log_format.h"

namespace wharf::server {
namespace {

Status ConfigError(const std::string& path, const std::string& what) {
  return Status(StatusCode::kInvalidConfig, path + ": " + what);
}

// Rejects keys the schema does not know, so a typo is an error rather than a silent default.
Status CheckKeys(const std::string& path, const std::string& table_name, const toml::value& table,
                 const std::set<std::string>& known) {
  for (const auto& [key, value] : table.as_table()) {
    if (!known.contains(key)) {
      return ConfigError(path, "unknown key '" + key + "' in [" + table_name + "]");
    }
  }
  return Status::Ok();
}

template <typename T>
Status ReadInt(const std::string& path, const toml::value& table, const char* key, T min, T max,
               T* out) {
  if (!table.contains(key)) return Status::Ok();
  const toml::value& v = table.at(key);
  if (!v.is_integer()) return ConfigError(path, std::string(key) + " must be an integer");
  auto n = v.as_integer();
  if (n < static_cast<int64_t>(min) || static_cast<uint64_t>(n) > static_cast<uint64_t>(max)) {
    return ConfigError(path, std::string(key) + " = " + std::to_string(n) + " is out of range " +
                                 std::to_string(min) + ".." + std::to_string(max));
  }
  *out = static_cast<T>(n);
  return Status::Ok();
}

Status ReadString(const std::string& path, const toml::value& table, const char* key,
                  std::string* out) {
  if (!table.contains(key)) return Status::Ok();
  const toml::value& v = table.at(key);
  if (!v.is_string()) return ConfigError(path, std::string(key) + " must be a string");
  *out = v.as_string().str;
  return Status::Ok();
}

Status ReadBool(const std::string& path, const toml::value& table, const char* key, bool* out) {
  if (!table.contains(key)) return Status::Ok();
  const toml::value& v = table.at(key);
  if (!v.is_boolean()) return ConfigError(path, std::string(key) + " must be true or false");
  *out = v.as_boolean();
  return Status::Ok();
}

// [[auth.users]] tags (strings; RabbitMQ's user tags) and permissions (tables of vhost,
// configure, write, read: PCRE patterns, checked here so a bad one fails at start). Neither
// given: an administrator with every permission on "/", as config users were before tags.
Status ReadUserAccess(const std::string& path, const std::string& name, const toml::value& user,
                      ServerOptions* options) {
  std::vector<std::string> tags{"administrator"};
  if (user.contains("tags")) {
    const toml::value& list = user.at("tags");
    if (!list.is_array()) return ConfigError(path, "user '" + name + "': tags must be an array");
    tags.clear();
    for (const toml::value& tag : list.as_array()) {
      if (!tag.is_string() || tag.as_string().str.empty()) {
        return ConfigError(path, "user '" + name + "': each tag must be a non-empty string");
      }
      tags.push_back(tag.as_string().str);
    }
  }
  std::vector<UserPermission> permissions{UserPermission{"/", ".*", ".*", ".*"}};
  if (user.contains("permissions")) {
    const toml::value& list = user.at("permissions");
    if (!list.is_array()) {
      return ConfigError(path, "user '" + name + "': permissions must be an array of tables");
    }
    permissions.clear();
    for (const toml::value& entry : list.as_array()) {
      if (!entry.is_table()) {
        return ConfigError(path, "user '" + name + "': permissions must be an array of tables");
      }
      WHARF_RETURN_IF_ERROR(CheckKeys(path, "auth.users.permissions", entry,
                                      {"vhost", "configure", "write", "read"}));
      UserPermission p;
      WHARF_RETURN_IF_ERROR(ReadString(path, entry, "vhost", &p.vhost));
      WHARF_RETURN_IF_ERROR(ReadString(path, entry, "configure", &p.configure));
      WHARF_RETURN_IF_ERROR(ReadString(path, entry, "write", &p.write));
      WHARF_RETURN_IF_ERROR(ReadString(path, entry, "read", &p.read));
      // The vhost need not exist yet: the permissions apply once it is made (wharfctl
      // add-vhost), as a definitions import would give them.
      if (Status valid = ValidateVhostName(p.vhost); !valid.ok()) {
        return ConfigError(path, "user '" + name + "': " + std::string(valid.message()));
      }
      for (const std::string* pattern : {&p.configure, &p.write, &p.read}) {
        auto compiled = Regex::Compile(*pattern);
        if (!compiled.ok()) {
          return ConfigError(path,
                             "user '" + name + "': " + std::string(compiled.status().message()));
        }
      }
      if (std::any_of(permissions.begin(), permissions.end(),
                      [&](const UserPermission& q) { return q.vhost == p.vhost; })) {
        return ConfigError(path, "user '" + name + "': vhost '" + p.vhost + "' is listed twice");
      }
      permissions.push_back(std::move(p));
    }
  }
  options->user_tags[name] = std::move(tags);
  options->user_permissions[name] = std::move(permissions);
  return Status::Ok();
}

Status Apply(const std::string& path, const toml::value& root, ServerOptions* options) {
  WHARF_RETURN_IF_ERROR(
      CheckKeys(path, "top level", root,
                {"server", "log", "limits", "store", "scheduler", "flow", "auth", "amqp", "tls"}));
  for (const char* section :
       {"server", "log", "limits", "store", "scheduler", "flow", "auth", "amqp", "tls"}) {
    if (root.contains(section) && !root.at(section).is_table()) {
      return ConfigError(path, std::string("[") + section + "] must be a table");
    }
  }
  if (root.contains("server")) {
    const toml::value& server = root.at("server");
    WHARF_RETURN_IF_ERROR(CheckKeys(path, "server", server,
                                    {"listen", "data_dir", "log_level", "io_threads",
                                     "metrics_listen", "metrics_threads", "metrics_auth"}));
    std::string listen;
    WHARF_RETURN_IF_ERROR(ReadString(path, server, "listen", &listen));
    if (!listen.empty()) {
      Status s = ParseListenAddress(listen, options);
      if (!s.ok()) return ConfigError(path, std::string(s.message()));
    }
    std::string metrics;
    WHARF_RETURN_IF_ERROR(ReadString(path, server, "metrics_listen", &metrics));
    if (!metrics.empty()) {
      Status s = ParseMetricsAddress(metrics, options);
      if (!s.ok()) return ConfigError(path, std::string(s.message()));
    }
    WHARF_RETURN_IF_ERROR(ReadString(path, server, "data_dir", &options->data_dir));
    WHARF_RETURN_IF_ERROR(ReadString(path, server, "log_level", &options->log_level));
    WHARF_RETURN_IF_ERROR(
        ReadInt<uint32_t>(path, server, "io_threads", 0, 64, &options->io_threads));
    WHARF_RETURN_IF_ERROR(
        ReadInt<uint32_t>(path, server, "metrics_threads", 1, 64, &options->metrics_threads));
    WHARF_RETURN_IF_ERROR(ReadBool(path, server, "metrics_auth", &options->metrics_auth));
  }
  if (root.contains("amqp")) {
    const toml::value& amqp = root.at("amqp");
    WHARF_RETURN_IF_ERROR(CheckKeys(path, "amqp", amqp,
                                    {"listen", "frame_max", "channel_max", "heartbeat_s",
                                     "consumer_timeout_ms", "server_product", "server_version"}));
    std::string listen;
    WHARF_RETURN_IF_ERROR(ReadString(path, amqp, "listen", &listen));
    if (!listen.empty()) {
      Status s = ParseAmqpAddress(listen, options);
      if (!s.ok()) return ConfigError(path, std::string(s.message()));
    }
    AmqpOptions& a = options->amqp;
    WHARF_RETURN_IF_ERROR(
        ReadInt<uint32_t>(path, amqp, "frame_max", 4'096, 1u << 20, &a.frame_max));
    WHARF_RETURN_IF_ERROR(ReadInt<uint16_t>(path, amqp, "channel_max", 1, 65'535, &a.channel_max));
    WHARF_RETURN_IF_ERROR(ReadInt<uint16_t>(path, amqp, "heartbeat_s", 0, 65'535, &a.heartbeat_s));
    WHARF_RETURN_IF_ERROR(ReadInt<uint32_t>(path, amqp, "consumer_timeout_ms", 0, UINT32_MAX,
                                            &a.consumer_timeout_ms));
    WHARF_RETURN_IF_ERROR(ReadString(path, amqp, "server_product", &a.server_product));
    WHARF_RETURN_IF_ERROR(ReadString(path, amqp, "server_version", &a.server_version));
  }
  if (root.contains("tls")) {
    const toml::value& tls = root.at("tls");
    WHARF_RETURN_IF_ERROR(
        CheckKeys(path, "tls", tls,
                  {"listen", "amqp_listen", "metrics_listen", "cert", "key", "ca", "verify",
                   "min_version", "ciphers", "ciphersuites", "cert_login"}));
    TlsOptions& t = options->tls;
    for (auto [key, enabled, host, port] :
         {std::tuple{"listen", &t.native_enabled, &t.native_host, &t.native_port},
          std::tuple{"amqp_listen", &t.amqp_enabled, &t.amqp_host, &t.amqp_port},
          std::tuple{"metrics_listen", &t.metrics_enabled, &t.metrics_host, &t.metrics_port}}) {
      std::string listen;
      WHARF_RETURN_IF_ERROR(ReadString(path, tls, key, &listen));
      if (listen.empty()) continue;
      Status s = ParseOptionalAddress(listen, enabled, host, port);
      if (!s.ok())
        return ConfigError(path, "[tls] " + std::string(key) + ": " + std::string(s.message()));
    }
    net::TlsServerSettings& settings = t.settings;
    WHARF_RETURN_IF_ERROR(ReadString(path, tls, "cert", &settings.cert_file));
    WHARF_RETURN_IF_ERROR(ReadString(path, tls, "key", &settings.key_file));
    WHARF_RETURN_IF_ERROR(ReadString(path, tls, "ca", &settings.ca_file));
    WHARF_RETURN_IF_ERROR(ReadString(path, tls, "min_version", &settings.min_version));
    WHARF_RETURN_IF_ERROR(ReadString(path, tls, "ciphers", &settings.ciphers));
    WHARF_RETURN_IF_ERROR(ReadString(path, tls, "ciphersuites", &settings.ciphersuites));
    std::string cert_login;
    WHARF_RETURN_IF_ERROR(ReadString(path, tls, "cert_login", &cert_login));
    if (cert_login == "off") {
      t.cert_login = TlsOptions::CertLogin::kOff;
    } else if (cert_login == "common_name") {
      t.cert_login = TlsOptions::CertLogin::kCommonName;
    } else if (cert_login == "distinguished_name") {
      t.cert_login = TlsOptions::CertLogin::kDistinguishedName;
    } else if (!cert_login.empty()) {
      return ConfigError(path,
                         "[tls] cert_login must be \"off\", \"common_name\" or "
                         "\"distinguished_name\", not '" +
                             cert_login + "'");
    }
    std::string verify;
    WHARF_RETURN_IF_ERROR(ReadString(path, tls, "verify", &verify));
    if (!verify.empty()) {
      auto parsed = net::ParsePeerVerify(verify);
      if (!parsed.ok()) return ConfigError(path, std::string(parsed.status().message()));
      settings.verify = *parsed;
    }
  }
  if (root.contains("log")) {
    const toml::value& log = root.at("log");
    WHARF_RETURN_IF_ERROR(
        CheckKeys(path, "log", log, {"file", "max_bytes", "max_files", "format"}));
    WHARF_RETURN_IF_ERROR(ReadString(path, log, "file", &options->log_file));
    WHARF_RETURN_IF_ERROR(ReadString(path, log, "format", &options->log_format));
    WHARF_RETURN_IF_ERROR(
        ReadInt<uint64_t>(path, log, "max_bytes", 0, 1ull << 40, &options->log_max_bytes));
    WHARF_RETURN_IF_ERROR(
        ReadInt<uint32_t>(path, log, "max_files", 0, 1'000, &options->log_max_files));
  }
  if (root.contains("limits")) {
    const toml::value& limits = root.at("limits");
    WHARF_RETURN_IF_ERROR(CheckKeys(
        path, "limits", limits,
        {"max_message_bytes", "max_headers", "max_connections", "handshake_timeout_ms",
         "reserved_fds", "partial_frame_bytes", "frame_timeout_ms", "max_consumers_per_channel"}));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, limits, "max_message_bytes", 1, 512u << 20,
                                            &options->max_message_bytes));
    WHARF_RETURN_IF_ERROR(
        ReadInt<uint32_t>(path, limits, "max_headers", 0, 1'000'000, &options->max_headers));
    WHARF_RETURN_IF_ERROR(ReadInt<uint32_t>(path, limits, "max_connections", 1, 1'000'000,
                                            &options->max_connections));
    WHARF_RETURN_IF_ERROR(ReadInt<uint32_t>(path, limits, "max_consumers_per_channel", 0,
                                            UINT32_MAX, &options->max_consumers_per_channel));
    WHARF_RETURN_IF_ERROR(
        ReadInt<uint32_t>(path, limits, "reserved_fds", 16, 1'000'000, &options->reserved_fds));
    WHARF_RETURN_IF_ERROR(ReadInt<uint32_t>(path, limits, "handshake_timeout_ms", 1, 3'600'000,
                                            &options->handshake_timeout_ms));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, limits, "partial_frame_bytes", 1u << 20,
                                            1ull << 50, &options->partial_frame_bytes));
    WHARF_RETURN_IF_ERROR(ReadInt<uint32_t>(path, limits, "frame_timeout_ms", 1, 3'600'000,
                                            &options->frame_timeout_ms));
  }
  if (root.contains("store")) {
    const toml::value& store = root.at("store");
    WHARF_RETURN_IF_ERROR(CheckKeys(
        path, "store", store,
        {"memtable_bytes", "block_cache_bytes", "min_blob_bytes", "page_max_messages",
         "page_max_bytes", "disk_reserve_bytes", "ballast_bytes", "verify_checksums_at_start"}));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, store, "memtable_bytes", 8u << 20, 64ull << 30,
                                            &options->store_memtable_bytes));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, store, "block_cache_bytes", 1u << 20, 64ull << 30,
                                            &options->store_block_cache_bytes));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, store, "min_blob_bytes", 0, 1ull << 30,
                                            &options->store_min_blob_bytes));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, store, "page_max_messages", 1, 100'000'000,
                                            &options->page_max_messages));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, store, "page_max_bytes", 1u << 10, 64ull << 30,
                                            &options->page_max_bytes));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, store, "disk_reserve_bytes", 1u << 20, 1ull << 50,
                                            &options->store_disk_reserve_bytes));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, store, "ballast_bytes", 0, 1ull << 50,
                                            &options->store_ballast_bytes));
    WHARF_RETURN_IF_ERROR(
        ReadBool(path, store, "verify_checksums_at_start", &options->store_verify_checksums));
  }
  if (root.contains("scheduler")) {
    const toml::value& scheduler = root.at("scheduler");
    WHARF_RETURN_IF_ERROR(CheckKeys(
        path, "scheduler", scheduler,
        {"release_per_second", "ram_messages", "ram_bytes", "max_delay_ms", "redrive_rate"}));
    WHARF_RETURN_IF_ERROR(ReadInt<uint32_t>(path, scheduler, "release_per_second", 1, 10'000'000,
                                            &options->release_per_second));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, scheduler, "ram_messages", 16, 100'000'000,
                                            &options->delay_ram_messages));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, scheduler, "ram_bytes", 64u << 10, 64ull << 30,
                                            &options->delay_ram_bytes));
    WHARF_RETURN_IF_ERROR(
        ReadInt<uint64_t>(path, scheduler, "max_delay_ms", 0, INT64_MAX, &options->max_delay_ms));
    WHARF_RETURN_IF_ERROR(
        ReadInt<uint32_t>(path, scheduler, "redrive_rate", 1, 1'000'000, &options->redrive_rate));
  }
  if (root.contains("flow")) {
    const toml::value& flow = root.at("flow");
    WHARF_RETURN_IF_ERROR(
        CheckKeys(path, "flow", flow, {"memory_high_bytes", "disk_free_low_bytes"}));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, flow, "memory_high_bytes", 0, 1ull << 50,
                                            &options->memory_high_bytes));
    WHARF_RETURN_IF_ERROR(ReadInt<uint64_t>(path, flow, "disk_free_low_bytes", 0, 1ull << 50,
                                            &options->disk_free_low_bytes));
  }
  if (root.contains("auth")) {
    const toml::value& auth = root.at("auth");
    WHARF_RETURN_IF_ERROR(
        CheckKeys(path, "auth", auth,
                  {"loopback_guest", "users", "hash_threads", "hash_queue", "max_hash_iterations",
                   "failure_delay_ms", "failure_delay_max_ms", "throttle_addresses"}));
    WHARF_RETURN_IF_ERROR(ReadBool(path, auth, "loopback_guest", &options->loopback_guest));
    WHARF_RETURN_IF_ERROR(
        ReadInt<uint32_t>(path, auth, "hash_threads", 1, 64, &options->login_threads));
    WHARF_RETURN_IF_ERROR(
        ReadInt<uint32_t>(path, auth, "hash_queue", 1, 100'000, &options->login_queue));
    WHARF_RETURN_IF_ERROR(ReadInt<uint32_t>(path, auth, "max_hash_iterations", 1,
                                            kMaxPasswordIterations, &options->max_hash_iterations));
    WHARF_RETURN_IF_ERROR(ReadInt<uint32_t>(path, auth, "failure_delay_ms", 0, 60'000,
                                            &options->login_failure_delay_ms));
    WHARF_RETURN_IF_ERROR(ReadInt<uint32_t>(path, auth, "failure_delay_max_ms", 0, 3'600'000,
                                            &options->login_failure_delay_max_ms));
    WHARF_RETURN_IF_ERROR(ReadInt<uint32_t>(path, auth, "throttle_addresses", 1, 10'000'000,
                                            &options->login_throttle_addresses));
    if (auth.contains("users")) {
      const toml::value& users = auth.at("users");
      if (!users.is_array()) return ConfigError(path, "[[auth.users]] must be an array of tables");
      for (const toml::value& user : users.as_array()) {
        if (!user.is_table()) return ConfigError(path, "each [[auth.users]] must be a table");
        WHARF_RETURN_IF_ERROR(CheckKeys(
            path, "auth.users", user,
            {"name", "password_hash", "max_connections", "max_channels", "tags", "permissions"}));
        std::string name, hash;
        WHARF_RETURN_IF_ERROR(ReadString(path, user, "name", &name));
        WHARF_RETURN_IF_ERROR(ReadString(path, user, "password_hash", &hash));
        if (name.empty()) return ConfigError(path, "a user in [[auth.users]] has no name");
        Status valid = ValidatePasswordHash(hash, options->max_hash_iterations);
        if (!valid.ok()) {
          return ConfigError(path, "user '" + name + "': " + std::string(valid.message()));
        }
        if (!options->users.emplace(name, hash).second) {
          return ConfigError(path, "user '" + name + "' is listed twice");
        }
        UserLimits limits;
        WHARF_RETURN_IF_ERROR(
            ReadInt<int64_t>(path, user, "max_connections", 0, INT64_MAX, &limits.max_connections));
        WHARF_RETURN_IF_ERROR(
            ReadInt<int64_t>(path, user, "max_channels", 0, INT64_MAX, &limits.max_channels));
        if (limits != UserLimits{}) options->user_limits[name] = limits;
        WHARF_RETURN_IF_ERROR(ReadUserAccess(path, name, user, options));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status LoadConfigFile(const std::string& path, ServerOptions* options) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return ConfigError(path, "is a directory, not a config file");
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || in.bad()) {
    return ConfigError(path, std::string("cannot read the file: ") + std::strerror(errno));
  }
  return ParseConfigText(text.str(), path, options);
}

Status ParseConfigText(std::string_view text, const std::string& name, ServerOptions* options) {
  // TOML is UTF-8. Checked here, before toml11 sees the text: toml11 3.7's own check reads
  // past its buffer while reporting a quoted key that is not UTF-8 (a heap overflow
  // fuzz/config_fuzzer found; fuzz/regressions/config keeps the input).
  if (!IsValidUtf8(text)) {
    size_t line = 1;
    size_t start = 0;
    while (true) {
      const size_t end = text.find('\n', start);
      if (end == std::string_view::npos || !IsValidUtf8(text.substr(start, end - start))) {
        break;  // (a byte sequence never spans '\n', so the bad line is found before the end)
      }
      ++line;
      start = end + 1;
    }
    return ConfigError(
        name, "line " + std::to_string(line) + " is not valid UTF-8 (a TOML file is UTF-8 text)");
  }
  toml::value root;
  try {
    std::istringstream in{std::string(text)};
    root = toml::parse(in, name);
  } catch (const std::exception& e) {
    // toml11 throws for syntax errors; the message says where.
    return ConfigError(name, e.what());
  }
  return Apply(name, root, options);
}

Status ParseHostPort(const std::string& text, std::string* host_out, uint16_t* port_out) {
  std::string host;
  std::string port;
  if (text.starts_with("[")) {
    size_t close = text.find("]:");
    if (close == std::string::npos) {
      return Status(StatusCode::kInvalidConfig,
                    "listen address '" + text + "' must look like [::1]:5680");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) {
      return Status(StatusCode::kInvalidConfig,
                    "listen address '" + text + "' must look like HOST:PORT");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      return Status(StatusCode::kInvalidConfig,
                    "listen address '" + text + "': put an IPv6 host in brackets, [::1]:5680");
    }
  }
  unsigned value = 0;
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (host.empty() || port.empty() || ec != std::errc() || p != port.data() + port.size() ||
      value > 65535) {
    return Status(StatusCode::kInvalidConfig,
                  "listen address '" + text + "' must look like HOST:PORT with a port 0-65535");
  }
  *host_out = host;
  *port_out = static_cast<uint16_t>(value);
  return Status::Ok();
}

Status ParseListenAddress(const std::string& text, ServerOptions* options) {
  return ParseOptionalAddress(text, &options->listen_enabled, &options->listen_host,
                              &options->listen_port);
}

Status ParseOptionalAddress(const std::string& text, bool* enabled, std::string* host,
                            uint16_t* port) {
  if (text == "off") {
    *enabled = false;
    return Status::Ok();
  }
  WHARF_RETURN_IF_ERROR(ParseHostPort(text, host, port));
  *enabled = true;
  return Status::Ok();
}

Status ParseMetricsAddress(const std::string& text, ServerOptions* options) {
  WHARF_RETURN_IF_ERROR(ParseHostPort(text, &options->metrics_host, &options->metrics_port));
  options->metrics_enabled = true;
  return Status::Ok();
}

Status ParseAmqpAddress(const std::string& text, ServerOptions* options) {
  return ParseOptionalAddress(text, &options->amqp.enabled, &options->amqp.listen_host,
                              &options->amqp.listen_port);
}

const std::vector<std::string>& LogLevelNames() {
  static const std::vector<std::string> kLevels = {"trace", "debug",    "info", "warn",
                                                   "error", "critical", "off"};
  return kLevels;
}

Status ValidateOptions(const ServerOptions& options) {
  const auto& levels = LogLevelNames();
  if (std::find(levels.begin(), levels.end(), options.log_level) == levels.end()) {
    return Status(StatusCode::kInvalidConfig,
                  "log_level '" + options.log_level +
                      "' must be one of trace, debug, info, warn, error, critical, off");
  }
  if (!ParseLogFormat(options.log_format)) {
    return Status(StatusCode::kInvalidConfig,
                  "log format '" + options.log_format + "' must be text or json");
  }
  if (options.data_dir.empty()) {
    return Status(StatusCode::kInvalidConfig, "data_dir must not be empty");
  }
  if (options.tls.cert_login != TlsOptions::CertLogin::kOff &&
      options.tls.settings.verify == net::PeerVerify::kNone) {
    return Status(StatusCode::kInvalidConfig,
                  "[tls] cert_login needs verify = \"optional\" or \"required\": without it no "
                  "client certificate is asked for, let alone checked");
  }
  if (!options.listen_enabled && !options.tls.native_enabled) {
    return Status(StatusCode::kInvalidConfig,
                  "[server] listen = \"off\" needs [tls] listen: wharfctl and the native "
                  "clients would have no way in");
  }
  if (options.max_message_bytes == 0) {
    return Status(StatusCode::kInvalidConfig, "max_message_bytes must be at least 1");
  }
  if (options.login_threads == 0 || options.login_queue == 0) {
    return Status(StatusCode::kInvalidConfig,
                  "[auth] hash_threads and hash_queue must be at least 1");
  }
  if (options.login_failure_delay_max_ms < options.login_failure_delay_ms) {
    return Status(StatusCode::kInvalidConfig,
                  "[auth] failure_delay_max_ms must not be below failure_delay_ms");
  }
  return Status::Ok();
}

}  // namespace wharf::server
