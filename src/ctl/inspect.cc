// wharfctl queues, queue show, bindings, consumers, connections and peek: what an operator
// looks at (docs/operations.md).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "ctl/ctl.h"

namespace wharf::ctl {

std::string HeadersJson(const wharf::Headers& headers) {
  std::string out = "{";
  for (const auto& [k, v] : headers) {
    out += (out.size() > 1 ? "," : "") + JsonString(k) + ":" +
           JsonString(wharf::HeaderValueToString(v));
  }
  return out + "}";
}

std::string DeathsJson(const std::vector<wharf::Death>& deaths) {
  std::string out = "[";
  for (const wharf::Death& death : deaths) {
    out += (out.size() > 1 ? "," : "") + std::string("{\"reason\":") + JsonString(death.reason) +
           ",\"queue\":" + JsonString(death.queue) + ",\"exchange\":" + JsonString(death.exchange) +
           ",\"routing_key\":" + JsonString(death.routing_key) +
           ",\"count\":" + std::to_string(death.count) +
           ",\"first_at_ms\":" + std::to_string(death.first_at_ms) +
           ",\"last_at_ms\":" + std::to_string(death.last_at_ms) +
           ",\"receive_count\":" + std::to_string(death.receive_count) +
           ",\"failure_count\":" + std::to_string(death.failure_count) +
           ",\"last_error\":" + JsonString(death.last_error) + "}";
  }
  return out + "]";
}

// How long the next ready message has waited (since its publish), in ms; -1 when unknown.
int64_t OldestAgeMs(const wharf::QueueInfo& q) {
  if (q.head_published_at_ms == 0) return -1;
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  return std::max<int64_t>(0, now - q.head_published_at_ms);
}

// "-", "850ms", "42s", "17m", "5h", "3d".
std::string Age(int64_t ms) {
  if (ms < 0) return "-";
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

// One queue as `queues --json` and `queue show --json` print it.
std::string QueueJson(const wharf::QueueInfo& q) {
  return std::string("{\"name\":") + JsonString(q.name) +
         ",\"durable\":" + (q.durable ? "true" : "false") +
         ",\"exclusive\":" + (q.exclusive ? "true" : "false") +
         ",\"auto_delete\":" + (q.auto_delete ? "true" : "false") +
         ",\"ready\":" + std::to_string(q.ready) + ",\"in_flight\":" + std::to_string(q.in_flight) +
         ",\"delayed\":" + std::to_string(q.delayed) +
         ",\"next_delayed_at_ms\":" + std::to_string(q.next_delayed_at_ms) +
         ",\"consumers\":" + std::to_string(q.consumers) +
         ",\"published_total\":" + std::to_string(q.published_total) +
         ",\"delivered_total\":" + std::to_string(q.delivered_total) +
         ",\"acked_total\":" + std::to_string(q.acked_total) +
         ",\"dead_letter_target\":" + JsonString(q.dead_letter_target) +
         ",\"oldest_ready_age_ms\":" + std::to_string(OldestAgeMs(q)) +
         ",\"publish_rate\":" + Rate(q.publish_rate) + ",\"deliver_rate\":" + Rate(q.deliver_rate) +
         ",\"ack_rate\":" + Rate(q.ack_rate) +
         ",\"purge_reclaiming\":" + std::to_string(q.purge_reclaiming) +
         ",\"arguments\":" + HeadersJson(q.arguments) + "}";
}

int ListQueues(wharf::Client& client, const Args& args) {
  auto queues =
      client.ListQueues(args.options.count("--prefix") ? args.options.at("--prefix") : "");
  if (!queues.ok()) return Refused(queues.status());
  if (args.flags.count("--json")) {
    std::string out = "[";
    for (size_t i = 0; i < queues->size(); ++i) {
      const auto& q = (*queues)[i];
      out += (i ? ",\n " : "") + QueueJson(q);
    }
    std::puts((out + "]").c_str());
    return 0;
  }
  std::printf("%-28s %9s %8s %9s %5s %8s %8s %8s %8s  %s\n", "NAME", "READY", "DELAYED",
              "IN_FLIGHT", "CONS", "OLDEST", "PUB/S", "DELIV/S", "ACK/S", "DEAD-LETTERS TO");
  for (const auto& q : *queues) {
    std::printf(
        "%-28s %9llu %8llu %9llu %5u %8s %8s %8s %8s  %s\n", q.name.c_str(),
        static_cast<unsigned long long>(q.ready), static_cast<unsigned long long>(q.delayed),
        static_cast<unsigned long long>(q.in_flight), q.consumers, Age(OldestAgeMs(q)).c_str(),
        Rate(q.publish_rate).c_str(), Rate(q.deliver_rate).c_str(), Rate(q.ack_rate).c_str(),
        q.dead_letter_target.empty() ? "-" : q.dead_letter_target.c_str());
  }
  return 0;
}

int ListBindings(wharf::Client& client, const Args& args) {
  auto bindings =
      client.ListBindings(args.options.count("--exchange") ? args.options.at("--exchange") : "",
                          args.options.count("--queue") ? args.options.at("--queue") : "");
  if (!bindings.ok()) return Refused(bindings.status());
  if (args.flags.count("--json")) {
    std::string out = "[";
    for (size_t i = 0; i < bindings->size(); ++i) {
      const auto& b = (*bindings)[i];
      out += (i ? ",\n " : "") + std::string("{\"exchange\":") + JsonString(b.exchange) +
             ",\"queue\":" + JsonString(b.queue) +
             ",\"destination_exchange\":" + JsonString(b.destination_exchange) +
             ",\"routing_key\":" + JsonString(b.routing_key) +
             ",\"arguments\":" + HeadersJson(b.arguments) + "}";
    }
    std::puts((out + "]").c_str());
    return 0;
  }
  std::printf("%-24s %-32s %-24s %s\n", "EXCHANGE", "TO", "KEY", "ARGUMENTS");
  for (const auto& b : *bindings) {
    std::string to = b.queue.empty() ? "exchange " + b.destination_exchange : b.queue;
    std::string arguments;
    for (const auto& [k, v] : b.arguments) {
      arguments += (arguments.empty() ? "" : ", ") + k + "=" + wharf::HeaderValueToString(v);
    }
    std::printf("%-24s %-32s %-24s %s\n", b.exchange.empty() ? "(default)" : b.exchange.c_str(),
                to.c_str(), b.routing_key.c_str(), arguments.c_str());
  }
  return 0;
}

int ListConsumers(wharf::Client& client, const Args& args) {
  auto consumers = client.ListConsumers(args.positional.empty() ? "" : args.positional[0]);
  if (!consumers.ok()) return Refused(consumers.status());
  if (args.flags.count("--json")) {
    std::string out = "[";
    for (size_t i = 0; i < consumers->size(); ++i) {
      const auto& c = (*consumers)[i];
      out += (i ? ",\n " : "") + std::string("{\"queue\":") + JsonString(c.queue) +
             ",\"consumer_tag\":" + JsonString(c.consumer_tag) +
             ",\"connection_id\":" + std::to_string(c.connection_id) +
             ",\"user\":" + JsonString(c.user) + ",\"prefetch\":" + std::to_string(c.prefetch) +
             ",\"unacked\":" + std::to_string(c.unacked) +
             ",\"lease_ms\":" + std::to_string(c.lease_ms) +
             ",\"exclusive\":" + (c.exclusive ? "true" : "false") + "}";
    }
    std::puts((out + "]").c_str());
    return 0;
  }
  std::printf("%-24s %-28s %8s %-12s %8s %8s %9s\n", "QUEUE", "TAG", "CONN", "USER", "PREFETCH",
              "UNACKED", "LEASE_MS");
  for (const auto& c : *consumers) {
    std::printf("%-24s %-28s %8llu %-12s %8u %8u %9u%s\n", c.queue.c_str(), c.consumer_tag.c_str(),
                static_cast<unsigned long long>(c.connection_id), c.user.c_str(), c.prefetch,
                c.unacked, c.lease_ms, c.exclusive ? "  exclusive" : "");
  }
  return 0;
}

int ListConnections(wharf::Client& client, const Args& args) {
  auto connections = client.ListConnections();
  if (!connections.ok()) return Refused(connections.status());
  if (args.flags.count("--json")) {
    std::string out = "[";
    for (size_t i = 0; i < connections->size(); ++i) {
      const auto& c = (*connections)[i];
      out += (i ? ",\n " : "") + std::string("{\"id\":") + std::to_string(c.id) +
             ",\"user\":" + JsonString(c.user) + ",\"address\":" + JsonString(c.address) +
             ",\"connected_at_ms\":" + std::to_string(c.connected_at_ms) +
             ",\"consumers\":" + std::to_string(c.consumers) +
             ",\"unacked\":" + std::to_string(c.unacked) +
             ",\"pending_receives\":" + std::to_string(c.pending_receives) + "}";
    }
    std::puts((out + "]").c_str());
    return 0;
  }
  std::printf("%8s %-12s %-24s %-24s %9s %8s %8s\n", "ID", "USER", "ADDRESS", "SINCE (UTC)",
              "CONSUMERS", "UNACKED", "RECEIVES");
  for (const auto& c : *connections) {
    std::printf("%8llu %-12s %-24s %-24s %9u %8llu %8u\n", static_cast<unsigned long long>(c.id),
                c.user.c_str(), c.address.c_str(), FormatTime(c.connected_at_ms).c_str(),
                c.consumers, static_cast<unsigned long long>(c.unacked), c.pending_receives);
  }
  return 0;
}

// `wharfctl queue show Q`: one queue's arguments and figures.
int ShowQueue(wharf::Client& client, const Args& args) {
  if (args.positional.size() != 2 || args.positional[0] != "show") {
    return Usage("queue needs 'show QUEUE'");
  }
  const std::string& name = args.positional[1];
  auto queues = client.ListQueues(name);
  if (!queues.ok()) return Refused(queues.status());
  auto it = std::find_if(queues->begin(), queues->end(),
                         [&](const wharf::QueueInfo& q) { return q.name == name; });
  if (it == queues->end()) {
    return Refused(
        wharf::Status(wharf::StatusCode::kQueueNotFound, "queue '" + name + "' not found"));
  }
  const wharf::QueueInfo& q = *it;
  if (args.flags.count("--json")) {
    std::puts(QueueJson(q).c_str());
    return 0;
  }
  std::string flags = q.durable ? "durable" : "transient";
  if (q.exclusive) flags += ", exclusive";
  if (q.auto_delete) flags += ", auto-delete";
  std::string arguments;
  for (const auto& [k, v] : q.arguments) {
    arguments += "\n  " + k + " = " + wharf::HeaderValueToString(v);
  }
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
      "arguments:%s\n",
      q.name.c_str(), flags.c_str(), static_cast<unsigned long long>(q.ready),
      static_cast<unsigned long long>(q.delayed),
      q.next_delayed_at_ms ? (" (next at " + FormatTime(q.next_delayed_at_ms) + ")").c_str() : "",
      static_cast<unsigned long long>(q.in_flight), q.consumers, Age(OldestAgeMs(q)).c_str(),
      q.dead_letter_target.empty() ? "-" : q.dead_letter_target.c_str(),
      static_cast<unsigned long long>(q.published_total),
      static_cast<unsigned long long>(q.delivered_total),
      static_cast<unsigned long long>(q.acked_total), Rate(q.publish_rate).c_str(),
      Rate(q.deliver_rate).c_str(), Rate(q.ack_rate).c_str(),
      arguments.empty() ? " (none)" : arguments.c_str());
  if (q.purge_reclaiming > 0) {
    std::printf("purge:               %llu purged messages still being removed from the disk\n",
                static_cast<unsigned long long>(q.purge_reclaiming));
  }
  return 0;
}

// `wharfctl peek`: a page of a queue's ready messages, taken by nobody.
int Peek(wharf::Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("peek needs QUEUE");
  const std::string& queue = args.positional[0];
  uint32_t limit = 20;
  if (args.options.count("-n")) {
    unsigned long n = std::stoul(args.options.at("-n"));
    if (n == 0 || n > 1000) return Usage("-n needs 1 to 1000");
    limit = static_cast<uint32_t>(n);
  }
  uint64_t after = args.options.count("--after") ? std::stoull(args.options.at("--after")) : 0;
  const bool json = args.flags.count("--json") > 0;
  const bool body = args.flags.count("--no-body") == 0;
  auto page = client.Peek(queue, after, limit, body);
  if (!page.ok()) return Refused(page.status());
  auto hex = [](uint64_t id) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
    return std::string(buf);
  };
  if (json) {
    std::string out = "[";
    for (size_t i = 0; i < page->messages.size(); ++i) {
      const wharf::PeekedMessage& m = page->messages[i];
      out += (i ? ",\n " : "") + std::string("{\"position\":") + std::to_string(m.position) +
             ",\"message_id\":\"" + hex(m.message.id) + "\"" +
             ",\"published_at_ms\":" + std::to_string(m.message.published_at_ms) +
             ",\"persistent\":" + (m.message.persistent ? "true" : "false") +
             ",\"exchange\":" + JsonString(m.exchange) +
             ",\"routing_key\":" + JsonString(m.routing_key) +
             ",\"receive_count\":" + std::to_string(m.receive_count) +
             ",\"first_received_at_ms\":" + std::to_string(m.first_received_at_ms) +
             ",\"failure_count\":" + std::to_string(m.failure_count) +
             ",\"last_failed_at_ms\":" + std::to_string(m.last_failed_at_ms) +
             ",\"last_error\":" + JsonString(m.last_error) +
             ",\"body_bytes\":" + std::to_string(m.body_bytes) +
             ",\"headers\":" + HeadersJson(m.message.headers) +
             ",\"deaths\":" + DeathsJson(m.message.deaths) +
             (body ? ",\"body\":" + JsonString(m.message.body) : std::string()) + "}";
    }
    std::puts((out + "]").c_str());
  } else {
    std::printf("%8s  %-16s  %-24s %5s %5s %9s  %-24s %s\n", "POS", "MESSAGE_ID", "PUBLISHED (UTC)",
                "RECV", "FAIL", "BYTES", "LAST DEATH", body ? "BODY" : "");
    for (const wharf::PeekedMessage& m : page->messages) {
      std::string death;
      if (!m.message.deaths.empty()) {
        const wharf::Death& d = m.message.deaths[0];
        death = d.reason + "@" + d.queue;
      }
      std::string preview;
      for (char c : m.message.body.substr(0, 40)) {
        preview += std::isprint(static_cast<unsigned char>(c)) ? c : '.';
      }
      if (m.message.body.size() > 40) preview += "...";
      std::printf("%8llu  %s  %-24s %5u %5u %9llu  %-24s %s\n",
                  static_cast<unsigned long long>(m.position), hex(m.message.id).c_str(),
                  FormatTime(m.message.published_at_ms).c_str(), m.receive_count, m.failure_count,
                  static_cast<unsigned long long>(m.body_bytes), death.c_str(), preview.c_str());
    }
    if (page->messages.empty()) std::printf("(no ready message in '%s')\n", queue.c_str());
  }
  if (page->more) {
    std::fprintf(json ? stderr : stdout, "more: wharfctl peek %s -n %u --after %llu\n",
                 queue.c_str(), limit, static_cast<unsigned long long>(page->next_after));
  }
  return 0;
}

}  // namespace wharf::ctl
