// wharfctl: the admin CLI (docs/operations.md). This file: argument parsing, the usage text,
// topology, publish, consume, delayed messages, users; ctl/inspect.cc has the listings and
// peek, ctl/redrive.cc redrive, move and requeue. Exit codes: 0 success, 1 the broker refused
// or failed, 2 bad usage, 3 cannot connect.
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/password.h"
#include "ctl/ctl.h"
#include "wharf/client.h"

namespace wharf::ctl {

constexpr const char* kUsage =
    R"(usage: wharfctl [--server HOST:PORT] [--user U --password P] COMMAND [ARGS]

Without --user, wharfctl logs in as the built-in loopback user (guest).
Default server: 127.0.0.1:5680.

Commands:
  queues [--prefix P] [--json]          list queues: ready, delayed, in flight, consumers, age
                                        of the oldest ready message, publish/deliver/ack
                                        rates (5 s window), dead-letter target
  queue show QUEUE [--json]             one queue's figures and arguments
  exchanges [--json]                    list exchanges
  bindings [--exchange E] [--queue Q] [--json]
                                        list bindings (from E, to Q)
  consumers [QUEUE] [--json]            list consumers (of QUEUE): tag, connection, user,
                                        prefetch, unacked deliveries, lease
  connections [--json]                  list connections: id, user, address, since when,
                                        consumers, unacked deliveries, pending receives
  declare-queue NAME [--transient] [--exclusive] [--auto-delete]
  delete-queue NAME [--if-unused] [--if-empty]
  purge QUEUE [--no-wait] [--json]      remove QUEUE's ready and delayed messages (not those
                                        in flight); waits while a large purge is removed from
                                        the disk, with a progress bar on a terminal
  purge-queue NAME [--no-wait] [--json] the same as purge
  declare-exchange NAME TYPE [--transient] [--auto-delete] [--alternate EXCHANGE]
                                        TYPE is direct, fanout, topic or headers
  delete-exchange NAME [--if-unused]
  bind QUEUE EXCHANGE [KEY] [--header K=V]... [--match all|any]
  unbind QUEUE EXCHANGE [KEY] [--header K=V]... [--match all|any]
  bind-exchange DESTINATION SOURCE [KEY] [--header K=V]... [--match all|any]
                                        route what SOURCE matches on into exchange DESTINATION
  unbind-exchange DESTINATION SOURCE [KEY] [--header K=V]... [--match all|any]
  publish EXCHANGE ROUTING_KEY [BODY] [--persistent] [--mandatory] [--header K=V]...
          [--count N] [--content-type T] [--ttl MS] [--delay MS | --deliver-at TIME]
                                        BODY '-' or absent: read it from stdin; TIME is Unix
                                        ms or UTC like 2027-01-31T08:00:00Z
  consume QUEUE [--count N] [--wait SECONDS] [--requeue] [--json]
                                        take up to N messages (default 1), print and ack them
                                        (--requeue: nack them back instead)
  get QUEUE [...]                       the same as consume (RabbitMQ's basic.get)
  delayed list QUEUE [-n N] [--after DUE_MS:ID] [--json]
                                        delayed messages of QUEUE, soonest first, N per page
                                        (default 20); --after continues from a listed one
  delayed cancel QUEUE ID               cancel a delayed message (ID in hex, as published)
  peek QUEUE [-n N] [--after POS] [--no-body] [--json]
                                        browse QUEUE's ready messages in delivery order (N per
                                        page, default 20) with their counters and death
                                        records, taking none: no receive count, lease or
                                        order changes; --after continues from a listed POS
  redrive DLQ [--to QUEUE] [--reason R] [--limit N] [--rate N] [--dry-run] [--follow] [--json]
                                        move a dead-letter queue's messages back to the queue
                                        each died in (or to QUEUE), at most N per second
                                        (default 1000); R is rejected, max_attempts, expired
                                        or max_length; --dry-run counts what would move;
                                        --follow shows it to the end ('redrive start DLQ' for
                                        a queue named status or cancel)
  redrive status [DLQ] [--json]         the last redrive of DLQ, or of every queue
  redrive cancel DLQ                    stop a running redrive (what moved stays moved)
  move SRC --to DST [--limit N] [--rate N] [--json]
                                        move SRC's ready messages to DST in order, inside the
                                        broker (exactly once, survives restarts; shows progress)
  requeue QUEUE ID [--to DST] [--json]  move one ready message by id (hex) back to the queue it
                                        died in, or to DST
  users [--json]                        list users (admins only)
  add-user NAME [--admin] [--new-password P]
                                        create or replace a user kept by the broker (admins
                                        only); the password is read from stdin when absent
                                        and only its hash is sent
  delete-user NAME                      delete a user made with add-user (admins only)
  hash-password [PASSWORD]              print a password_hash for the config (stdin if absent)
)";

