// wharfctl queues, queue show, exchanges, bindings, consumers, connections and peek: what an
// operator looks at (docs/operations.md). Tables escape what clients named things; --json
// prints the documents of ctl/json.h.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ctl/ctl.h"
#include "ctl/json.h"

namespace wharf::ctl {
namespace {

// "-", "850ms", "42s", "17m", "5h", "3d".
std::string Age(std::optional<int64_t> age_ms) {
  if (!age_ms) return "-";
  const int64_t ms = *age_ms;
  if (ms < 1'000) return std::to_string(ms) + "ms";
  int64_t s = ms / 1'000;
  if (s < 120) return std::to_string(s) + "s";
  if (s < 7'200) return std::to_string(s / 60) + "m";
  if (s < 172'800) return std::to_string(s / 3'600) + "h";
  return std::to_string(s / 86'400) + "d";
}

std::string Rate(double per_second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", per_second);
  return buf;
}

std::string ArgumentsText(const Headers& arguments, const char* separator, const char* equals) {
  std::string out;
  for (const auto& [k, v] : arguments) {
    out +=
        (out.empty() ? "" : separator) + Printable(k) + equals + Printable(HeaderValueToString(v));
  }
  return out;
}

// A listing as a JSON array of its records.
template <typename T, typename F>
int PrintJsonList(const std::vector<T>& items, F to_json) {
  Json out = Json::array();
  for (const T& item : items) out.push_back(to_json(item));
  return PrintJson(out);
}

int ListQueues(Client& client, const std::string& prefix, bool json) {
  auto queues = client.ListQueues(prefix);
  if (!queues.ok()) return Refused(queues.status());
  if (json) return PrintJsonList(*queues, QueueJson);
  std::printf("%-28s %9s %8s %9s %5s %8s %8s %8s %8s  %s\n", "NAME", "READY", "DELAYED",
              "IN_FLIGHT", "CONS", "OLDEST", "PUB/S", "DELIV/S", "ACK/S", "DEAD-LETTERS TO");
  for (const QueueInfo& q : *queues) {
    std::printf(
        "%-28s %9llu %8llu %9llu %5u %8s %8s %8s %8s  %s\n", Printable(q.name).c_str(),
        static_cast<unsigned long long>(q.ready), static_cast<unsigned long long>(q.delayed),
        static_cast<unsigned long long>(q.in_flight), q.consumers, Age(OldestReadyAgeMs(q)).c_str(),
        Rate(q.publish_rate).c_str(), Rate(q.deliver_rate).c_str(), Rate(q.ack_rate).c_str(),
        q.dead_letter_target.empty() ? "-" : Printable(q.dead_letter_target).c_str());
  }
  return kExitOk;
}

int ShowQueue(Client& client, const std::string& name, bool json) {
  auto queues = client.ListQueues(name);
  if (!queues.ok()) return Refused(queues.status());
  auto it = std::find_if(queues->begin(), queues->end(),
                         [&](const QueueInfo& q) { return q.name == name; });
  if (it == queues->end()) {
    return Refused(Status(StatusCode::kQueueNotFound, "queue '" + name + "' not found"));
  }
  const QueueInfo& q = *it;
  if (json) return PrintJson(QueueJson(q));
  std::string flags = q.durable ? "durable" : "transient";
  if (q.exclusive) flags += ", exclusive";
  if (q.auto_delete) flags += ", auto-delete";
  const std::string arguments = ArgumentsText(q.arguments, "\n  ", " = ");
  std::printf(
      "queue:               %s (%s)\n"
      "ready:               %llu\n"
      "delayed:             %llu%s\n"
      "in flight:           %llu\n"
      "consumers:           %u\n"
      "oldest ready:        %s\n"
      "dead-letters to:     %s\n"
      "published/delivered/acked since start: %llu / %llu / %llu\n"
      "rates (msg/s):       publish %s, deliver %s, ack %s\n"
      "arguments:%s%s\n",
      Printable(q.name).c_str(), flags.c_str(), static_cast<unsigned long long>(q.ready),
      static_cast<unsigned long long>(q.delayed),
      q.next_delayed_at_ms ? (" (next at " + FormatTime(q.next_delayed_at_ms) + ")").c_str() : "",
      static_cast<unsigned long long>(q.in_flight), q.consumers, Age(OldestReadyAgeMs(q)).c_str(),
      q.dead_letter_target.empty() ? "-" : Printable(q.dead_letter_target).c_str(),
      static_cast<unsigned long long>(q.published_total),
      static_cast<unsigned long long>(q.delivered_total),
      static_cast<unsigned long long>(q.acked_total), Rate(q.publish_rate).c_str(),
      Rate(q.deliver_rate).c_str(), Rate(q.ack_rate).c_str(),
      arguments.empty() ? " (none)" : "\n  ", arguments.c_str());
  if (!q.policy.empty()) {
    const std::string effective = ArgumentsText(q.effective_arguments, "\n  ", " = ");
    std::printf("policy:              %s\neffective arguments:%s%s\n", Printable(q.policy).c_str(),
                effective.empty() ? " (none)" : "\n  ", effective.c_str());
  }
  if (q.purge_reclaiming > 0) {
    std::printf("purge:               %llu purged messages still being removed from the disk\n",
                static_cast<unsigned long long>(q.purge_reclaiming));
  }
  if (q.arguments.contains("x-message-groups")) {
    std::printf(
        "groups:              %llu active (ready in memory or out), %llu held (a delivery "
        "out or a retry backing off)\n",
        static_cast<unsigned long long>(q.groups), static_cast<unsigned long long>(q.groups_held));
  }
  return kExitOk;
}

int ListExchanges(Client& client, bool json) {
  auto exchanges = client.ListExchanges();
  if (!exchanges.ok()) return Refused(exchanges.status());
  if (json) return PrintJsonList(*exchanges, ExchangeJson);
  std::printf("%-32s %-8s %8s  %s\n", "NAME", "TYPE", "BINDINGS", "FLAGS");
  for (const ExchangeInfo& e : *exchanges) {
    std::string flags = e.durable ? "durable" : "transient";
    if (e.auto_delete) flags += ",auto-delete";
    if (e.internal) flags += ",internal";
    if (e.delayed) flags += ",delayed (x-delayed-message)";
    if (!e.alternate_exchange.empty()) flags += ",alternate=" + Printable(e.alternate_exchange);
    if (!e.policy.empty()) flags += ",policy=" + Printable(e.policy);
    std::printf("%-32s %-8s %8u  %s\n", e.name.empty() ? "(default)" : Printable(e.name).c_str(),
                std::string(ExchangeTypeName(e.type)).c_str(), e.bindings, flags.c_str());
  }
  return kExitOk;
}

int ListBindings(Client& client, const std::string& exchange, const std::string& queue, bool json) {
  auto bindings = client.ListBindings(exchange, queue);
  if (!bindings.ok()) return Refused(bindings.status());
  if (json) return PrintJsonList(*bindings, BindingJson);
  std::printf("%-24s %-32s %-24s %s\n", "EXCHANGE", "TO", "KEY", "ARGUMENTS");
  for (const BindingSpec& b : *bindings) {
    std::string to =
        b.queue.empty() ? "exchange " + Printable(b.destination_exchange) : Printable(b.queue);
    std::printf("%-24s %-32s %-24s %s\n",
                b.exchange.empty() ? "(default)" : Printable(b.exchange).c_str(), to.c_str(),
                Printable(b.routing_key).c_str(), ArgumentsText(b.arguments, ", ", "=").c_str());
  }
  return kExitOk;
}

int ListConsumers(Client& client, const std::string& queue, bool json) {
  auto consumers = client.ListConsumers(queue);
  if (!consumers.ok()) return Refused(consumers.status());
  if (json) return PrintJsonList(*consumers, ConsumerJson);
  std::printf("%-24s %-28s %8s %7s %-12s %8s %8s %9s %8s %-13s\n", "QUEUE", "TAG", "CONN",
              "CHANNEL", "USER", "PREFETCH", "UNACKED", "LEASE_MS", "PRIORITY", "ACTIVITY");
  for (const ConsumerInfo& c : *consumers) {
    std::printf("%-24s %-28s %8llu %7s %-12s %8u %8u %9u %8d %-13s%s\n", Printable(c.queue).c_str(),
                Printable(c.consumer_tag).c_str(), static_cast<unsigned long long>(c.connection_id),
                c.channel == 0 ? "-" : std::to_string(c.channel).c_str(), Printable(c.user).c_str(),
                c.prefetch, c.unacked, c.lease_ms, c.priority, Printable(c.activity).c_str(),
                c.exclusive ? "  exclusive" : "");
  }
  return kExitOk;
}

int ListConnections(Client& client, bool json) {
  auto connections = client.ListConnections();
  if (!connections.ok()) return Refused(connections.status());
  if (json) return PrintJsonList(*connections, ConnectionJson);
  std::printf("%8s %-5s %-12s %-12s %-24s %-24s %8s %9s %8s %8s  %s\n", "ID", "PROTO", "USER",
              "VHOST", "ADDRESS", "SINCE (UTC)", "CHANNELS", "CONSUMERS", "UNACKED", "RECEIVES",
              "CLIENT");
  for (const ConnectionInfo& c : *connections) {
    std::string client = c.client;
    if (!c.client_version.empty()) client += " " + c.client_version;
    std::printf("%8llu %-5s %-12s %-12s %-24s %-24s %8u %9u %8llu %8u  %s\n",
                static_cast<unsigned long long>(c.id), Printable(c.protocol).c_str(),
                Printable(c.user).c_str(), Printable(c.vhost).c_str(), Printable(c.address).c_str(),
                FormatTime(c.connected_at_ms).c_str(), c.channels, c.consumers,
                static_cast<unsigned long long>(c.unacked), c.pending_receives,
                Printable(client).c_str());
  }
  return kExitOk;
}

struct PeekOptions {
  std::string queue;
  uint32_t limit = 20;
  uint64_t after = 0;
  bool no_body = false, json = false;
};

// A page of a queue's ready messages, taken by nobody.
int Peek(Client& client, const PeekOptions& o) {
  const bool body = !o.no_body;
  auto page = client.Peek(o.queue, o.after, o.limit, body);
  if (!page.ok()) return Refused(page.status());
  if (o.json) {
    Json out{{"messages", Json::array()},
             {"more", page->more},
             {"next_after", page->more ? Json(page->next_after) : Json()}};
    for (const PeekedMessage& m : page->messages) {
      out["messages"].push_back(PeekedJson(o.queue, m, body));
    }
    return PrintJson(out);
  }
  std::printf("%8s  %-16s  %-24s %5s %5s %9s  %-24s %s\n", "POS", "MESSAGE_ID", "PUBLISHED (UTC)",
              "RECV", "FAIL", "BYTES", "LAST DEATH", body ? "BODY" : "");
  for (const PeekedMessage& m : page->messages) {
    std::string death;
    if (!m.message.deaths.empty()) {
      const Death& d = m.message.deaths[0];
      death = d.reason + "@" + Printable(d.queue);
    }
    std::string preview = Printable(m.message.body.substr(0, 40));
    if (m.message.body.size() > 40) preview += "...";
    std::printf("%8llu  %s  %-24s %5u %5u %9llu  %-24s %s\n",
                static_cast<unsigned long long>(m.position), HexId(m.message.id).c_str(),
                FormatTime(m.message.published_at_ms).c_str(), m.receive_count, m.failure_count,
                static_cast<unsigned long long>(m.body_bytes), death.c_str(), preview.c_str());
  }
  if (page->messages.empty())
    std::printf("(no ready message in '%s')\n", Printable(o.queue).c_str());
  if (page->more) {
    std::printf("more: wharfctl peek %s -n %u --after %llu\n", Printable(o.queue).c_str(), o.limit,
                static_cast<unsigned long long>(page->next_after));
  }
  return kExitOk;
}

struct ListOptions {
  std::string prefix, name, exchange, queue;
  bool json = false;
};

}  // namespace

void AddInspectCommands(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<ListOptions>();
  const char* kJson = "print as JSON";

  CLI::App* queues = app.add_subcommand(
      "queues",
      "list queues: ready, delayed, in flight, consumers, oldest ready, rates (5 s), "
      "dead-letter target");
  queues->add_option("--prefix", o->prefix, "only queues whose name starts with P");
  queues->add_flag("--json", o->json, kJson);
  commands.OnBroker(queues, [o](Client& client) { return ListQueues(client, o->prefix, o->json); });

  CLI::App* queue = app.add_subcommand("queue", "one queue: show");
  queue->require_subcommand(1);
  CLI::App* show = queue->add_subcommand("show", "one queue's figures and arguments");
  show->add_option("queue", o->name, "the queue")->required();
  show->add_flag("--json", o->json, kJson);
  commands.OnBroker(show, [o](Client& client) { return ShowQueue(client, o->name, o->json); });

  CLI::App* exchanges = app.add_subcommand("exchanges", "list exchanges");
  exchanges->add_flag("--json", o->json, kJson);
  commands.OnBroker(exchanges, [o](Client& client) { return ListExchanges(client, o->json); });

  CLI::App* bindings = app.add_subcommand("bindings", "list bindings");
  bindings->add_option("--exchange", o->exchange, "only those from exchange E");
  bindings->add_option("--queue", o->queue, "only those to queue Q");
  bindings->add_flag("--json", o->json, kJson);
  commands.OnBroker(bindings, [o](Client& client) {
    return ListBindings(client, o->exchange, o->queue, o->json);
  });

  CLI::App* consumers = app.add_subcommand(
      "consumers", "list consumers: tag, connection, user, prefetch, unacked, lease");
  consumers->add_option("queue", o->queue, "only those of QUEUE");
  consumers->add_flag("--json", o->json, kJson);
  commands.OnBroker(consumers,
                    [o](Client& client) { return ListConsumers(client, o->queue, o->json); });

  CLI::App* connections = app.add_subcommand(
      "connections", "list connections: id, user, address, since, consumers, unacked, receives");
  connections->add_flag("--json", o->json, kJson);
  commands.OnBroker(connections, [o](Client& client) { return ListConnections(client, o->json); });

  auto p = std::make_shared<PeekOptions>();
  CLI::App* peek = app.add_subcommand(
      "peek",
      "browse QUEUE's ready messages in delivery order with their counters and death "
      "records, taking none");
  peek->add_option("queue", p->queue, "the queue")->required();
  peek->add_option("-n", p->limit, "per page (default 20)")->check(Unsigned(1, 1000));
  peek->add_option("--after", p->after, "continue after this listed POS")
      ->check(Unsigned(0, UINT64_MAX));
  peek->add_flag("--no-body", p->no_body, "leave the bodies out");
  peek->add_flag("--json", p->json,
                 "as JSON: {messages, more, next_after}, each message as consume --json prints it");
  commands.OnBroker(peek, [p](Client& client) { return Peek(client, *p); });
}

}  // namespace wharf::ctl
