#include "amqp/message_map.h"

#include <cmath>
#include <limits>
#include <optional>

#include "common/utf8.h"

namespace wharf::amqp {
namespace {

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

std::optional<HeaderValue> ToHeaderValue(const FieldValue& v) {
  switch (v.type) {
    case 't':
      if (auto b = v.AsBool()) return HeaderValue(*b);
      return std::nullopt;
    case 'b':
    case 's':
    case 'I':
    case 'l':
    case 'L':
    case 'B':
    case 'u':
    case 'i':
    case 'T':
      if (const auto* s = std::get_if<int64_t>(&v.value)) return HeaderValue(*s);
      if (const auto* u = std::get_if<uint64_t>(&v.value)) {
        if (*u <= kInt64Max) return HeaderValue(static_cast<int64_t>(*u));
        return HeaderValue(static_cast<double>(*u));
      }
      return std::nullopt;
    case 'f':
      if (const auto* f = std::get_if<float>(&v.value)) return HeaderValue(double{*f});
      return std::nullopt;
    case 'd':
      if (const auto* d = std::get_if<double>(&v.value)) return HeaderValue(*d);
      return std::nullopt;
    case 'D':
      if (const auto* d = std::get_if<Decimal>(&v.value)) {
        return HeaderValue(static_cast<double>(d->value) / std::pow(10.0, d->scale));
      }
      return std::nullopt;
    case 'S':
      if (const auto* s = std::get_if<std::string>(&v.value)) {
        if (IsValidUtf8(*s)) return HeaderValue(*s);
        return HeaderValue(Bytes{*s});
      }
      return std::nullopt;
    case 'x':
      if (const auto* s = std::get_if<std::string>(&v.value)) return HeaderValue(Bytes{*s});
      return std::nullopt;
    default:  // F, A, V: no Wharf form
      return std::nullopt;
  }
}

FieldValue ToFieldValue(const HeaderValue& v) {
  return std::visit(
      [](const auto& x) -> FieldValue {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          return FieldValue::Bool(x);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return FieldValue::Int('l', x);
        } else if constexpr (std::is_same_v<T, double>) {
          return FieldValue::Double(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return FieldValue::LongStr(x);
        } else {
          return FieldValue::ByteArray(x.data);
        }
      },
      v);
}

std::string_view DeathReason(std::string_view wharf_reason) {
  if (wharf_reason == "max_length") return "maxlen";
  if (wharf_reason == "max_attempts") return "delivery_limit";
  return wharf_reason;
}

}  // namespace

Headers ToWharfHeaders(const FieldTable& table) {
  Headers headers;
  for (const auto& [key, value] : table.entries) {
    if (headers.contains(key)) continue;  // the first of duplicates wins
    // Wharf's header names are text (the native protocol's map keys must be UTF-8); an AMQP
    // consumer still gets this one, in the publisher's property bytes kept as they came.
    if (!IsValidUtf8(key)) continue;
    if (auto v = ToHeaderValue(value)) headers.emplace(key, std::move(*v));
  }
  return headers;
}

void ToWharfMessage(const BasicProperties& p, Message* m) {
  Properties& out = m->properties;
  out.content_type = p.content_type.value_or("");
  out.content_encoding = p.content_encoding.value_or("");
  out.correlation_id = p.correlation_id.value_or("");
  out.reply_to = p.reply_to.value_or("");
  out.message_id = p.message_id.value_or("");
  out.type = p.type.value_or("");
  out.app_id = p.app_id.value_or("");
  out.timestamp_ms = 0;
  if (p.timestamp) {
    out.timestamp_ms = *p.timestamp > kInt64Max / 1000 ? std::numeric_limits<int64_t>::max()
                                                       : static_cast<int64_t>(*p.timestamp * 1000);
  }
  out.priority = p.priority.value_or(0);
  out.expiration_ms = 0;
  if (p.expiration) {
    if (auto ms = ParseExpiration(*p.expiration); ms.ok()) out.expiration_ms = *ms;
  }
  m->persistent = p.delivery_mode == 2;
  m->headers = p.headers ? ToWharfHeaders(*p.headers) : Headers();
}

BasicProperties FromWharfMessage(const Message& m) {
  BasicProperties p;
  const Properties& in = m.properties;
  auto text = [](const std::string& s) {
    return s.empty() ? std::nullopt : std::optional<std::string>(s);
  };
  p.content_type = text(in.content_type);
  p.content_encoding = text(in.content_encoding);
  p.correlation_id = text(in.correlation_id);
  p.reply_to = text(in.reply_to);
  p.message_id = text(in.message_id);
  p.type = text(in.type);
  p.app_id = text(in.app_id);
  if (m.persistent) p.delivery_mode = 2;
  if (in.timestamp_ms > 0) p.timestamp = static_cast<uint64_t>(in.timestamp_ms / 1000);
  if (in.priority != 0) p.priority = static_cast<uint8_t>(std::min<uint32_t>(in.priority, 255));
  if (in.expiration_ms != 0) p.expiration = std::to_string(in.expiration_ms);
  if (!m.headers.empty() || !m.deaths.empty()) {
    FieldTable& headers = p.headers.emplace();
    for (const auto& [key, value] : m.headers)
      headers.entries.emplace_back(key, ToFieldValue(value));
    SetDeathHeaders(m.deaths, &headers);
  }
  return p;
}

void SetDeathHeaders(const std::vector<Death>& deaths, FieldTable* headers,
                     const std::optional<std::string>& original_expiration) {
  if (deaths.empty()) return;
  FieldArray x_death;
  x_death.reserve(deaths.size());
  for (const Death& d : deaths) {
    FieldTable t;
    t.entries.reserve(6);
    t.entries.emplace_back("queue", FieldValue::LongStr(d.queue));
    t.entries.emplace_back("reason", FieldValue::LongStr(std::string(DeathReason(d.reason))));
    t.entries.emplace_back("count", FieldValue::Int('l', d.count));
    t.entries.emplace_back(
        "time",
        FieldValue::Timestamp(d.last_at_ms > 0 ? static_cast<uint64_t>(d.last_at_ms / 1000) : 0));
    t.entries.emplace_back("exchange", FieldValue::LongStr(d.exchange));
    t.entries.emplace_back("routing-keys", FieldValue::Array({FieldValue::LongStr(d.routing_key)}));
    // The expiration the first death took from it (RabbitMQ keeps it in that death's entry).
    if (original_expiration && &d == &deaths.back()) {
      t.entries.emplace_back("original-expiration", FieldValue::LongStr(*original_expiration));
    }
    x_death.push_back(FieldValue::Table(std::move(t)));
  }
  const Death& first = deaths.back();
  headers->Set("x-death", FieldValue::Array(std::move(x_death)));
  headers->Set("x-first-death-reason", FieldValue::LongStr(std::string(DeathReason(first.reason))));
  headers->Set("x-first-death-queue", FieldValue::LongStr(first.queue));
  headers->Set("x-first-death-exchange", FieldValue::LongStr(first.exchange));
}

Result<uint64_t> ParseExpiration(std::string_view text) {
  // Built only on an error: a valid expiration (on every publish that has one) allocates
  // nothing here.
  auto prefix = [&] { return "invalid expiration '" + std::string(text) + "': "; };
  auto invalid = [&](std::string_view reason) {
    return Status(StatusCode::kPreconditionFailed, prefix() + std::string(reason));
  };
  // RabbitMQ prints the reason with Erlang's ~p: a tuple that would pass column 80 is broken
  // after its first element, the second indented under the brace (io_lib_pretty).
  auto tuple = [&](std::string_view atom, std::string_view value) {
    std::string flat = "{" + std::string(atom) + "," + std::string(value) + "}";
    const size_t column = prefix().size();
    if (column + flat.size() <= 80) return invalid(flat);
    return invalid("{" + std::string(atom) + ",\n" + std::string(column + 1, ' ') +
                   std::string(value) + "}");
  };
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    negative = text[i] == '-';
    ++i;
  }
  const size_t digits_at = i;
  uint64_t value = 0;
  bool saturated = false;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const auto digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) {
      saturated = true;
    } else {
      value = value * 10 + digit;
    }
    ++i;
  }
  if (i == digits_at) return invalid("no_integer");
  if (i < text.size()) {
    return tuple("leftover_string", "\"" + std::string(text.substr(i)) + "\"");
  }
  // Erlang prints the integer: no '+', no leading zeros.
  std::string number = saturated ? std::string(text.substr(digits_at)) : std::to_string(value);
  if (saturated) number.erase(0, std::min(number.find_first_not_of('0'), number.size() - 1));
  if (negative && (value != 0 || saturated)) return tuple("value_negative", "-" + number);
  // RabbitMQ's largest expiry (its timers' limit): 2^32 - 1 ms, about 49.7 days.
  if (saturated || value > kMaxExpirationMs) return tuple("value_too_large", number);
  return value;
}

void SetReplyTo(std::string reply_to, Message* m) {
  BasicProperties p;
  if (m->amqp_properties.empty() || !DecodeProperties(m->amqp_properties, &p).ok()) {
    p = FromWharfMessage(*m);
  }
  p.reply_to = reply_to;
  m->amqp_properties.clear();
  EncodeProperties(p, &m->amqp_properties);
  m->properties.reply_to = std::move(reply_to);
}

}  // namespace wharf::amqp
