// wharfctl: the admin CLI (docs/operations.md, "wharfctl"). This file: the global options
// (server, user, password from flags, WHARF_* variables or a config file), help, version,
// completion, and running the chosen command. The commands are in topology.cc,
// messages.cc, inspect.cc, redrive.cc, users.cc and backup.cc.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "ctl/ctl.h"
#include "wharf/client.h"
#include "wharf/version.h"

namespace wharf::ctl {
namespace {

constexpr const char* kFooter = R"(
Connection: --server, --user and --password (and --tls with --ca, --cert, --key for a TLS
listener), or the environment variables WHARF_SERVER,
WHARF_USER and WHARF_PASSWORD, or the keys server, user and password in a config file
(--config FILE, WHARFCTL_CONFIG, or ~/.config/wharf/wharfctl.toml when it exists), so that
passwords need not sit in shell history. Flags win over variables, variables over the file.
Without a user, wharfctl logs in as the built-in loopback user guest.

Exit codes: 0 success, 1 the broker refused or failed (or stdout could not be written),
2 bad usage, 3 cannot connect.
'wharfctl help COMMAND' or 'wharfctl COMMAND --help' shows a command's options.)";

struct Global {
  std::string server = "127.0.0.1:5680";
  std::string user;
  std::string password;
  std::string vhost = "/";
  wharf::ClientTlsOptions tls;
};

std::string DefaultConfigPath() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/wharf/wharfctl.toml";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.config/wharf/wharfctl.toml";
  }
  return "";
}

// A password in a file others can read is as good as printed: say so (ssh does the same).
void WarnIfReadableByOthers(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return;
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    std::fprintf(stderr,
                 "wharfctl: warning: %s can be read by other users (mode %03o); it may hold a "
                 "password: chmod 600 it\n",
                 path.c_str(), st.st_mode & 0777);
  }
}

// "wharfctl redrive status" for the command `redrive status`.
std::string CommandPath(const CLI::App* command) {
  std::string path;
  for (const CLI::App* c = command; c != nullptr; c = c->get_parent()) {
    path = c->get_name() + (path.empty() ? "" : " " + path);
  }
  return path;
}

// --- completion ----------------------------------------------------------------------------

void CollectCompletion(const CLI::App* command, const std::string& path, std::string* subcommands,
                       std::string* options) {
  std::string subs, opts;
  for (const CLI::App* sub : command->get_subcommands({})) {
    subs += " " + sub->get_name();
    for (const std::string& alias : sub->get_aliases()) subs += " " + alias;
  }
  for (const CLI::Option* opt : command->get_options({})) {
    for (const std::string& name : opt->get_lnames()) opts += " --" + name;
    for (const std::string& name : opt->get_snames()) opts += " -" + name;
  }
  *subcommands += "    \"" + path + "\") echo \"" + subs.substr(subs.empty() ? 0 : 1) + "\" ;;\n";
  *options += "    \"" + path + "\") echo \"" + opts.substr(opts.empty() ? 0 : 1) + "\" ;;\n";
  for (const CLI::App* sub : command->get_subcommands({})) {
    // An alias (get, purge-queue) completes as its command does.
    std::vector<std::string> names = sub->get_aliases();
    names.insert(names.begin(), sub->get_name());
    for (const std::string& name : names) {
      CollectCompletion(sub, path.empty() ? name : path + " " + name, subcommands, options);
    }
  }
}

// A bash completion script made from the command definitions themselves, so it cannot drift
// from them: installed as /usr/share/bash-completion/completions/wharfctl.
std::string BashCompletion(const CLI::App& app) {
  std::string subcommands, options;
  CollectCompletion(&app, "", &subcommands, &options);
  return "# bash completion for wharfctl " WHARF_VERSION
         " (made by 'wharfctl completion bash')\n"
         "_wharfctl_subcommands() {\n  case \"$1\" in\n" +
         subcommands +
         "  esac\n}\n"
         "_wharfctl_options() {\n  case \"$1\" in\n" +
         options +
         "  esac\n}\n"
         "_wharfctl() {\n"
         "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" path=\"\" word i subs\n"
         "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "    word=\"${COMP_WORDS[i]}\"\n"
         "    subs=\" $(_wharfctl_subcommands \"$path\") \"\n"
         "    if [[ \"$word\" != -* && \"$subs\" == *\" $word \"* ]]; then\n"
         "      path=\"${path:+$path }$word\"\n"
         "    fi\n"
         "  done\n"
         "  if [[ \"$cur\" == -* ]]; then\n"
         "    local options=\"$(_wharfctl_options \"$path\")\"\n"
         "    [[ -n \"$path\" ]] && options+=\" $(_wharfctl_options \"\")\"\n"
         "    COMPREPLY=($(compgen -W \"$options\" -- \"$cur\"))\n"
         "  else\n"
         "    COMPREPLY=($(compgen -W \"$(_wharfctl_subcommands \"$path\")\" -- \"$cur\"))\n"
         "  fi\n"
         "}\n"
         "complete -F _wharfctl wharfctl\n";
}

