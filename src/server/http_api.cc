#include "server/http_api.h"

#include <algorithm>
#include <functional>
#include <future>
#include <memory>
#include <utility>

#include "broker/access.h"
#include "broker/broker.h"
#include "json/policy.h"
#include "server/api_listing.h"
#include "server/api_users.h"
#include "server/api_writes.h"
#include "wharf/version.h"

namespace wharf::server {
namespace {

using json::Json;

using api::Error;
using api::NotFound;
using api::Reply;

// RabbitMQ's answer for what a user may not see (3.10.8's).
Reply NotAuthorised(const std::string& reason) { return Error(401, "not_authorised", reason); }
Reply BrokerBusy() {
  return Error(503, "service_unavailable", "the broker thread did not answer in time");
}

template <typename T, typename Fn>
Json JsonArray(const std::vector<T>& items, Fn&& fn) {
  Json out = Json::array();
  for (const T& item : items) out.push_back(fn(item));
  return out;
}

}  // namespace

template <typename T>
std::optional<T> HttpApi::Ask(std::function<T(const broker::Broker&)> fn) const {
  auto promise = std::make_shared<std::promise<T>>();
  auto future = promise->get_future();
  const broker::Broker* broker = config_.broker;
  config_.post_to_broker(
      [promise, broker, fn = std::move(fn)] { promise->set_value(fn(*broker)); });
  if (future.wait_for(kBrokerTimeout) != std::future_status::ready) return std::nullopt;
  try {
    return future.get();
  } catch (const std::future_error&) {  // the broker context went away with it
    return std::nullopt;
  }
}

// One request, from a user who logged in with a management tag.
class HttpApi::Call {
 public:
  Call(const HttpApi& api, const Request& request, std::shared_ptr<const broker::Access> access)
      : api_(api), request_(request), path_(request.path), access_(std::move(access)) {}

  Reply Run() {
    const std::string& what = path_.empty() ? std::string() : path_[0];
    if (auto write = Write(what)) return *write;
    if (auto change = UserWrite(what)) return *change;
    const size_t n = path_.size();
    // Paths without GET: a limit, bulk-delete.
    const bool limit = (what == "user-limits" || what == "vhost-limits") && n == 3;
    const bool bulk = what == "users" && n == 2 && path_[1] == "bulk-delete";
    if ((request_.method != "GET" && request_.method != "HEAD") || limit || bulk) {
      Reply refused = Error(405, "method_not_allowed", request_.method + " is not allowed here");
      const bool object = (n == 3 && (what == "queues" || what == "exchanges" ||
                                      what == "policies" || what == "permissions")) ||
                          (n == 2 && !bulk && (what == "users" || what == "vhosts"));
      refused.allow = object                            ? "GET, HEAD, PUT, DELETE"
                      : bulk                            ? "POST"
                      : limit                           ? "PUT, DELETE"
                      : what == "definitions" && n <= 2 ? "GET, HEAD, POST"
                                                        : "GET, HEAD";
      return refused;
    }
    if (what == "overview" && path_.size() == 1) return Overview();
    if (what == "overview" && path_.size() == 2 && path_[1] == "history") return History();
    if (what == "whoami" && path_.size() == 1) return WhoAmI();
    if (what == "vhosts") return Vhosts();
    if (what == "queues") return Queues();
    if (what == "exchanges") return Exchanges();
    if (what == "bindings" && path_.size() <= 2) return Bindings();
    if (what == "connections" && path_.size() == 1) return Connections("");
    if (what == "consumers" && path_.size() <= 2) return Consumers();
    if (what == "users") return Users();
    if (what == "permissions" && path_.size() == 1) return Permissions("", "");
    if (what == "permissions" && path_.size() == 3) return Permission(path_[1], path_[2]);
    if (what == "user-limits" && path_.size() <= 2) return UserLimits();
    if (what == "vhost-limits" && path_.size() <= 2) return VhostLimits();
    if (what == "policies") return Policies();
    if (what == "definitions" && path_.size() <= 2) return ExportDefinitions();
    return NotFound();
  }

