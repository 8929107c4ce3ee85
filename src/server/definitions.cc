#include "server/definitions.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <asio/post.hpp>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "broker/broker.h"
#include "broker/exchange.h"
#include "common/log_safe.h"
#include "server/internal_session.h"
#include "server/user_changes.h"
#include "server/user_directory.h"

namespace wharf::server {
namespace {

using json::Json;

// Never imported, whatever the file says: Wharf's guest is its own loopback-only administrator
// (or absent, with [auth] loopback_guest = false); a stored "guest" with RabbitMQ's guest/guest
// would be an administrator reachable from anywhere.
constexpr const char* kGuest = "guest";
constexpr const char* kGuestIsWharfs =
    "Wharf's own loopback-only administrator ([auth] loopback_guest); never imported";

bool IsBuiltinExchange(std::string_view name) { return name.empty() || name.starts_with("amq."); }

// The exchange's type as RabbitMQ names it, and its arguments as declared (the alternate
// exchange in them: ExchangeInfo's; a policy's is the policy's).
std::pair<std::string, Headers> DeclaredExchange(const ExchangeInfo& e) {
  Headers arguments = e.arguments;
  std::string type(ExchangeTypeName(e.type));
  if (e.delayed) {
    if (!arguments.contains("x-delayed-type")) arguments["x-delayed-type"] = type;
    type = "x-delayed-message";
  }
  return {type, arguments};
}

class ImportRun : public std::enable_shared_from_this<ImportRun> {
 public:
  ImportRun(const ServerContext& context, json::Definitions definitions,
            std::function<void(ImportReport)> done)
      : context_(context), definitions_(std::move(definitions)), done_(std::move(done)) {
    report_.skipped = definitions_.skipped;  // what the document holds that Wharf does not take
  }

  void Start() {
    Vhosts();
    auto self = shared_from_this();
    context_.user_changes->Run(
        [self](std::function<void()> done) { self->Users(std::move(done)); });
  }

 private:
  broker::Broker& broker() { return *context_.broker; }
  void Error(std::string text) { report_.errors.push_back(std::move(text)); }

  void Vhosts() {
    for (const json::DefinitionsVhost& v : definitions_.vhosts) {
      Status s = broker().AddVhost(v.name, v.description);
      if (s.ok() && v.limits) s = broker().SetVhostLimits(v.name, *v.limits);
      if (!s.ok()) {
        Error("vhost " + QuotedForDisplay(v.name) + ": " + std::string(s.message()));
        continue;
      }
      ++report_.vhosts;
    }
    // Written ahead of the users' commit (the store writes in order): no permission on disk
    // names a vhost that is not.
    if (context_.after_broker_work) context_.after_broker_work();
  }

  // Users and permissions: one write, then applied; the next steps follow its commit.
  void Users(std::function<void()> done) {
    UserDirectory& users = *context_.users;
    std::map<std::string, store::StoredUser> changed;
    for (const json::DefinitionsUser& u : definitions_.users) {
      const std::string what = "user " + QuotedForDisplay(u.name);
      if (u.name == kGuest) {
        report_.skipped.push_back(what + ": " + kGuestIsWharfs);
        continue;
      }
      if (u.password_hash.empty()) {
        report_.skipped.push_back(what + ": it has no password (Wharf's users need one)");
        continue;
      }
      if (Status s = users.CheckChange(u.name, &u.password_hash); !s.ok()) {
        if (s.code() == StatusCode::kPreconditionFailed) {
          report_.skipped.push_back(what + ": " + std::string(s.message()));
        } else {
          Error(what + ": " + std::string(s.message()));
        }
        continue;
      }
      store::StoredUser user =
          users.Stored(u.name).value_or(store::StoredUser{u.name, "", false, {}, {}, {}});
      user.password_hash = u.password_hash;
      user.tags = u.tags;
      user.admin = std::find(u.tags.begin(), u.tags.end(), "administrator") != u.tags.end();
      user.limits = u.limits;
      changed[u.name] = std::move(user);
    }
    for (const json::DefinitionsPermission& p : definitions_.permissions) {
      const std::string what = "permissions of user " + QuotedForDisplay(p.user) + " in vhost " +
                               QuotedForDisplay(p.permission.vhost);
      if (p.user == kGuest) {
        report_.skipped.push_back(what + ": " + kGuestIsWharfs);
        continue;
      }
      if (!broker().HasVhost(p.permission.vhost)) {
        Error(what + ": no such vhost");
        continue;
      }
      auto it = changed.find(p.user);
      if (it == changed.end()) {
        if (Status s = users.CheckStoredChange(p.user, "permissions"); !s.ok()) {
          auto existing = users.Find(p.user);
          if (existing && existing->source != "store") {
            report_.skipped.push_back(what + ": " + std::string(s.message()));
          } else {
            Error(what + ": " + std::string(s.message()));
          }
          continue;
        }
        it = changed.emplace(p.user, *users.Stored(p.user)).first;
      }
      auto& permissions = it->second.permissions;
      std::erase_if(permissions,
                    [&](const UserPermission& have) { return have.vhost == p.permission.vhost; });
      permissions.push_back(p.permission);
      ++report_.permissions;
    }
    if (changed.empty()) return Continue(std::move(done));
    store::StoreBatch batch;
    for (const auto& [name, user] : changed) batch.Add(store::StoreBatch::PutUser{user});
    const size_t made = std::count_if(definitions_.users.begin(), definitions_.users.end(),
                                      [&](const auto& u) { return changed.contains(u.name); });
    auto self = shared_from_this();
    context_.store->Commit(std::move(batch), /*sync=*/true,
                           [self, changed = std::move(changed), made, done](Status status) {
                             if (!status.ok()) {
                               self->Error("users and permissions: " + status.ToString());
                               self->report_.permissions = 0;
                             } else {
                               for (const auto& [name, user] : changed) {
                                 self->context_.users->Put(user);
                               }
                               self->report_.users = made;
                             }
                             self->Continue(done);
                           });
  }

