// The HTTP API's objects (server/api_json.h): RabbitMQ's keys for what both brokers have, and
// valid JSON whatever a client put in a name, an argument or a header.
#include "server/api_json.h"

#include <gtest/gtest.h>

namespace wharf::server::api {
namespace {

TEST(ApiJson, AQueueHasRabbitMqsDepthKeys) {
  QueueInfo q;
  q.name = "orders";
  q.vhost = "/";
  q.durable = true;
  q.ready = 5;
  q.in_flight = 2;
  q.consumers = 1;
  q.published_total = 40;
  q.publish_rate = 2.5;
  q.arguments["x-max-length"] = int64_t{100};
  q.arguments["x-blob"] = Bytes{std::string("\xff\x00", 2)};
  Json out = QueueJson(q, "wharf@host");
  EXPECT_EQ(out["messages"], 7);
  EXPECT_EQ(out["messages_ready"], 5);
  EXPECT_EQ(out["messages_unacknowledged"], 2);
  EXPECT_EQ(out["consumers"], 1);
  EXPECT_EQ(out["node"], "wharf@host");
  EXPECT_EQ(out["message_stats"]["publish"], 40);
  EXPECT_EQ(out["message_stats"]["publish_details"]["rate"], 2.5);
  EXPECT_EQ(out["arguments"]["x-max-length"], 100);
  EXPECT_EQ(out["arguments"]["x-blob"], Json::parse(R"({"type":"bytes","base64":"/wA="})"));
  EXPECT_TRUE(out["head_message_timestamp"].is_null());
  // Always valid UTF-8 JSON.
  EXPECT_TRUE(Json::accept(json::Dump(out)));
}

TEST(ApiJson, BindingsAreSourceToDestinationWithAPropertiesKey) {
  BindingSpec b;
  b.exchange = "ex";
  b.queue = "q";
  b.routing_key = "rk";
  b.vhost = "/";
  Json out = BindingJson(b);
  EXPECT_EQ(out, Json::parse(R"({"source":"ex","vhost":"/","destination":"q",
      "destination_type":"queue","routing_key":"rk","arguments":{},"properties_key":"rk"})"));
  b.routing_key = "";
  EXPECT_EQ(BindingJson(b)["properties_key"], "~");
  b.arguments["x-match"] = std::string("all");
  const std::string key = BindingJson(b)["properties_key"];
  EXPECT_EQ(key.rfind("~", 0), 0u);
  EXPECT_GT(key.size(), 1u);
  b.destination_exchange = "ex2";
  EXPECT_EQ(BindingJson(b)["destination_type"], "exchange");
  EXPECT_EQ(BindingJson(b)["destination"], "ex2");
  EXPECT_EQ(DefaultBindingJson("/", "q")["source"], "");
  EXPECT_EQ(DefaultBindingJson("/", "q")["routing_key"], "q");
}

TEST(ApiJson, AConnectionSplitsItsPeerAddress) {
  ConnectionInfo c;
  c.id = 7;
  c.address = "[::1]:5000";
  c.protocol = "amqp";
  c.client = "pika";
  Json out = ConnectionJson(c, "n");
  EXPECT_EQ(out["peer_host"], "::1");
  EXPECT_EQ(out["peer_port"], 5000);
  EXPECT_EQ(out["protocol"], "AMQP 0-9-1");
  EXPECT_EQ(out["client_properties"], Json::parse(R"({"product":"pika"})"));
  c.address = "127.0.0.1:40000";
  c.protocol = "wharf";
  EXPECT_EQ(ConnectionJson(c, "n")["peer_host"], "127.0.0.1");
  EXPECT_EQ(ConnectionJson(c, "n")["protocol"], "Wharf");
}

TEST(ApiJson, TheOverviewSumsWhatTheCallerSees) {
  QueueInfo a, b;
  a.ready = 1;
  a.in_flight = 2;
  a.published_total = 10;
  b.ready = 3;
  b.published_total = 5;
  NodeFacts node{"wharf@h", "1.2.3", {{"amqp", "127.0.0.1", 5672}}};
  Json out = OverviewJson(node, {a, b}, {ExchangeInfo{}}, 4, 6, 2);
  EXPECT_EQ(out["queue_totals"]["messages"], 6);
  EXPECT_EQ(out["queue_totals"]["messages_ready"], 4);
  EXPECT_EQ(out["message_stats"]["publish"], 15);
  EXPECT_EQ(
      out["object_totals"],
      Json::parse(R"({"connections":4,"channels":6,"exchanges":1,"queues":2,"consumers":2})"));
  EXPECT_EQ(out["listeners"][0]["port"], 5672);
  EXPECT_EQ(out["product_version"], "1.2.3");
}

TEST(ApiJson, PublishPropertiesAreRabbitMqsAndABadOneIsNamed) {
  Message m;
  ASSERT_TRUE(MessageFromPublishJson(Json::parse(R"({"delivery_mode": 2, "priority": 3,
      "content_type": "text/plain", "expiration": "60000", "timestamp": 1700000000,
      "headers": {"h": 1, "b": true}})"),
                                     &m)
                  .ok());
  EXPECT_TRUE(m.persistent);
  EXPECT_EQ(m.properties.priority, 3u);
  EXPECT_EQ(m.properties.content_type, "text/plain");
  EXPECT_EQ(m.properties.expiration_ms, 60000u);
  EXPECT_EQ(m.properties.timestamp_ms, 1700000000000);
  EXPECT_EQ(std::get<int64_t>(m.headers.at("h")), 1);
  // And back, as a get shows them.
  EXPECT_EQ(AmqpPropertiesJson(m), Json::parse(R"({"content_type": "text/plain",
      "headers": {"b": true, "h": 1}, "delivery_mode": 2, "priority": 3,
      "expiration": "60000", "timestamp": 1700000000})"));
  const std::pair<const char*, const char*> bad[] = {
      {R"({"delivery_mode": 3})", "properties.delivery_mode must be 1 or 2"},
      {R"({"priority": 256})", "properties.priority must be an integer from 0 to 255"},
      {R"({"expiration": 5})", "properties.expiration must be milliseconds"},
      {R"({"expiration": "-5"})", "properties.expiration must be milliseconds"},
      {R"({"colour": "red"})", "properties.colour is not a message property"},
      {R"({"content_type": 7})", "properties.content_type must be a string"},
      {R"([1])", "\"properties\" must be a JSON object"},
  };
  for (const auto& [text, words] : bad) {
    Message other;
    Status s = MessageFromPublishJson(Json::parse(text), &other);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
  }
}

TEST(ApiJson, AGotMessageIsTextOrBase64AndMayBeTruncated) {
  Message m;
  m.body = "hello world";
  Json out = GotMessageJson(m, false, "ex", "rk", 4, /*base64=*/false, /*truncate=*/5);
  EXPECT_EQ(out, Json::parse(R"({"payload_bytes": 11, "redelivered": false, "exchange": "ex",
      "routing_key": "rk", "message_count": 4, "properties": {}, "payload": "hello",
      "payload_encoding": "string"})"));
  EXPECT_EQ(GotMessageJson(m, true, "", "q", 0, /*base64=*/true, 0)["payload"], "aGVsbG8gd29ybGQ=");
  m.body = std::string("\xff\xfe", 2);
  Json binary = GotMessageJson(m, true, "", "q", 0, false, 0);
  EXPECT_EQ(binary["payload_encoding"], "base64");
  EXPECT_EQ(binary["payload"], "//4=");
}

TEST(ApiJson, BrokerErrorsGetRabbitMqsStatuses) {
  EXPECT_EQ(ErrorOf(Status(StatusCode::kQueueNotFound, "no queue 'q' in vhost '/'")).body,
            Json::parse(R"({"error": "not_found",
                            "reason": "NOT_FOUND - no queue 'q' in vhost '/'"})"));
  EXPECT_EQ(ErrorOf(Status(StatusCode::kAccessRefused, "x")).status, 401);
  EXPECT_EQ(ErrorOf(Status(StatusCode::kPreconditionFailed, "inequivalent arg")).status, 400);
  EXPECT_EQ(ErrorOf(Status(StatusCode::kStoreFull, "disk")).status, 503);
  EXPECT_EQ(ErrorOf(Status(StatusCode::kInternal, "bug")).status, 500);
}

}  // namespace
}  // namespace wharf::server::api