 private:
  // The requests of server/api_writes.h, or nullopt for another path or method.
  std::optional<Reply> Write(const std::string& what) const {
    const std::string& method = request_.method;
    const size_t n = path_.size();
    ApiWrites writes(ApiWrites::Context{api_.config_.broker, api_.config_.post_to_broker,
                                        &api_.next_session_, access_->user(),
                                        request_.credentials.peer_address});
    const bool reading = method == "GET" || method == "HEAD";
    if (what == "queues" && n >= 3 && n <= 5) {
      const std::string& vhost = path_[1];
      const std::string& name = path_[2];
      const std::string tail = n >= 4 ? path_[3] : "";
      std::function<Reply()> run;
      if (n == 5) {
        if (tail == "delayed" && method == "DELETE") {
          run = [&] { return writes.CancelDelayed(vhost, name, path_[4]); };
        }
      } else if (n == 4 && tail == "redrive") {
        if (method == "POST") run = [&] { return writes.StartRedrive(vhost, name, request_.body); };
        if (reading) run = [&] { return writes.RedriveProgress(vhost, name); };
        if (method == "DELETE") run = [&] { return writes.CancelRedrive(vhost, name); };
      } else if (n == 4 && (tail == "move" || tail == "requeue") && method == "POST") {
        run = [&] {
          return writes.StartRedrive(
              vhost, name, request_.body,
              tail == "move" ? ApiWrites::Redrive::kMove : ApiWrites::Redrive::kRequeue);
        };
      } else if (n == 4 && tail == "delayed" && reading) {
        run = [&] { return writes.ListDelayed(vhost, name, request_.params); };
      }
      if (n == 3 && method == "PUT") {
        run = [&] { return writes.PutQueue(vhost, name, request_.body); };
      } else if (n == 3 && method == "DELETE") {
        run = [&] { return writes.DeleteQueue(vhost, name, request_.params); };
      } else if (n == 4 && tail == "contents" && method == "DELETE") {
        run = [&] { return writes.Purge(vhost, name); };
      } else if (n == 4 && tail == "get" && method == "POST") {
        run = [&] { return writes.Get(vhost, name, request_.body); };
      } else if (n == 4 && tail == "messages" && reading) {
        run = [&] { return writes.Peek(vhost, name, request_.params); };
      }
      if (!run) return std::nullopt;
      if (auto refused = CheckVhost(vhost)) return *refused;
      return run();
    }
    if (what == "exchanges" && n == 4 && path_[3] == "publish" && method == "POST") {
      if (auto refused = CheckVhost(path_[1])) return *refused;
      return writes.Publish(path_[1], path_[2], request_.body);
    }
    if (what == "exchanges" && n == 3 && (method == "PUT" || method == "DELETE")) {
      if (auto refused = CheckVhost(path_[1])) return *refused;
      if (method == "PUT") return writes.PutExchange(path_[1], path_[2], request_.body);
      return writes.DeleteExchange(path_[1], path_[2], request_.params);
    }
    if (what == "definitions" && n <= 2 && method == "POST") return ImportDefinitions();
    if (what == "policies" && n == 3 && (method == "PUT" || method == "DELETE")) {
      if (!Policymaker()) return NotAuthorised("Not policymaker user");
      if (auto refused = CheckVhost(path_[1])) return *refused;
      if (method == "PUT") return writes.PutPolicy(path_[1], path_[2], request_.body);
      return writes.DeletePolicy(path_[1], path_[2]);
    }
    // /api/bindings/{vhost}/e/{source}/q|e/{destination}[/{props}]
    if (what == "bindings" && (n == 6 || n == 7) && path_[2] == "e" &&
        (path_[4] == "q" || path_[4] == "e")) {
      if (auto refused = CheckVhost(path_[1])) return *refused;
      // RabbitMQ names the default exchange amq.default in paths.
      const std::string source = path_[3] == "amq.default" ? "" : path_[3];
      if (n == 6 && method == "POST") {
        return writes.Bind(path_[1], source, path_[4], path_[5], request_.body);
      }
      if (n == 7 && method == "DELETE") {
        return writes.Unbind(path_[1], source, path_[4], path_[5], path_[6]);
      }
      if (n == 6 && reading) return BindingsBetween(source, path_[4], path_[5]);
    }
    return std::nullopt;
  }

