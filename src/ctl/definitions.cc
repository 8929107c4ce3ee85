// wharfctl export and import: the broker's definitions (users with their password hashes,
// vhosts, permissions, policies, durable exchanges, queues and bindings) as RabbitMQ's
// definitions JSON (docs/definitions.md), as rabbitmqctl export_definitions and
// import_definitions. Admins only.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "ctl/ctl.h"
#include "ctl/json.h"

namespace wharf::ctl {
namespace {

struct DefinitionsOptions {
  std::string file = "-";
  std::string vhost;
  uint64_t timeout_s = 300;
  bool json = false;
};

}  // namespace

void AddDefinitionsCommands(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<DefinitionsOptions>();

  CLI::App* exp = app.add_subcommand(
      "export",
      "write the broker's definitions (users with password hashes, vhosts, permissions, "
      "policies, durable exchanges, queues and bindings) as RabbitMQ's definitions JSON, as "
      "rabbitmqctl export_definitions (admins only)");
  exp->add_option("FILE", o->file, "where to write it; - is stdout")->capture_default_str();
  exp->add_option("--of-vhost", o->vhost,
                  "that vhost's alone (its policies, exchanges, queues and bindings)");
  commands.OnBroker(exp, [o](Client& client) {
    auto doc = client.ExportDefinitions(o->vhost.empty() ? std::nullopt
                                                         : std::optional<std::string>(o->vhost));
    if (!doc.ok()) return Refused(doc.status());
    if (o->file == "-") {
      if (std::fwrite(doc->data(), 1, doc->size(), stdout) != doc->size() ||
          std::fputc('\n', stdout) == EOF || std::fflush(stdout) != 0) {
        return Refused(Status(StatusCode::kIoError, "cannot write to stdout"));
      }
      return kExitOk;
    }
    // It holds every user's password hash: readable by its owner only, as a store is.
    const Status cannot(StatusCode::kIoError, "cannot write '" + Printable(o->file) + "'");
    const int fd = ::open(o->file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Refused(cannot);
    FILE* out = ::fdopen(fd, "wb");
    if (out == nullptr) {
      ::close(fd);
      return Refused(cannot);
    }
    bool written = std::fwrite(doc->data(), 1, doc->size(), out) == doc->size() &&
                   std::fputc('\n', out) != EOF;
    written = std::fclose(out) == 0 && written;
    if (!written) return Refused(cannot);
    std::fprintf(stderr, "definitions written to %s\n", Printable(o->file).c_str());
    return kExitOk;
  });

  CLI::App* imp = app.add_subcommand(
      "import",
      "apply a definitions file (RabbitMQ's JSON, from rabbitmqctl export_definitions or "
      "wharfctl export) as rabbitmqctl import_definitions: adds and updates, never deletes "
      "(admins only); RabbitMQ's users log in with their RabbitMQ passwords");
  imp->add_option("FILE", o->file, "the file; - is stdin")->required();
  imp->add_option("--into-vhost", o->vhost,
                  "import the file's policies, exchanges, queues and bindings into this vhost, "
                  "whatever vhost they name (its users, vhosts and permissions are left out)");
  imp->add_option("--timeout", o->timeout_s, "seconds to wait for the import to be on disk")
      ->check(Unsigned(1, 24 * 3600))
      ->capture_default_str();
  imp->add_flag("--json", o->json, "print the report as JSON");
  commands.OnBroker(imp, [o](Client& client) {
    std::string text, error;
    if (!ReadInput(o->file, &text, &error)) return Usage(error);
    auto done = client.ImportDefinitions(
        text, o->vhost.empty() ? std::nullopt : std::optional<std::string>(o->vhost),
        std::chrono::seconds(o->timeout_s));
    if (!done.ok()) return Refused(done.status());
    Json report;
    try {
      report = Json::parse(done->report);
    } catch (const std::exception& e) {
      return Refused(Status(StatusCode::kInternal, "the broker's report is not JSON"));
    }
    if (o->json) {
      const int printed = PrintJson(report);
      return printed != kExitOk ? printed : (done->ok ? kExitOk : kExitRefused);
    }
    std::printf(
        "imported: %s vhosts, %s users, %s permissions, %s policies, %s exchanges, %s "
        "queues, %s bindings\n",
        report["vhosts"].dump().c_str(), report["users"].dump().c_str(),
        report["permissions"].dump().c_str(), report["policies"].dump().c_str(),
        report["exchanges"].dump().c_str(), report["queues"].dump().c_str(),
        report["bindings"].dump().c_str());
    for (const Json& line : report["skipped"]) {
      std::printf("skipped: %s\n", Printable(line.get<std::string>()).c_str());
    }
    for (const Json& line : report["errors"]) {
      std::fprintf(stderr, "error: %s\n", Printable(line.get<std::string>()).c_str());
    }
    return done->ok ? kExitOk : kExitRefused;
  });
}

}  // namespace wharf::ctl
