// RabbitMQ's definitions documents (json/definitions.h) as Wharf reads and writes them: what
// RabbitMQ 3.10.8's rabbitmqctl export_definitions writes (abridged from
// tests/integration/definitions/), older spellings, errors that name the item, and a document
// Wharf writes reading back the same.
#include "json/definitions.h"

#include <gtest/gtest.h>

#include <string>

namespace wharf::json {
namespace {

// rabbitmqctl export_definitions of RabbitMQ 3.10.8, abridged.
constexpr const char* kExport = R"({
  "bindings": [
    {"arguments": {}, "destination": "q.orders", "destination_type": "queue",
     "routing_key": "order.#", "source": "ex.orders", "vhost": "/"},
    {"arguments": {}, "destination": "unrouted", "destination_type": "exchange",
     "routing_key": "x", "source": "ex.orders", "vhost": "/"}],
  "exchanges": [
    {"arguments": {}, "auto_delete": false, "durable": true, "name": "ex.orders",
     "type": "topic", "vhost": "/"}],
  "global_parameters": [],
  "parameters": [
    {"component": "operator_policy", "name": "opcap", "vhost": "/",
     "value": {"apply-to": "queues", "definition": [["max-length-bytes", 1000000]],
               "pattern": ".*", "priority": 0}}],
  "permissions": [
    {"configure": "^bob\\.", "read": "", "user": "bob", "vhost": "/", "write": ".*"}],
  "policies": [
    {"apply-to": "all", "definition": {"dead-letter-exchange": "dlx", "message-ttl": 60000},
     "name": "ttl", "pattern": ".*", "priority": -2, "vhost": "dev"}],
  "queues": [
    {"arguments": {"x-message-ttl": 5000}, "auto_delete": false, "durable": true,
     "name": "q.orders", "type": "classic", "vhost": "/"},
    {"arguments": {"x-delivery-limit": 5, "x-queue-type": "quorum"}, "auto_delete": false,
     "durable": true, "name": "q.quorum", "type": "quorum", "vhost": "/"}],
  "rabbit_version": "3.10.8",
  "rabbitmq_version": "3.10.8",
  "topic_permissions": [{"user": "bob", "vhost": "/", "exchange": "amq.topic", "write": ".*",
                         "read": ".*"}],
  "users": [
    {"hashing_algorithm": "rabbit_password_hashing_sha256", "limits": {}, "name": "bob",
     "password_hash": "TY5/T046ay+2bp2/uKLC9Nx5R0w2HoAqd5A9ohIuwk7DdWls",
     "tags": ["monitoring", "management"]}],
  "vhosts": [
    {"limits": [], "metadata": {"description": "Default virtual host", "tags": []}, "name": "/"},
    {"limits": [], "metadata": {"description": "", "tags": []}, "name": "dev"}]
})";

Definitions Read(const std::string& text, std::optional<std::string_view> into = {}) {
  auto read = DefinitionsFromJson(Json::parse(text), into);
  EXPECT_TRUE(read.ok()) << read.status().ToString();
  return read.ok() ? std::move(*read) : Definitions{};
}

std::string Refusal(const std::string& text) {
  auto read = DefinitionsFromJson(Json::parse(text));
  EXPECT_FALSE(read.ok()) << text;
  return read.ok() ? "" : std::string(read.status().message());
}