  // The changes of server/api_users.h (administrator), or nullopt for another path or method.
  std::optional<Reply> UserWrite(const std::string& what) const {
    const std::string& method = request_.method;
    const std::string& body = request_.body;
    const size_t n = path_.size();
    const bool put = method == "PUT", del = method == "DELETE";
    std::function<Reply(ApiUsers&)> run;
    if (what == "users" && n == 2 && path_[1] == "bulk-delete") {
      if (method == "POST") run = [&](ApiUsers& users) { return users.BulkDeleteUsers(body); };
    } else if (what == "users" && n == 2 && (put || del)) {
      run = [&](ApiUsers& users) {
        return put ? users.PutUser(path_[1], body) : users.DeleteUser(path_[1]);
      };
    } else if (what == "permissions" && n == 3 && (put || del)) {
      run = [&](ApiUsers& users) {
        return put ? users.PutPermissions(path_[1], path_[2], body)
                   : users.DeletePermissions(path_[1], path_[2]);
      };
    } else if (what == "vhosts" && n == 2 && (put || del)) {
      run = [&](ApiUsers& users) {
        return put ? users.PutVhost(path_[1], body) : users.DeleteVhost(path_[1]);
      };
    } else if (what == "user-limits" && n == 3 && (put || del)) {
      run = [&](ApiUsers& users) {
        return users.SetUserLimit(path_[1], path_[2], put ? &body : nullptr);
      };
    } else if (what == "vhost-limits" && n == 3 && (put || del)) {
      run = [&](ApiUsers& users) {
        return users.SetVhostLimit(path_[1], path_[2], put ? &body : nullptr);
      };
    }
    if (!run) return std::nullopt;
    if (!Administrator()) return NotAuthorised("Not administrator user");
    ApiUsers users(ApiUsers::Context{api_.config_.server, api_.config_.post_to_broker,
                                     access_->user(), request_.credentials.peer_address});
    return run(users);
  }

  bool Monitoring() const { return access_->HasTag(broker::kMonitoringTags); }
  bool Administrator() const { return access_->HasTag(broker::kTagAdministrator); }
  bool Policymaker() const {
    return access_->HasTag(broker::kTagAdministrator | broker::kTagPolicymaker);
  }
  // RabbitMQ's rules (measured against 3.10.8): the objects of a vhost (queues, exchanges,
  // bindings, consumers) are seen by an administrator, and by others in the vhosts they have
  // permissions in, monitoring included; the vhosts themselves are listed for monitoring too.
  bool SeesVhost(const std::string& vhost) const {
    return Administrator() || access_->CanUseVhost(vhost);
  }
  bool ListsVhost(const std::string& vhost) const {
    return Monitoring() || access_->CanUseVhost(vhost);
  }
  // Connections, and the consumers on them: monitoring and administrator see everyone's, the
  // others their own.
  bool SeesUser(const std::string& user) const { return Monitoring() || user == access_->user(); }

  // A list, as the query asks (filter, sort, page, columns).
  Reply List(Json items) const {
    ListQuery query;
    std::optional<ListError> refused = ParseListQuery(request_.params, &query);
    if (!refused) refused = ApplyListQuery(query, &items);
    if (refused) return Error(400, refused->error, refused->reason);
    return Reply{200, std::move(items)};
  }

  // The items of `items` whose "vhost" the user sees.
  Json Visible(Json items) const {
    Json out = Json::array();
    for (Json& item : items) {
      if (SeesVhost(item["vhost"].get<std::string>())) out.push_back(std::move(item));
    }
    return out;
  }

