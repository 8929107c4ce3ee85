// ctl/ctl.h: what wharfctl's command files share (ctl/wharfctl.cc, inspect.cc, redrive.cc).
//
// Thread safety: single-threaded CLI.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "wharf/client.h"

namespace wharf::ctl {

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;  // --name value
  std::map<std::string, bool> flags;           // --name
  std::vector<std::string> headers;            // --header K=V, repeatable
};

// A JSON string literal of `s`.
std::string JsonString(const std::string& s);
std::string HeadersJson(const wharf::Headers& headers);
std::string DeathsJson(const std::vector<wharf::Death>& deaths);
// Prints the broker's refusal; returns exit code 1.
int Refused(const wharf::Status& status);
// Prints the problem and the usage; returns exit code 2.
int Usage(const std::string& message);
// Unix ms as UTC, 2027-01-31T08:00:00.000Z.
std::string FormatTime(int64_t ms);
// A message id in hex (as wharfctl prints them), with or without 0x.
std::optional<uint64_t> ParseMessageId(std::string text);

// ctl/redrive.cc
int Redrive(wharf::Client& client, const Args& args);
int MoveMessages(wharf::Client& client, const Args& args, bool one);
int Purge(wharf::Client& client, const Args& args);
// ctl/inspect.cc
int ListQueues(wharf::Client& client, const Args& args);
int ShowQueue(wharf::Client& client, const Args& args);
int ListBindings(wharf::Client& client, const Args& args);
int ListConsumers(wharf::Client& client, const Args& args);
int ListConnections(wharf::Client& client, const Args& args);
int Peek(wharf::Client& client, const Args& args);

}  // namespace wharf::ctl