const std::vector<std::string> kValueOptions = {
    "--prefix", "--alternate",    "--match",  "--count",      "--wait",     "--content-type",
    "--ttl",    "--new-password", "--delay",  "--deliver-at", "-n",         "--after",
    "--to",     "--rate",         "--reason", "--limit",      "--exchange", "--queue"};

bool ParseArgs(const std::vector<std::string>& in, Args* out, std::string* error) {
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string& a = in[i];
    if (a == "--header") {
      if (i + 1 >= in.size()) return *error = "--header needs K=V", false;
      out->headers.push_back(in[++i]);
    } else if (std::find(kValueOptions.begin(), kValueOptions.end(), a) != kValueOptions.end()) {
      if (i + 1 >= in.size()) return *error = a + " needs a value", false;
      out->options[a] = in[++i];
    } else if (a.starts_with("--") && a.size() > 2) {
      out->flags[a] = true;
    } else {
      out->positional.push_back(a);
    }
  }
  return true;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// K=V: V is an integer if it parses as one, true/false as bool, else a string.
bool ParseHeader(const std::string& kv, wharf::Headers* headers, std::string* error) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) return *error = "header '" + kv + "' is not K=V", false;
  std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
  char* end = nullptr;
  long long n = std::strtoll(value.c_str(), &end, 10);
  if (!value.empty() && end && *end == '\0') {
    (*headers)[key] = static_cast<int64_t>(n);
  } else if (value == "true" || value == "false") {
    (*headers)[key] = value == "true";
  } else {
    (*headers)[key] = value;
  }
  return true;
}

int Refused(const wharf::Status& status) {
  std::fprintf(stderr, "wharfctl: %s\n", status.ToString().c_str());
  return 1;
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "wharfctl: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

// `wharfctl COMMAND --help`: that command's lines of the usage text.
int CommandHelp(const std::string& command) {
  std::string out;
  bool in_command = false;
  size_t start = 0;
  const std::string usage = kUsage;
  while (start < usage.size()) {
    size_t end = usage.find('\n', start);
    if (end == std::string::npos) end = usage.size();
    std::string line = usage.substr(start, end - start);
    start = end + 1;
    const bool continuation = line.starts_with("        ");  // wrapped text or options
    if (!continuation) {
      in_command = line.starts_with("  " + command + " ") || line == "  " + command;
    }
    if (in_command) out += line + "\n";
  }
  if (out.empty()) return Usage("unknown command '" + command + "'");
  std::printf("usage: wharfctl [--server HOST:PORT] [--user U --password P] ...\n\n%s",
              out.c_str());
  return 0;
}

int HashPassword(const Args& args) {
  std::string password;
  if (!args.positional.empty()) {
    password = args.positional[0];
  } else {
    std::getline(std::cin, password);
  }
  if (password.empty()) return Usage("hash-password needs a non-empty password");
  std::puts(wharf::HashPassword(password).c_str());
  return 0;
}

// Unix ms, or YYYY-MM-DDTHH:MM:SS[.mmm]Z (UTC).
std::optional<int64_t> ParseTime(const std::string& text) {
  char* end = nullptr;
  long long ms = std::strtoll(text.c_str(), &end, 10);
  if (!text.empty() && end && *end == '\0') return ms;
  std::tm tm{};
  int millis = 0;
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return std::nullopt;
  if (*rest == '.') {
    if (!std::isdigit(static_cast<unsigned char>(rest[1])) ||
        !std::isdigit(static_cast<unsigned char>(rest[2])) ||
        !std::isdigit(static_cast<unsigned char>(rest[3]))) {
      return std::nullopt;
    }
    millis = (rest[1] - '0') * 100 + (rest[2] - '0') * 10 + (rest[3] - '0');
    rest += 4;
  }
  if (std::string_view(rest) != "Z") return std::nullopt;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + millis;
}

std::string FormatTime(int64_t ms) {
  // Floor division, so times before 1970 keep a positive millisecond part.
  int64_t floor_seconds = ms / 1000 - (ms % 1000 < 0 ? 1 : 0);
  int millis = static_cast<int>(ms - floor_seconds * 1000);
  std::time_t seconds = static_cast<std::time_t>(floor_seconds);
  std::tm tm{};
  if (!gmtime_r(&seconds, &tm)) return std::to_string(ms) + " ms";
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, millis);
  return out;
}