TEST(Definitions, ReadsWhatRabbitMqExports) {
  Definitions d = Read(kExport);
  ASSERT_EQ(d.users.size(), 1u);
  EXPECT_EQ(d.users[0].name, "bob");
  EXPECT_EQ(d.users[0].password_hash,
            "rabbit-sha256$TY5/T046ay+2bp2/uKLC9Nx5R0w2HoAqd5A9ohIuwk7DdWls");
  EXPECT_EQ(d.users[0].tags, (std::vector<std::string>{"monitoring", "management"}));
  EXPECT_EQ(d.users[0].limits, UserLimits{});
  ASSERT_EQ(d.vhosts.size(), 2u);
  EXPECT_EQ(d.vhosts[0].description, "Default virtual host");
  EXPECT_FALSE(d.vhosts[1].limits.has_value());
  ASSERT_EQ(d.permissions.size(), 1u);
  EXPECT_EQ(d.permissions[0].permission, (UserPermission{"/", "^bob\\.", ".*", ""}));
  ASSERT_EQ(d.policies.size(), 1u);
  EXPECT_EQ(d.policies[0], (PolicyInfo{"dev",
                                       "ttl",
                                       ".*",
                                       "all",
                                       -2,
                                       {{"dead-letter-exchange", std::string("dlx")},
                                        {"message-ttl", int64_t{60000}}}}));
  ASSERT_EQ(d.queues.size(), 2u);
  EXPECT_EQ(d.queues[0].arguments, (Headers{{"x-message-ttl", int64_t{5000}}}));
  EXPECT_EQ(d.queues[1].arguments.at("x-queue-type"), HeaderValue(std::string("quorum")));
  ASSERT_EQ(d.exchanges.size(), 1u);
  EXPECT_EQ(d.exchanges[0].type, "topic");
  EXPECT_TRUE(d.exchanges[0].spec.durable);
  ASSERT_EQ(d.bindings.size(), 2u);
  EXPECT_EQ(d.bindings[0].queue, "q.orders");
  EXPECT_EQ(d.bindings[1].destination_exchange, "unrouted");
  EXPECT_EQ(d.bindings[1].routing_key, "x");
  // What Wharf has no use for is said, not refused.
  ASSERT_EQ(d.skipped.size(), 2u);
  EXPECT_NE(d.skipped[0].find("topic_permissions: 1 entries"), std::string::npos) << d.skipped[0];
  EXPECT_NE(d.skipped[1].find("'opcap' of component 'operator_policy'"), std::string::npos)
      << d.skipped[1];
}

constexpr const char* kOlder = R"({
    "users": [{"name": "old", "password_hash": "6+vDw3jaliAOnpHH0EgShcIAuPZo5tk8gSGneo2cM35a99Mv",
               "tags": "administrator,management"},
              {"name": "nopass", "password_hash": "", "tags": []}],
    "vhosts": [{"name": "shop", "description": "the shop"}],
    "parameters": [{"component": "vhost-limits", "name": "limits", "vhost": "shop",
                    "value": {"max-connections": 10, "max-queues": 5}}],
    "queues": [{"name": "orders", "durable": true, "auto_delete": false, "arguments": {}},
               {"name": "elsewhere", "vhost": "/", "durable": true}],
    "policies": [{"name": "cap", "pattern": "^orders$", "definition": {"max-length": 3}}]
  })";

TEST(Definitions, ReadsOlderSpellings) {
  Definitions d = Read(kOlder);
  ASSERT_EQ(d.users.size(), 2u);
  // No hashing_algorithm: RabbitMQ's default, SHA-256.
  EXPECT_EQ(d.users[0].password_hash,
            "rabbit-sha256$6+vDw3jaliAOnpHH0EgShcIAuPZo5tk8gSGneo2cM35a99Mv");
  EXPECT_EQ(d.users[0].tags, (std::vector<std::string>{"administrator", "management"}));
  // RabbitMQ's user without a password: read as such (the import skips it).
  EXPECT_EQ(d.users[1].password_hash, "");
  ASSERT_EQ(d.vhosts.size(), 1u);
  EXPECT_EQ(d.vhosts[0].description, "the shop");
  ASSERT_TRUE(d.vhosts[0].limits.has_value());
  EXPECT_EQ(d.vhosts[0].limits->max_connections, 10);
  EXPECT_EQ(d.vhosts[0].limits->max_queues, 5);
  // Items without a vhost are "/"'s.
  ASSERT_EQ(d.queues.size(), 2u);
  EXPECT_EQ(d.queues[0].vhost, "/");
  ASSERT_EQ(d.policies.size(), 1u);
  EXPECT_EQ(d.policies[0].vhost, "/");
  EXPECT_EQ(d.policies[0].apply_to, "all");
}

