// wharfctl publish, consume (get), delayed list and delayed cancel: messages in and out.
// Bodies are bytes: what is read is published as it is, and what is consumed is written as it
// is and acked only once stdout has taken all of it (docs/operations.md, "wharfctl").
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/base64.h"
#include "ctl/ctl.h"
#include "ctl/json.h"

namespace wharf::ctl {
namespace {

constexpr uint64_t kMaxMs = uint64_t{1} << 62;

struct PublishOptionsCli {
  std::string exchange, routing_key, body;
  bool body_given = false;
  std::string body_file, message_file, payload_encoding = "string";
  bool persistent = false, mandatory = false, json = false;
  std::vector<std::string> headers;
  uint64_t count = 1;
  std::string content_type;
  uint64_t ttl_ms = 0, delay_ms = 0;
  std::string deliver_at;
};

// --message: one message object, an array of them, or one object a line (what consume --json
// prints; peek --json's "messages" array too).
bool ParseMessages(const std::string& text, std::vector<Json>* out, std::string* error) {
  try {
    Json doc = Json::parse(text);
    if (doc.is_array()) {
      for (Json& m : doc) out->push_back(std::move(m));
    } else if (doc.is_object() && doc.contains("messages") && doc["messages"].is_array()) {
      for (Json& m : doc["messages"]) out->push_back(std::move(m));
    } else {
      out->push_back(std::move(doc));
    }
    return true;
  } catch (const Json::parse_error&) {
  }
  std::istringstream lines(text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out->push_back(Json::parse(line));
    } catch (const Json::parse_error& e) {
      *error = "--message: line " + std::to_string(n) + " is not JSON: " + e.what();
      return false;
    }
  }
  return true;
}

// The messages to publish with their exchange and routing key; the problem in `error`.
struct Outgoing {
  std::string exchange, routing_key;
  Message message;
};

bool BuildMessages(const PublishOptionsCli& o, std::vector<Outgoing>* out, std::string* error) {
  Headers extra;
  for (const std::string& h : o.headers) {
    if (!ParseTypedValue(h, &extra, error)) return *error = "--header " + *error, false;
  }
  auto finish = [&](Outgoing& m) {
    for (const auto& [k, v] : extra) m.message.headers[k] = v;
    if (o.persistent) m.message.persistent = true;
    if (!o.content_type.empty()) m.message.properties.content_type = o.content_type;
    if (o.ttl_ms) m.message.properties.expiration_ms = o.ttl_ms;
  };
  if (!o.message_file.empty()) {
    std::string text;
    std::vector<Json> docs;
    if (!ReadInput(o.message_file, &text, error) || !ParseMessages(text, &docs, error))
      return false;
    if (docs.empty()) return *error = "--message: no message in the input", false;
    for (size_t i = 0; i < docs.size(); ++i) {
      auto message = MessageFromJson(docs[i]);
      if (!message.ok()) {
        *error = "--message: message " + std::to_string(i + 1) + ": " +
                 std::string(message.status().message());
        return false;
      }
      Outgoing m{o.exchange, o.routing_key, std::move(*message)};
      // Without EXCHANGE and ROUTING_KEY, each goes back where it was published.
      if (o.exchange.empty() && o.routing_key.empty() && docs[i].is_object()) {
        m.exchange = docs[i].value("exchange", "");
        m.routing_key = docs[i].value("routing_key", "");
      }
      finish(m);
      out->push_back(std::move(m));
    }
    return true;
  }
  Outgoing m{o.exchange, o.routing_key, {}};
  if (!o.body_file.empty()) {
    if (!ReadInput(o.body_file, &m.message.body, error)) return false;
  } else if (o.body_given && o.body != "-") {
    m.message.body = o.body;
  } else {
    m.message.body = ReadAll(std::cin);
  }
  if (o.payload_encoding == "base64") {
    // As base64(1) writes it too: lines of 76, a final newline.
    std::string text;
    for (char ch : m.message.body) {
      if (ch != '\n' && ch != '\r' && ch != ' ' && ch != '\t') text += ch;
    }
    auto bytes = Base64Decode(text);
    if (!bytes) return *error = "the body is not valid base64 (--payload-encoding base64)", false;
    m.message.body = std::move(*bytes);
  }
  finish(m);
  out->push_back(std::move(m));
  return true;
}

int Publish(Client& client, const PublishOptionsCli& o) {
  PublishOptions options;
  options.mandatory = o.mandatory;
  options.delay_ms = o.delay_ms;
  if (!o.deliver_at.empty()) {
    auto at = ParseTime(o.deliver_at);
    if (!at) return Usage("--deliver-at needs Unix ms or a UTC time like 2027-01-31T08:00:00Z");
    options.deliver_at_ms = *at;
  }
  std::vector<Outgoing> messages;
  std::string error;
  if (!BuildMessages(o, &messages, &error)) return Usage(error);
  // Returns come on the client's thread, maybe after this function: shared, not on the stack.
  auto returned = std::make_shared<std::atomic<uint64_t>>(0);
  client.SetReturnHandler([returned](ReturnedMessage r) {
    ++*returned;
    std::fprintf(stderr, "wharfctl: message returned: %s\n",
                 Printable(r.reason.ToString()).c_str());
  });
  std::vector<std::future<Result<PublishResult>>> confirms;
  for (uint64_t i = 0; i < o.count; ++i) {
    for (const Outgoing& m : messages) {
      confirms.push_back(client.PublishAsync(m.exchange, m.routing_key, m.message, options));
    }
  }
  uint64_t routed_nowhere = 0;
  Json ids = Json::array();
  for (auto& f : confirms) {
    auto r = f.get();
    if (!r.ok()) return Refused(r.status());
    if (r->routed_queues == 0) ++routed_nowhere;
    if (o.json) {
      ids.push_back(
          Json{{"message_id", HexId(r->message_id)}, {"routed_queues", r->routed_queues}});
    } else if (confirms.size() == 1) {
      std::printf("published message %s to %u queue(s)\n", HexId(r->message_id).c_str(),
                  r->routed_queues);
    }
  }
  if (o.json) {
    if (int rc = PrintJson(Json{{"published", ids}}); rc != kExitOk) return rc;
  } else if (confirms.size() != 1) {
    std::printf("published %zu messages\n", confirms.size());
  }
  if (routed_nowhere > 0) {
    std::fprintf(stderr, "wharfctl: %llu message(s) reached no queue%s\n",
                 static_cast<unsigned long long>(routed_nowhere),
                 returned->load() > 0 ? " and were returned" : "");
  }
  return kExitOk;
}

struct ConsumeOptions {
  std::string queue;
  uint64_t count = 1;
  double wait_s = 1.0;
  bool requeue = false, json = false, raw = false;
  std::string separator;
  bool separator_given = false;
};

// --requeue: a look that takes nothing, through Peek: no receive is counted, no lease taken,
// nothing moves (a taken-and-nacked message would count toward x-max-attempts).
int Look(Client& client, const ConsumeOptions& o, const std::string& separator) {
  uint64_t shown = 0, after = 0;
  while (shown < o.count) {
    auto page = client.Peek(o.queue, after,
                            static_cast<uint32_t>(std::min<uint64_t>(o.count - shown, 1000)), true);
    if (!page.ok()) return Refused(page.status());
    for (const PeekedMessage& m : page->messages) {
      std::string error;
      const std::string record =
          o.json ? Dump(PeekedJson(o.queue, m, true), false) + "\n" : m.message.body + separator;
      if (!WriteOut(record, &error)) {
        std::fprintf(stderr, "wharfctl: cannot write to stdout: %s\n", error.c_str());
        return kExitRefused;
      }
      ++shown;
    }
    if (!page->more || page->messages.empty()) break;
    after = page->next_after;
  }
  if (shown == 0)
    std::fprintf(stderr, "wharfctl: no ready message in queue '%s'\n", Printable(o.queue).c_str());
  return kExitOk;
}

// Takes one message at a time, writes it, and acks it once written: a failed write puts back
// that one message, not a batch.
int Consume(Client& client, const ConsumeOptions& o) {
  const std::string separator =
      o.separator_given ? *ParseSeparator(o.separator) : (o.raw ? "" : "\n");
  if (o.requeue) return Look(client, o, separator);
  uint64_t taken = 0;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(o.wait_s * 1000));
  while (taken < o.count) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) left = std::chrono::milliseconds(0);
    auto one = client.Receive(o.queue, 1, left);
    if (!one.ok()) return Refused(one.status());
    if (one->empty()) break;
    const Delivery& d = one->front();
    const std::string record =
        o.json ? Dump(DeliveryJson(d), false) + "\n" : d.message.body + separator;
    std::string error;
    if (!WriteOut(record, &error)) {
      // Not written, so not acked: back at once, with why. (It was delivered: that receive
      // counts, as a consumer that crashed on it would.)
      NackOptions back;
      back.immediate = true;
      back.error = "wharfctl could not write it to stdout: " + error;
      const bool nacked = client.NackSync(d.delivery_tag, back).ok();  // else the close returns it
      std::fprintf(stderr,
                   "wharfctl: cannot write message %s to stdout (%s): not acked, %s queue '%s' "
                   "(its receive count stays counted)\n",
                   HexId(d.message.id).c_str(), error.c_str(),
                   nacked ? "put back at once in" : "it goes back to", Printable(o.queue).c_str());
      return kExitRefused;
    }
    if (Status s = client.AckSync(d.delivery_tag); !s.ok()) return Refused(s);
    ++taken;
  }
  if (taken == 0)
    std::fprintf(stderr, "wharfctl: no message in queue '%s'\n", Printable(o.queue).c_str());
  return kExitOk;
}