// The connection settings, first found wins: the flags, WHARF_SERVER / WHARF_USER /
// WHARF_PASSWORD, the config file (--config, else $WHARFCTL_CONFIG, both of which must exist,
// else the default path when it exists). The problem, or "".
std::string ResolveConnection(const CLI::Option* server_flag, const CLI::Option* user_flag,
                              const CLI::Option* password_flag, const CLI::Option* config_flag,
                              Global* global) {
  std::string path = config_flag->count() > 0 ? config_flag->as<std::string>() : "";
  bool must_exist = !path.empty();
  if (path.empty()) {
    if (const char* env = std::getenv("WHARFCTL_CONFIG"); env && *env) {
      path = env;
      must_exist = true;
    } else {
      path = DefaultConfigPath();
    }
  }
  std::map<std::string, std::string> file;
  if (!path.empty() && (must_exist || ::access(path.c_str(), F_OK) == 0)) {
    try {
      for (const CLI::ConfigItem& item : CLI::ConfigTOML().from_file(path)) {
        const std::string key = item.fullname();
        if (key != "server" && key != "user" && key != "password") {
          return "config file " + path + ": unknown key '" + key +
                 "' (it takes server, user, password)";
        }
        file[key] = item.inputs.empty() ? "" : item.inputs.front();
      }
    } catch (const CLI::Error& e) {
      return "config file " + path + ": " + e.what();
    }
    if (file.count("password")) WarnIfReadableByOthers(path);
  }
  auto pick = [&](const CLI::Option* flag, const char* env, const char* key, std::string* out) {
    if (flag->count() > 0) return;
    if (const char* value = std::getenv(env); value && *value) {
      *out = value;
    } else if (file.count(key)) {
      *out = file[key];
    }
  };
  pick(server_flag, "WHARF_SERVER", "server", &global->server);
  pick(user_flag, "WHARF_USER", "user", &global->user);
  pick(password_flag, "WHARF_PASSWORD", "password", &global->password);
  std::string host;
  uint16_t port = 0;
  if (!ParseHostPort(global->server, &host, &port)) {
    return "server '" + global->server +
           "' (from WHARF_SERVER or the config file) is not HOST:PORT with a port from 1 to "
           "65535";
  }
  return "";
}