  // For a path naming a vhost: nullopt when it is fine, else the reply (404 when it does not
  // exist, 401 when the user may not see it).
  std::optional<Reply> CheckVhost(const std::string& vhost) const {
    auto exists =
        api_.Ask<bool>([vhost](const broker::Broker& broker) { return broker.HasVhost(vhost); });
    if (!exists) return BrokerBusy();
    if (!*exists) return NotFound();
    if (!SeesVhost(vhost)) return NotAuthorised("User not authorised to access virtual host");
    return std::nullopt;
  }

  Reply Overview() const {
    struct Facts {
      std::vector<QueueInfo> queues;
      std::vector<ExchangeInfo> exchanges;
      std::vector<ConnectionInfo> connections;
      std::vector<ConsumerInfo> consumers;
    };
    auto facts = api_.Ask<Facts>([](const broker::Broker& broker) {
      return Facts{broker.ListQueues(""), broker.ListExchanges(), broker.ListConnections(),
                   broker.ListConsumers("")};
    });
    if (!facts) return BrokerBusy();
    std::erase_if(facts->queues, [this](const QueueInfo& q) { return !SeesVhost(q.vhost); });
    std::erase_if(facts->exchanges, [this](const ExchangeInfo& e) { return !SeesVhost(e.vhost); });
    std::erase_if(facts->connections,
                  [this](const ConnectionInfo& c) { return !SeesUser(c.user); });
    std::erase_if(facts->consumers, [this](const ConsumerInfo& c) {
      return !SeesUser(c.user) || !SeesVhost(c.vhost);
    });
    uint64_t channels = 0;
    for (const ConnectionInfo& c : facts->connections) channels += c.channels;
    return Reply{200,
                 api::OverviewJson(api_.config_.node, facts->queues, facts->exchanges,
                                   facts->connections.size(), channels, facts->consumers.size())};
  }

  // GET /api/overview/history (Wharf's): the totals of the vhosts the user sees, sampled every
  // 5 s for the last 10 minutes (server/overview_history.h), for the console's charts.
  Reply History() const {
    Json samples = Json::array();
    if (api_.config_.history) {
      auto sees = [this](const std::string& vhost) { return SeesVhost(vhost); };
      for (const OverviewHistory::Sample& s : api_.config_.history->Samples(sees)) {
        samples.push_back(Json{{"timestamp", s.at_ms},
                               {"publish_rate", s.totals.publish_rate},
                               {"deliver_rate", s.totals.deliver_rate},
                               {"ack_rate", s.totals.ack_rate},
                               {"messages_ready", s.totals.ready},
                               {"messages_unacknowledged", s.totals.unacked}});
      }
    }
    return Reply{
        200, Json{{"interval_ms", std::chrono::milliseconds(OverviewHistory::kInterval).count()},
                  {"samples", std::move(samples)}}};
  }

  Reply WhoAmI() const {
    auto user = api_.config_.users->Find(access_->user());
    Json tags = Json::array();
    if (user) tags = user->tags;
    return Reply{200, Json{{"name", access_->user()}, {"tags", std::move(tags)}}};
  }

  // /api/vhosts[/{vhost}[/connections|/permissions]]
  Reply Vhosts() const {
    if (path_.size() > 3) return NotFound();
    if (path_.size() == 3) {
      if (auto refused = CheckVhost(path_[1])) return *refused;
      if (path_[2] == "connections") return Connections(path_[1]);
      if (path_[2] == "permissions") return Permissions("", path_[1]);
      return NotFound();
    }
    struct Facts {
      std::vector<VhostInfo> vhosts;
      std::vector<QueueInfo> queues;
    };
    auto facts = api_.Ask<Facts>([](const broker::Broker& broker) {
      return Facts{broker.ListVhosts(), broker.ListQueues("")};
    });
    if (!facts) return BrokerBusy();
    Json items = Json::array();
    for (const VhostInfo& v : facts->vhosts) {
      if (!ListsVhost(v.name)) continue;
      std::vector<QueueInfo> queues;
      for (const QueueInfo& q : facts->queues) {
        if (q.vhost == v.name) queues.push_back(q);
      }
      items.push_back(api::VhostJson(v, queues));
    }
    if (path_.size() == 1) return List(std::move(items));
    for (Json& item : items) {
      if (item["name"] == path_[1]) return Reply{200, std::move(item)};
    }
    // Missing, or not the user's: RabbitMQ answers both alike here.
    return NotFound();
  }