struct DelayedOptions {
  std::string queue, id, after;
  uint32_t limit = 20;
  bool json = false;
};

int ListDelayed(Client& client, const DelayedOptions& o) {
  int64_t after_due = 0;
  uint64_t after_id = 0;
  if (!o.after.empty()) {
    const size_t colon = o.after.find(':');
    auto due = colon == std::string::npos ? std::nullopt : ParseTime(o.after.substr(0, colon));
    auto id = colon == std::string::npos ? std::nullopt : ParseMessageId(o.after.substr(colon + 1));
    if (!due || !id) return Usage("--after needs DUE_MS:ID, as the last line of a listing shows");
    after_due = *due;
    after_id = *id;
  }
  auto page = client.ListDelayed(o.queue, after_due, after_id, o.limit);
  if (!page.ok()) return Refused(page.status());
  const std::string next =
      std::to_string(page->next_after_deliver_at_ms) + ":" + HexId(page->next_after_message_id);
  if (o.json) {
    Json out{{"messages", Json::array()},
             {"more", page->more},
             {"next_after", page->more ? Json(next) : Json()}};
    for (const DelayedInfo& m : page->messages) out["messages"].push_back(DelayedJson(m));
    return PrintJson(out);
  }
  std::printf("%-16s  %-24s %9s  %s\n", "MESSAGE_ID", "DUE (UTC)", "BYTES", "ROUTING_KEY");
  for (const DelayedInfo& m : page->messages) {
    std::printf("%-16s  %-24s %9llu  %s\n", HexId(m.message.id).c_str(),
                FormatTime(m.deliver_at_ms).c_str(), static_cast<unsigned long long>(m.body_bytes),
                Printable(m.routing_key).c_str());
  }
  if (page->messages.empty())
    std::printf("(no delayed message in '%s')\n", Printable(o.queue).c_str());
  if (page->more) {
    std::printf("more: wharfctl delayed list %s --after %s\n", Printable(o.queue).c_str(),
                next.c_str());
  }
  return kExitOk;
}