  // After the users: policies and topology, then the answer once on disk.
  void Continue(std::function<void()> users_done) {
    users_done();  // the next user change may start: this import is done with users
    Policies();
    Topology();
    Finish();
  }

  void Policies() {
    for (const PolicyInfo& p : definitions_.policies) {
      Status s = broker().SetPolicy(p);
      if (!s.ok()) {
        Error("policy " + QuotedForDisplay(p.name) + " in vhost " + QuotedForDisplay(p.vhost) +
              ": " + std::string(s.message()));
        continue;
      }
      ++report_.policies;
    }
  }

  // The session of `vhost`, opened on first use; 0 when the vhost does not exist.
  uint64_t SessionIn(const std::string& vhost) {
    if (auto it = sessions_.find(vhost); it != sessions_.end()) return it->second;
    if (!broker().HasVhost(vhost)) return 0;
    // Internal and trusted (server/internal_session.h), one per vhost.
    auto id = OpenInternalSession(context_, vhost, "definitions import");
    if (!id.ok()) {
      Error("vhost " + QuotedForDisplay(vhost) + ": " + std::string(id.status().message()));
      return 0;
    }
    sessions_[vhost] = *id;
    return *id;
  }

  void Topology() {
    for (const json::DefinitionsExchange& e : definitions_.exchanges) {
      const std::string what = "exchange " + QuotedForDisplay(e.spec.name) + " in vhost " +
                               QuotedForDisplay(e.spec.vhost);
      if (IsBuiltinExchange(e.spec.name)) continue;  // every vhost has them
      const uint64_t session = SessionIn(e.spec.vhost);
      if (session == 0) {
        Error(what + ": no such vhost");
        continue;
      }
      ExchangeSpec spec = e.spec;
      Status s = broker::ApplyDeclaredType(e.type, &spec);
      if (s.ok()) s = broker().DeclareExchange(session, spec);
      if (!s.ok()) {
        Error(what + ": " + std::string(s.message()));
        continue;
      }
      ++report_.exchanges;
    }
    for (const QueueSpec& q : definitions_.queues) {
      const std::string what =
          "queue " + QuotedForDisplay(q.name) + " in vhost " + QuotedForDisplay(q.vhost);
      const uint64_t session = SessionIn(q.vhost);
      if (session == 0) {
        Error(what + ": no such vhost");
        continue;
      }
      QueueSpec spec = q;
      broker::AddQuorumDeliveryLimit(&spec.arguments);  // as AMQP's queue.declare
      auto declared = broker().DeclareQueue(session, spec);
      if (!declared.ok()) {
        Error(what + ": " + std::string(declared.status().message()));
        continue;
      }
      ++report_.queues;
    }
    for (const BindingSpec& b : definitions_.bindings) {
      const std::string what =
          "binding of " + QuotedForDisplay(b.exchange) + " to " +
          QuotedForDisplay(b.queue.empty() ? b.destination_exchange : b.queue) + " in vhost " +
          QuotedForDisplay(b.vhost);
      const uint64_t session = SessionIn(b.vhost);
      if (session == 0) {
        Error(what + ": no such vhost");
        continue;
      }
      Status s = broker().Bind(session, b);
      if (!s.ok()) {
        Error(what + ": " + std::string(s.message()));
        continue;
      }
      ++report_.bindings;
    }
  }

