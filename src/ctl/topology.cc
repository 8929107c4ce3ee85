// wharfctl declare-queue, delete-queue, declare-exchange, delete-exchange, bind, unbind,
// bind-exchange, unbind-exchange: the broker's topology.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ctl/ctl.h"
#include "ctl/json.h"

namespace wharf::ctl {
namespace {

// --arg K=V (repeatable) and --arguments JSON into one table; the problem, or "".
std::string ReadArguments(const std::vector<std::string>& pairs, const std::string& json,
                          Headers* out) {
  if (!json.empty()) {
    Json doc;
    try {
      doc = Json::parse(json);
    } catch (const Json::parse_error& e) {
      return std::string("--arguments is not JSON: ") + e.what();
    }
    if (!doc.is_object()) return "--arguments must be a JSON object";
    auto headers = HeadersFromJson(doc);
    if (!headers.ok()) return "--arguments: " + std::string(headers.status().message());
    *out = std::move(*headers);
  }
  std::string error;
  for (const std::string& kv : pairs) {
    if (!ParseTypedValue(kv, out, &error)) return error;
  }
  return "";
}

struct QueueOptions {
  std::string name;
  bool transient = false, exclusive = false, auto_delete = false, json = false;
  std::vector<std::string> args;
  std::string arguments;
  bool if_unused = false, if_empty = false;
};

struct ExchangeOptions {
  std::string name, type, alternate;
  bool transient = false, auto_delete = false, if_unused = false;
};

struct BindingOptions {
  std::string destination, source, key, match;
  std::vector<std::string> headers;
};

void AddBindingCommand(CLI::App& app, Commands& commands, const std::string& name,
                       const std::string& description, bool bind, bool to_exchange) {
  auto o = std::make_shared<BindingOptions>();
  CLI::App* c = app.add_subcommand(name, description);
  c->add_option(to_exchange ? "destination" : "queue", o->destination,
                to_exchange ? "the exchange that receives" : "the queue")
      ->required();
  c->add_option("source", o->source, "the exchange that routes")->required();
  c->add_option("key", o->key, "routing key (a pattern for topic exchanges)");
  c->add_option("--header", o->headers, "K=V a headers exchange matches on (repeatable)")
      ->check(TypedValueText());
  c->add_option("--match", o->match, "headers exchanges: all or any of the headers")
      ->check(CLI::IsMember({"all", "any"}));
  commands.OnBroker(c, [o, bind, to_exchange](Client& client) {
    BindingSpec spec;
    (to_exchange ? spec.destination_exchange : spec.queue) = o->destination;
    spec.exchange = o->source;
    spec.routing_key = o->key;
    std::string error;
    for (const std::string& h : o->headers) {
      if (!ParseTypedValue(h, &spec.arguments, &error)) return Usage("--header " + error);
    }
    if (!o->match.empty()) spec.arguments["x-match"] = o->match;
    Status s = bind ? client.Bind(spec) : client.Unbind(spec);
    if (!s.ok()) return Refused(s);
    std::printf("%s %s '%s' %s exchange '%s' with key '%s'\n", bind ? "bound" : "unbound",
                to_exchange ? "exchange" : "queue", Printable(o->destination).c_str(),
                bind ? "to" : "from", Printable(spec.exchange).c_str(),
                Printable(spec.routing_key).c_str());
    return kExitOk;
  });
}

}  // namespace

void AddTopologyCommands(CLI::App& app, Commands& commands) {
  auto q = std::make_shared<QueueOptions>();
  CLI::App* declare =
      app.add_subcommand("declare-queue", "declare a queue (durable unless --transient)");
  declare->add_option("name", q->name, "the queue's name")->required();
  declare->add_flag("--transient", q->transient, "not kept across restarts");
  declare->add_flag("--exclusive", q->exclusive,
                    "owned by this connection (gone when wharfctl exits)");
  declare->add_flag("--auto-delete", q->auto_delete, "deleted when its last consumer goes");
  declare
      ->add_option("--arg", q->args,
                   "a queue argument K=V (repeatable), typed: 1000 is an integer, true a "
                   "boolean, K:string=1000 a string; e.g. x-max-length=1000, "
                   "x-dead-letter-queue=orders.dlq, x-lease-ms=30000, x-max-attempts=5")
      ->check(TypedValueText());
  declare
      ->add_option("--arguments", q->arguments,
                   "the arguments as a JSON object, e.g. '{\"x-max-length\": 1000}' (--arg "
                   "adds to it)")
      ->check(Check("JSON", [](const std::string& text) {
        Headers scratch;
        return ReadArguments({}, text, &scratch);
      }));
  declare->add_flag("--json", q->json, "print the queue as JSON");
  commands.OnBroker(declare, [q](Client& client) {
    QueueSpec spec;
    spec.name = q->name;
    spec.durable = !q->transient;
    spec.exclusive = q->exclusive;
    spec.auto_delete = q->auto_delete;
    if (std::string error = ReadArguments(q->args, q->arguments, &spec.arguments); !error.empty()) {
      return Usage(error);
    }
    auto info = client.DeclareQueue(spec);
    if (!info.ok()) return Refused(info.status());
    if (q->json) {
      // The declare's answer has the counts; the listing has the arguments as the broker took
      // them too.
      auto listed = client.ListQueues(info->name);
      if (listed.ok()) {
        for (const QueueInfo& one : *listed) {
          if (one.name == info->name) return PrintJson(QueueJson(one));
        }
      }
      return PrintJson(QueueJson(*info));
    }
    std::printf("queue '%s' declared (ready %llu, consumers %u)\n", Printable(info->name).c_str(),
                static_cast<unsigned long long>(info->ready), info->consumers);
    return kExitOk;
  });

  CLI::App* del = app.add_subcommand("delete-queue", "delete a queue and its messages");
  del->add_option("name", q->name, "the queue")->required();
  del->add_flag("--if-unused", q->if_unused, "only if it has no consumers");
  del->add_flag("--if-empty", q->if_empty, "only if it has no messages");
  commands.OnBroker(del, [q](Client& client) {
    auto n = client.DeleteQueue(q->name, q->if_unused, q->if_empty);
    if (!n.ok()) return Refused(n.status());
    std::printf("queue '%s' deleted with %llu messages\n", Printable(q->name).c_str(),
                static_cast<unsigned long long>(*n));
    return kExitOk;
  });

  auto e = std::make_shared<ExchangeOptions>();
  CLI::App* declare_ex = app.add_subcommand("declare-exchange", "declare an exchange");
  declare_ex->add_option("name", e->name, "the exchange's name")->required();
  declare_ex->add_option("type", e->type, "direct, fanout, topic or headers")
      ->required()
      ->check(CLI::IsMember({"direct", "fanout", "topic", "headers"}));
  declare_ex->add_flag("--transient", e->transient, "not kept across restarts");
  declare_ex->add_flag("--auto-delete", e->auto_delete, "deleted when its last binding goes");
  declare_ex->add_option("--alternate", e->alternate, "where messages it cannot route go");
  commands.OnBroker(declare_ex, [e](Client& client) {
    ExchangeSpec spec;
    spec.name = e->name;
    spec.type = *ParseExchangeType(e->type);
    spec.durable = !e->transient;
    spec.auto_delete = e->auto_delete;
    spec.alternate_exchange = e->alternate;
    Status s = client.DeclareExchange(spec);
    if (!s.ok()) return Refused(s);
    std::printf("exchange '%s' (%s) declared\n", Printable(spec.name).c_str(), e->type.c_str());
    return kExitOk;
  });

  CLI::App* del_ex = app.add_subcommand("delete-exchange", "delete an exchange");
  del_ex->add_option("name", e->name, "the exchange")->required();
  del_ex->add_flag("--if-unused", e->if_unused, "only if nothing is bound to it");
  commands.OnBroker(del_ex, [e](Client& client) {
    Status s = client.DeleteExchange(e->name, e->if_unused);
    if (!s.ok()) return Refused(s);
    std::printf("exchange '%s' deleted\n", Printable(e->name).c_str());
    return kExitOk;
  });

  AddBindingCommand(app, commands, "bind", "route what exchange SOURCE matches into QUEUE", true,
                    false);
  AddBindingCommand(app, commands, "unbind", "remove a binding of QUEUE to exchange SOURCE", false,
                    false);
  AddBindingCommand(app, commands, "bind-exchange",
                    "route what exchange SOURCE matches on into exchange DESTINATION", true, true);
  AddBindingCommand(app, commands, "unbind-exchange",
                    "remove a binding of exchange DESTINATION to exchange SOURCE", false, true);
}

}  // namespace wharf::ctl
