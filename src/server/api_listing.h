// server/api_listing.h
//
// The query of a list in the HTTP API (server/http_api.h), RabbitMQ's management API's:
//   name=TEXT        only items whose "name" contains TEXT (any case); with use_regex=true,
//                    TEXT is a PCRE (any case, unanchored)
//   sort=KEY         by that key, dotted for nested ones ("message_stats.publish"); items
//                    without it sort first, ties as listed; sort_reverse=true reverses the
//                    sorted list (ties too, as RabbitMQ)
//   columns=a,b.c    only those keys of each item
//   page=N           the N-th page (from 1) of page_size items (default 100, at most 500),
//                    answered as the envelope {filtered_count, item_count, items, page,
//                    page_count, page_size, total_count}; without page, the whole list
// A list is filtered first, then sorted, then paged, then cut to its columns, so a page of
// 10,000 queues costs one pass over the copies the broker made, not a request per queue.
//
// Thread safety: plain functions on values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "json/values.h"

namespace wharf::server {

struct ListQuery {
  static constexpr uint64_t kDefaultPageSize = 100;
  static constexpr uint64_t kMaxPageSize = 500;

  std::string name;  // "" = every item
  bool use_regex = false;
  std::string sort;  // "" = as listed (by vhost, then name)
  bool sort_reverse = false;
  std::vector<std::string> columns;  // empty = every key
  std::optional<uint64_t> page;      // from 1
  uint64_t page_size = kDefaultPageSize;
};

// A refused query, as RabbitMQ names it: "bad_request" (a value that is not a number, a
// boolean or a regular expression), "invalid_pagination_parameters" (a page or page_size of 0,
// a page_size above kMaxPageSize), "page_out_of_range"; and the reason, in words.
struct ListError {
  std::string error;
  std::string reason;
};

// The query of `params` (the request's query string, decoded) into `query`, or why not. Other
// parameters are left to the caller.
std::optional<ListError> ParseListQuery(const std::multimap<std::string, std::string>& params,
                                        ListQuery* query);

// `items` (a JSON array of objects) made what `query` asks, or why not (a page past the last;
// a page of an empty list is page 1 and empty).
std::optional<ListError> ApplyListQuery(const ListQuery& query, json::Json* items);

}  // namespace wharf::server
