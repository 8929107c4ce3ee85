// wharfctl set-policy, clear-policy, list-policies (the policymaker or administrator tag,
// through the broker): RabbitMQ's set_policy, clear_policy and list_policies, in the vhost of
// -p (docs/policies.md).
#include <cstdio>
#include <memory>
#include <string>

#include "ctl/ctl.h"
#include "ctl/json.h"

namespace wharf::ctl {
namespace {

struct PolicyOptions {
  std::string name, pattern, definition, apply_to = "all";
  int64_t priority = 0;
  bool json = false, all_vhosts = false;
};

}  // namespace

void AddPolicyCommands(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<PolicyOptions>();

  CLI::App* set = app.add_subcommand(
      "set-policy",
      "add or replace a policy in the vhost of -p, as rabbitmqctl set_policy: queue or exchange "
      "arguments applied at once to every queue or exchange whose name PATTERN matches "
      "(docs/policies.md has the keys)");
  set->add_option("name", o->name, "the policy")->required();
  set->add_option("pattern", o->pattern, "a regular expression (PCRE, unanchored: ^ and $ anchor)")
      ->required();
  set->add_option("definition", o->definition,
                  "the arguments as JSON: '{\"max-length\": 1000, \"dead-letter-exchange\": "
                  "\"dlx\"}'")
      ->required();
  set->add_option("--priority", o->priority,
                  "of the policies that match a name, the highest priority applies")
      ->capture_default_str();
  set->add_option("--apply-to", o->apply_to, "what the policy applies to")
      ->check(CLI::IsMember({"queues", "exchanges", "all"}))
      ->capture_default_str();
  commands.OnBroker(set, [o](Client& client) {
    Json definition;
    try {
      definition = Json::parse(o->definition);
    } catch (const std::exception& e) {
      return Usage(std::string("the definition is not JSON: ") + e.what());
    }
    auto headers = json::DefinitionFromJson(definition);
    if (!headers.ok()) return Usage(std::string(headers.status().message()));
    PolicyInfo policy;
    policy.name = o->name;
    policy.pattern = o->pattern;
    policy.apply_to = o->apply_to;
    policy.priority = o->priority;
    policy.definition = std::move(*headers);
    Status s = client.SetPolicy(policy);
    if (!s.ok()) return Refused(s);
    std::printf("policy '%s' set\n", Printable(o->name).c_str());
    return kExitOk;
  });

  CLI::App* clear = app.add_subcommand(
      "clear-policy", "remove a policy of the vhost of -p, as rabbitmqctl clear_policy");
  clear->add_option("name", o->name, "the policy")->required();
  commands.OnBroker(clear, [o](Client& client) {
    Status s = client.ClearPolicy(o->name);
    if (!s.ok()) return Refused(s);
    std::printf("policy '%s' cleared\n", Printable(o->name).c_str());
    return kExitOk;
  });

  CLI::App* list = app.add_subcommand(
      "list-policies", "list the policies of the vhost of -p, as rabbitmqctl list_policies");
  list->add_flag("--json", o->json, "print as JSON (RabbitMQ's shape)");
  list->add_flag("--all-vhosts", o->all_vhosts, "of every vhost (admins only)");
  commands.OnBroker(list, [o](Client& client) {
    auto policies = client.ListPolicies(o->all_vhosts);
    if (!policies.ok()) return Refused(policies.status());
    if (o->json) {
      Json out = Json::array();
      for (const PolicyInfo& p : *policies) out.push_back(PolicyJson(p));
      return PrintJson(out);
    }
    std::printf("%-16s %-24s %-24s %-9s %8s  %s\n", "VHOST", "NAME", "PATTERN", "APPLY-TO",
                "PRIORITY", "DEFINITION");
    for (const PolicyInfo& p : *policies) {
      std::printf("%-16s %-24s %-24s %-9s %8lld  %s\n", Printable(p.vhost).c_str(),
                  Printable(p.name).c_str(), Printable(p.pattern).c_str(),
                  Printable(p.apply_to).c_str(), static_cast<long long>(p.priority),
                  Printable(Dump(DefinitionJson(p.definition), false)).c_str());
    }
    return kExitOk;
  });
}

}  // namespace wharf::ctl