  // /api/queues[/{vhost}[/{name}[/bindings]]]
  Reply Queues() const {
    if (path_.size() > 4 || (path_.size() == 4 && path_[3] != "bindings")) return NotFound();
    const std::string vhost = path_.size() >= 2 ? path_[1] : "";
    if (path_.size() >= 2) {
      if (auto refused = CheckVhost(vhost)) return *refused;
    }
    const std::string node = api_.config_.node.node;
    if (path_.size() <= 2) {
      auto queues = api_.Ask<std::vector<QueueInfo>>(
          [vhost](const broker::Broker& broker) { return broker.ListQueues("", vhost); });
      if (!queues) return BrokerBusy();
      Json items = JsonArray(*queues, [&](const QueueInfo& q) { return api::QueueJson(q, node); });
      return List(Visible(std::move(items)));
    }
    const std::string name = path_[2];
    struct Facts {
      std::vector<QueueInfo> queues;
      std::vector<BindingSpec> bindings;
    };
    const bool bindings = path_.size() == 4;
    auto facts = api_.Ask<Facts>([vhost, name, bindings](const broker::Broker& broker) {
      Facts facts{broker.ListQueues(name, vhost), {}};
      if (bindings) facts.bindings = broker.ListBindings("", name, vhost);
      return facts;
    });
    if (!facts) return BrokerBusy();
    for (const QueueInfo& q : facts->queues) {
      if (q.name != name) continue;
      if (!bindings) return Reply{200, api::QueueJson(q, node)};
      Json items = Json::array();
      items.push_back(api::DefaultBindingJson(vhost, name));
      for (const BindingSpec& b : facts->bindings) {
        if (b.destination_exchange.empty()) items.push_back(api::BindingJson(b));
      }
      return List(std::move(items));
    }
    return NotFound();
  }

  // /api/exchanges[/{vhost}[/{name}[/bindings/source|destination]]]
  Reply Exchanges() const {
    if (path_.size() > 5 || path_.size() == 4 ||
        (path_.size() == 5 &&
         (path_[3] != "bindings" || (path_[4] != "source" && path_[4] != "destination")))) {
      return NotFound();
    }
    const std::string vhost = path_.size() >= 2 ? path_[1] : "";
    if (path_.size() >= 2) {
      if (auto refused = CheckVhost(vhost)) return *refused;
    }
    if (path_.size() <= 2) {
      auto exchanges = api_.Ask<std::vector<ExchangeInfo>>(
          [vhost](const broker::Broker& broker) { return broker.ListExchanges(vhost); });
      if (!exchanges) return BrokerBusy();
      return List(Visible(JsonArray(*exchanges, api::ExchangeJson)));
    }
    // RabbitMQ names the default exchange "amq.default" in paths.
    const std::string name = path_[2] == "amq.default" ? "" : path_[2];
    struct Facts {
      std::vector<ExchangeInfo> exchanges;
      std::vector<BindingSpec> bindings;
    };
    auto facts = api_.Ask<Facts>([vhost](const broker::Broker& broker) {
      return Facts{broker.ListExchanges(vhost), broker.ListBindings("", "", vhost)};
    });
    if (!facts) return BrokerBusy();
    for (const ExchangeInfo& e : facts->exchanges) {
      if (e.name != name) continue;
      if (path_.size() == 3) return Reply{200, api::ExchangeJson(e)};
      const bool source = path_[4] == "source";
      Json items = Json::array();
      for (const BindingSpec& b : facts->bindings) {
        if (source ? b.exchange == name : b.destination_exchange == name) {
          items.push_back(api::BindingJson(b));
        }
      }
      return List(std::move(items));
    }
    return NotFound();
  }

