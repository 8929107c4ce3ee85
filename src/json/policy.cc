#include "json/policy.h"

#include <cstdint>
#include <string>

namespace wharf::json {
namespace {

Status Bad(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

}  // namespace

Json DefinitionJson(const Headers& definition) {
  Json out = Json::object();
  for (const auto& [key, value] : definition) {
    // An array or object is kept as its JSON text (DefinitionFromJson).
    if (const auto* json = std::get_if<Bytes>(&value)) {
      out[key] = Json::parse(json->data, nullptr, /*allow_exceptions=*/false);
      if (!out[key].is_discarded()) continue;
    }
    out[key] = HeaderValueJson(value);
  }
  return out;
}

Json PolicyJson(const PolicyInfo& policy) {
  return Json{{"vhost", policy.vhost},
              {"name", policy.name},
              {"pattern", policy.pattern},
              {"apply-to", policy.apply_to},
              {"definition", DefinitionJson(policy.definition)},
              {"priority", policy.priority}};
}

Result<Headers> DefinitionFromJson(const Json& object) {
  if (!object.is_object()) return Bad("a policy's \"definition\" must be a JSON object");
  Headers out;
  for (const auto& [key, value] : object.items()) {
    if (!IsUtf8(key)) return Bad("a policy definition key is not UTF-8");
    if (value.is_boolean()) {
      out[key] = value.get<bool>();
    } else if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX)) {
      return Bad("policy definition key '" + key + "' = " + value.dump() + " is out of range");
    } else if (value.is_number_integer()) {
      out[key] = value.get<int64_t>();
    } else if (value.is_number_float()) {
      out[key] = value.get<double>();
    } else if (value.is_string()) {
      out[key] = value.get<std::string>();
    } else if (value.is_array() || value.is_object()) {
      // Only RabbitMQ's keys Wharf keeps without applying take these (ha-params: a list of
      // nodes): kept as their JSON text, typed bytes so that no applied key mistakes one for a
      // string (broker::ValidatePolicy refuses it there).
      out[key] = Bytes{value.dump()};
    } else {
      return Bad("policy definition key '" + key +
                 "' is null: a value must be a number, a "
                 "string, a boolean, or (for a key Wharf only keeps) a list or an object");
    }
  }
  return out;
}

Status PolicyFromJson(const Json& object, PolicyInfo* out) {
  if (!object.is_object()) return Bad("a policy must be a JSON object");
  auto text = [&](const char* key, std::string* field, bool required) -> Status {
    auto it = object.find(key);
    if (it == object.end()) {
      return required ? Bad(std::string("a policy needs \"") + key + "\"") : Status::Ok();
    }
    if (!it->is_string()) return Bad(std::string("a policy's \"") + key + "\" must be a string");
    *field = it->get<std::string>();
    return Status::Ok();
  };
  WHARF_RETURN_IF_ERROR(text("vhost", &out->vhost, false));
  WHARF_RETURN_IF_ERROR(text("name", &out->name, false));
  WHARF_RETURN_IF_ERROR(text("pattern", &out->pattern, true));
  out->apply_to = "all";
  WHARF_RETURN_IF_ERROR(text("apply-to", &out->apply_to, false));
  out->priority = 0;
  if (auto it = object.find("priority"); it != object.end()) {
    if (!it->is_number_integer() ||
        (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX))) {
      return Bad("a policy's \"priority\" must be an integer");
    }
    out->priority = it->get<int64_t>();
  }
  auto definition = object.find("definition");
  if (definition == object.end()) return Bad("a policy needs \"definition\"");
  WHARF_ASSIGN_OR_RETURN(out->definition, DefinitionFromJson(*definition));
  return Status::Ok();
}

}  // namespace wharf::json
