#include "server/api_listing.h"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "common/regex.h"
#include "server/api_json.h"

namespace wharf::server {
namespace {

using json::Json;

ListError Bad(std::string what) { return ListError{"bad_request", std::move(what)}; }
ListError BadPage(std::string what) {
  return ListError{"invalid_pagination_parameters", std::move(what)};
}

std::optional<ListError> PositiveInteger(const std::string& key, const std::string& text,
                                         uint64_t* value) {
  // A sign or anything but digits is not a number; 0 is a number but not a page.
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return Bad(key + " must be a positive integer, not '" + text + "'");
  }
  if (*value == 0) return BadPage(key + " must be a positive integer, not '" + text + "'");
  return std::nullopt;
}

std::optional<ListError> Boolean(const std::string& key, const std::string& text, bool* value) {
  if (text == "true") {
    *value = true;
  } else if (text == "false" || text.empty()) {
    *value = false;
  } else {
    return Bad(key + " must be true or false, not '" + text + "'");
  }
  return std::nullopt;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// The value at a dotted path ("message_stats.publish"), or null.
const Json* At(const Json& item, std::string_view path) {
  const Json* at = &item;
  while (true) {
    const size_t dot = path.find('.');
    const std::string key(path.substr(0, dot));
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
    if (dot == std::string_view::npos) return at;
    path.remove_prefix(dot + 1);
  }
}

// `item` with only `columns` (dotted paths keep their nesting).
Json Columns(const Json& item, const std::vector<std::string>& columns) {
  Json out = Json::object();
  for (const std::string& column : columns) {
    const Json* value = At(item, column);
    if (value == nullptr) continue;
    Json* into = &out;
    std::string_view path = column;
    for (size_t dot; (dot = path.find('.')) != std::string_view::npos;) {
      into = &(*into)[std::string(path.substr(0, dot))];
      path.remove_prefix(dot + 1);
    }
    (*into)[std::string(path)] = *value;
  }
  return out;
}

}  // namespace

std::optional<ListError> ParseListQuery(const std::multimap<std::string, std::string>& params,
                                        ListQuery* query) {
  *query = ListQuery();
  if (const std::string* name = api::QueryParam(params, "name")) query->name = *name;
  if (const std::string* regex = api::QueryParam(params, "use_regex")) {
    if (auto bad = Boolean("use_regex", *regex, &query->use_regex)) return bad;
  }
  if (query->use_regex && !query->name.empty()) {
    auto compiled = Regex::Compile(query->name);
    if (!compiled.ok()) {
      return Bad("name is not a valid regular expression: " +
                 std::string(compiled.status().message()));
    }
  }
  if (const std::string* sort = api::QueryParam(params, "sort")) query->sort = *sort;
  if (const std::string* reverse = api::QueryParam(params, "sort_reverse")) {
    if (auto bad = Boolean("sort_reverse", *reverse, &query->sort_reverse)) return bad;
  }
  if (const std::string* columns = api::QueryParam(params, "columns")) {
    std::string_view rest = *columns;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view column = rest.substr(0, comma);
      if (!column.empty()) query->columns.emplace_back(column);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (const std::string* page = api::QueryParam(params, "page")) {
    uint64_t value = 0;
    if (auto bad = PositiveInteger("page", *page, &value)) return bad;
    query->page = value;
  }
  if (const std::string* size = api::QueryParam(params, "page_size")) {
    if (auto bad = PositiveInteger("page_size", *size, &query->page_size)) return bad;
    if (query->page_size > ListQuery::kMaxPageSize) {
      return BadPage("page_size must be at most " + std::to_string(ListQuery::kMaxPageSize) +
                     ", not " + *size);
    }
  }
  return std::nullopt;
}

std::optional<ListError> ApplyListQuery(const ListQuery& query, Json* list) {
  Json& items = *list;
  const uint64_t total = items.size();
  if (!query.name.empty()) {
    Json kept = Json::array();
    std::optional<Regex> regex;
    if (query.use_regex) {
      auto compiled = Regex::Compile("(?i)" + query.name);
      if (!compiled.ok()) {
        return Bad("name is not a valid regular expression: " +
                   std::string(compiled.status().message()));
      }
      regex = std::move(*compiled);
    }
    const std::string needle = Lower(query.name);
    for (Json& item : items) {
      const Json* name = At(item, "name");
      if (name == nullptr || !name->is_string()) continue;
      const std::string& text = name->get_ref<const std::string&>();
      const bool match =
          regex ? regex->Search(text) : Lower(text).find(needle) != std::string::npos;
      if (match) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (!query.sort.empty()) {
    static const Json kMissing;  // null sorts first
    std::stable_sort(items.begin(), items.end(), [&](const Json& a, const Json& b) {
      const Json* x = At(a, query.sort);
      const Json* y = At(b, query.sort);
      return (x ? *x : kMissing) < (y ? *y : kMissing);
    });
    if (query.sort_reverse) std::reverse(items.begin(), items.end());
  }
  const uint64_t filtered = items.size();
  const uint64_t pages = std::max<uint64_t>(1, (filtered + query.page_size - 1) / query.page_size);
  if (query.page) {
    if (*query.page > pages) {
      return ListError{"page_out_of_range", "page " + std::to_string(*query.page) +
                                                " is past the last one (" + std::to_string(pages) +
                                                ")"};
    }
    const uint64_t first = (*query.page - 1) * query.page_size;
    const uint64_t last = std::min(filtered, first + query.page_size);
    Json page_items = Json::array();
    for (uint64_t i = first; i < last; ++i) page_items.push_back(std::move(items[i]));
    items = std::move(page_items);
  }
  if (!query.columns.empty()) {
    for (Json& item : items) item = Columns(item, query.columns);
  }
  if (!query.page) return std::nullopt;
  Json envelope = Json::object();
  envelope["filtered_count"] = filtered;
  envelope["item_count"] = items.size();
  envelope["items"] = std::move(items);
  envelope["page"] = *query.page;
  envelope["page_count"] = pages;
  envelope["page_size"] = query.page_size;
  envelope["total_count"] = total;
  *list = std::move(envelope);
  return std::nullopt;
}

}  // namespace wharf::server