  // /api/bindings[/{vhost}]: every binding, the default exchange's implicit ones first in
  // each vhost as RabbitMQ lists them.
  Reply Bindings() const {
    const std::string vhost = path_.size() == 2 ? path_[1] : "";
    if (path_.size() == 2) {
      if (auto refused = CheckVhost(vhost)) return *refused;
    }
    struct Facts {
      std::vector<QueueInfo> queues;
      std::vector<BindingSpec> bindings;
    };
    auto facts = api_.Ask<Facts>([vhost](const broker::Broker& broker) {
      return Facts{broker.ListQueues("", vhost), broker.ListBindings("", "", vhost)};
    });
    if (!facts) return BrokerBusy();
    Json items = Json::array();
    for (const QueueInfo& q : facts->queues)
      items.push_back(api::DefaultBindingJson(q.vhost, q.name));
    for (const BindingSpec& b : facts->bindings) items.push_back(api::BindingJson(b));
    return List(Visible(std::move(items)));
  }

  // GET /api/bindings/{vhost}/e/{source}/q|e/{destination}: the bindings between the two.
  Reply BindingsBetween(const std::string& source, const std::string& kind,
                        const std::string& destination) const {
    const std::string vhost = path_[1];
    auto bindings =
        api_.Ask<std::vector<BindingSpec>>([vhost, source](const broker::Broker& broker) {
          return broker.ListBindings(source, "", vhost);
        });
    if (!bindings) return BrokerBusy();
    Json items = Json::array();
    for (const BindingSpec& b : *bindings) {
      const std::string& to = kind == "q" ? b.queue : b.destination_exchange;
      if (b.exchange == source && to == destination &&
          (kind == "q") == b.destination_exchange.empty()) {
        items.push_back(api::BindingJson(b));
      }
    }
    return List(std::move(items));
  }

  // Connections (of `vhost`, "" = all): every one for monitoring and administrator, the
  // user's own for the others.
  Reply Connections(const std::string& vhost) const {
    auto connections = api_.Ask<std::vector<ConnectionInfo>>(
        [vhost](const broker::Broker& broker) { return broker.ListConnections(vhost); });
    if (!connections) return BrokerBusy();
    Json items = Json::array();
    for (const ConnectionInfo& c : *connections) {
      if (!SeesUser(c.user)) continue;
      items.push_back(api::ConnectionJson(c, api_.config_.node.node));
    }
    return List(std::move(items));
  }

  // /api/consumers[/{vhost}]
  Reply Consumers() const {
    const std::string vhost = path_.size() == 2 ? path_[1] : "";
    if (path_.size() == 2) {
      if (auto refused = CheckVhost(vhost)) return *refused;
    }
    auto consumers = api_.Ask<std::vector<ConsumerInfo>>(
        [vhost](const broker::Broker& broker) { return broker.ListConsumers("", vhost); });
    if (!consumers) return BrokerBusy();
    Json items = Json::array();
    for (const ConsumerInfo& c : *consumers) {
      if (!SeesVhost(c.vhost) || !SeesUser(c.user)) continue;
      items.push_back(api::ConsumerJson(c));
    }
    return List(std::move(items));
  }

  // /api/users[/{name}[/permissions]] (administrator)
  Reply Users() const {
    if (!Administrator()) return NotAuthorised("Not administrator user");
    if (path_.size() > 3 || (path_.size() == 3 && path_[2] != "permissions")) return NotFound();
    std::vector<UserInfo> users = api_.config_.users->List();
    if (path_.size() == 1) return List(JsonArray(users, api::UserJson));
    for (const UserInfo& u : users) {
      if (u.name != path_[1]) continue;
      if (path_.size() == 2) return Reply{200, api::UserJson(u)};
      return Permissions(u.name, "");
    }
    return NotFound();
  }