TEST(Definitions, IntoOneVhostTakesItsOwnDefinitionsOnly) {
  Definitions d = Read(kOlder, "books");
  // Every item is the target's, whatever it says, as RabbitMQ's per-vhost import.
  ASSERT_EQ(d.queues.size(), 2u);
  EXPECT_EQ(d.queues[0].vhost, "books");
  EXPECT_EQ(d.queues[1].vhost, "books");
  ASSERT_EQ(d.policies.size(), 1u);
  EXPECT_EQ(d.policies[0].vhost, "books");
  ASSERT_EQ(d.vhosts.size(), 1u);  // from the vhost-limits parameter alone
  EXPECT_EQ(d.vhosts[0].name, "books");
  EXPECT_EQ(d.vhosts[0].limits->max_queues, 5);
  EXPECT_TRUE(d.users.empty());
  ASSERT_EQ(d.skipped.size(), 2u);
  EXPECT_EQ(d.skipped[0],
            "users: 2 entries: an import into one vhost takes its own definitions only");
  EXPECT_EQ(d.skipped[1],
            "vhosts: 1 entries: an import into one vhost takes its own definitions only");
}

TEST(Definitions, AnErrorNamesTheItem) {
  EXPECT_EQ(Refusal("[]"), "definitions must be a JSON object");
  EXPECT_EQ(Refusal(R"({"queues": {}})"), "queues: must be an array");
  EXPECT_EQ(Refusal(R"({"queues": [{"name": "a"}, {"durable": true}]})"),
            "queues[1]: \"name\" is missing");
  EXPECT_EQ(Refusal(R"({"queues": [{"name": "a", "durable": "yes"}]})"),
            "queues[0]: \"durable\" must be true or false");
  EXPECT_NE(Refusal(R"({"users": [{"name": "u", "password_hash": "x",
                                   "hashing_algorithm": "bcrypt"}]})")
                .find("users[0]: hashing_algorithm 'bcrypt' is not one Wharf verifies"),
            std::string::npos);
  EXPECT_EQ(Refusal(R"({"users": [{"name": "u", "password_hash": "AAAA"}]})"),
            "users[0]: password_hash does not decode as its hashing_algorithm says");
  EXPECT_EQ(Refusal(R"({"bindings": [{"source": "e", "destination": "q",
                                      "destination_type": "stream"}]})"),
            "bindings[0]: \"destination_type\" must be queue or exchange");
  EXPECT_EQ(Refusal(R"({"policies": [{"name": "p", "pattern": ".*"}]})"),
            "policies[0]: a policy needs \"definition\"");
  EXPECT_EQ(Refusal(R"({"exchanges": [{"name": "e", "arguments": {"k": [1]}}]})"),
            "exchanges[0]: \"type\" is missing");
}

TEST(Definitions, WhatWharfWritesReadsBackAlike) {
  Definitions d = Read(kExport);
  d.users.push_back({"wharf-user", "pbkdf2-sha256$1000$00$" + std::string(64, '0'), {}, {7, -1}});
  d.vhosts[1].limits = VhostLimits{-1, 4};
  Json written = DefinitionsJson(d, "1.2.3");
  EXPECT_EQ(written["product_name"], "Wharf");
  EXPECT_EQ(written["users"][0]["hashing_algorithm"], "rabbit_password_hashing_sha256");
  EXPECT_EQ(written["users"][0]["password_hash"],
            "TY5/T046ay+2bp2/uKLC9Nx5R0w2HoAqd5A9ohIuwk7DdWls");
  EXPECT_EQ(written["users"][1]["hashing_algorithm"], "wharf_pbkdf2_sha256");
  EXPECT_EQ(written["users"][1]["limits"], Json::parse(R"({"max-connections": 7})"));
  Definitions again = Read(Dump(written));
  ASSERT_EQ(again.users.size(), 2u);
  EXPECT_EQ(again.users[0].password_hash, d.users[0].password_hash);
  EXPECT_EQ(again.users[1].password_hash, d.users[1].password_hash);
  EXPECT_EQ(again.users[1].limits, d.users[1].limits);
  ASSERT_TRUE(again.vhosts[1].limits.has_value());
  EXPECT_EQ(again.vhosts[1].limits->max_queues, 4);
  EXPECT_EQ(again.policies, d.policies);
  ASSERT_EQ(again.queues.size(), d.queues.size());
  for (size_t i = 0; i < d.queues.size(); ++i) {
    EXPECT_EQ(again.queues[i].name, d.queues[i].name);
    EXPECT_EQ(again.queues[i].arguments, d.queues[i].arguments);
  }
  ASSERT_EQ(again.bindings.size(), 2u);
  EXPECT_EQ(again.bindings[1].destination_exchange, "unrouted");
  EXPECT_TRUE(again.skipped.empty());
}

}  // namespace
}  // namespace wharf::json
