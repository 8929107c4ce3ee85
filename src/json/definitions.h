// json/definitions.h: a broker's definitions (users, vhosts, permissions, policies, queues,
// exchanges, bindings) as RabbitMQ's definitions file holds them (rabbitmqctl
// export_definitions, GET /api/definitions; docs/definitions.md), read into Wharf's types and
// written back. Pure: what an import does with them is server/definitions.h's.
//
// Read as RabbitMQ 3.x writes it: a user's password_hash under its hashing_algorithm (RabbitMQ's
// SHA-256, SHA-512 and MD5, or Wharf's own "wharf_pbkdf2_sha256"), tags as an array or a
// comma-separated string, a vhost's description at the top or in its metadata, its limits as a
// "vhost-limits" parameter, a queue's type as x-queue-type. What Wharf has no use for
// (topic permissions, other parameters, operator policies) is listed in `skipped`, not refused.
//
// Thread safety: plain functions on values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "json/values.h"
#include "wharf/result.h"
#include "wharf/types.h"

namespace wharf::json {

struct DefinitionsUser {
  std::string name;
  std::string password_hash;  // Wharf's encoding (common/password.h): rabbit-sha256$... or pbkdf2
  std::vector<std::string> tags;
  UserLimits limits;
};

struct DefinitionsVhost {
  std::string name;
  std::string description;
  std::optional<VhostLimits> limits;  // from a "vhost-limits" parameter
};

struct DefinitionsPermission {
  std::string user;
  UserPermission permission;
};

struct DefinitionsExchange {
  ExchangeSpec spec;  // its type still to be applied (broker::ApplyDeclaredType)
  std::string type;   // as RabbitMQ names it: direct, ..., x-delayed-message
};

struct Definitions {
  std::vector<DefinitionsVhost> vhosts;
  std::vector<DefinitionsUser> users;
  std::vector<DefinitionsPermission> permissions;
  std::vector<PolicyInfo> policies;
  std::vector<DefinitionsExchange> exchanges;
  std::vector<QueueSpec> queues;
  std::vector<BindingSpec> bindings;
  // What the file holds that Wharf does not take, one line each ("topic_permissions: 2
  // entries: Wharf has no topic permissions").
  std::vector<std::string> skipped;
};

// Reads a definitions document. An item without a "vhost" is in "/". With `into_vhost` (RabbitMQ's
// per-vhost import) every policy, exchange, queue, binding and vhost limit is that vhost's
// whatever it says, and users, vhosts and permissions are left out (said in `skipped`).
// kInvalidArgument naming the item and what is wrong ("queues[2]: \"name\" must be a string");
// nothing is half read.
Result<Definitions> DefinitionsFromJson(const Json& doc,
                                        std::optional<std::string_view> into_vhost = {});

// The hash Wharf keeps (common/password.h) for RabbitMQ's `password_hash` under its
// `hashing_algorithm` (rabbit_password_hashing_sha256, _sha512, _md5, or Wharf's
// wharf_pbkdf2_sha256); "" stays "" (a user without a password). kInvalidArgument saying what
// is wrong (an unknown algorithm, a hash that does not decode as it says).
Result<std::string> StoredPasswordHash(const std::string& password_hash,
                                       const std::string& hashing_algorithm);

// RabbitMQ's "tags" of a user: a list of strings, or one string of tags separated by commas
// (as before RabbitMQ 3.9; each trimmed of spaces, empty ones dropped). kInvalidArgument for
// anything else.
Result<std::vector<std::string>> TagsFromJson(const Json& tags);

// The document RabbitMQ's GET /api/definitions answers, in its key order, for `product_version`
// of Wharf. Users' hashes go out under their algorithm: RabbitMQ's as RabbitMQ wrote them (so
// a RabbitMQ user exported from Wharf imports back into RabbitMQ), Wharf's PBKDF2 ones as
// "wharf_pbkdf2_sha256" (Wharf reads them; RabbitMQ does not).
Json DefinitionsJson(const Definitions& definitions, std::string_view product_version);

}  // namespace wharf::json