std::optional<uint64_t> ParseMessageId(std::string text) {
  if (text.starts_with("0x")) text = text.substr(2);
  if (text.empty() || text.size() > 16) return std::nullopt;
  char* end = nullptr;
  unsigned long long id = std::strtoull(text.c_str(), &end, 16);
  if (!end || *end != '\0') return std::nullopt;
  return id;
}

int Delayed(wharf::Client& client, const Args& args) {
  const auto& p = args.positional;
  if (p.size() < 2 || (p[0] != "list" && p[0] != "cancel")) {
    return Usage("delayed needs 'list QUEUE' or 'cancel QUEUE ID'");
  }
  const std::string& queue = p[1];
  if (p[0] == "cancel") {
    if (p.size() < 3) return Usage("delayed cancel needs QUEUE ID");
    auto id = ParseMessageId(p[2]);
    if (!id) return Usage("message id '" + p[2] + "' is not a hex id like 0190a3c5e2f40001");
    auto cancelled = client.CancelDelayed(queue, *id);
    if (!cancelled.ok()) return Refused(cancelled.status());
    if (!*cancelled) {
      std::fprintf(stderr,
                   "wharfctl: message %016llx is not waiting in queue '%s' (delivered already, "
                   "cancelled before, or not delayed there)\n",
                   static_cast<unsigned long long>(*id), queue.c_str());
      return 1;
    }
    std::printf("cancelled message %016llx in queue '%s'\n", static_cast<unsigned long long>(*id),
                queue.c_str());
    return 0;
  }
  uint32_t limit = args.options.count("-n") ? std::stoul(args.options.at("-n")) : 20;
  int64_t after_due = 0;
  uint64_t after_id = 0;
  if (args.options.count("--after")) {
    const std::string& after = args.options.at("--after");
    size_t colon = after.find(':');
    auto id = colon == std::string::npos ? std::nullopt : ParseMessageId(after.substr(colon + 1));
    if (!id) return Usage("--after needs DUE_MS:ID, as the last line of a listing shows");
    after_due = std::stoll(after.substr(0, colon));
    after_id = *id;
  }
  auto page = client.ListDelayed(queue, after_due, after_id, limit);
  if (!page.ok()) return Refused(page.status());
  if (args.flags.count("--json")) {
    std::string out = "{\"messages\":[";
    for (size_t i = 0; i < page->messages.size(); ++i) {
      const auto& m = page->messages[i];
      char id[24];
      std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(m.message.id));
      out += (i ? ",\n " : "") + std::string("{\"message_id\":\"") + id +
             "\",\"deliver_at_ms\":" + std::to_string(m.deliver_at_ms) +
             ",\"deliver_at\":" + JsonString(FormatTime(m.deliver_at_ms)) +
             ",\"body_bytes\":" + std::to_string(m.body_bytes) +
             ",\"persistent\":" + (m.message.persistent ? "true" : "false") +
             ",\"receive_count\":" + std::to_string(m.receive_count) +
             ",\"exchange\":" + JsonString(m.exchange) +
             ",\"routing_key\":" + JsonString(m.routing_key) + "}";
    }
    char next[24];
    std::snprintf(next, sizeof next, "%016llx",
                  static_cast<unsigned long long>(page->next_after_message_id));
    out += std::string("],\"more\":") + (page->more ? "true" : "false") + ",\"next_after\":\"" +
           std::to_string(page->next_after_deliver_at_ms) + ":" + next + "\"}";
    std::puts(out.c_str());
    return 0;
  }
  std::printf("%-16s  %-24s %10s  %s\n", "MESSAGE_ID", "DELIVER_AT (UTC)", "BYTES", "ROUTING_KEY");
  for (const auto& m : page->messages) {
    std::printf("%016llx  %-24s %10llu  %s\n", static_cast<unsigned long long>(m.message.id),
                FormatTime(m.deliver_at_ms).c_str(), static_cast<unsigned long long>(m.body_bytes),
                m.routing_key.c_str());
  }
  if (page->more) {
    std::printf("more: wharfctl delayed list %s --after %lld:%016llx\n", queue.c_str(),
                static_cast<long long>(page->next_after_deliver_at_ms),
                static_cast<unsigned long long>(page->next_after_message_id));
  }
  return 0;
}

