// wharfctl users, add-user, delete-user (admins only, through the broker) and hash-password
// (local: a password_hash for the config file).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "common/password.h"
#include "ctl/ctl.h"
#include "ctl/json.h"

namespace wharf::ctl {
namespace {

struct UserOptions {
  std::string name, password, limits, which;
  bool admin = false, json = false;
};

// A limit for the listing: "-" when none.
std::string LimitText(int64_t limit) { return limit < 0 ? "-" : std::to_string(limit); }

// rabbitmqctl set_user_limits' JSON: {"max-connections": N, "max-channels": N}, either or both;
// a negative value clears that limit.
Status ParseUserLimits(const std::string& text, std::optional<int64_t>* connections,
                       std::optional<int64_t>* channels) {
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || doc.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "limits must be a JSON object such as '{\"max-connections\": 10}'");
  }
  for (const auto& [key, value] : doc.items()) {
    std::optional<int64_t>* target = key == "max-connections" ? connections
                                     : key == "max-channels"  ? channels
                                                              : nullptr;
    if (target == nullptr) {
      return Status(StatusCode::kInvalidArgument,
                    "unknown limit '" + key + "' (max-connections, max-channels)");
    }
    if (!value.is_number_integer()) {
      return Status(StatusCode::kInvalidArgument, "limit '" + key + "' must be an integer");
    }
    *target = value.get<int64_t>();
  }
  return Status::Ok();
}

// The password given, or a line of stdin.
std::string PasswordOrStdin(const std::string& given) {
  if (!given.empty()) return given;
  std::string line;
  std::getline(std::cin, line);
  return line;
}

}  // namespace

void AddUserCommands(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<UserOptions>();

  CLI::App* users = app.add_subcommand("users", "list users (admins only)");
  users->add_flag("--json", o->json, "print as JSON");
  commands.OnBroker(users, [o](Client& client) {
    auto list = client.ListUsers();
    if (!list.ok()) return Refused(list.status());
    if (o->json) {
      Json out = Json::array();
      for (const UserInfo& u : *list) out.push_back(UserJson(u));
      return PrintJson(out);
    }
    std::printf("%-32s %-6s %-8s %-16s %s\n", "NAME", "ADMIN", "SOURCE", "MAX-CONNECTIONS",
                "MAX-CHANNELS");
    for (const UserInfo& u : *list) {
      std::printf("%-32s %-6s %-8s %-16s %s\n", Printable(u.name).c_str(), u.admin ? "yes" : "no",
                  u.source.c_str(), LimitText(u.limits.max_connections).c_str(),
                  LimitText(u.limits.max_channels).c_str());
    }
    return kExitOk;
  });

  CLI::App* set_limits = app.add_subcommand(
      "set-user-limits",
      "set a stored user's limits, as rabbitmqctl set_user_limits (admins only): "
      "'{\"max-connections\": 10, \"max-channels\": 100}'; negative clears one, 0 allows none");
  set_limits->add_option("name", o->name, "the user")->required();
  set_limits->add_option("limits", o->limits, "the limits as JSON")->required();
  commands.OnBroker(set_limits, [o](Client& client) {
    std::optional<int64_t> connections, channels;
    if (Status s = ParseUserLimits(o->limits, &connections, &channels); !s.ok()) {
      return Usage(std::string(s.message()));
    }
    Status s = client.SetUserLimits(o->name, connections, channels);
    if (!s.ok()) return Refused(s);
    std::printf("limits of user '%s' set\n", Printable(o->name).c_str());
    return kExitOk;
  });

  CLI::App* clear_limits = app.add_subcommand(
      "clear-user-limits", "clear a stored user's limit, as rabbitmqctl clear_user_limits");
  clear_limits->add_option("name", o->name, "the user")->required();
  clear_limits->add_option("limit", o->which, "max-connections, max-channels or all")
      ->required()
      ->check(CLI::IsMember({"max-connections", "max-channels", "all"}));
  commands.OnBroker(clear_limits, [o](Client& client) {
    const bool all = o->which == "all";
    std::optional<int64_t> none = -1;
    Status s =
        client.SetUserLimits(o->name, all || o->which == "max-connections" ? none : std::nullopt,
                             all || o->which == "max-channels" ? none : std::nullopt);
    if (!s.ok()) return Refused(s);
    std::printf("limit %s of user '%s' cleared\n", o->which.c_str(), Printable(o->name).c_str());
    return kExitOk;
  });

  CLI::App* add =
      app.add_subcommand("add-user",
                         "create or replace a user kept by the broker (admins only); only the "
                         "password's hash is sent");
  add->add_option("name", o->name, "the user")->required();
  add->add_flag("--admin", o->admin, "may manage users");
  add->add_option("--new-password", o->password, "the password (default: a line of stdin)");
  commands.OnBroker(add, [o](Client& client) {
    const std::string password = PasswordOrStdin(o->password);
    if (password.empty()) return Usage("add-user needs a non-empty password");
    Status s = client.PutUser(o->name, HashPassword(password), o->admin);
    if (!s.ok()) return Refused(s);
    std::printf("user '%s' saved%s\n", Printable(o->name).c_str(), o->admin ? " (admin)" : "");
    return kExitOk;
  });

  CLI::App* del =
      app.add_subcommand("delete-user", "delete a user made with add-user (admins only)");
  del->add_option("name", o->name, "the user")->required();
  commands.OnBroker(del, [o](Client& client) {
    Status s = client.DeleteUser(o->name);
    if (!s.ok()) return Refused(s);
    std::printf("user '%s' deleted\n", Printable(o->name).c_str());
    return kExitOk;
  });

  CLI::App* hash = app.add_subcommand(
      "hash-password", "print a password_hash for [[auth.users]] in the config (no broker needed)");
  hash->add_option("password", o->password, "the password (default: a line of stdin)");
  commands.OnLocal(hash, [o]() {
    const std::string password = PasswordOrStdin(o->password);
    if (password.empty()) return Usage("hash-password needs a non-empty password");
    std::puts(HashPassword(password).c_str());
    return kExitOk;
  });
}

}  // namespace wharf::ctl
