// ctl/ctl.h: what wharfctl's command files share (docs/operations.md, "wharfctl").
//
// The command line is parsed by CLI11 (Debian's libcli11-dev): each command file adds its
// subcommands and their typed options to the app and says what runs when one is chosen
// (Commands). Parsing is over before anything runs, so an unknown option or a value out of
// range is an error (exit 2) before the broker is even reached.
//
// Thread safety: single-threaded CLI.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/validators.h"
#include "json/message.h"
#include "wharf/client.h"

namespace wharf::ctl {

using cli::Finite;
using cli::HostPort;
using cli::ParseHostPort;
using cli::Unsigned;

// Exit codes (wharfctl --help says them too).
inline constexpr int kExitOk = 0;
inline constexpr int kExitRefused = 1;  // the broker refused or failed, or output failed
inline constexpr int kExitUsage = 2;    // bad command line
inline constexpr int kExitUnreachable = 3;

// What runs for each (sub)command once the command line is parsed: with a connection to the
// broker, or without one (hash-password, help, completion).
class Commands {
 public:
  using BrokerAction = std::function<int(wharf::Client&)>;
  using LocalAction = std::function<int()>;

  void OnBroker(const CLI::App* command, BrokerAction action) {
    broker_[command] = std::move(action);
  }
  void OnLocal(const CLI::App* command, LocalAction action) { local_[command] = std::move(action); }
  const BrokerAction* Broker(const CLI::App* command) const {
    auto it = broker_.find(command);
    return it == broker_.end() ? nullptr : &it->second;
  }
  const LocalAction* Local(const CLI::App* command) const {
    auto it = local_.find(command);
    return it == local_.end() ? nullptr : &it->second;
  }

 private:
  std::map<const CLI::App*, BrokerAction> broker_;
  std::map<const CLI::App*, LocalAction> local_;
};

// Each command file's subcommands (ctl/topology.cc, messages.cc, inspect.cc, redrive.cc,
// users.cc, backup.cc, vhosts.cc, policies.cc, definitions.cc).
void AddTopologyCommands(CLI::App& app, Commands& commands);
void AddMessageCommands(CLI::App& app, Commands& commands);
void AddInspectCommands(CLI::App& app, Commands& commands);
void AddRedriveCommands(CLI::App& app, Commands& commands);
void AddUserCommands(CLI::App& app, Commands& commands);
void AddBackupCommands(CLI::App& app, Commands& commands);
void AddVhostCommands(CLI::App& app, Commands& commands);
void AddPolicyCommands(CLI::App& app, Commands& commands);
void AddDefinitionsCommands(CLI::App& app, Commands& commands);

// --- Values on the command line (ctl/values.cc) ---------------------------------------------

// All of `in`; and a file's bytes ("-" is stdin), the problem in `error`.
std::string ReadAll(std::istream& in);
bool ReadInput(const std::string& path, std::string* out, std::string* error);

// A validator from a check that returns the problem ("" when the text is fine): so that a bad
// value is a usage error before wharfctl connects.
CLI::Validator Check(std::string name, std::function<std::string(const std::string&)> problem);
// The usual ones: --separator, a time, a hex message id, K=V typed values.
CLI::Validator SeparatorText();
CLI::Validator TimeText();
CLI::Validator MessageIdText();
CLI::Validator TypedValueText();

// K=V for --header and --arg: V is an integer if it is one, true/false a boolean, a number
// with a fraction a double, otherwise a string; "K:string=V" (or :int, :double, :bool) says
// the type. The problem in `error`.
bool ParseTypedValue(const std::string& kv, wharf::Headers* out, std::string* error);
// Unix ms, or a UTC time like 2027-01-31T08:00:00Z (with optional .mmm).
std::optional<int64_t> ParseTime(const std::string& text);
// How long a queue's next ready message has waited since its publish, by the clock now;
// nullopt when not known (an empty queue, or its head paged out).
std::optional<int64_t> OldestReadyAgeMs(const wharf::QueueInfo& q);
// Unix ms as UTC, 2027-01-31T08:00:00.000Z.
std::string FormatTime(int64_t ms);
// A message id in hex (as wharfctl prints them), with or without 0x (json/message.h).
using json::ParseMessageId;
// A record separator given on the command line: \n, \t, \0, \\ and \xHH are unescaped.
std::optional<std::string> ParseSeparator(const std::string& text);

// --- Output (ctl/values.cc) ------------------------------------------------------------------

// Writes `bytes` to stdout as they are (NUL bytes and all) and flushes: true only once all of
// them reached the kernel. The reason when not.
bool WriteOut(std::string_view bytes, std::string* error);
// A name or text for a table cell: control characters and invalid UTF-8 escaped (\n, \x1b),
// so what a client named a queue cannot move the cursor of an operator's terminal.
std::string Printable(std::string_view text);
// Prints the broker's refusal; returns kExitRefused.
int Refused(const wharf::Status& status);
// Prints the problem and how to get help; returns kExitUsage.
int Usage(const std::string& message);

}  // namespace wharf::ctl
