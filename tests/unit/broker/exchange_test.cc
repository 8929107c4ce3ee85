// Unit tests for broker/exchange.h: bindings and routing for every exchange type.
#include "broker/exchange.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "broker/queue.h"

namespace wharf::broker {
namespace {

using std::string_literals::operator""s;

class ExchangeTest : public ::testing::Test {
 protected:
  Queue* NewQueue(const std::string& name) {
    QueueSpec spec;
    spec.name = name;
    queues_.push_back(std::make_unique<Queue>(spec, 0));
    return queues_.back().get();
  }

  static Exchange Make(ExchangeType type) {
    ExchangeSpec spec;
    spec.name = "ex";
    spec.type = type;
    return Exchange(spec);
  }

  // Binds and expects success; returns whether the binding was new.
  static bool BindOk(Exchange& exchange, Queue* queue, const std::string& key,
                     const Headers& arguments = {}) {
    bool added = false;
    Status s = exchange.Bind(queue, key, arguments, &added);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return added;
  }

  // The queues a message is routed to, sorted by name.
  static std::vector<std::string> RouteNames(const Exchange& exchange, const std::string& key,
                                             const Headers& headers = {}) {
    std::vector<Queue*> out;
    exchange.Route(key, headers, &out);
    std::vector<std::string> names;
    for (Queue* q : out) names.push_back(q->name());
    std::sort(names.begin(), names.end());
    return names;
  }

  using Names = std::vector<std::string>;