int Run(int argc, char** argv) {
  CLI::App app("wharfctl " WHARF_VERSION ": inspect and operate a Wharf broker", "wharfctl");
  app.footer(kFooter);
  app.set_version_flag("--version", "wharfctl " WHARF_VERSION);
  app.get_formatter()->column_width(36);
  app.require_subcommand(1);
  app.fallthrough();  // global options after the command work too

  Global global;
  std::string config_path;
  CLI::Option* server_flag =
      app.add_option("--server", global.server, "the broker's native listener")
          ->check(HostPort())
          ->capture_default_str();
  CLI::Option* user_flag =
      app.add_option("--user", global.user, "log in as this user (default: the loopback guest)");
  CLI::Option* password_flag = app.add_option("--password", global.password, "the user's password");
  app.add_option("--vhost,-p", global.vhost,
                 "the virtual host to use: queues, exchanges and bindings are looked up there "
                 "(set-permissions and clear-permissions take it as the permissions' vhost)")
      ->capture_default_str();
  app.add_flag("--tls", global.tls.enabled,
               "connect with TLS (to the broker's [tls] listen port; docs/security.md)");
  auto tls_file = [&](const char* flag, std::string* into, const char* what) {
    app.add_option(flag, *into, what)
        ->check(CLI::ExistingFile)
        ->each([&global](const std::string&) { global.tls.enabled = true; });
  };
  tls_file("--ca", &global.tls.ca_file,
           "PEM CA certificates the broker's certificate must chain to (implies --tls; "
           "default: the system's)");
  tls_file("--cert", &global.tls.cert_file,
           "PEM client certificate, for a broker that asks for one (implies --tls; with --key)");
  tls_file("--key", &global.tls.key_file, "the client certificate's PEM private key");
  app.add_flag("--cert-login", global.tls.certificate_login,
               "log in as the user the --cert certificate names (EXTERNAL; the broker's [tls] "
               "cert_login), not with --user and --password");
  app.add_option("--tls-server-name", global.tls.server_name,
                 "the name the broker's certificate must carry (default: the --server host)");
  CLI::Option* config_flag =
      app.add_option("--config", config_path,
                     "a TOML file with server, user, password (default: $WHARFCTL_CONFIG, or " +
                         (DefaultConfigPath().empty() ? std::string("none") : DefaultConfigPath()) +
                         " when it exists)");

  Commands commands;
  AddInspectCommands(app, commands);
  AddTopologyCommands(app, commands);
  AddMessageCommands(app, commands);
  AddRedriveCommands(app, commands);
  AddUserCommands(app, commands);
  AddBackupCommands(app, commands);
  AddVhostCommands(app, commands);
  AddPolicyCommands(app, commands);
  AddDefinitionsCommands(app, commands);

  std::vector<std::string> help_for;
  CLI::App* help = app.add_subcommand("help", "show the help of wharfctl or of COMMAND");
  help->add_option("command", help_for, "a command, and a subcommand of it");
  commands.OnLocal(help, [&]() {
    const CLI::App* command = &app;
    for (const std::string& name : help_for) {
      try {
        command = command->get_subcommand(name);
      } catch (const CLI::OptionNotFound&) {
        return Usage("no command '" + name + "' in '" + CommandPath(command) + "'");
      }
    }
    const CLI::App* parent = command->get_parent();
    std::fputs(command->help(parent ? CommandPath(parent) : "").c_str(), stdout);
    return kExitOk;
  });
  std::string shell;
  CLI::App* completion = app.add_subcommand("completion", "print a shell completion script");
  completion->add_option("shell", shell, "bash")->required()->check(CLI::IsMember({"bash"}));
  commands.OnLocal(completion, [&]() {
    std::fputs(BashCompletion(app).c_str(), stdout);
    return kExitOk;
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return Usage(e.what());
  }

  const CLI::App* chosen = &app;
  while (!chosen->get_subcommands().empty()) chosen = chosen->get_subcommands().front();
  if (const auto* local = commands.Local(chosen)) return (*local)();
  const auto* action = commands.Broker(chosen);
  if (!action) return Usage("'" + CommandPath(chosen) + "' needs a subcommand");

  if (std::string error =
          ResolveConnection(server_flag, user_flag, password_flag, config_flag, &global);
      !error.empty()) {
    return Usage(error);
  }
  wharf::ClientOptions options;
  options.client_name = "wharfctl";
  ParseHostPort(global.server, &options.host, &options.port);
  options.tls = global.tls;
  options.vhost = global.vhost;
  if (global.tls.certificate_login) {
    if (global.tls.cert_file.empty()) return Usage("--cert-login needs --cert and --key");
    options.tls.enabled = true;
  } else if (!global.user.empty()) {
    if (global.password.empty()) {
      return Usage("--user needs --password (or WHARF_PASSWORD, or password in the config file)");
    }
    options.user = global.user;
    options.password = global.password;
  }
  auto client = wharf::Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "wharfctl: %s\n", Printable(client.status().ToString()).c_str());
    return client.status().code() == wharf::StatusCode::kUnavailable ? kExitUnreachable
                                                                     : kExitRefused;
  }
  int rc = (*action)(**client);
  // Tables and text too: what stdout could not take is a failure, not a silent success.
  if (rc == kExitOk && (std::fflush(stdout) != 0 || std::ferror(stdout))) {
    std::fprintf(stderr, "wharfctl: cannot write to stdout\n");
    rc = kExitRefused;
  }
  (*client)->Close();
  return rc;
}

}  // namespace
}  // namespace wharf::ctl

int main(int argc, char** argv) {
  // A closed stdout (wharfctl consume | head -1) is a write error the command handles (it
  // does not ack what it could not write), not a signal that kills it mid-way.
  std::signal(SIGPIPE, SIG_IGN);
  // A closed standard descriptor would be taken by the next file or socket opened: stdout
  // writes would go into the broker connection. A closed stdin or stderr gets /dev/null; a
  // closed stdout is an error, since nothing printed could be seen (or acked as seen).
  for (int fd : {STDIN_FILENO, STDERR_FILENO}) {
    if (::fcntl(fd, F_GETFD) == -1) ::open("/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY);
  }
  if (::fcntl(STDOUT_FILENO, F_GETFD) == -1) {
    std::fprintf(stderr, "wharfctl: stdout is closed: nothing it prints could be read\n");
    ::open("/dev/null", O_WRONLY);  // keeps descriptor 1 from the sockets meanwhile
    return wharf::ctl::kExitRefused;
  }
  try {
    return wharf::ctl::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wharfctl: %s\n", e.what());
    return wharf::ctl::kExitRefused;
  }
}