int CancelDelayed(Client& client, const DelayedOptions& o) {
  auto id = ParseMessageId(o.id);
  if (!id) return Usage("message id '" + o.id + "' is not a hex id like 0190a3c5e2f40001");
  auto cancelled = client.CancelDelayed(o.queue, *id);
  if (!cancelled.ok()) return Refused(cancelled.status());
  if (!*cancelled) {
    std::fprintf(stderr,
                 "wharfctl: message %s is not waiting in queue '%s' (delivered already, "
                 "cancelled before, or not delayed there)\n",
                 HexId(*id).c_str(), Printable(o.queue).c_str());
    return kExitRefused;
  }
  std::printf("cancelled message %s in queue '%s'\n", HexId(*id).c_str(),
              Printable(o.queue).c_str());
  return kExitOk;
}

}  // namespace

void AddMessageCommands(CLI::App& app, Commands& commands) {
  auto p = std::make_shared<PublishOptionsCli>();
  CLI::App* publish = app.add_subcommand(
      "publish", "publish a message (BODY, --body-file, stdin, or JSON messages with --message)");
  publish->add_option("exchange", p->exchange, "the exchange ('' is the default exchange)");
  publish->add_option("routing_key", p->routing_key, "the routing key");
  CLI::Option* body = publish->add_option("body", p->body, "the body; '-' or absent: stdin");
  CLI::Option* body_file =
      publish->add_option("--body-file", p->body_file, "read the body from FILE, as bytes");
  CLI::Option* message = publish->add_option(
      "--message", p->message_file,
      "publish the JSON message(s) in FILE ('-': stdin) as consume --json and peek --json print "
      "them: payload, payload_encoding, properties, headers, persistent; without EXCHANGE and "
      "ROUTING_KEY each goes to its own exchange and routing_key");
  body->excludes(body_file)->excludes(message);
  body_file->excludes(message);
  publish
      ->add_option("--payload-encoding", p->payload_encoding,
                   "how BODY (or the file, or stdin) is given: string (as it is) or base64")
      ->check(CLI::IsMember({"string", "base64"}))
      ->excludes(message);
  publish->add_flag("--persistent", p->persistent, "kept on disk: confirmed once synced");
  publish->add_flag("--mandatory", p->mandatory, "returned if it reaches no queue");
  publish->add_option("--header", p->headers, "a header K=V (repeatable; typed as --arg)")
      ->check(TypedValueText());
  publish->add_option("--count", p->count, "publish it N times")->check(Unsigned(1, 10'000'000));
  publish->add_option("--content-type", p->content_type, "the content type property");
  publish->add_option("--ttl", p->ttl_ms, "expire it MS after publish")->check(Unsigned(1, kMaxMs));
  CLI::Option* delay = publish->add_option("--delay", p->delay_ms, "deliver it MS from now")
                           ->check(Unsigned(0, kMaxMs));
  publish
      ->add_option("--deliver-at", p->deliver_at,
                   "deliver it from TIME: Unix ms or UTC like 2027-01-31T08:00:00Z")
      ->excludes(delay)
      ->check(TimeText());
  publish->add_flag("--json", p->json, "print the message ids as JSON");
  publish->callback([p, publish]() {
    if (p->message_file.empty() && publish->get_option("routing_key")->count() == 0) {
      throw CLI::ValidationError("publish needs EXCHANGE ROUTING_KEY [BODY] (or --message FILE)");
    }
  });
  commands.OnBroker(publish, [p, body](Client& client) {
    p->body_given = body->count() > 0;
    return Publish(client, *p);
  });

  auto c = std::make_shared<ConsumeOptions>();
  CLI::App* consume = app.add_subcommand(
      "consume", "take up to N messages, write each body to stdout and ack it once written");
  consume->alias("get");
  consume->add_option("queue", c->queue, "the queue")->required();
  consume->add_option("--count,-n", c->count, "at most N messages (default 1)")
      ->check(Unsigned(1, 1'000'000));
  consume->add_option("--wait", c->wait_s, "wait this long for them (default 1)")
      ->check(Finite(0, 3600));
  consume->add_flag("--requeue,--peek", c->requeue,
                    "only look: print them without taking any (a peek: no receive counted)");
  CLI::Option* json = consume->add_flag("--json", c->json,
                                        "one JSON object a line: the message with its headers, "
                                        "properties, counters and payload (base64 if binary)");
  consume->add_flag("--raw", c->raw, "the bodies' bytes only, nothing added between them")
      ->excludes(json);
  consume
      ->add_option("--separator", c->separator,
                   "written after each body (default a newline, none with --raw): text with "
                   "\\0, \\n, \\t, \\xHH")
      ->excludes(json)
      ->check(SeparatorText());
  consume->callback([c, consume]() {
    c->separator_given = consume->get_option("--separator")->count() > 0;
    if (c->raw && !c->separator_given && c->count > 1) {
      throw CLI::ValidationError(
          "--raw with --count above 1 needs --separator (e.g. --separator '\\0'), or the "
          "bodies run together");
    }
  });
  commands.OnBroker(consume, [c](Client& client) { return Consume(client, *c); });

  auto d = std::make_shared<DelayedOptions>();
  CLI::App* delayed = app.add_subcommand("delayed", "delayed messages: list, cancel");
  delayed->require_subcommand(1);
  CLI::App* list = delayed->add_subcommand("list", "QUEUE's delayed messages, soonest first");
  list->add_option("queue", d->queue, "the queue")->required();
  list->add_option("-n", d->limit, "per page (default 20)")->check(Unsigned(1, 1000));
  list->add_option("--after", d->after, "DUE_MS:ID: continue after a listed message")
      ->check(Check("DUE_MS:ID", [](const std::string& text) -> std::string {
        const size_t colon = text.find(':');
        if (colon != std::string::npos && ParseTime(text.substr(0, colon)) &&
            ParseMessageId(text.substr(colon + 1))) {
          return "";
        }
        return "'" + text + "' is not DUE_MS:ID, as the last line of a listing shows";
      }));
  list->add_flag("--json", d->json, "as JSON: {messages, more, next_after}");
  commands.OnBroker(list, [d](Client& client) { return ListDelayed(client, *d); });
  CLI::App* cancel = delayed->add_subcommand("cancel", "cancel a delayed message");
  cancel->add_option("queue", d->queue, "the queue")->required();
  cancel->add_option("id", d->id, "the message id, in hex as published")
      ->required()
      ->check(MessageIdText());
  commands.OnBroker(cancel, [d](Client& client) { return CancelDelayed(client, *d); });
}

}  // namespace wharf::ctl