  std::vector<std::unique_ptr<Queue>> queues_;
};

TEST_F(ExchangeTest, DirectRoutesOnEqualKeyOnly) {
  Exchange ex = Make(ExchangeType::kDirect);
  Queue* q1 = NewQueue("q1");
  Queue* q2 = NewQueue("q2");
  BindOk(ex, q1, "red");
  BindOk(ex, q2, "green");
  BindOk(ex, q2, "red");
  EXPECT_EQ(RouteNames(ex, "red"), (Names{"q1", "q2"}));
  EXPECT_EQ(RouteNames(ex, "green"), (Names{"q2"}));
  EXPECT_EQ(RouteNames(ex, "blue"), Names{});
  EXPECT_EQ(RouteNames(ex, "re"), Names{});
  EXPECT_EQ(RouteNames(ex, ""), Names{});
}

TEST_F(ExchangeTest, DirectTreatsWildcardsAsLiterals) {
  Exchange ex = Make(ExchangeType::kDirect);
  Queue* q = NewQueue("q");
  BindOk(ex, q, "a.*");
  EXPECT_EQ(RouteNames(ex, "a.b"), Names{});
  EXPECT_EQ(RouteNames(ex, "a.*"), Names{"q"});
}

TEST_F(ExchangeTest, FanoutRoutesToEveryBoundQueueIgnoringKey) {
  Exchange ex = Make(ExchangeType::kFanout);
  Queue* q1 = NewQueue("q1");
  Queue* q2 = NewQueue("q2");
  NewQueue("unbound");
  BindOk(ex, q1, "");
  BindOk(ex, q2, "ignored");
  EXPECT_EQ(RouteNames(ex, "anything"), (Names{"q1", "q2"}));
  EXPECT_EQ(RouteNames(ex, ""), (Names{"q1", "q2"}));
}

TEST_F(ExchangeTest, EmptyExchangeRoutesNowhere) {
  for (ExchangeType type : {ExchangeType::kDirect, ExchangeType::kFanout, ExchangeType::kTopic,
                            ExchangeType::kHeaders}) {
    Exchange ex = Make(type);
    EXPECT_EQ(RouteNames(ex, "k"), Names{}) << ExchangeTypeName(type);
  }
}

TEST_F(ExchangeTest, TopicRoutesByPattern) {
  Exchange ex = Make(ExchangeType::kTopic);
  Queue* usd = NewQueue("usd");
  Queue* all = NewQueue("all");
  Queue* nyse = NewQueue("nyse");
  BindOk(ex, usd, "stock.usd.*");
  BindOk(ex, all, "#");
  BindOk(ex, nyse, "*.*.nyse");
  EXPECT_EQ(RouteNames(ex, "stock.usd.nyse"), (Names{"all", "nyse", "usd"}));
  EXPECT_EQ(RouteNames(ex, "stock.eur.nyse"), (Names{"all", "nyse"}));
  EXPECT_EQ(RouteNames(ex, "stock.usd"), (Names{"all"}));
  EXPECT_EQ(RouteNames(ex, ""), (Names{"all"}));
}

TEST_F(ExchangeTest, HeadersRoutesByMatchTable) {
  Exchange ex = Make(ExchangeType::kHeaders);
  Queue* pdf = NewQueue("pdf");
  Queue* any = NewQueue("any");
  BindOk(ex, pdf, "", {{"x-match", "all"s}, {"format", "pdf"s}, {"type", "report"s}});
  BindOk(ex, any, "", {{"x-match", "any"s}, {"format", "pdf"s}, {"type", "log"s}});
  EXPECT_EQ(RouteNames(ex, "", {{"format", "pdf"s}, {"type", "report"s}}), (Names{"any", "pdf"}));
  EXPECT_EQ(RouteNames(ex, "", {{"type", "log"s}}), (Names{"any"}));
  EXPECT_EQ(RouteNames(ex, "", {{"format", "zip"s}}), Names{});
  // The routing key plays no part.
  EXPECT_EQ(RouteNames(ex, "whatever", {{"type", "log"s}}), (Names{"any"}));
}

TEST_F(ExchangeTest, HeadersBindWithBadXMatchIsInvalidArgumentAndAddsNothing) {
  Exchange ex = Make(ExchangeType::kHeaders);
  Queue* q = NewQueue("q");
  bool added = true;
  Status s = ex.Bind(q, "", {{"x-match", "most"s}}, &added);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_FALSE(added);
  EXPECT_EQ(ex.binding_count(), 0u);
  EXPECT_EQ(RouteNames(ex, ""), Names{});
}

TEST_F(ExchangeTest, XMatchIsOnlyCheckedForHeadersExchanges) {
  // A direct exchange carries arguments but does not interpret them.
  Exchange ex = Make(ExchangeType::kDirect);
  Queue* q = NewQueue("q");
  EXPECT_TRUE(BindOk(ex, q, "k", {{"x-match", "most"s}}));
  EXPECT_EQ(RouteNames(ex, "k"), Names{"q"});
}

TEST_F(ExchangeTest, QueueBoundByTwoMatchingKeysGetsOneCopy) {
  Exchange topic = Make(ExchangeType::kTopic);
  Queue* q = NewQueue("q");
  Queue* r = NewQueue("r");
  BindOk(topic, q, "a.*");
  BindOk(topic, q, "a.#");
  BindOk(topic, q, "#");
  BindOk(topic, r, "a.b");
  std::vector<Queue*> out;
  topic.Route("a.b", {}, &out);
  EXPECT_EQ(std::count(out.begin(), out.end(), q), 1);
  EXPECT_EQ(std::count(out.begin(), out.end(), r), 1);
  EXPECT_EQ(out.size(), 2u);
}

TEST_F(ExchangeTest, HeadersQueueBoundByTwoMatchingTablesGetsOneCopy) {
  Exchange ex = Make(ExchangeType::kHeaders);
  Queue* q = NewQueue("q");
  EXPECT_TRUE(BindOk(ex, q, "", {{"a", int64_t{1}}}));
  EXPECT_TRUE(BindOk(ex, q, "", {{"b", int64_t{2}}}));
  EXPECT_EQ(ex.binding_count(), 2u);
  std::vector<Queue*> out;
  ex.Route("", {{"a", int64_t{1}}, {"b", int64_t{2}}}, &out);
  EXPECT_EQ(out, std::vector<Queue*>{q});
}

TEST_F(ExchangeTest, FanoutQueueBoundWithTwoKeysGetsOneCopy) {
  Exchange ex = Make(ExchangeType::kFanout);
  Queue* q = NewQueue("q");
  EXPECT_TRUE(BindOk(ex, q, "one"));
  EXPECT_TRUE(BindOk(ex, q, "two"));
  std::vector<Queue*> out;
  ex.Route("", {}, &out);
  EXPECT_EQ(out, std::vector<Queue*>{q});
}

TEST_F(ExchangeTest, RouteAppendsAndDedupsOnlyItsOwnAdditions) {
  Exchange ex = Make(ExchangeType::kFanout);
  Queue* q = NewQueue("q");
  Queue* r = NewQueue("r");
  BindOk(ex, q, "");
  BindOk(ex, r, "");
  std::vector<Queue*> out = {q};  // left by an earlier call
  ex.Route("", {}, &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], q);
  EXPECT_EQ(std::count(out.begin(), out.end(), q), 2);
  EXPECT_EQ(std::count(out.begin(), out.end(), r), 1);
}

TEST_F(ExchangeTest, BindIsIdempotent) {
  for (ExchangeType type : {ExchangeType::kDirect, ExchangeType::kFanout, ExchangeType::kTopic,
                            ExchangeType::kHeaders}) {
    Exchange ex = Make(type);
    Queue* q = NewQueue("q");
    Headers arguments = {{"k", "v"s}};
    EXPECT_TRUE(BindOk(ex, q, "a.b", arguments)) << ExchangeTypeName(type);
    EXPECT_FALSE(BindOk(ex, q, "a.b", arguments)) << ExchangeTypeName(type);
    EXPECT_EQ(ex.binding_count(), 1u) << ExchangeTypeName(type);
    std::vector<Queue*> out;
    ex.Route("a.b", arguments, &out);
    EXPECT_EQ(out, std::vector<Queue*>{q}) << ExchangeTypeName(type);
    // One Unbind removes it entirely: the second Bind added nothing.
    EXPECT_TRUE(ex.Unbind(q, "a.b", arguments)) << ExchangeTypeName(type);
    out.clear();
    ex.Route("a.b", arguments, &out);
    EXPECT_TRUE(out.empty()) << ExchangeTypeName(type);
  }
}

TEST_F(ExchangeTest, BindingIdentityIncludesKeyAndArguments) {
  Exchange ex = Make(ExchangeType::kDirect);
  Queue* q = NewQueue("q");
  EXPECT_TRUE(BindOk(ex, q, "a"));
  EXPECT_TRUE(BindOk(ex, q, "b"));
  EXPECT_TRUE(BindOk(ex, q, "a", {{"k", "v"s}}));
  EXPECT_EQ(ex.binding_count(), 3u);
}

TEST_F(ExchangeTest, HeadersBindingIdentityKeepsValueTypesApart) {
  Exchange ex = Make(ExchangeType::kHeaders);
  Queue* q = NewQueue("q");
  EXPECT_TRUE(BindOk(ex, q, "", {{"n", int64_t{1}}}));
  EXPECT_TRUE(BindOk(ex, q, "", {{"n", "1"s}}));
  EXPECT_TRUE(BindOk(ex, q, "", {{"n", true}}));
  EXPECT_TRUE(BindOk(ex, q, "", {{"n", 1.0}}));
  EXPECT_EQ(ex.binding_count(), 4u);
}

// Binding identity once printed doubles with "%g" (6 significant digits), merging these two.
TEST_F(ExchangeTest, HeadersBindingIdentityKeepsCloseDoublesApart) {
  Exchange ex = Make(ExchangeType::kHeaders);
  Queue* q = NewQueue("q");
  EXPECT_TRUE(BindOk(ex, q, "", {{"price", 1.0000001}}));
  EXPECT_TRUE(BindOk(ex, q, "", {{"price", 1.0000002}}));
  EXPECT_EQ(ex.binding_count(), 2u);
  EXPECT_EQ(RouteNames(ex, "", {{"price", 1.0000002}}), Names{"q"});
}

TEST_F(ExchangeTest, UnbindRemovesOneBinding) {
  Exchange ex = Make(ExchangeType::kDirect);
  Queue* q = NewQueue("q");
  BindOk(ex, q, "a");
  BindOk(ex, q, "b");
  EXPECT_TRUE(ex.Unbind(q, "a", {}));
  EXPECT_EQ(ex.binding_count(), 1u);
  EXPECT_EQ(RouteNames(ex, "a"), Names{});
  EXPECT_EQ(RouteNames(ex, "b"), Names{"q"});
}

TEST_F(ExchangeTest, UnbindOfMissingBindingReturnsFalse) {
  Exchange ex = Make(ExchangeType::kTopic);
  Queue* q = NewQueue("q");
  Queue* r = NewQueue("r");
  BindOk(ex, q, "a.*");
  EXPECT_FALSE(ex.Unbind(q, "a.b", {}));
  EXPECT_FALSE(ex.Unbind(r, "a.*", {}));
  EXPECT_FALSE(ex.Unbind(q, "a.*", {{"k", "v"s}}));
  EXPECT_EQ(ex.binding_count(), 1u);
  EXPECT_EQ(RouteNames(ex, "a.b"), Names{"q"});
  EXPECT_TRUE(ex.Unbind(q, "a.*", {}));
  EXPECT_FALSE(ex.Unbind(q, "a.*", {}));
}

TEST_F(ExchangeTest, UnbindWorksForEveryType) {
  for (ExchangeType type : {ExchangeType::kDirect, ExchangeType::kFanout, ExchangeType::kTopic,
                            ExchangeType::kHeaders}) {
    Exchange ex = Make(type);
    Queue* q = NewQueue("q");
    Queue* r = NewQueue("r");
    Headers arguments = {{"k", "v"s}};
    BindOk(ex, q, "k", arguments);
    BindOk(ex, r, "k", arguments);
    EXPECT_TRUE(ex.Unbind(q, "k", arguments)) << ExchangeTypeName(type);
    EXPECT_EQ(RouteNames(ex, "k", arguments), Names{"r"}) << ExchangeTypeName(type);
    EXPECT_EQ(ex.binding_count(), 1u);
  }
}

TEST_F(ExchangeTest, HeadersUnbindRemovesOnlyTheMatchingTable) {
  Exchange ex = Make(ExchangeType::kHeaders);
  Queue* q = NewQueue("q");
  BindOk(ex, q, "", {{"a", int64_t{1}}});
  BindOk(ex, q, "", {{"b", int64_t{2}}});
  EXPECT_TRUE(ex.Unbind(q, "", {{"a", int64_t{1}}}));
  EXPECT_EQ(RouteNames(ex, "", {{"a", int64_t{1}}}), Names{});
  EXPECT_EQ(RouteNames(ex, "", {{"b", int64_t{2}}}), Names{"q"});
}

TEST_F(ExchangeTest, UnbindQueueRemovesEveryBindingOfThatQueue) {
  for (ExchangeType type : {ExchangeType::kDirect, ExchangeType::kFanout, ExchangeType::kTopic}) {
    Exchange ex = Make(type);
    Queue* q = NewQueue("q");
    Queue* r = NewQueue("r");
    BindOk(ex, q, "a");
    BindOk(ex, q, "b");
    BindOk(ex, q, "#");
    BindOk(ex, r, "a");
    ASSERT_EQ(ex.binding_count(), 4u) << ExchangeTypeName(type);
    ex.UnbindQueue(q);
    EXPECT_EQ(ex.binding_count(), 1u) << ExchangeTypeName(type);
    for (const char* key : {"a", "b", "c"}) {
      std::vector<Queue*> out;
      ex.Route(key, {}, &out);
      EXPECT_EQ(std::count(out.begin(), out.end(), q), 0)
          << ExchangeTypeName(type) << " key " << key;
    }
    EXPECT_EQ(RouteNames(ex, "a"), Names{"r"}) << ExchangeTypeName(type);
  }
}

TEST_F(ExchangeTest, UnbindQueueRemovesEveryHeadersBindingOfThatQueue) {
  Exchange ex = Make(ExchangeType::kHeaders);
  Queue* q = NewQueue("q");
  Queue* r = NewQueue("r");
  BindOk(ex, q, "", {{"h", int64_t{1}}});
  BindOk(ex, q, "", {{"h", int64_t{2}}});
  BindOk(ex, q, "", {{"x-match", "any"s}, {"h", int64_t{3}}});
  BindOk(ex, r, "", {{"h", int64_t{1}}});
  ASSERT_EQ(ex.binding_count(), 4u);
  ex.UnbindQueue(q);
  EXPECT_EQ(ex.binding_count(), 1u);
  for (int64_t h : {1, 2, 3}) {
    std::vector<Queue*> out;
    ex.Route("", {{"h", h}}, &out);
    EXPECT_EQ(std::count(out.begin(), out.end(), q), 0) << h;
  }
  EXPECT_EQ(RouteNames(ex, "", {{"h", int64_t{1}}}), Names{"r"});
}

// Regression: UnbindQueue once ignored the arguments that are part of a binding's identity.
TEST_F(ExchangeTest, UnbindQueueRemovesBindingsMadeWithArguments) {
  for (ExchangeType type : {ExchangeType::kDirect, ExchangeType::kFanout, ExchangeType::kTopic,
                            ExchangeType::kHeaders}) {
    Exchange ex = Make(type);
    Queue* q = NewQueue("q");
    Queue* r = NewQueue("r");
    BindOk(ex, q, "a", {{"h", int64_t{1}}});
    BindOk(ex, q, "b", {{"h", int64_t{2}}});
    BindOk(ex, q, "#", {{"x-match", "any"s}, {"h", int64_t{3}}});
    BindOk(ex, r, "a", {{"h", int64_t{1}}});
    ASSERT_EQ(ex.binding_count(), 4u) << ExchangeTypeName(type);
    ex.UnbindQueue(q);
    EXPECT_EQ(ex.binding_count(), 1u) << ExchangeTypeName(type);
    const std::vector<std::pair<std::string, int64_t>> probes = {{"a", 1}, {"b", 2}, {"c", 3}};
    for (const auto& [key, h] : probes) {
      std::vector<Queue*> out;
      ex.Route(key, {{"h", h}}, &out);
      EXPECT_EQ(std::count(out.begin(), out.end(), q), 0)
          << ExchangeTypeName(type) << " key " << key;
    }
    EXPECT_EQ(RouteNames(ex, "a", {{"h", int64_t{1}}}), Names{"r"}) << ExchangeTypeName(type);
  }
}

TEST_F(ExchangeTest, UnbindQueueOfUnboundQueueIsHarmless) {
  Exchange ex = Make(ExchangeType::kDirect);
  Queue* q = NewQueue("q");
  Queue* r = NewQueue("r");
  BindOk(ex, q, "a");
  ex.UnbindQueue(r);
  EXPECT_EQ(ex.binding_count(), 1u);
  EXPECT_EQ(RouteNames(ex, "a"), Names{"q"});
}

TEST_F(ExchangeTest, BindingCountAndInfo) {
  ExchangeSpec spec;
  spec.name = "events";
  spec.type = ExchangeType::kTopic;
  spec.durable = false;
  spec.auto_delete = true;
  spec.alternate_exchange = "unrouted";
  Exchange ex(spec);
  EXPECT_EQ(ex.name(), "events");
  EXPECT_EQ(ex.binding_count(), 0u);
  Queue* q = NewQueue("q");
  BindOk(ex, q, "a.#");
  BindOk(ex, q, "b.*");
  EXPECT_EQ(ex.binding_count(), 2u);
  ExchangeInfo info = ex.Info();
  EXPECT_EQ(info.name, "events");
  EXPECT_EQ(info.type, ExchangeType::kTopic);
  EXPECT_FALSE(info.durable);
  EXPECT_TRUE(info.auto_delete);
  EXPECT_EQ(info.alternate_exchange, "unrouted");
  EXPECT_EQ(info.bindings, 2u);
}

}  // namespace
}  // namespace wharf::broker
