// wharfctl backup DIR: the broker writes a consistent copy of its store into DIR on its own
// machine while it runs (docs/operations.md, "Backup and restore"). Admins only.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "ctl/ctl.h"
#include "ctl/json.h"

namespace wharf::ctl {
namespace {

struct BackupOptions {
  std::string directory;
  uint64_t timeout_s = 3600;
  bool json = false;
};

std::string MiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1u << 20));
  return buf;
}

}  // namespace

void AddBackupCommands(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<BackupOptions>();
  CLI::App* backup = app.add_subcommand(
      "backup",
      "have the broker write a consistent copy of its store into DIR, on the broker's machine, "
      "while it runs (admins only); 'wharfd --data-dir DIR' starts from it");
  backup
      ->add_option("DIR", o->directory,
                   "an absolute path on the broker's machine: a new directory (its parent must "
                   "exist) or an empty one")
      ->required()
      ->check(Check("DIR", [](const std::string& text) -> std::string {
        if (!text.empty() && text.front() == '/') return "";
        // The broker may be on another machine, and its working directory is not this one's:
        // a relative path would be a guess.
        return "backup DIR '" + Printable(text) +
               "' is not absolute: it is a path on the broker's machine, give it whole (e.g. "
               "/var/backups/wharf/2027-01-31)";
      }));
  backup->add_option("--timeout", o->timeout_s, "seconds to wait for the copy to complete")
      ->check(Unsigned(1, 7 * 24 * 3600))
      ->capture_default_str();
  backup->add_flag("--json", o->json, "print the figures as JSON");
  commands.OnBroker(backup, [o](Client& client) {
    auto info = client.Backup(o->directory, std::chrono::seconds(o->timeout_s));
    if (!info.ok()) return Refused(info.status());
    if (o->json) return PrintJson(BackupJson(*info));
    std::printf(
        "backup written to %s: %llu files, %s (%s hard-linked to the live store), in %.3f s\n",
        Printable(info->directory).c_str(), static_cast<unsigned long long>(info->files),
        MiB(info->bytes).c_str(), MiB(info->linked_bytes).c_str(),
        static_cast<double>(info->duration_ms) / 1000);
    std::printf("every message confirmed before it began is in it (ids up to %s)\n",
                HexId(info->max_message_id).c_str());
    return kExitOk;
  });
}

}  // namespace wharf::ctl
