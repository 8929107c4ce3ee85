// wharfctl users, add-user, delete-user, set-user-limits, set-user-tags, set-permissions,
// clear-permissions, list-permissions (the administrator tag only, through the broker) and
// hash-password (local: a password_hash for the config file).
#include <algorithm>
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
  std::string name, password, limits, which, vhost = "/", configure, write, read;
  std::vector<std::string> tags;
  bool admin = false, json = false;
};

// A permission pattern as written (backslashes are common in them), when it is printable
// ASCII; escaped as any other text otherwise.
std::string PatternText(const std::string& pattern) {
  const bool plain =
      std::all_of(pattern.begin(), pattern.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
  return plain ? pattern : Printable(pattern);
}

// rabbitmqctl list_users' way: [administrator, monitoring].
std::string TagsText(const std::vector<std::string>& tags) {
  std::string out = "[";
  for (size_t i = 0; i < tags.size(); ++i) out += (i ? ", " : "") + Printable(tags[i]);
  return out + "]";
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
    std::printf("%-32s %-8s %-16s %-13s %s\n", "NAME", "SOURCE", "MAX-CONNECTIONS", "MAX-CHANNELS",
                "TAGS");
    for (const UserInfo& u : *list) {
      std::printf("%-32s %-8s %-16s %-13s %s\n", Printable(u.name).c_str(), u.source.c_str(),
                  LimitText(u.limits.max_connections).c_str(),
                  LimitText(u.limits.max_channels).c_str(), TagsText(u.tags).c_str());
    }
    return kExitOk;
  });

  CLI::App* set_tags = app.add_subcommand(
      "set-user-tags",
      "replace a stored user's tags, as rabbitmqctl set_user_tags (administrator, monitoring, "
      "policymaker, management; none clears them)");
  set_tags->add_option("name", o->name, "the user")->required();
  set_tags->add_option("tags", o->tags, "the tags");
  commands.OnBroker(set_tags, [o](Client& client) {
    Status s = client.SetUserTags(o->name, o->tags);
    if (!s.ok()) return Refused(s);
    std::printf("tags of user '%s' set to %s\n", Printable(o->name).c_str(),
                TagsText(o->tags).c_str());
    return kExitOk;
  });

  CLI::App* set_permissions = app.add_subcommand(
      "set-permissions",
      "set a stored user's permissions in a vhost, as rabbitmqctl set_permissions: regular "
      "expressions (PCRE, unanchored) over the queue and exchange names it may configure, write "
      "and read; \"\" allows none, \".*\" all");
  set_permissions->add_option("--vhost,-p", o->vhost, "the vhost")->capture_default_str();
  set_permissions->add_option("name", o->name, "the user")->required();
  set_permissions->add_option("configure", o->configure, "declare and delete")->required();
  set_permissions->add_option("write", o->write, "publish to an exchange, bind into a queue")
      ->required();
  set_permissions->add_option("read", o->read, "consume, purge, bind from an exchange")->required();
  commands.OnBroker(set_permissions, [o](Client& client) {
    Status s = client.SetPermissions(o->name, {o->vhost, o->configure, o->write, o->read});
    if (!s.ok()) return Refused(s);
    std::printf("permissions of user '%s' in vhost '%s' set\n", Printable(o->name).c_str(),
                Printable(o->vhost).c_str());
    return kExitOk;
  });

  CLI::App* clear_permissions =
      app.add_subcommand("clear-permissions", "remove a stored user's permissions in a vhost");
  clear_permissions->add_option("--vhost,-p", o->vhost, "the vhost")->capture_default_str();
  clear_permissions->add_option("name", o->name, "the user")->required();
  commands.OnBroker(clear_permissions, [o](Client& client) {
    Status s = client.ClearPermissions(o->name, o->vhost);
    if (!s.ok()) return Refused(s);
    std::printf("permissions of user '%s' in vhost '%s' cleared\n", Printable(o->name).c_str(),
                Printable(o->vhost).c_str());
    return kExitOk;
  });

  CLI::App* list_permissions = app.add_subcommand(
      "list-permissions",
      "list the permissions of every user in a vhost, or of one user in every vhost "
      "(rabbitmqctl list_permissions, list_user_permissions)");
  list_permissions->add_option("--vhost,-p", o->vhost, "the vhost (without --user)")
      ->capture_default_str();
  list_permissions->add_option("--user,-u", o->name, "one user's, in every vhost");
  list_permissions->add_flag("--json", o->json, "print as JSON");
  commands.OnBroker(list_permissions, [o](Client& client) {
    auto list = client.ListUsers();
    if (!list.ok()) return Refused(list.status());
    Json out = Json::array();
    if (!o->json) {
      std::printf("%-32s %-8s %-20s %-20s %s\n", "USER", "VHOST", "CONFIGURE", "WRITE", "READ");
    }
    bool found = o->name.empty();
    for (const UserInfo& u : *list) {
      if (!o->name.empty() && u.name != o->name) continue;
      found = true;
      for (const UserPermission& p : u.permissions) {
        if (o->name.empty() && p.vhost != o->vhost) continue;
        if (o->json) {
          out.push_back(Json{{"user", u.name},
                             {"vhost", p.vhost},
                             {"configure", p.configure},
                             {"write", p.write},
                             {"read", p.read}});
          continue;
        }
        std::printf("%-32s %-8s %-20s %-20s %s\n", Printable(u.name).c_str(),
                    Printable(p.vhost).c_str(), PatternText(p.configure).c_str(),
                    PatternText(p.write).c_str(), PatternText(p.read).c_str());
      }
    }
    if (!found) {
      return Refused(Status(StatusCode::kPreconditionFailed,
                            "user '" + Printable(o->name) + "' does not exist"));
    }
    if (o->json) return PrintJson(out);
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
    if (Status s = ParseLimitsJson(
            o->limits, {{"max-connections", &connections}, {"max-channels", &channels}});
        !s.ok()) {
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
  add->add_flag("--admin", o->admin,
                "with the administrator tag (else a new user has no tags); a new user has no "
                "permissions until set-permissions");
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
