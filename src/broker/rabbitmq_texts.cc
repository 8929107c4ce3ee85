#include "broker/rabbitmq_texts.h"

#include <cstdint>
#include <cstdio>
#include <limits>

#include "common/log_safe.h"

namespace wharf::broker::rabbitmq {

std::string Resource(std::string_view kind, std::string_view name, std::string_view vhost) {
  return std::string(kind) + " '" + CutForDisplay(name) + "' in vhost '" + CutForDisplay(vhost) +
         "'";
}

std::string Bare(const HeaderValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return "'" + std::to_string(*i) + "'";
  if (const auto* b = std::get_if<bool>(&value)) return Bare(*b);
  if (const auto* d = std::get_if<double>(&value)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", *d);
    return "'" + std::string(buf) + "'";
  }
  if (const auto* s = std::get_if<std::string>(&value)) return "'" + CutForDisplay(*s) + "'";
  return "'" + CutForDisplay(std::get<Bytes>(value).data) + "'";
}

std::string Bare(bool value) { return value ? "'true'" : "'false'"; }

std::string_view TypeName(const HeaderValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) {
    return *i >= std::numeric_limits<int32_t>::min() && *i <= std::numeric_limits<int32_t>::max()
               ? "signedint"
               : "long";
  }
  if (std::holds_alternative<bool>(value)) return "bool";
  if (std::holds_alternative<double>(value)) return "double";
  if (std::holds_alternative<std::string>(value)) return "longstr";
  return "binary";
}

std::string Typed(const HeaderValue* value) {
  if (value == nullptr) return "none";
  return "the value " + Bare(*value) + " of type '" + std::string(TypeName(*value)) + "'";
}

std::string Inequivalent(std::string_view key, std::string_view resource, std::string_view received,
                         std::string_view current) {
  return "inequivalent arg '" + std::string(key) + "' for " + std::string(resource) +
         ": received " + std::string(received) + " but current is " + std::string(current);
}

std::string InvalidArg(std::string_view key, std::string_view queue, std::string_view vhost,
                       std::string_view reason) {
  return "invalid arg '" + std::string(key) + "' for " + Resource("queue", queue, vhost) + ": " +
         std::string(reason);
}

std::string ReservedName(std::string_view kind, std::string_view name) {
  return std::string(kind) + " name '" + CutForDisplay(name) + "' contains reserved prefix 'amq.*'";
}

std::string Locked(std::string_view queue, std::string_view vhost) {
  return "cannot obtain exclusive access to locked " + Resource("queue", queue, vhost) +
         ". It could be originally declared on another connection or the exclusive property "
         "value does not match that of the original declaration.";
}

std::string NotFound(std::string_view kind, std::string_view name, std::string_view vhost) {
  return "no " + Resource(kind, name, vhost);
}

}  // namespace wharf::broker::rabbitmq
