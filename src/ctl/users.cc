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
  std::string name, password;
  bool admin = false, json = false;
};

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
    std::printf("%-32s %-6s %s\n", "NAME", "ADMIN", "SOURCE");
    for (const UserInfo& u : *list) {
      std::printf("%-32s %-6s %s\n", Printable(u.name).c_str(), u.admin ? "yes" : "no",
                  u.source.c_str());
    }
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
