#include "broker/exchange.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <variant>

#include "broker/queue.h"
#include "broker/vhost.h"
#include "common/log_safe.h"

namespace wharf::broker {
namespace {

void EraseOne(std::vector<Destination>* list, Destination queue) {
  auto it = std::find(list->begin(), list->end(), queue);
  if (it != list->end()) list->erase(it);
}

}  // namespace

std::string Exchange::Canonical(const Headers& arguments) {
  // Length-prefixed, type-tagged and exact (doubles by their bits), so two different tables
  // never share a form. Headers is an ordered map, so the form is deterministic.
  std::string out;
  auto append = [&out](std::string_view bytes) {
    out += std::to_string(bytes.size());
    out += ':';
    out += bytes;
  };
  for (const auto& [key, value] : arguments) {
    append(key);
    out += static_cast<char>('0' + value.index());
    if (const auto* d = std::get_if<double>(&value)) {
      uint64_t bits;
      std::memcpy(&bits, d, sizeof bits);
      append(std::to_string(bits));
    } else if (const auto* text = std::get_if<std::string>(&value)) {
      append(*text);
    } else if (const auto* bytes = std::get_if<Bytes>(&value)) {
      append(bytes->data);
    } else {
      append(HeaderValueToString(value));  // bool and int64 print exactly
    }
  }
  return out;
}

Status Exchange::Bind(Destination queue, const std::string& routing_key, const Headers& arguments,
                      bool* added) {
  *added = false;
  HeadersMatchMode mode = HeadersMatchMode::kAll;
  if (spec_.type == ExchangeType::kHeaders) {
    WHARF_RETURN_IF_ERROR(ParseHeadersMatchMode(arguments, &mode));
  }
  std::string canonical = Canonical(arguments);
  auto [it, inserted] = bindings_.emplace(BindingKey{queue, routing_key, canonical}, arguments);
  if (!inserted) return Status::Ok();
  *added = true;
  switch (spec_.type) {
    case ExchangeType::kDirect:
      direct_[routing_key].push_back(queue);
      break;
    case ExchangeType::kFanout:
      fanout_.push_back(queue);
      break;
    case ExchangeType::kTopic:
      topic_.Add(routing_key, queue);
      break;
    case ExchangeType::kHeaders:
      headers_.push_back(HeadersBinding{queue, arguments, mode, std::move(canonical)});
      break;
  }
  return Status::Ok();
}

bool Exchange::Unbind(Destination queue, const std::string& routing_key, const Headers& arguments) {
  std::string canonical = Canonical(arguments);
  if (bindings_.erase(BindingKey{queue, routing_key, canonical}) == 0) return false;
  switch (spec_.type) {
    case ExchangeType::kDirect: {
      auto it = direct_.find(routing_key);
      if (it != direct_.end()) {
        EraseOne(&it->second, queue);
        if (it->second.empty()) direct_.erase(it);
      }
      break;
    }
    case ExchangeType::kFanout:
      EraseOne(&fanout_, queue);
      break;
    case ExchangeType::kTopic:
      topic_.Remove(routing_key, queue);
      break;
    case ExchangeType::kHeaders: {
      auto it = std::find_if(headers_.begin(), headers_.end(), [&](const HeadersBinding& b) {
        return b.queue == queue && b.canonical == canonical;
      });
      if (it != headers_.end()) headers_.erase(it);
      break;
    }
  }
  return true;
}

void Exchange::UnbindDestination(Destination queue) {
  std::vector<std::pair<std::string, Headers>> doomed;
  for (auto it = bindings_.lower_bound(BindingKey{queue, "", ""});
       it != bindings_.end() && std::get<0>(it->first) == queue; ++it) {
    doomed.emplace_back(std::get<1>(it->first), it->second);
  }
  for (const auto& [key, arguments] : doomed) Unbind(queue, key, arguments);
}

void Exchange::Route(const std::string& routing_key, const Headers& headers,
                     std::vector<Destination>* out) const {
  size_t first = out->size();
  switch (spec_.type) {
    case ExchangeType::kDirect: {
      auto it = direct_.find(routing_key);
      if (it != direct_.end()) out->insert(out->end(), it->second.begin(), it->second.end());
      break;
    }
    case ExchangeType::kFanout:
      out->insert(out->end(), fanout_.begin(), fanout_.end());
      break;
    case ExchangeType::kTopic:
      topic_.Match(routing_key, [out](const Destination& d) { out->push_back(d); });
      break;
    case ExchangeType::kHeaders:
      for (const auto& b : headers_) {
        if (HeadersMatch(b.arguments, b.mode, headers)) out->push_back(b.queue);
      }
      break;
  }
  // Dedup only what this call added; usually zero or one element.
  if (out->size() - first > 1) {
    std::sort(out->begin() + static_cast<std::ptrdiff_t>(first), out->end());
    out->erase(std::unique(out->begin() + static_cast<std::ptrdiff_t>(first), out->end()),
               out->end());
  }
}

void Exchange::Route(const std::string& routing_key, const Headers& headers,
                     std::vector<Queue*>* out) const {
  std::vector<Destination> all;
  Route(routing_key, headers, &all);
  for (const Destination& d : all) {
    if (d.queue) out->push_back(d.queue);
  }
}

std::vector<BindingSpec> Exchange::Bindings() const {
  std::vector<BindingSpec> out;
  out.reserve(bindings_.size());
  for (const auto& [key, arguments] : bindings_) {
    const Destination& to = std::get<0>(key);
    BindingSpec b;
    b.exchange = spec_.name;
    b.routing_key = std::get<1>(key);
    b.arguments = arguments;
    if (to.queue) b.queue = to.queue->name();
    if (to.exchange) b.destination_exchange = to.exchange->name();
    out.push_back(std::move(b));
  }
  return out;
}

Exchange::Exchange(ExchangeSpec spec) : spec_(std::move(spec)) {
  if (spec_.vhost.empty()) spec_.vhost = kDefaultVhost;
  alternate_exchange_ = spec_.alternate_exchange;
}

void Exchange::SetPolicy(std::string name, Headers definition) {
  alternate_exchange_ = EffectiveAlternateExchange(spec_, definition);
  applied_policy_ = std::move(name);
  policy_definition_ = std::move(definition);
}

ExchangeInfo Exchange::Info() const {
  ExchangeInfo info;
  info.name = spec_.name;
  info.vhost = spec_.vhost;
  info.type = spec_.type;
  info.durable = spec_.durable;
  info.auto_delete = spec_.auto_delete;
  info.alternate_exchange = alternate_exchange_;
  info.policy = applied_policy_;
  info.policy_definition = policy_definition_;
  info.bindings = static_cast<uint32_t>(bindings_.size());
  info.internal = spec_.internal;
  info.arguments = spec_.arguments;
  // As declared, whichever protocol declared it: a native declaration names its alternate
  // exchange outside the arguments. (alternate_exchange is the one in effect, maybe a policy's.)
  if (!spec_.alternate_exchange.empty() && !info.arguments.contains("alternate-exchange")) {
    info.arguments["alternate-exchange"] = spec_.alternate_exchange;
  }
  info.delayed = spec_.delayed;
  return info;
}

Status ApplyDeclaredType(std::string_view type, ExchangeSpec* spec) {
  auto text = [spec](const char* key) -> const std::string* {
    auto it = spec->arguments.find(key);
    return it == spec->arguments.end() ? nullptr : std::get_if<std::string>(&it->second);
  };
  std::optional<ExchangeType> parsed;
  spec->delayed = type == "x-delayed-message";
  if (spec->delayed) {
    const std::string* routed_as = text("x-delayed-type");
    if (routed_as != nullptr && *routed_as == "x-delayed-message") {
      return Status(StatusCode::kPreconditionFailed,
                    "Invalid argument, 'x-delayed-message' can't be used for 'x-delayed-type'");
    }
    if (routed_as == nullptr || !(parsed = ParseExchangeType(*routed_as))) {
      return Status(StatusCode::kPreconditionFailed,
                    "Invalid argument, 'x-delayed-type' must be an existing exchange type");
    }
  } else if (!(parsed = ParseExchangeType(type))) {
    return Status(StatusCode::kInvalidArgument,
                  "unknown exchange type '" + CutForDisplay(type) + "'");
  }
  spec->type = *parsed;
  if (const std::string* alternate = text("alternate-exchange")) {
    spec->alternate_exchange = *alternate;
  }
  return Status::Ok();
}

}  // namespace wharf::broker
