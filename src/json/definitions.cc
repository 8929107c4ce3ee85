#include "json/definitions.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "common/log_safe.h"
#include "common/password.h"
#include "json/policy.h"

namespace wharf::json {
namespace {

constexpr std::string_view kWharfHashing = "wharf_pbkdf2_sha256";

Status Bad(const std::string& where, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, where + ": " + what);
}

// One item of a section, with its place ("queues[3]") for errors.
class Item {
 public:
  Item(const Json& item, std::string where) : item_(item), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  bool has(const char* key) const { return item_.contains(key); }

  Status Text(const char* key, std::string* out, bool required) const {
    auto it = item_.find(key);
    if (it == item_.end() || it->is_null()) {
      return required ? Bad(where_, std::string("\"") + key + "\" is missing") : Status::Ok();
    }
    if (!it->is_string()) return Bad(where_, std::string("\"") + key + "\" must be a string");
    *out = it->get<std::string>();
    if (!IsUtf8(*out)) return Bad(where_, std::string("\"") + key + "\" is not UTF-8");
    return Status::Ok();
  }
  Status Flag(const char* key, bool* out) const {
    auto it = item_.find(key);
    if (it == item_.end() || it->is_null()) return Status::Ok();
    if (!it->is_boolean()) return Bad(where_, std::string("\"") + key + "\" must be true or false");
    *out = it->get<bool>();
    return Status::Ok();
  }
  Status Arguments(Headers* out) const {
    auto it = item_.find("arguments");
    if (it == item_.end()) return Status::Ok();
    auto headers = HeadersFromJson(*it);
    if (!headers.ok()) return Bad(where_, std::string(headers.status().message()));
    *out = std::move(*headers);
    return Status::Ok();
  }
  // An integer limit; negative means none (-1).
  static Status Limit(const Json& object, const char* key, const std::string& where, int64_t* out) {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return Status::Ok();
    if (!it->is_number_integer() ||
        (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX))) {
      return Bad(where, std::string("\"") + key + "\" must be an integer");
    }
    *out = std::max<int64_t>(it->get<int64_t>(), -1);
    return Status::Ok();
  }
  const Json& json() const { return item_; }

 private:
  const Json& item_;
  std::string where_;
};

