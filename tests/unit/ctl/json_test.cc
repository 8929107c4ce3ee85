// ctl/json.h: wharfctl's JSON is valid whatever the bytes, typed, and reads back what it wrote.
#include "ctl/json.h"

#include <gtest/gtest.h>

#include "common/base64.h"

namespace wharf::ctl {
namespace {

std::string AllBytes() {
  std::string s;
  for (int i = 0; i < 256; ++i) s += static_cast<char>(i);
  return s;
}

TEST(CtlJson, ABinaryBodyIsBase64AndTextStaysText) {
  Json binary, text;
  AddPayload(AllBytes(), &binary);
  EXPECT_EQ(binary["payload_encoding"], "base64");
  EXPECT_EQ(binary["payload_bytes"], 256);
  EXPECT_EQ(*Base64Decode(binary["payload"].get<std::string>()), AllBytes());
  AddPayload("héllo \"wharf\"\n", &text);
  EXPECT_EQ(text["payload_encoding"], "string");
  EXPECT_EQ(text["payload"], "héllo \"wharf\"\n");
  // Whatever the body, the output parses.
  EXPECT_TRUE(Json::accept(Dump(binary)));
  EXPECT_TRUE(Json::accept(Dump(text)));
}

TEST(CtlJson, HeaderValuesKeepTheirTypesBothWays) {
  Headers headers{
      {"n", int64_t{3}}, {"s", std::string("acme")}, {"b", true},
      {"d", 1.5},        {"raw", Bytes{"\x01\xff"}}, {"latin1", std::string("caf\xe9")}};
  Json json = HeadersJson(headers);
  EXPECT_EQ(Dump(json, false),
            "{\"b\":true,\"d\":1.5,\"latin1\":{\"type\":\"string\",\"base64\":\"Y2Fm6Q==\"},"
            "\"n\":3,\"raw\":{\"type\":\"bytes\",\"base64\":\"Af8=\"},\"s\":\"acme\"}");
  auto back = HeadersFromJson(Json::parse(Dump(json)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, headers);
  EXPECT_EQ(HeadersFromJson(Json::parse("{\"k\": [1]}")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(HeadersFromJson(Json::parse("{\"k\": 18446744073709551615}")).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CtlJson, APeekedMessageIsPublishedBackAsItWas) {
  PeekedMessage m;
  m.message.id = 0x0190a3c5e2f40001;
  m.message.body = AllBytes();
  m.message.persistent = true;
  m.message.headers["tenant"] = std::string("acme");
  m.message.headers["attempt"] = int64_t{2};
  m.message.properties.content_type = "application/x-protobuf";
  m.message.properties.priority = 5;
  m.message.properties.expiration_ms = 60'000;
  m.exchange = "events";
  m.routing_key = "order.created";
  m.position = 7;
  m.body_bytes = 256;
  Json doc = Json::parse(Dump(PeekedJson("orders", m, true)));
  EXPECT_EQ(doc["message_id"], "0190a3c5e2f40001");
  EXPECT_EQ(doc["queue"], "orders");
  EXPECT_EQ(doc["position"], 7);
  EXPECT_TRUE(doc["redelivered"].is_null()) << "not delivered: unknown, not false";
  EXPECT_TRUE(doc["last_error"].is_null());
  EXPECT_TRUE(doc["properties"]["reply_to"].is_null());
  EXPECT_EQ(doc["properties"]["headers"]["attempt"], 2);

  auto back = MessageFromJson(doc);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->body, m.message.body);
  EXPECT_EQ(back->headers, m.message.headers);
  EXPECT_EQ(back->properties, m.message.properties);
  EXPECT_TRUE(back->persistent);

  Json without_body = Json::parse(Dump(PeekedJson("orders", m, false)));
  EXPECT_TRUE(without_body["payload"].is_null());
  EXPECT_EQ(without_body["payload_bytes"], 256);
  EXPECT_EQ(MessageFromJson(without_body).status().code(), StatusCode::kInvalidArgument);
}

TEST(CtlJson, ABadMessageDocumentSaysWhatIsWrong) {
  auto bad = [](const char* text) { return MessageFromJson(Json::parse(text)).status(); };
  EXPECT_NE(bad("{\"payload\": \"x\", \"payload_encoding\": \"hex\"}").message().find("hex"),
            std::string::npos);
  EXPECT_NE(
      bad("{\"payload\": \"@@@@\", \"payload_encoding\": \"base64\"}").message().find("base64"),
      std::string::npos);
  EXPECT_NE(
      bad("{\"payload\": \"x\", \"properties\": {\"priority\": 300}}").message().find("priority"),
      std::string::npos);
  EXPECT_NE(bad("{\"payload\": \"x\", \"persistent\": \"yes\"}").message().find("persistent"),
            std::string::npos);
  EXPECT_TRUE(MessageFromJson(Json::parse("{\"payload\": \"x\"}")).ok());
}

TEST(CtlJson, UnknownValuesAreNullNotSentinels) {
  QueueInfo q;
  q.name = "orders";
  Json doc = QueueJson(q);
  EXPECT_TRUE(doc["oldest_ready_age_ms"].is_null());
  EXPECT_TRUE(doc["next_delayed_at_ms"].is_null());
  EXPECT_TRUE(doc["dead_letter_target"].is_null());
  q.head_published_at_ms = 1;
  EXPECT_TRUE(QueueJson(q)["oldest_ready_age_ms"].is_number_integer());
  RedriveInfo r;
  r.spec.queue = "orders.dlq";
  Json redrive = RedriveJson(r);
  EXPECT_TRUE(redrive["to"].is_null());
  EXPECT_TRUE(redrive["finished_at_ms"].is_null());
  EXPECT_TRUE(redrive["limit"].is_null());
}

// rabbitmqctl's limits JSON, for set-user-limits and set-vhost-limits.
TEST(CtlJson, LimitsAreAnObjectOfKnownIntegers) {
  std::optional<int64_t> connections, queues;
  const std::vector<std::pair<std::string, std::optional<int64_t>*>> known = {
      {"max-connections", &connections}, {"max-queues", &queues}};
  ASSERT_TRUE(ParseLimitsJson(R"({"max-queues": 5, "max-connections": -1})", known).ok());
  EXPECT_EQ(queues, 5);
  EXPECT_EQ(connections, -1);
  std::optional<int64_t> only;
  ASSERT_TRUE(ParseLimitsJson(R"({"max-queues": 0})", {{"max-queues", &only}}).ok());
  EXPECT_EQ(only, 0);
  EXPECT_EQ(ParseLimitsJson(R"({"max-things": 1})", known).message(),
            "unknown limit 'max-things' (max-connections, max-queues)");
  EXPECT_EQ(ParseLimitsJson(R"({"max-queues": "5"})", known).message(),
            "limit 'max-queues' must be an integer");
  EXPECT_EQ(ParseLimitsJson(R"({"max-queues": 1.5})", known).code(), StatusCode::kInvalidArgument);
  for (const char* bad : {"{}", "[]", "5", "not json"}) {
    EXPECT_EQ(ParseLimitsJson(bad, known).message(),
              "limits must be a JSON object such as '{\"max-connections\": 10}'")
        << bad;
  }
  EXPECT_EQ(LimitText(-1), "-");
  EXPECT_EQ(LimitText(3), "3");
}

}  // namespace
}  // namespace wharf::ctl
