// server/definitions.h
//
// Definitions (docs/definitions.md): the broker's users (with their password hashes), vhosts,
// permissions, policies and durable topology in RabbitMQ's definitions format
// (json/definitions.h). Export reads them as they are; Import applies a file as RabbitMQ's
// import_definitions does: it adds and updates, never deletes, so importing one file twice
// changes nothing the second time. Used by wharfctl export/import (the native protocol),
// GET/POST /api/definitions and `wharfd --definitions FILE` at start.
//
// Import runs in steps, each finished before the next: vhosts (and their limits); users and
// permissions in one write (a config-file user or the built-in guest is skipped: the file
// owns it); policies; then per vhost exchanges, queues and bindings through a trusted
// internal broker session (SessionOptions::trusted, RabbitMQ's rules for arguments). An item
// the broker refuses (an inequivalent queue, a policy with an unknown key) is an error in the
// report and the import goes on; `done` is called once every change is on disk.
//
// Threads: both run on the broker thread; Import's `done` too.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "json/definitions.h"
#include "server/server_context.h"

namespace wharf::broker {
class Broker;
}

namespace wharf::server {

class UserDirectory;

struct ImportReport {
  // Made or changed (an unchanged item counts too: the import asked for it and it is so).
  uint64_t vhosts = 0;
  uint64_t users = 0;
  uint64_t permissions = 0;
  uint64_t policies = 0;
  uint64_t exchanges = 0;
  uint64_t queues = 0;
  uint64_t bindings = 0;
  std::vector<std::string> skipped;  // left alone, and why
  std::vector<std::string> errors;   // refused, and why
  bool ok() const { return errors.empty(); }
  json::Json ToJson() const;
};

// A definitions document from outside (a file, a request body): JSON, nested at most 32 deep,
// read as json::DefinitionsFromJson (into one vhost, or as the document says). kInvalidArgument
// saying what is wrong.
Result<json::Definitions> ParseDefinitions(std::string_view text,
                                           std::optional<std::string_view> into_vhost);

// Every vhost's definitions, or `vhost`'s alone (its policies, exchanges, queues and bindings,
// without users, vhosts and permissions, as RabbitMQ's per-vhost export).
json::Definitions ExportDefinitions(const broker::Broker& broker, const UserDirectory& users,
                                    const std::optional<std::string>& vhost);

// Imports `definitions` (see above); `done` gets the report.
void ImportDefinitions(const ServerContext& context, json::Definitions definitions,
                       std::function<void(ImportReport)> done);

}  // namespace wharf::server