int ListExchanges(wharf::Client& client, const Args& args) {
  auto exchanges = client.ListExchanges();
  if (!exchanges.ok()) return Refused(exchanges.status());
  bool json = args.flags.count("--json") > 0;
  std::string out = "[";
  if (!json) std::printf("%-32s %-8s %8s  %s\n", "NAME", "TYPE", "BINDINGS", "FLAGS");
  for (size_t i = 0; i < exchanges->size(); ++i) {
    const auto& e = (*exchanges)[i];
    std::string type(wharf::ExchangeTypeName(e.type));
    if (json) {
      out += (i ? ",\n " : "") + std::string("{\"name\":") + JsonString(e.name) +
             ",\"type\":" + JsonString(type) + ",\"durable\":" + (e.durable ? "true" : "false") +
             ",\"bindings\":" + std::to_string(e.bindings) +
             ",\"alternate_exchange\":" + JsonString(e.alternate_exchange) + "}";
    } else {
      std::string flags = e.durable ? "durable" : "transient";
      if (e.auto_delete) flags += ",auto-delete";
      if (!e.alternate_exchange.empty()) flags += ",alternate=" + e.alternate_exchange;
      std::printf("%-32s %-8s %8u  %s\n", e.name.empty() ? "(default)" : e.name.c_str(),
                  type.c_str(), e.bindings, flags.c_str());
    }
  }
  if (json) std::puts((out + "]").c_str());
  return 0;
}

// bind QUEUE EXCHANGE [KEY], or with to_exchange: bind-exchange DESTINATION SOURCE [KEY].
int Binding(wharf::Client& client, const Args& args, bool bind, bool to_exchange = false) {
  if (args.positional.size() < 2) {
    return Usage(to_exchange ? "bind-exchange/unbind-exchange need DESTINATION SOURCE [KEY]"
                             : "bind/unbind need QUEUE EXCHANGE [KEY]");
  }
  wharf::BindingSpec spec;
  (to_exchange ? spec.destination_exchange : spec.queue) = args.positional[0];
  spec.exchange = args.positional[1];
  if (args.positional.size() > 2) spec.routing_key = args.positional[2];
  std::string error;
  for (const auto& h : args.headers) {
    if (!ParseHeader(h, &spec.arguments, &error)) return Usage(error);
  }
  if (args.options.count("--match")) spec.arguments["x-match"] = args.options.at("--match");
  wharf::Status s = bind ? client.Bind(spec) : client.Unbind(spec);
  if (!s.ok()) return Refused(s);
  std::printf("%s %s '%s' %s exchange '%s' with key '%s'\n", bind ? "bound" : "unbound",
              to_exchange ? "exchange" : "queue", args.positional[0].c_str(), bind ? "to" : "from",
              spec.exchange.c_str(), spec.routing_key.c_str());
  return 0;
}

