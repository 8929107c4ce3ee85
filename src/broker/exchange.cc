#include "broker/exchange.h"

#include <algorithm>

namespace wharf::broker {
namespace {

void EraseOne(std::vector<Queue*>* list, Queue* queue) {
  auto it = std::find(list->begin(), list->end(), queue);
  if (it != list->end()) list->erase(it);
}

}  // namespace

std::string Exchange::Canonical(const Headers& arguments) {
  // Headers is an ordered map, so this is deterministic. The type index keeps 1 and "1" apart.
  std::string out;
  for (const auto& [key, value] : arguments) {
    out += key;
    out += '\x1f';
    out += static_cast<char>('0' + value.index());
    out += HeaderValueToString(value);
    out += '\x1e';
  }
  return out;
}

Status Exchange::Bind(Queue* queue, const std::string& routing_key, const Headers& arguments,
                      bool* added) {
  *added = false;
  HeadersMatchMode mode = HeadersMatchMode::kAll;
  if (spec_.type == ExchangeType::kHeaders) {
    WHARF_RETURN_IF_ERROR(ParseHeadersMatchMode(arguments, &mode));
  }
  std::string canonical = Canonical(arguments);
  auto [it, inserted] = bindings_.emplace(BindingKey{queue, routing_key, canonical}, true);
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

bool Exchange::Unbind(Queue* queue, const std::string& routing_key, const Headers& arguments) {
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

void Exchange::UnbindQueue(Queue* queue) {
  std::vector<BindingKey> doomed;
  for (auto it = bindings_.lower_bound(BindingKey{queue, "", ""});
       it != bindings_.end() && std::get<0>(it->first) == queue; ++it) {
    doomed.push_back(it->first);
  }
  for (const auto& [q, key, canonical] : doomed) {
    // Rebuild the arguments only for headers bindings, which keep them.
    Headers arguments;
    if (spec_.type == ExchangeType::kHeaders) {
      for (const auto& b : headers_) {
        if (b.queue == q && b.canonical == canonical) arguments = b.arguments;
      }
    }
    Unbind(q, key, arguments);
  }
}

void Exchange::Route(const std::string& routing_key, const Headers& headers,
                     std::vector<Queue*>* out) const {
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
      topic_.Match(routing_key, [out](Queue* q) { out->push_back(q); });
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

ExchangeInfo Exchange::Info() const {
  ExchangeInfo info;
  info.name = spec_.name;
  info.type = spec_.type;
  info.durable = spec_.durable;
  info.auto_delete = spec_.auto_delete;
  info.alternate_exchange = spec_.alternate_exchange;
  info.bindings = static_cast<uint32_t>(bindings_.size());
  return info;
}

}  // namespace wharf::broker
