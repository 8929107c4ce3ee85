// Unit tests for policies' pure parts (broker/policy.h): what a policy may say, how its
// definition merges into a queue's declared arguments (RabbitMQ's rules), and which of several
// matching policies applies.
#include "broker/policy.h"

#include <gtest/gtest.h>

#include <string>

namespace wharf::broker {
namespace {

PolicyInfo Policy(std::string name, std::string pattern, Headers definition, int64_t priority = 0,
                  std::string apply_to = "all") {
  PolicyInfo p;
  p.name = std::move(name);
  p.pattern = std::move(pattern);
  p.definition = std::move(definition);
  p.priority = priority;
  p.apply_to = std::move(apply_to);
  return p;
}

std::string Refusal(const PolicyInfo& policy) {
  Status s = ValidatePolicy(policy);
  EXPECT_FALSE(s.ok()) << policy.name;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return std::string(s.message());
}

TEST(PolicyValidation, TakesRabbitMqAndWharfKeys) {
  EXPECT_TRUE(ValidatePolicy(Policy("p", "^q\\.",
                                    {{"max-length", int64_t{10}},
                                     {"max-length-bytes", int64_t{0}},
                                     {"message-ttl", int64_t{0}},
                                     {"expires", int64_t{1}},
                                     {"overflow", std::string("reject-publish")},
                                     {"dead-letter-exchange", std::string("")},
                                     {"dead-letter-routing-key", std::string("k")},
                                     {"delivery-limit", int64_t{3}},
                                     {"lease-ms", int64_t{5000}},
                                     {"retry-base-ms", int64_t{100}},
                                     {"retry-max-ms", int64_t{1000}},
                                     {"alternate-exchange", std::string("ae")}}))
                  .ok());
  // RabbitMQ's keys for what Wharf has not are kept, so its definitions import.
  EXPECT_TRUE(
      ValidatePolicy(Policy("ha", ".*",
                            {{"ha-mode", std::string("all")}, {"queue-mode", std::string("lazy")}}))
          .ok());
  EXPECT_FALSE(IsAppliedPolicyKey("ha-mode"));
  EXPECT_TRUE(IsAppliedPolicyKey("max-length"));
}

TEST(PolicyValidation, RefusesWithTheReason) {
  EXPECT_EQ(Refusal(Policy("", ".*", {{"max-length", int64_t{1}}})), "a policy needs a name");
  EXPECT_NE(
      Refusal(Policy("p", "(", {{"max-length", int64_t{1}}})).find("is not a regular expression"),
      std::string::npos);
  EXPECT_EQ(Refusal(Policy("p", ".*", {{"max-length", int64_t{1}}}, 0, "bogus")),
            "policy apply-to 'bogus' must be queues, exchanges or all");
  EXPECT_EQ(Refusal(Policy("p", ".*", {})), "a policy's definition is empty");
  EXPECT_EQ(Refusal(Policy("p", ".*", {{"foo", int64_t{1}}, {"bar", true}})),
            "policy definition keys 'bar', 'foo' are not known (docs/policies.md lists the keys)");
  EXPECT_EQ(Refusal(Policy("p", ".*", {{"max-length", std::string("ten")}})),
            "policy definition key 'max-length' must be an integer");
  EXPECT_EQ(Refusal(Policy("p", ".*", {{"max-length", int64_t{-1}}})),
            "policy definition key 'max-length' = -1 is out of range 0..9223372036854775807");
  EXPECT_EQ(Refusal(Policy("p", ".*", {{"expires", int64_t{0}}})),
            "policy definition key 'expires' = 0 is out of range 1..4294967295");
  EXPECT_EQ(Refusal(Policy("p", ".*", {{"overflow", std::string("bogus")}})),
            "policy definition key 'overflow' must be drop-head, reject-publish or "
            "reject-publish-dlx");
  EXPECT_EQ(Refusal(Policy("p", ".*", {{"dead-letter-exchange", int64_t{5}}})),
            "policy definition key 'dead-letter-exchange' must be a string");
  EXPECT_NE(Refusal(Policy("p", ".*",
                           {{"dead-letter-queue", std::string("dlq")},
                            {"dead-letter-exchange", std::string("dlx")}}))
                .find("excludes"),
            std::string::npos);
  EXPECT_NE(
      Refusal(Policy("p", ".*", {{"retry-base-ms", int64_t{10}}, {"retry-max-ms", int64_t{5}}}))
          .find("larger than"),
      std::string::npos);
  // One side alone is checked against the queue's default for the other: such a policy could
  // apply to no queue without arguments of its own.
  EXPECT_EQ(Refusal(Policy("p", ".*", {{"retry-base-ms", int64_t{300'001}}})),
            "policy definition key 'retry-base-ms' = 300001 is larger than 'retry-max-ms' "
            "(300000)");
  EXPECT_EQ(Refusal(Policy("p", ".*", {{"lease-ms", int64_t{43'200'001}}})),
            "policy definition key 'lease-ms' = 43200001 is larger than 'max-lease-ms' "
            "(43200000)");
  EXPECT_TRUE(ValidatePolicy(Policy("p", ".*",
                                    {{"lease-ms", int64_t{50'000'000}},
                                     {"max-lease-ms", int64_t{60'000'000}}}))
                  .ok());
  // A list or object (kept as JSON text in bytes) is for the keys Wharf only keeps.
  EXPECT_TRUE(ValidatePolicy(Policy("p", ".*", {{"ha-params", Bytes{R"(["rabbit@a"])"}}})).ok());
  EXPECT_EQ(Refusal(Policy("p", ".*", {{"dead-letter-exchange", Bytes{R"(["x"])"}}})),
            "policy definition key 'dead-letter-exchange' must be a string");
}

TEST(PolicyMerge, TheLowerLimitWinsAndOtherwiseTheDeclaredArgument) {
  const Headers declared = {{"x-max-length", int64_t{5}},
                            {"x-message-ttl", int64_t{1000}},
                            {"x-overflow", std::string("drop-head")},
                            {"x-lease-ms", int64_t{2000}}};
  Headers merged = EffectiveQueueArguments(declared, {{"max-length", int64_t{3}},
                                                      {"message-ttl", int64_t{5000}},
                                                      {"overflow", std::string("reject-publish")},
                                                      {"lease-ms", int64_t{9000}},
                                                      {"expires", int64_t{60000}},
                                                      {"ha-mode", std::string("all")}});
  EXPECT_EQ(merged.at("x-max-length"), HeaderValue(int64_t{3}));      // lower: the policy's
  EXPECT_EQ(merged.at("x-message-ttl"), HeaderValue(int64_t{1000}));  // lower: the queue's
  EXPECT_EQ(merged.at("x-overflow"), HeaderValue(std::string("drop-head")));
  EXPECT_EQ(merged.at("x-lease-ms"), HeaderValue(int64_t{2000}));
  EXPECT_EQ(merged.at("x-expires"), HeaderValue(int64_t{60000}));  // only the policy says
  EXPECT_FALSE(merged.contains("ha-mode"));
  EXPECT_FALSE(merged.contains("x-ha-mode"));
}

TEST(PolicyMerge, DeliveryLimitCountsReturnsAndMaxAttemptsDeliveries) {
  Headers merged = EffectiveQueueArguments({}, {{"delivery-limit", int64_t{2}}});
  EXPECT_EQ(merged.at("x-max-attempts"), HeaderValue(int64_t{3}));
  merged =
      EffectiveQueueArguments({{"x-max-attempts", int64_t{2}}}, {{"delivery-limit", int64_t{5}}});
  EXPECT_EQ(merged.at("x-max-attempts"), HeaderValue(int64_t{2}));
}

TEST(PolicyMerge, ADeadLetterTargetComesWholeFromOneSide) {
  // The queue names a dead-letter queue: the policy's exchange and key do not apply.
  Headers merged = EffectiveQueueArguments({{"x-dead-letter-queue", std::string("dlq")}},
                                           {{"dead-letter-exchange", std::string("dlx")},
                                            {"dead-letter-routing-key", std::string("k")}});
  EXPECT_EQ(merged, (Headers{{"x-dead-letter-queue", std::string("dlq")}}));
  // The queue names an exchange without a key: the policy's key completes it, as in RabbitMQ.
  merged = EffectiveQueueArguments({{"x-dead-letter-exchange", std::string("mine")}},
                                   {{"dead-letter-exchange", std::string("dlx")},
                                    {"dead-letter-routing-key", std::string("k")}});
  EXPECT_EQ(merged, (Headers{{"x-dead-letter-exchange", std::string("mine")},
                             {"x-dead-letter-routing-key", std::string("k")}}));
  // Nothing declared: the policy's target.
  merged = EffectiveQueueArguments({}, {{"dead-letter-queue", std::string("dlq")}});
  EXPECT_EQ(merged, (Headers{{"x-dead-letter-queue", std::string("dlq")}}));
  // A key with no exchange anywhere means nothing and is left out.
  merged = EffectiveQueueArguments({}, {{"dead-letter-routing-key", std::string("k")}});
  EXPECT_TRUE(merged.empty());
}

TEST(PolicyMerge, AnExchangesDeclaredAlternateWins) {
  ExchangeSpec spec;
  const Headers definition = {{"alternate-exchange", std::string("ae")}};
  EXPECT_EQ(EffectiveAlternateExchange(spec, definition), "ae");
  spec.alternate_exchange = "mine";
  EXPECT_EQ(EffectiveAlternateExchange(spec, definition), "mine");
  EXPECT_EQ(EffectiveAlternateExchange(ExchangeSpec{}, {}), "");
}

TEST(PolicyTableTest, TheHighestPriorityMatchingPolicyApplies) {
  PolicyTable table;
  ASSERT_TRUE(table.Put(Policy("low", "^orders", {{"max-length", int64_t{1}}}, 1)));
  ASSERT_TRUE(table.Put(Policy("high", "orders", {{"max-length", int64_t{2}}}, 5)));
  ASSERT_TRUE(table.Put(
      Policy("exchanges", ".*", {{"alternate-exchange", std::string("ae")}}, 9, "exchanges")));
  ASSERT_NE(table.For("/", "orders", PolicyTarget::kQueue), nullptr);
  EXPECT_EQ(table.For("/", "orders", PolicyTarget::kQueue)->name, "high");
  EXPECT_EQ(table.For("/", "my-orders", PolicyTarget::kQueue)->name, "high");  // unanchored
  EXPECT_EQ(table.For("/", "orders", PolicyTarget::kExchange)->name, "exchanges");
  EXPECT_EQ(table.For("/", "payments", PolicyTarget::kQueue), nullptr);
  EXPECT_EQ(table.For("shop", "orders", PolicyTarget::kQueue), nullptr);  // another vhost
  // A tie goes to the first by name.
  ASSERT_TRUE(table.Put(Policy("a-tie", "orders", {{"max-length", int64_t{3}}}, 5)));
  EXPECT_EQ(table.For("/", "orders", PolicyTarget::kQueue)->name, "a-tie");
  // The same policy again changes nothing; a change replaces it.
  EXPECT_FALSE(table.Put(Policy("a-tie", "orders", {{"max-length", int64_t{3}}}, 5)));
  EXPECT_TRUE(table.Put(Policy("a-tie", "orders", {{"max-length", int64_t{3}}}, 4)));
  EXPECT_EQ(table.For("/", "orders", PolicyTarget::kQueue)->name, "high");
  EXPECT_EQ(table.size(), 4u);
  EXPECT_TRUE(table.Remove("/", "high"));
  EXPECT_FALSE(table.Remove("/", "high"));
  EXPECT_EQ(table.For("/", "orders", PolicyTarget::kQueue)->name, "a-tie");
  table.RemoveVhost("/");
  EXPECT_EQ(table.size(), 0u);
}

}  // namespace
}  // namespace wharf::broker