// Each element of section `name` (an array, or absent), through `read`.
template <typename Read>
Status Section(const Json& doc, const char* name, Read read) {
  auto it = doc.find(name);
  if (it == doc.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return Bad(name, "must be an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& element = (*it)[i];
    const std::string where = std::string(name) + "[" + std::to_string(i) + "]";
    if (!element.is_object()) return Bad(where, "must be an object");
    WHARF_RETURN_IF_ERROR(read(Item(element, where)));
  }
  return Status::Ok();
}

Status ReadUser(const Item& item, DefinitionsUser* user) {
  WHARF_RETURN_IF_ERROR(item.Text("name", &user->name, true));
  std::string hash, algorithm = "rabbit_password_hashing_sha256";  // RabbitMQ's default
  WHARF_RETURN_IF_ERROR(item.Text("password_hash", &hash, true));
  WHARF_RETURN_IF_ERROR(item.Text("hashing_algorithm", &algorithm, false));
  // Empty: RabbitMQ's user without a password (it logs in by other means only), which the
  // import skips.
  auto stored = StoredPasswordHash(hash, algorithm);
  if (!stored.ok()) return Bad(item.where(), std::string(stored.status().message()));
  user->password_hash = std::move(*stored);
  if (auto tags = item.json().find("tags"); tags != item.json().end() && !tags->is_null()) {
    auto read = TagsFromJson(*tags);
    if (!read.ok()) return Bad(item.where(), std::string(read.status().message()));
    user->tags = std::move(*read);
  }
  if (auto limits = item.json().find("limits"); limits != item.json().end()) {
    if (limits->is_object()) {
      WHARF_RETURN_IF_ERROR(
          Item::Limit(*limits, "max-connections", item.where(), &user->limits.max_connections));
      WHARF_RETURN_IF_ERROR(
          Item::Limit(*limits, "max-channels", item.where(), &user->limits.max_channels));
    } else if (!limits->is_array() && !limits->is_null()) {  // RabbitMQ writes [] for none
      return Bad(item.where(), "\"limits\" must be an object");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> StoredPasswordHash(const std::string& password_hash,
                                       const std::string& hashing_algorithm) {
  if (password_hash.empty()) return std::string();
  std::string stored;
  if (hashing_algorithm == kWharfHashing) {
    stored = password_hash;
  } else if (std::string_view scheme = RabbitMqHashScheme(hashing_algorithm); !scheme.empty()) {
    stored = std::string(scheme) + "$" + password_hash;
  } else {
    return Status(StatusCode::kInvalidArgument,
                  "hashing_algorithm '" + CutForDisplay(hashing_algorithm) +
                      "' is not one Wharf verifies (rabbit_password_hashing_sha256, _sha512, "
                      "_md5, or wharf_pbkdf2_sha256)");
  }
  if (!ValidatePasswordHash(stored).ok()) {
    return Status(StatusCode::kInvalidArgument,
                  "password_hash does not decode as its hashing_algorithm says");
  }
  return stored;
}

Result<std::vector<std::string>> TagsFromJson(const Json& tags) {
  std::vector<std::string> out;
  if (tags.is_string()) {
    const std::string text = tags.get<std::string>();
    size_t start = 0;
    while (start <= text.size()) {
      const size_t comma = text.find(',', start);
      const size_t end = comma == std::string::npos ? text.size() : comma;
      size_t first = start, last = end;
      while (first < last && text[first] == ' ') ++first;
      while (last > first && text[last - 1] == ' ') --last;
      if (last > first) out.push_back(text.substr(first, last - first));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }
  if (!tags.is_array()) {
    return Status(StatusCode::kInvalidArgument, "\"tags\" must be an array or a string");
  }
  for (const Json& tag : tags) {
    if (!tag.is_string()) return Status(StatusCode::kInvalidArgument, "\"tags\" must be strings");
    out.push_back(tag.get<std::string>());
  }
  return out;
}

namespace {

// A stored hash as a definitions file gives it: (hashing_algorithm, password_hash).
std::pair<std::string, std::string> ExportedHash(const std::string& encoded) {
  std::string_view algorithm = RabbitMqHashingAlgorithm(encoded);
  if (algorithm.empty()) return {std::string(kWharfHashing), encoded};
  return {std::string(algorithm), encoded.substr(encoded.find('$') + 1)};
}

}  // namespace

Result<Definitions> DefinitionsFromJson(const Json& doc,
                                        std::optional<std::string_view> into_vhost) {
  if (!doc.is_object()) {
    return Status(StatusCode::kInvalidArgument, "definitions must be a JSON object");
  }
  Definitions out;
  auto vhost_of = [&](const Item& item, std::string* vhost) -> Status {
    if (into_vhost) {
      *vhost = std::string(*into_vhost);
      return Status::Ok();
    }
    *vhost = "/";
    return item.Text("vhost", vhost, false);
  };
  // Into one vhost: only its own definitions, as RabbitMQ's per-vhost import.
  for (const char* section : {"users", "vhosts", "permissions"}) {
    auto it = doc.find(section);
    if (!into_vhost || it == doc.end() || !it->is_array() || it->empty()) continue;
    out.skipped.push_back(std::string(section) + ": " + std::to_string(it->size()) +
                          " entries: an import into one vhost takes its own definitions only");
  }
  auto whole = [&](const char* section) {
    return into_vhost ? Json() : doc.value(section, Json());
  };
  const Json vhosts = whole("vhosts"), users = whole("users"), permissions = whole("permissions");
  const Json scoped = Json{{"vhosts", vhosts}, {"users", users}, {"permissions", permissions}};

  WHARF_RETURN_IF_ERROR(Section(scoped, "vhosts", [&](const Item& item) -> Status {
    DefinitionsVhost vhost;
    WHARF_RETURN_IF_ERROR(item.Text("name", &vhost.name, true));
    WHARF_RETURN_IF_ERROR(item.Text("description", &vhost.description, false));
    if (auto metadata = item.json().find("metadata");
        vhost.description.empty() && metadata != item.json().end() && metadata->is_object()) {
      WHARF_RETURN_IF_ERROR(Item(*metadata, item.where() + ".metadata")
                                .Text("description", &vhost.description, false));
    }
    out.vhosts.push_back(std::move(vhost));
    return Status::Ok();
  }));
  WHARF_RETURN_IF_ERROR(Section(scoped, "users", [&](const Item& item) -> Status {
    DefinitionsUser user;
    WHARF_RETURN_IF_ERROR(ReadUser(item, &user));
    out.users.push_back(std::move(user));
    return Status::Ok();
  }));
  WHARF_RETURN_IF_ERROR(Section(scoped, "permissions", [&](const Item& item) -> Status {
    DefinitionsPermission p;
    WHARF_RETURN_IF_ERROR(item.Text("user", &p.user, true));
    WHARF_RETURN_IF_ERROR(vhost_of(item, &p.permission.vhost));
    WHARF_RETURN_IF_ERROR(item.Text("configure", &p.permission.configure, true));
    WHARF_RETURN_IF_ERROR(item.Text("write", &p.permission.write, true));
    WHARF_RETURN_IF_ERROR(item.Text("read", &p.permission.read, true));
    out.permissions.push_back(std::move(p));
    return Status::Ok();
  }));
  size_t topic_permissions = 0;
  WHARF_RETURN_IF_ERROR(Section(doc, "topic_permissions", [&](const Item&) -> Status {
    ++topic_permissions;
    return Status::Ok();
  }));
  if (topic_permissions > 0) {
    out.skipped.push_back("topic_permissions: " + std::to_string(topic_permissions) +
                          " entries: Wharf has no topic permissions");
  }
  WHARF_RETURN_IF_ERROR(Section(doc, "parameters", [&](const Item& item) -> Status {
    std::string component, vhost, name;
    WHARF_RETURN_IF_ERROR(item.Text("component", &component, true));
    WHARF_RETURN_IF_ERROR(vhost_of(item, &vhost));
    WHARF_RETURN_IF_ERROR(item.Text("name", &name, false));
    auto value = item.json().find("value");
    if (component != "vhost-limits" || value == item.json().end() || !value->is_object()) {
      out.skipped.push_back(item.where() + ": parameter '" + name + "' of component '" + component +
                            "' in vhost '" + vhost + "': Wharf has no such component");
      return Status::Ok();
    }
    VhostLimits limits;
    WHARF_RETURN_IF_ERROR(
        Item::Limit(*value, "max-connections", item.where(), &limits.max_connections));
    WHARF_RETURN_IF_ERROR(Item::Limit(*value, "max-queues", item.where(), &limits.max_queues));
    for (DefinitionsVhost& v : out.vhosts) {
      if (v.name == vhost) {
        v.limits = limits;
        return Status::Ok();
      }
    }
    out.vhosts.push_back(DefinitionsVhost{vhost, "", limits});
    return Status::Ok();
  }));
  WHARF_RETURN_IF_ERROR(Section(doc, "policies", [&](const Item& item) -> Status {
    PolicyInfo policy;
    policy.vhost = "/";
    if (Status read = PolicyFromJson(item.json(), &policy); !read.ok()) {
      return Bad(item.where(), std::string(read.message()));
    }
    if (into_vhost) policy.vhost = std::string(*into_vhost);
    if (policy.name.empty()) return Bad(item.where(), "\"name\" is missing");
    out.policies.push_back(std::move(policy));
    return Status::Ok();
  }));
  WHARF_RETURN_IF_ERROR(Section(doc, "queues", [&](const Item& item) -> Status {
    QueueSpec spec;
    WHARF_RETURN_IF_ERROR(item.Text("name", &spec.name, true));
    WHARF_RETURN_IF_ERROR(vhost_of(item, &spec.vhost));
    WHARF_RETURN_IF_ERROR(item.Flag("durable", &spec.durable));
    WHARF_RETURN_IF_ERROR(item.Flag("auto_delete", &spec.auto_delete));
    WHARF_RETURN_IF_ERROR(item.Arguments(&spec.arguments));
    std::string type;
    WHARF_RETURN_IF_ERROR(item.Text("type", &type, false));
    if (!type.empty() && type != "classic" && !spec.arguments.contains("x-queue-type")) {
      spec.arguments["x-queue-type"] = type;
    }
    out.queues.push_back(std::move(spec));
    return Status::Ok();
  }));
  WHARF_RETURN_IF_ERROR(Section(doc, "exchanges", [&](const Item& item) -> Status {
    DefinitionsExchange e;
    WHARF_RETURN_IF_ERROR(item.Text("name", &e.spec.name, true));
    WHARF_RETURN_IF_ERROR(vhost_of(item, &e.spec.vhost));
    WHARF_RETURN_IF_ERROR(item.Text("type", &e.type, true));
    WHARF_RETURN_IF_ERROR(item.Flag("durable", &e.spec.durable));
    WHARF_RETURN_IF_ERROR(item.Flag("auto_delete", &e.spec.auto_delete));
    WHARF_RETURN_IF_ERROR(item.Flag("internal", &e.spec.internal));
    WHARF_RETURN_IF_ERROR(item.Arguments(&e.spec.arguments));
    out.exchanges.push_back(std::move(e));
    return Status::Ok();
  }));
  WHARF_RETURN_IF_ERROR(Section(doc, "bindings", [&](const Item& item) -> Status {
    BindingSpec b;
    std::string destination, kind = "queue";
    WHARF_RETURN_IF_ERROR(item.Text("source", &b.exchange, true));
    WHARF_RETURN_IF_ERROR(vhost_of(item, &b.vhost));
    WHARF_RETURN_IF_ERROR(item.Text("destination", &destination, true));
    WHARF_RETURN_IF_ERROR(item.Text("destination_type", &kind, false));
    WHARF_RETURN_IF_ERROR(item.Text("routing_key", &b.routing_key, false));
    WHARF_RETURN_IF_ERROR(item.Arguments(&b.arguments));
    if (kind == "queue") {
      b.queue = destination;
    } else if (kind == "exchange") {
      b.destination_exchange = destination;
    } else {
      return Bad(item.where(), "\"destination_type\" must be queue or exchange");
    }
    out.bindings.push_back(std::move(b));
    return Status::Ok();
  }));
  return out;
}

Json DefinitionsJson(const Definitions& d, std::string_view product_version) {
  Json doc = Json::object();
  doc["product_name"] = "Wharf";
  doc["product_version"] = product_version;
  Json users = Json::array();
  for (const DefinitionsUser& u : d.users) {
    auto [algorithm, hash] = ExportedHash(u.password_hash);
    Json limits = Json::object();
    if (u.limits.max_connections >= 0) limits["max-connections"] = u.limits.max_connections;
    if (u.limits.max_channels >= 0) limits["max-channels"] = u.limits.max_channels;
    users.push_back(Json{{"name", u.name},
                         {"password_hash", hash},
                         {"hashing_algorithm", algorithm},
                         {"tags", u.tags},
                         {"limits", std::move(limits)}});
  }
  doc["users"] = std::move(users);
  Json vhosts = Json::array();
  Json parameters = Json::array();
  for (const DefinitionsVhost& v : d.vhosts) {
    vhosts.push_back(
        Json{{"name", v.name},
             {"description", v.description},
             {"metadata", Json{{"description", v.description}, {"tags", Json::array()}}}});
    if (v.limits && (v.limits->max_connections >= 0 || v.limits->max_queues >= 0)) {
      Json value = Json::object();
      if (v.limits->max_connections >= 0) value["max-connections"] = v.limits->max_connections;
      if (v.limits->max_queues >= 0) value["max-queues"] = v.limits->max_queues;
      parameters.push_back(Json{{"value", std::move(value)},
                                {"vhost", v.name},
                                {"component", "vhost-limits"},
                                {"name", "limits"}});
    }
  }
  doc["vhosts"] = std::move(vhosts);
  Json permissions = Json::array();
  for (const DefinitionsPermission& p : d.permissions) {
    permissions.push_back(Json{{"user", p.user},
                               {"vhost", p.permission.vhost},
                               {"configure", p.permission.configure},
                               {"write", p.permission.write},
                               {"read", p.permission.read}});
  }
  doc["permissions"] = std::move(permissions);
  doc["topic_permissions"] = Json::array();
  doc["parameters"] = std::move(parameters);
  doc["global_parameters"] = Json::array();
  Json policies = Json::array();
  for (const PolicyInfo& p : d.policies) policies.push_back(PolicyJson(p));
  doc["policies"] = std::move(policies);
  Json queues = Json::array();
  for (const QueueSpec& q : d.queues) {
    queues.push_back(Json{{"name", q.name},
                          {"vhost", q.vhost},
                          {"durable", q.durable},
                          {"auto_delete", q.auto_delete},
                          {"arguments", HeadersJson(q.arguments)}});
  }
  doc["queues"] = std::move(queues);
  Json exchanges = Json::array();
  for (const DefinitionsExchange& e : d.exchanges) {
    exchanges.push_back(Json{{"name", e.spec.name},
                             {"vhost", e.spec.vhost},
                             {"type", e.type},
                             {"durable", e.spec.durable},
                             {"auto_delete", e.spec.auto_delete},
                             {"internal", e.spec.internal},
                             {"arguments", HeadersJson(e.spec.arguments)}});
  }
  doc["exchanges"] = std::move(exchanges);
  Json bindings = Json::array();
  for (const BindingSpec& b : d.bindings) {
    const bool to_exchange = !b.destination_exchange.empty();
    bindings.push_back(Json{{"source", b.exchange},
                            {"vhost", b.vhost},
                            {"destination", to_exchange ? b.destination_exchange : b.queue},
                            {"destination_type", to_exchange ? "exchange" : "queue"},
                            {"routing_key", b.routing_key},
                            {"arguments", HeadersJson(b.arguments)}});
  }
  doc["bindings"] = std::move(bindings);
  return doc;
}

}  // namespace wharf::json