  // Answers once every change is synced: through an import session's AnswerWhenDurable (the
  // anchor, made when none was needed for topology), then closes the sessions.
  void Finish() {
    const uint64_t anchor = SessionIn(std::string(broker::kDefaultVhost));
    auto self = shared_from_this();
    auto answer = [self](const Status& status) {
      if (!status.ok()) self->Error("the import's changes: " + status.ToString());
      spdlog::info(
          "definitions imported: {} vhosts, {} users, {} permissions, {} policies, {} "
          "exchanges, {} queues, {} bindings; {} skipped, {} errors",
          self->report_.vhosts, self->report_.users, self->report_.permissions,
          self->report_.policies, self->report_.exchanges, self->report_.queues,
          self->report_.bindings, self->report_.skipped.size(), self->report_.errors.size());
      for (const std::string& error : self->report_.errors) {
        spdlog::warn("definitions import: {}", LogSafe(error, kLogSafeStatusBytes));
      }
      // Not from inside the broker's call into the session: closed once it returns.
      asio::post(*self->context_.broker_context, [self] {
        for (const auto& [vhost, id] : self->sessions_) self->broker().CloseSession(id);
        if (self->context_.after_broker_work) self->context_.after_broker_work();
        self->done_(std::move(self->report_));
      });
    };
    if (anchor == 0) return answer(Status::Ok());
    broker().AnswerWhenDurable(
        anchor, [answer](broker::SessionPeer&, const Status& status) { answer(status); });
    if (context_.after_broker_work) context_.after_broker_work();
  }

  const ServerContext context_;  // pointers and functions: copied
  json::Definitions definitions_;
  std::function<void(ImportReport)> done_;
  ImportReport report_;
  std::map<std::string, uint64_t> sessions_;  // by vhost
};

}  // namespace

Json ImportReport::ToJson() const {
  return Json{{"vhosts", vhosts},     {"users", users},         {"permissions", permissions},
              {"policies", policies}, {"exchanges", exchanges}, {"queues", queues},
              {"bindings", bindings}, {"skipped", skipped},     {"errors", errors}};
}

Result<json::Definitions> ParseDefinitions(std::string_view text,
                                           std::optional<std::string_view> into_vhost) {
  if (json::NestedDeeperThan(text, 32)) {
    return Status(StatusCode::kInvalidArgument, "definitions nest deeper than 32 levels");
  }
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::exception& e) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("definitions are not JSON: ") + e.what());
  }
  return json::DefinitionsFromJson(doc, into_vhost);
}

json::Definitions ExportDefinitions(const broker::Broker& broker, const UserDirectory& users,
                                    const std::optional<std::string>& vhost) {
  json::Definitions out;
  const std::string in = vhost.value_or("");
  // One vhost's: its own definitions only, without users, vhosts and permissions (RabbitMQ's).
  if (!vhost) {
    for (const UserInfo& info : users.List()) {
      if (info.source == "builtin") continue;  // every Wharf has its loopback guest
      for (const UserPermission& p : info.permissions) out.permissions.push_back({info.name, p});
      auto user = users.Find(info.name);
      if (!user) continue;
      out.users.push_back({info.name, user->password_hash, info.tags, info.limits});
    }
    for (const VhostInfo& v : broker.ListVhosts()) {
      out.vhosts.push_back({v.name, v.description, v.limits});
    }
  }
  for (PolicyInfo& p : vhost ? broker.ListPolicies(*vhost) : broker.ListPolicies()) {
    out.policies.push_back(std::move(p));
  }
  // What survives a restart: durable exchanges and queues, and the bindings between them.
  std::set<std::pair<std::string, std::string>> exchanges, queues;  // (vhost, name)
  for (const ExchangeInfo& e : broker.ListExchanges(in)) {
    if (IsBuiltinExchange(e.name) || !e.durable) continue;
    auto [type, arguments] = DeclaredExchange(e);
    ExchangeSpec spec;
    spec.name = e.name;
    spec.vhost = e.vhost;
    spec.durable = e.durable;
    spec.auto_delete = e.auto_delete;
    spec.internal = e.internal;
    spec.arguments = std::move(arguments);
    out.exchanges.push_back({std::move(spec), std::move(type)});
    exchanges.emplace(e.vhost, e.name);
  }
  for (const QueueInfo& q : broker.ListQueues("", in)) {
    if (!q.durable || q.exclusive) continue;
    QueueSpec spec;
    spec.name = q.name;
    spec.vhost = q.vhost;
    spec.durable = q.durable;
    spec.auto_delete = q.auto_delete;
    spec.arguments = q.arguments;
    out.queues.push_back(std::move(spec));
    queues.emplace(q.vhost, q.name);
  }
  for (BindingSpec& b : broker.ListBindings("", "", in)) {
    const bool source = IsBuiltinExchange(b.exchange) ? !b.exchange.empty()
                                                      : exchanges.contains({b.vhost, b.exchange});
    const bool destination = b.destination_exchange.empty()
                                 ? queues.contains({b.vhost, b.queue})
                                 : exchanges.contains({b.vhost, b.destination_exchange}) ||
                                       IsBuiltinExchange(b.destination_exchange);
    if (source && destination) out.bindings.push_back(std::move(b));
  }
  return out;
}

void ImportDefinitions(const ServerContext& context, json::Definitions definitions,
                       std::function<void(ImportReport)> done) {
  std::make_shared<ImportRun>(context, std::move(definitions), std::move(done))->Start();
}

}  // namespace wharf::server