int Publish(wharf::Client& client, const Args& args) {
  if (args.positional.size() < 2) return Usage("publish needs EXCHANGE ROUTING_KEY [BODY]");
  wharf::Message message;
  if (args.positional.size() > 2 && args.positional[2] != "-") {
    message.body = args.positional[2];
  } else {
    message.body.assign(std::istreambuf_iterator<char>(std::cin), {});
  }
  message.persistent = args.flags.count("--persistent") > 0;
  std::string error;
  for (const auto& h : args.headers) {
    if (!ParseHeader(h, &message.headers, &error)) return Usage(error);
  }
  if (args.options.count("--content-type")) {
    message.properties.content_type = args.options.at("--content-type");
  }
  if (args.options.count("--ttl")) {
    message.properties.expiration_ms = std::stoull(args.options.at("--ttl"));
  }
  wharf::PublishOptions options;
  options.mandatory = args.flags.count("--mandatory") > 0;
  if (args.options.count("--delay")) options.delay_ms = std::stoull(args.options.at("--delay"));
  if (args.options.count("--deliver-at")) {
    auto at = ParseTime(args.options.at("--deliver-at"));
    if (!at) return Usage("--deliver-at needs Unix ms or a UTC time like 2027-01-31T08:00:00Z");
    options.deliver_at_ms = *at;
  }
  bool returned = false;
  client.SetReturnHandler([&returned](wharf::ReturnedMessage r) {
    returned = true;
    std::fprintf(stderr, "wharfctl: message returned: %s\n", r.reason.ToString().c_str());
  });
  long count = args.options.count("--count") ? std::stol(args.options.at("--count")) : 1;
  std::vector<std::future<wharf::Result<wharf::PublishResult>>> confirms;
  for (long i = 0; i < count; ++i) {
    confirms.push_back(
        client.PublishAsync(args.positional[0], args.positional[1], message, options));
  }
  uint64_t routed_nowhere = 0;
  for (auto& f : confirms) {
    auto r = f.get();
    if (!r.ok()) return Refused(r.status());
    if (r->routed_queues == 0) ++routed_nowhere;
    if (count == 1) {
      std::printf("published message %016llx to %u queue(s)\n",
                  static_cast<unsigned long long>(r->message_id), r->routed_queues);
    }
  }
  if (count != 1) std::printf("published %ld messages\n", count);
  if (routed_nowhere > 0) {
    std::fprintf(stderr, "wharfctl: %llu message(s) reached no queue%s\n",
                 static_cast<unsigned long long>(routed_nowhere),
                 returned ? " and were returned" : "");
  }
  return 0;
}

int Consume(wharf::Client& client, const Args& args) {
  if (args.positional.empty()) return Usage("consume needs QUEUE");
  long count = args.options.count("--count") ? std::stol(args.options.at("--count")) : 1;
  double wait_s = args.options.count("--wait") ? std::stod(args.options.at("--wait")) : 1.0;
  bool json = args.flags.count("--json") > 0;
  bool requeue = args.flags.count("--requeue") > 0;
  long taken = 0;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<long>(wait_s * 1000));
  while (taken < count) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) left = std::chrono::milliseconds(0);
    auto batch = client.Receive(args.positional[0],
                                static_cast<uint32_t>(std::min<long>(count - taken, 1000)), left);
    if (!batch.ok()) return Refused(batch.status());
    if (batch->empty()) break;
    for (const auto& d : *batch) {
      if (json) {
        const std::string headers = HeadersJson(d.message.headers);
        const std::string deaths = DeathsJson(d.message.deaths);
        std::printf(
            "{\"message_id\":\"%016llx\",\"queue\":%s,\"exchange\":%s,\"routing_key\":%s,"
            "\"receive_count\":%u,\"redelivered\":%s,\"failure_count\":%u,\"last_error\":%s,"
            "\"deaths\":%s,\"headers\":%s,\"body\":%s}\n",
            static_cast<unsigned long long>(d.message.id), JsonString(d.queue).c_str(),
            JsonString(d.exchange).c_str(), JsonString(d.routing_key).c_str(), d.receive_count,
            d.redelivered ? "true" : "false", d.failure_count, JsonString(d.last_error).c_str(),
            deaths.c_str(), headers.c_str(), JsonString(d.message.body).c_str());
      } else {
        std::printf("%s\n", d.message.body.c_str());
      }
      wharf::NackOptions back;
      back.immediate = true;  // at once, at its position: wharfctl only looked
      wharf::Status s =
          requeue ? client.NackSync(d.delivery_tag, back) : client.AckSync(d.delivery_tag);
      if (!s.ok()) return Refused(s);
      ++taken;
    }
  }
  if (taken == 0)
    std::fprintf(stderr, "wharfctl: no message in queue '%s'\n", args.positional[0].c_str());
  return 0;
}

