// The HTTP API's list query (server/api_listing.h): RabbitMQ's name filter, sort, columns and
// paging envelope, and the 400s of a bad query.
#include "server/api_listing.h"

#include <gtest/gtest.h>

namespace wharf::server {
namespace {

using json::Json;
using Params = std::multimap<std::string, std::string>;

Json Queues() {
  Json items = Json::array();
  const std::pair<const char*, int> queues[] = {
      {"orders", 3}, {"Orders.dlq", 0}, {"emails", 7}, {"audit", 1}, {"invoices", 7}};
  for (const auto& [name, messages] : queues) {
    items.push_back(Json{{"name", name},
                         {"vhost", "/"},
                         {"messages", messages},
                         {"message_stats", Json{{"publish", messages * 10}}}});
  }
  items.push_back(Json{{"name", "no-stats"}, {"vhost", "/"}, {"messages", 0}});
  return items;
}

Json Apply(const Params& params) {
  ListQuery query;
  auto refused = ParseListQuery(params, &query);
  EXPECT_FALSE(refused) << refused->reason;
  Json items = Queues();
  refused = ApplyListQuery(query, &items);
  EXPECT_FALSE(refused) << refused->reason;
  return items;
}

std::vector<std::string> Names(const Json& items) {
  std::vector<std::string> names;
  for (const Json& item : items) names.push_back(item.value("name", "?"));
  return names;
}

TEST(ApiListing, WithoutAQueryTheListIsAsGiven) { EXPECT_EQ(Apply({}), Queues()); }

TEST(ApiListing, NameFiltersByTextInAnyCaseOrByRegex) {
  EXPECT_EQ(Names(Apply({{"name", "ORDERS"}})), (std::vector<std::string>{"orders", "Orders.dlq"}));
  EXPECT_EQ(Names(Apply({{"name", "^o.*s$"}, {"use_regex", "true"}})),
            (std::vector<std::string>{"orders"}));
  // Without use_regex the pattern is text: nothing has "^o" in its name.
  EXPECT_TRUE(Apply({{"name", "^o"}}).empty());
}

TEST(ApiListing, SortIsStableByAnyKeyAndMissingValuesComeFirst) {
  EXPECT_EQ(Names(Apply({{"sort", "messages"}})),
            (std::vector<std::string>{"Orders.dlq", "no-stats", "audit", "orders", "emails",
                                      "invoices"}));
  EXPECT_EQ(Names(Apply({{"sort", "message_stats.publish"}}))[0], "no-stats");
  EXPECT_EQ(Names(Apply({{"sort", "name"}}))[0], "Orders.dlq");  // byte order, as RabbitMQ
}

TEST(ApiListing, ColumnsKeepOnlyThoseKeysWithTheirNesting) {
  Json out = Apply({{"name", "audit"}, {"columns", "name,message_stats.publish,nope"}});
  EXPECT_EQ(out, Json::parse(R"([{"name":"audit","message_stats":{"publish":10}}])"));
}

TEST(ApiListing, APageComesInRabbitMqsEnvelope) {
  Json page = Apply({{"page", "2"}, {"page_size", "2"}, {"sort", "name"}});
  EXPECT_EQ(page["filtered_count"], 6);
  EXPECT_EQ(page["total_count"], 6);
  EXPECT_EQ(page["item_count"], 2);
  EXPECT_EQ(page["page"], 2);
  EXPECT_EQ(page["page_count"], 3);
  EXPECT_EQ(page["page_size"], 2);
  EXPECT_EQ(Names(page["items"]), (std::vector<std::string>{"emails", "invoices"}));
  // Filtered first: the counts say so.
  Json filtered = Apply({{"page", "1"}, {"name", "orders"}});
  EXPECT_EQ(filtered["filtered_count"], 2);
  EXPECT_EQ(filtered["total_count"], 6);
  EXPECT_EQ(filtered["page_size"], 100);
  // A page of nothing is page 1, empty.
  Json none = Apply({{"page", "1"}, {"name", "zzz"}});
  EXPECT_EQ(none["item_count"], 0);
  EXPECT_EQ(none["page_count"], 1);
}

TEST(ApiListing, ABadQueryIsRefusedWithRabbitMqsErrorAndAReason) {
  struct Bad {
    Params params;
    const char* error;
    const char* words;
  };
  const Bad bad[] = {
      {{{"page", "0"}},
       "invalid_pagination_parameters",
       "page must be a positive integer, not '0'"},
      {{{"page", "-1"}}, "bad_request", "page must be a positive integer"},
      {{{"page", "1x"}}, "bad_request", "page must be a positive integer"},
      {{{"page_size", ""}}, "bad_request", "page_size must be a positive integer"},
      {{{"page_size", "501"}},
       "invalid_pagination_parameters",
       "page_size must be at most 500, not 501"},
      {{{"name", "(("}, {"use_regex", "true"}},
       "bad_request",
       "name is not a valid regular expression"},
      {{{"use_regex", "yes"}}, "bad_request", "use_regex must be true or false"},
  };
  for (const Bad& b : bad) {
    ListQuery query;
    auto refused = ParseListQuery(b.params, &query);
    ASSERT_TRUE(refused) << b.words;
    EXPECT_EQ(refused->error, b.error) << b.words;
    EXPECT_NE(refused->reason.find(b.words), std::string::npos) << refused->reason;
  }
  ListQuery past;
  ASSERT_FALSE(ParseListQuery({{"page", "4"}, {"page_size", "2"}}, &past));
  Json items = Queues();
  auto refused = ApplyListQuery(past, &items);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->error, "page_out_of_range");
  EXPECT_EQ(refused->reason, "page 4 is past the last one (3)");
}

TEST(ApiListing, AReversedSortReversesTiesToo) {
  // RabbitMQ reverses the ascending list: of two queues with 7 messages, the later one first.
  EXPECT_EQ(Names(Apply({{"sort", "messages"}, {"sort_reverse", "true"}}))[0], "invoices");
}

}  // namespace
}  // namespace wharf::server
