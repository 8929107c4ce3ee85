// wharfctl vhosts, add-vhost, delete-vhost, set-vhost-limits, clear-vhost-limits (the
// administrator tag only, through the broker): RabbitMQ's list_vhosts, add_vhost, delete_vhost,
// set_vhost_limits and clear_vhost_limits (docs/security.md, "Virtual hosts").
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "ctl/ctl.h"
#include "ctl/json.h"

namespace wharf::ctl {
namespace {

struct VhostOptions {
  std::string name, description, limits, which;
  bool json = false;
};

}  // namespace

void AddVhostCommands(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<VhostOptions>();

  CLI::App* vhosts = app.add_subcommand("vhosts", "list virtual hosts (admins only)");
  vhosts->add_flag("--json", o->json, "print as JSON");
  commands.OnBroker(vhosts, [o](Client& client) {
    auto list = client.ListVhosts();
    if (!list.ok()) return Refused(list.status());
    if (o->json) {
      Json out = Json::array();
      for (const VhostInfo& v : *list) out.push_back(VhostJson(v));
      return PrintJson(out);
    }
    std::printf("%-24s %8s %10s %12s %16s %11s  %s\n", "NAME", "QUEUES", "EXCHANGES", "CONNECTIONS",
                "MAX-CONNECTIONS", "MAX-QUEUES", "DESCRIPTION");
    for (const VhostInfo& v : *list) {
      std::printf("%-24s %8llu %10llu %12llu %16s %11s  %s\n", Printable(v.name).c_str(),
                  static_cast<unsigned long long>(v.queues),
                  static_cast<unsigned long long>(v.exchanges),
                  static_cast<unsigned long long>(v.connections),
                  LimitText(v.limits.max_connections).c_str(),
                  LimitText(v.limits.max_queues).c_str(), Printable(v.description).c_str());
    }
    return kExitOk;
  });

  CLI::App* add = app.add_subcommand(
      "add-vhost",
      "create a virtual host with its own exchanges, queues and bindings (admins "
      "only); users need set-permissions -p NAME to use it");
  add->add_option("name", o->name, "the vhost")->required();
  add->add_option("--description", o->description, "free text for the listing");
  commands.OnBroker(add, [o](Client& client) {
    Status s = client.AddVhost(o->name, o->description);
    if (!s.ok()) return Refused(s);
    std::printf("vhost '%s' added\n", Printable(o->name).c_str());
    return kExitOk;
  });

  CLI::App* del = app.add_subcommand(
      "delete-vhost",
      "delete a virtual host with every queue (and its messages) and exchange in "
      "it; its connections are closed and its permissions removed (admins only)");
  del->add_option("name", o->name, "the vhost")->required();
  commands.OnBroker(del, [o](Client& client) {
    Status s = client.DeleteVhost(o->name);
    if (!s.ok()) return Refused(s);
    std::printf("vhost '%s' deleted\n", Printable(o->name).c_str());
    return kExitOk;
  });

  CLI::App* set_limits = app.add_subcommand(
      "set-vhost-limits",
      "set a vhost's limits, as rabbitmqctl set_vhost_limits: '{\"max-connections\": N, "
      "\"max-queues\": N}' (either or both; negative clears, 0 allows none)");
  set_limits->add_option("name", o->name, "the vhost")->required();
  set_limits->add_option("limits", o->limits, "the limits as JSON")->required();
  commands.OnBroker(set_limits, [o](Client& client) {
    std::optional<int64_t> connections, queues;
    if (Status s = ParseLimitsJson(o->limits,
                                   {{"max-connections", &connections}, {"max-queues", &queues}});
        !s.ok()) {
      return Usage(std::string(s.message()));
    }
    Status s = client.SetVhostLimits(o->name, connections, queues);
    if (!s.ok()) return Refused(s);
    std::printf("limits of vhost '%s' set\n", Printable(o->name).c_str());
    return kExitOk;
  });

  CLI::App* clear_limits = app.add_subcommand(
      "clear-vhost-limits", "clear a vhost's limit, as rabbitmqctl clear_vhost_limits");
  clear_limits->add_option("name", o->name, "the vhost")->required();
  clear_limits->add_option("limit", o->which, "max-connections, max-queues or all")
      ->required()
      ->check(CLI::IsMember({"max-connections", "max-queues", "all"}));
  commands.OnBroker(clear_limits, [o](Client& client) {
    const bool all = o->which == "all";
    std::optional<int64_t> none = -1;
    Status s =
        client.SetVhostLimits(o->name, all || o->which == "max-connections" ? none : std::nullopt,
                              all || o->which == "max-queues" ? none : std::nullopt);
    if (!s.ok()) return Refused(s);
    std::printf("limit %s of vhost '%s' cleared\n", o->which.c_str(), Printable(o->name).c_str());
    return kExitOk;
  });
}

}  // namespace wharf::ctl