int RunCommand(wharf::Client& client, const std::string& command, const Args& args) {
  const auto& p = args.positional;
  if (command == "queues") return ListQueues(client, args);
  if (command == "exchanges") return ListExchanges(client, args);
  if (command == "declare-queue") {
    if (p.empty()) return Usage("declare-queue needs NAME");
    wharf::QueueSpec spec;
    spec.name = p[0];
    spec.durable = !args.flags.count("--transient");
    spec.exclusive = args.flags.count("--exclusive") > 0;
    spec.auto_delete = args.flags.count("--auto-delete") > 0;
    auto info = client.DeclareQueue(spec);
    if (!info.ok()) return Refused(info.status());
    std::printf("queue '%s' declared (ready %llu, consumers %u)\n", info->name.c_str(),
                static_cast<unsigned long long>(info->ready), info->consumers);
    return 0;
  }
  if (command == "delete-queue") {
    if (p.empty()) return Usage("delete-queue needs NAME");
    auto n = client.DeleteQueue(p[0], args.flags.count("--if-unused") > 0,
                                args.flags.count("--if-empty") > 0);
    if (!n.ok()) return Refused(n.status());
    std::printf("queue '%s' deleted with %llu messages\n", p[0].c_str(),
                static_cast<unsigned long long>(*n));
    return 0;
  }
  if (command == "purge-queue" || command == "purge") return Purge(client, args);
  if (command == "declare-exchange") {
    if (p.size() < 2) return Usage("declare-exchange needs NAME TYPE");
    auto type = wharf::ParseExchangeType(p[1]);
    if (!type) return Usage("exchange type must be direct, fanout, topic or headers");
    wharf::ExchangeSpec spec;
    spec.name = p[0];
    spec.type = *type;
    spec.durable = !args.flags.count("--transient");
    spec.auto_delete = args.flags.count("--auto-delete") > 0;
    if (args.options.count("--alternate")) spec.alternate_exchange = args.options.at("--alternate");
    wharf::Status s = client.DeclareExchange(spec);
    if (!s.ok()) return Refused(s);
    std::printf("exchange '%s' (%s) declared\n", spec.name.c_str(), p[1].c_str());
    return 0;
  }
  if (command == "delete-exchange") {
    if (p.empty()) return Usage("delete-exchange needs NAME");
    wharf::Status s = client.DeleteExchange(p[0], args.flags.count("--if-unused") > 0);
    if (!s.ok()) return Refused(s);
    std::printf("exchange '%s' deleted\n", p[0].c_str());
    return 0;
  }
  if (command == "bind") return Binding(client, args, true);
  if (command == "unbind") return Binding(client, args, false);
  if (command == "bind-exchange") return Binding(client, args, true, true);
  if (command == "unbind-exchange") return Binding(client, args, false, true);
  if (command == "users") {
    auto users = client.ListUsers();
    if (!users.ok()) return Refused(users.status());
    if (args.flags.count("--json")) {
      std::string out = "[";
      for (size_t i = 0; i < users->size(); ++i) {
        const auto& u = (*users)[i];
        out += (i ? ",\n " : "") + std::string("{\"name\":") + JsonString(u.name) +
               ",\"admin\":" + (u.admin ? "true" : "false") +
               ",\"source\":" + JsonString(u.source) + "}";
      }
      std::printf("%s]\n", out.c_str());
      return 0;
    }
    std::printf("%-32s %-6s %s\n", "NAME", "ADMIN", "SOURCE");
    for (const auto& u : *users) {
      std::printf("%-32s %-6s %s\n", u.name.c_str(), u.admin ? "yes" : "no", u.source.c_str());
    }
    return 0;
  }
  if (command == "add-user") {
    if (p.empty()) return Usage("add-user needs NAME");
    std::string password;
    if (args.options.count("--new-password")) {
      password = args.options.at("--new-password");
    } else {
      std::getline(std::cin, password);
    }
    if (password.empty()) return Usage("add-user needs a non-empty password");
    wharf::Status s =
        client.PutUser(p[0], wharf::HashPassword(password), args.flags.count("--admin") > 0);
    if (!s.ok()) return Refused(s);
    std::printf("user '%s' saved%s\n", p[0].c_str(), args.flags.count("--admin") ? " (admin)" : "");
    return 0;
  }
  if (command == "delete-user") {
    if (p.empty()) return Usage("delete-user needs NAME");
    wharf::Status s = client.DeleteUser(p[0]);
    if (!s.ok()) return Refused(s);
    std::printf("user '%s' deleted\n", p[0].c_str());
    return 0;
  }
  if (command == "publish") return Publish(client, args);
  if (command == "delayed") return Delayed(client, args);
  if (command == "redrive") return Redrive(client, args);
  if (command == "peek") return Peek(client, args);
  if (command == "queue") return ShowQueue(client, args);
  if (command == "bindings") return ListBindings(client, args);
  if (command == "consumers") return ListConsumers(client, args);
  if (command == "connections") return ListConnections(client, args);
  if (command == "move") return MoveMessages(client, args, /*one=*/false);
  if (command == "requeue") return MoveMessages(client, args, /*one=*/true);
  if (command == "consume" || command == "get") return Consume(client, args);
  return Usage("unknown command '" + command + "'");
}

}  // namespace wharf::ctl