  // /api/policies[/{vhost}[/{name}]] (policymaker, administrator): of the vhosts the user
  // sees.
  Reply Policies() const {
    if (!Policymaker()) return NotAuthorised("Not policymaker user");
    if (path_.size() > 3) return NotFound();
    std::optional<std::string> vhost;
    if (path_.size() >= 2) {
      if (auto refused = CheckVhost(path_[1])) return *refused;
      vhost = path_[1];
    }
    auto policies = api_.Ask<std::vector<PolicyInfo>>([vhost](const broker::Broker& broker) {
      return vhost ? broker.ListPolicies(*vhost) : broker.ListPolicies();
    });
    if (!policies) return BrokerBusy();
    // RabbitMQ's order: by priority, then vhost and name (ListPolicies' order).
    std::stable_sort(
        policies->begin(), policies->end(),
        [](const PolicyInfo& a, const PolicyInfo& b) { return a.priority < b.priority; });
    Json items = Json::array();
    for (const PolicyInfo& p : *policies) {
      if (!SeesVhost(p.vhost)) continue;
      if (path_.size() == 3) {
        if (p.name == path_[2]) return Reply{200, json::PolicyJson(p)};
        continue;
      }
      items.push_back(json::PolicyJson(p));
    }
    if (path_.size() == 3) return NotFound();
    return List(std::move(items));
  }

  // GET /api/definitions[/{vhost}] (administrator): RabbitMQ's definitions document.
  Reply ExportDefinitions() const {
    if (!Administrator()) return NotAuthorised("Not administrator user");
    std::optional<std::string> vhost;
    if (path_.size() == 2) {
      if (auto refused = CheckVhost(path_[1])) return *refused;
      vhost = path_[1];
    }
    const UserDirectory* users = api_.config_.users;
    auto doc = api_.Ask<Json>([users, vhost](const broker::Broker& broker) {
      return json::DefinitionsJson(server::ExportDefinitions(broker, *users, vhost), WHARF_VERSION);
    });
    if (!doc) return BrokerBusy();
    return Reply{200, std::move(*doc)};
  }

  // POST /api/definitions[/{vhost}] (administrator): 204 once imported and on disk, as
  // RabbitMQ's; 400 with the report when anything was refused.
  Reply ImportDefinitions() const {
    if (!Administrator()) return NotAuthorised("Not administrator user");
    std::optional<std::string_view> vhost;
    if (path_.size() == 2) {
      if (auto refused = CheckVhost(path_[1])) return *refused;
      vhost = path_[1];
    }
    auto definitions = ParseDefinitions(request_.body, vhost);
    if (!definitions.ok()) {
      return Error(400, "bad_request", std::string(definitions.status().message()));
    }
    auto promise = std::make_shared<std::promise<ImportReport>>();
    auto future = promise->get_future();
    auto import_definitions = api_.config_.import_definitions;
    auto shared = std::make_shared<json::Definitions>(std::move(*definitions));
    api_.config_.post_to_broker([import_definitions, promise, shared] {
      import_definitions(std::move(*shared),
                         [promise](ImportReport report) { promise->set_value(std::move(report)); });
    });
    if (future.wait_for(kImportTimeout) != std::future_status::ready) {
      return Error(503, "service_unavailable",
                   "the import did not finish in time; it goes on, and may still take effect");
    }
    ImportReport report;
    try {
      report = future.get();
    } catch (const std::future_error&) {  // the broker context went away with it (shutdown)
      return BrokerBusy();
    }
    if (report.ok()) return Reply{204, nullptr};
    Reply refused = Error(400, "bad_request", report.errors.front());
    refused.body["report"] = report.ToJson();
    return refused;
  }

  // GET /api/permissions/{vhost}/{user} (administrator): 404 when there are none.
  Reply Permission(const std::string& vhost, const std::string& user) const {
    if (!Administrator()) return NotAuthorised("Not administrator user");
    auto known = api_.config_.users->Find(user);
    if (!known) return NotFound();
    for (const UserPermission& p : known->permissions) {
      if (p.vhost == vhost) return Reply{200, api::PermissionJson(user, p)};
    }
    return NotFound();
  }