int main(int argc, char** argv) {
  using namespace wharf::ctl;
  wharf::ClientOptions options;
  options.client_name = "wharfctl";
  std::vector<std::string> rest;
  bool user_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (rest.empty() && (a == "--help" || a == "-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (rest.empty() && a == "--server") {
      const char* v = value();
      if (!v) return Usage("--server needs HOST:PORT");
      std::string server = v;
      size_t colon = server.rfind(':');
      if (colon == std::string::npos) return Usage("--server needs HOST:PORT");
      options.host = server.substr(0, colon);
      try {
        options.port = static_cast<uint16_t>(std::stoi(server.substr(colon + 1)));
      } catch (...) {
        return Usage("--server needs HOST:PORT");
      }
    } else if (rest.empty() && a == "--user") {
      const char* v = value();
      if (!v) return Usage("--user needs a value");
      options.user = v;
      user_given = true;
    } else if (rest.empty() && a == "--password") {
      const char* v = value();
      if (!v) return Usage("--password needs a value");
      options.password = v;
    } else {
      rest.push_back(a);
    }
  }
  if (rest.empty()) return Usage("no command given");
  std::string command = rest[0];
  Args args;
  std::string error;
  if (!ParseArgs({rest.begin() + 1, rest.end()}, &args, &error)) return Usage(error);
  if (args.flags.count("--help") || args.flags.count("-h")) return CommandHelp(command);
  if (command == "hash-password") return HashPassword(args);
  if (user_given && options.password == "guest" && options.user != "guest") {
    return Usage("--user needs --password");
  }
  try {
    auto client = wharf::Client::Connect(options);
    if (!client.ok()) {
      std::fprintf(stderr, "wharfctl: %s\n", client.status().ToString().c_str());
      return client.status().code() == wharf::StatusCode::kUnavailable ? 3 : 1;
    }
    int rc = RunCommand(**client, command, args);
    (*client)->Close();
    return rc;
  } catch (const std::exception& e) {
    return Usage(std::string("bad argument: ") + e.what());
  }
}