  // GET /api/user-limits[/{user}]: RabbitMQ's [{"user", "value": {limit: N}}], of the users
  // with a limit. An administrator sees everyone's, another user its own.
  Reply UserLimits() const {
    std::vector<UserInfo> users = api_.config_.users->List();
    if (path_.size() == 2 && std::none_of(users.begin(), users.end(),
                                          [&](const UserInfo& u) { return u.name == path_[1]; })) {
      return NotFound();
    }
    Json items = Json::array();
    for (const UserInfo& u : users) {
      if (path_.size() == 2 && u.name != path_[1]) continue;
      if (!Administrator() && u.name != access_->user()) continue;
      Json value = api::UserJson(u)["limits"];
      if (!value.empty()) items.push_back(Json{{"user", u.name}, {"value", std::move(value)}});
    }
    return List(std::move(items));
  }

  // GET /api/vhost-limits[/{vhost}]: [{"vhost", "value": {limit: N}}], of the vhosts with a
  // limit that the user may list.
  Reply VhostLimits() const {
    if (path_.size() == 2) {
      if (auto refused = CheckVhost(path_[1])) return *refused;
    }
    auto vhosts = api_.Ask<std::vector<VhostInfo>>(
        [](const broker::Broker& broker) { return broker.ListVhosts(); });
    if (!vhosts) return BrokerBusy();
    Json items = Json::array();
    for (const VhostInfo& v : *vhosts) {
      if (path_.size() == 2 && v.name != path_[1]) continue;
      if (!ListsVhost(v.name)) continue;
      Json value = api::VhostJson(v, {})["limits"];
      if (!value.empty()) items.push_back(Json{{"vhost", v.name}, {"value", std::move(value)}});
    }
    return List(std::move(items));
  }

  // Permissions of `user` and/or in `vhost` ("" = any) (administrator).
  Reply Permissions(const std::string& user, const std::string& vhost) const {
    if (!Administrator()) return NotAuthorised("Not administrator user");
    Json items = Json::array();
    for (const UserInfo& u : api_.config_.users->List()) {
      if (!user.empty() && u.name != user) continue;
      for (const UserPermission& p : u.permissions) {
        if (vhost.empty() || p.vhost == vhost) items.push_back(api::PermissionJson(u.name, p));
      }
    }
    return List(std::move(items));
  }

  const HttpApi& api_;
  const Request& request_;
  const std::vector<std::string>& path_;
  const std::shared_ptr<const broker::Access> access_;
};

HttpApi::Response HttpApi::Handle(const Request& request) const {
  Response response;
  HttpAuth::Answer login = config_.auth->Authenticate(request.credentials);
  response.user = login.user;
  response.failed_login = login.failed_login;
  Reply reply;
  if (login.status != 200) {
    // RabbitMQ answers a failed login 401 "Login failed"; Wharf says why, as for /metrics.
    // RabbitMQ spells a failed login's "not_authorized", the refusals after it "not_authorised".
    const char* error = login.status == 401   ? "not_authorized"
                        : login.status == 429 ? "too_many_requests"
                        : login.status == 503 ? "service_unavailable"
                                              : "forbidden";
    reply = Error(login.status, error, login.reason);
    response.ask_credentials = login.status == 401;
  } else {
    auto access = config_.users->AccessOf(login.user);
    if (!access->HasTag(broker::kAnyManagementTag)) {
      reply = NotAuthorised("Not management user");
    } else {
      reply = Call(*this, request, std::move(access)).Run();
    }
  }
  response.status = reply.status;
  // 201 and 204 carry no body, as RabbitMQ's.
  if (!reply.body.is_null()) response.body = json::Dump(reply.body, false);
  response.allow = std::move(reply.allow);
  return response;
}

}  // namespace wharf::server
