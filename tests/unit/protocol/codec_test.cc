// Unit tests for protocol/codec.h: conversions between wire types and Wharf's own types.
#include "protocol/codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "broker/envelope.h"
#include "net/frame.h"

namespace wharf::protocol {
namespace {

using std::string_literals::operator""s;

Message FullMessage() {
  Message m;
  m.id = 0xFEDCBA9876543210ull;
  m.body = std::string("bin\0ary\xff", 8);
  m.headers = {
      {"bool-true", true},
      {"bool-false", false},
      {"int", int64_t{42}},
      {"int-negative", int64_t{-7}},
      {"int-min", std::numeric_limits<int64_t>::min()},
      {"int-max", std::numeric_limits<int64_t>::max()},
      {"double", 3.25},
      {"double-negative", -1e300},
      {"string", "text"s},
      {"string-empty", ""s},
      {"bytes", Bytes{std::string("\0\1\2", 3)}},
      {"bytes-empty", Bytes{}},
  };
  m.properties.message_id = "app-1";
  m.properties.correlation_id = "corr-2";
  m.properties.reply_to = "replies";
  m.properties.content_type = "application/json";
  m.properties.content_encoding = "gzip";
  m.properties.timestamp_ms = -12345;
  m.properties.priority = 9;
  m.properties.expiration_ms = 60'000;
  m.properties.type = "order.created";
  m.properties.app_id = "shop";
  m.persistent = true;
  m.published_at_ms = 1'700'000'000'123;
  return m;
}

void ExpectSameMessage(const Message& a, const Message& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.body, b.body);
  EXPECT_EQ(a.headers, b.headers);
  EXPECT_EQ(a.properties, b.properties);
  EXPECT_EQ(a.persistent, b.persistent);
  EXPECT_EQ(a.published_at_ms, b.published_at_ms);
}

// Serializes and parses a wire message, as the two ends of a connection would.
wire::Message OverTheWire(const wire::Message& in) {
  wire::Message out;
  EXPECT_TRUE(out.ParseFromString(in.SerializeAsString()));
  return out;
}

TEST(Codec, MessageRoundTripKeepsEveryField) {
  Message original = FullMessage();
  wire::Message w;
  ToWire(original, &w);
  wire::Message parsed = OverTheWire(w);
  Message back = MoveFromWire(&parsed);
  ExpectSameMessage(back, original);
}

TEST(Codec, HeaderTypesSurviveRoundTrip) {
  Message original = FullMessage();
  wire::Message w;
  ToWire(original, &w);
  wire::Message parsed = OverTheWire(w);
  Headers headers;
  Status s = FromWire(parsed.headers(), &headers);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(headers.size(), original.headers.size());
  for (const auto& [key, value] : original.headers) {
    auto it = headers.find(key);
    ASSERT_NE(it, headers.end()) << key;
    EXPECT_EQ(it->second.index(), value.index()) << key;  // same type, not just same text
    EXPECT_EQ(it->second, value) << key;
  }
}

TEST(Codec, EmptyMessageRoundTrips) {
  Message original;
  wire::Message w;
  ToWire(original, &w);
  wire::Message parsed = OverTheWire(w);
  ExpectSameMessage(MoveFromWire(&parsed), original);
}

TEST(Codec, SpecialDoublesRoundTrip) {
  Headers original = {{"inf", std::numeric_limits<double>::infinity()},
                      {"tiny", std::numeric_limits<double>::denorm_min()},
                      {"neg-zero", -0.0}};
  wire::Message w;
  ToWire(original, w.mutable_headers());
  Headers back;
  ASSERT_TRUE(FromWire(OverTheWire(w).headers(), &back).ok());
  EXPECT_EQ(back, original);
  EXPECT_TRUE(std::signbit(std::get<double>(back.at("neg-zero"))));
}

TEST(Codec, HeaderWithNoValueIsInvalidArgument) {
  wire::Message w;
  (*w.mutable_headers())["good"].set_int_value(1);
  (*w.mutable_headers())["empty"];  // no kind set
  Headers headers;
  Status s = FromWire(w.headers(), &headers);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("empty"), std::string_view::npos) << s.ToString();
}

TEST(Codec, MoveFromWireSkipsHeaderWithNoValue) {
  wire::Message w;
  (*w.mutable_headers())["good"].set_string_value("v");
  (*w.mutable_headers())["empty"];
  Message m = MoveFromWire(&w);
  EXPECT_EQ(m.headers, (Headers{{"good", "v"s}}));
}

TEST(Codec, StatusRoundTripKeepsCodeAndMessage) {
  for (StatusCode code : {StatusCode::kMalformedFrame,
                          StatusCode::kFrameTooLarge,
                          StatusCode::kFrameTruncated,
                          StatusCode::kUnexpectedFrame,
                          StatusCode::kUnsupportedVersion,
                          StatusCode::kEmptyRequest,
                          StatusCode::kAuthenticationFailed,
                          StatusCode::kAccessRefused,
                          StatusCode::kQueueNotFound,
                          StatusCode::kExchangeNotFound,
                          StatusCode::kPreconditionFailed,
                          StatusCode::kInvalidArgument,
                          StatusCode::kMessageTooLarge,
                          StatusCode::kResourceLocked,
                          StatusCode::kConsumerTagInUse,
                          StatusCode::kConsumerNotFound,
                          StatusCode::kUnknownDeliveryTag,
                          StatusCode::kReservedName,
                          StatusCode::kInternal,
                          StatusCode::kShuttingDown,
                          StatusCode::kResourceExhausted,
                          StatusCode::kNoRoute}) {
    Status original(code, "queue 'orders' not found");
    wire::Error error;
    ToWire(original, &error);
    EXPECT_EQ(static_cast<int>(error.code()), static_cast<int>(code));
    wire::Error parsed;
    ASSERT_TRUE(parsed.ParseFromString(error.SerializeAsString()));
    Status back = FromWire(parsed);
    EXPECT_EQ(back, original) << StatusCodeName(code);
    EXPECT_EQ(back.code(), code);
    EXPECT_EQ(back.message(), "queue 'orders' not found");
  }
}

TEST(Codec, WireStatusCodesMatchErrorProto) {
  EXPECT_EQ(static_cast<int>(StatusCode::kQueueNotFound), wire::QUEUE_NOT_FOUND);
  EXPECT_EQ(static_cast<int>(StatusCode::kUnknownDeliveryTag), wire::UNKNOWN_DELIVERY_TAG);
  EXPECT_EQ(static_cast<int>(StatusCode::kFrameTooLarge), wire::FRAME_TOO_LARGE);
  EXPECT_EQ(static_cast<int>(StatusCode::kReservedName), wire::RESERVED_NAME);
  EXPECT_EQ(static_cast<int>(StatusCode::kResourceExhausted), wire::RESOURCE_EXHAUSTED);
  EXPECT_EQ(static_cast<int>(StatusCode::kNoRoute), wire::NO_ROUTE);
}

TEST(Codec, ErrorWithUnspecifiedCodeIsNeverOk) {
  wire::Error error;
  error.set_message("something");
  Status s = FromWire(error);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "something");
}

TEST(Codec, ErrorFrameCarriesRequestIdAndError) {
  wire::Frame frame = ErrorFrame(77, Status(StatusCode::kConsumerNotFound, "no consumer 'c'"));
  EXPECT_EQ(frame.request_id(), 77u);
  ASSERT_TRUE(frame.has_error());
  EXPECT_EQ(frame.error().code(), wire::CONSUMER_NOT_FOUND);
  EXPECT_EQ(frame.error().message(), "no consumer 'c'");
}

TEST(Codec, ExchangeTypeRoundTrips) {
  for (ExchangeType type : {ExchangeType::kDirect, ExchangeType::kFanout, ExchangeType::kTopic,
                            ExchangeType::kHeaders}) {
    auto back = FromWire(ToWire(type));
    ASSERT_TRUE(back.has_value()) << ExchangeTypeName(type);
    EXPECT_EQ(*back, type);
  }
  EXPECT_EQ(ToWire(ExchangeType::kTopic), wire::TOPIC);
  EXPECT_FALSE(FromWire(wire::EXCHANGE_TYPE_UNSPECIFIED).has_value());
  EXPECT_FALSE(FromWire(static_cast<wire::ExchangeType>(99)).has_value());
}

TEST(Codec, QueueInfoRoundTrips) {
  QueueInfo info;
  info.name = "orders";
  info.durable = true;
  info.exclusive = true;
  info.auto_delete = true;
  info.ready = 1;
  info.in_flight = 2;
  info.consumers = 3;
  info.published_total = 4;
  info.delivered_total = 5;
  info.acked_total = 6;
  wire::QueueInfo w;
  ToWire(info, &w);
  QueueInfo back = FromWire(w);
  EXPECT_EQ(back.name, "orders");
  EXPECT_TRUE(back.durable);
  EXPECT_TRUE(back.exclusive);
  EXPECT_TRUE(back.auto_delete);
  EXPECT_EQ(back.ready, 1u);
  EXPECT_EQ(back.in_flight, 2u);
  EXPECT_EQ(back.consumers, 3u);
  EXPECT_EQ(back.published_total, 4u);
  EXPECT_EQ(back.delivered_total, 5u);
  EXPECT_EQ(back.acked_total, 6u);
}

TEST(Codec, ExchangeInfoRoundTrips) {
  ExchangeInfo info;
  info.name = "events";
  info.type = ExchangeType::kHeaders;
  info.durable = true;
  info.auto_delete = true;
  info.alternate_exchange = "alt";
  info.bindings = 12;
  wire::ExchangeInfo w;
  ToWire(info, &w);
  ExchangeInfo back = FromWire(w);
  EXPECT_EQ(back.name, "events");
  EXPECT_EQ(back.type, ExchangeType::kHeaders);
  EXPECT_TRUE(back.durable);
  EXPECT_TRUE(back.auto_delete);
  EXPECT_EQ(back.alternate_exchange, "alt");
  EXPECT_EQ(back.bindings, 12u);
}

// Every field set to a value other than its default, so a field a conversion drops fails.
TEST(Codec, RequestSpecsRoundTrip) {
  // internal and arguments (AMQP's) are not in the native protocol's DeclareExchange.
  ExchangeSpec exchange{"events", ExchangeType::kTopic, false, true, "alt", true, false, {}};
  wire::DeclareExchange wire_exchange;
  ToWire(exchange, &wire_exchange);
  std::optional<ExchangeType> type;
  ExchangeSpec exchange_back = FromWire(wire_exchange, &type);
  EXPECT_EQ(type, ExchangeType::kTopic);
  EXPECT_EQ(exchange_back.name, "events");
  EXPECT_EQ(exchange_back.type, ExchangeType::kTopic);
  EXPECT_FALSE(exchange_back.durable);
  EXPECT_TRUE(exchange_back.auto_delete);
  EXPECT_EQ(exchange_back.alternate_exchange, "alt");
  EXPECT_TRUE(exchange_back.passive);

  QueueSpec queue{"orders", false, true, true, Headers{{"x-max-length", int64_t{5}}}, true};
  wire::DeclareQueue wire_queue;
  ToWire(queue, &wire_queue);
  auto queue_back = FromWire(wire_queue);
  ASSERT_TRUE(queue_back.ok()) << queue_back.status().ToString();
  EXPECT_EQ(queue_back->name, "orders");
  EXPECT_FALSE(queue_back->durable);
  EXPECT_TRUE(queue_back->exclusive);
  EXPECT_TRUE(queue_back->auto_delete);
  EXPECT_EQ(queue_back->arguments, queue.arguments);
  EXPECT_TRUE(queue_back->passive);

  BindingSpec binding{"q", "x", "a.*", Headers{{"x-match", std::string("any")}}, "x2"};
  wire::Bind bind;
  wire::Unbind unbind;
  ToWire(binding, &bind);
  ToWire(binding, &unbind);
  for (const auto& back : {FromWire(bind), FromWire(unbind)}) {
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->queue, "q");
    EXPECT_EQ(back->exchange, "x");
    EXPECT_EQ(back->routing_key, "a.*");
    EXPECT_EQ(back->arguments, binding.arguments);
    EXPECT_EQ(back->destination_exchange, "x2");
  }

  RedriveSpec redrive{"dlq", "work", "rejected", 10, 20, true, 30};
  wire::StartRedrive wire_redrive;
  ToWire(redrive, &wire_redrive);
  RedriveSpec redrive_back = FromWire(wire_redrive);
  EXPECT_EQ(redrive_back.queue, "dlq");
  EXPECT_EQ(redrive_back.to, "work");
  EXPECT_EQ(redrive_back.reason, "rejected");
  EXPECT_EQ(redrive_back.limit, 10u);
  EXPECT_EQ(redrive_back.rate, 20u);
  EXPECT_TRUE(redrive_back.dry_run);
  EXPECT_EQ(redrive_back.message_id, 30u);
}

TEST(Codec, AnUnknownExchangeTypeAndAValuelessArgumentAreSaid) {
  wire::DeclareExchange exchange;
  exchange.set_type(static_cast<wire::ExchangeType>(99));
  std::optional<ExchangeType> type;
  FromWire(exchange, &type);
  EXPECT_FALSE(type.has_value());

  wire::DeclareQueue queue;
  (*queue.mutable_arguments())["x-max-length"];  // a header with no value
  EXPECT_EQ(FromWire(queue).status().code(), StatusCode::kInvalidArgument);
  wire::Bind bind;
  (*bind.mutable_arguments())["x-match"];
  EXPECT_EQ(FromWire(bind).status().code(), StatusCode::kInvalidArgument);
}

TEST(Codec, ListingInfosRoundTrip) {
  ConnectionInfo connection{1, "alice", "127.0.0.1:5", 2, 3, 4, 5, "amqp", "pika", "1.2.0", 6};
  wire::ConnectionInfo wire_connection;
  ToWire(connection, &wire_connection);
  ConnectionInfo c = FromWire(wire_connection);
  EXPECT_EQ(c.id, 1u);
  EXPECT_EQ(c.user, "alice");
  EXPECT_EQ(c.address, "127.0.0.1:5");
  EXPECT_EQ(c.connected_at_ms, 2);
  EXPECT_EQ(c.consumers, 3u);
  EXPECT_EQ(c.unacked, 4u);
  EXPECT_EQ(c.pending_receives, 5u);
  EXPECT_EQ(c.protocol, "amqp");
  EXPECT_EQ(c.client, "pika");
  EXPECT_EQ(c.client_version, "1.2.0");
  EXPECT_EQ(c.channels, 6u);

  ConsumerInfo consumer{"q", "tag", 7, "bob", 8, 9, 10, true, 11, -12, "waiting"};
  wire::ConsumerInfo wire_consumer;
  ToWire(consumer, &wire_consumer);
  ConsumerInfo k = FromWire(wire_consumer);
  EXPECT_EQ(k.queue, "q");
  EXPECT_EQ(k.consumer_tag, "tag");
  EXPECT_EQ(k.connection_id, 7u);
  EXPECT_EQ(k.user, "bob");
  EXPECT_EQ(k.prefetch, 8u);
  EXPECT_EQ(k.unacked, 9u);
  EXPECT_EQ(k.lease_ms, 10u);
  EXPECT_TRUE(k.exclusive);
  EXPECT_EQ(k.priority, -12);
  EXPECT_EQ(k.activity, "waiting");
  EXPECT_EQ(k.channel, 11u);

  UserInfo user{"carol",
                true,
                "store",
                UserLimits{0, 12},
                {"administrator", "custom"},
                {UserPermission{"/", "^c", "", ".*"}}};
  wire::UserInfo wire_user;
  ToWire(user, &wire_user);
  UserInfo u = FromWire(wire_user);
  EXPECT_EQ(u.name, "carol");
  EXPECT_TRUE(u.admin);
  EXPECT_EQ(u.source, "store");
  // 0 (none allowed) is a limit; no limit is absent on the wire and negative here.
  EXPECT_EQ(u.limits, (UserLimits{0, 12}));
  EXPECT_EQ(u.tags, (std::vector<std::string>{"administrator", "custom"}));
  EXPECT_EQ(u.permissions, (std::vector<UserPermission>{{"/", "^c", "", ".*"}}));
  user.limits = UserLimits{};
  wire_user.Clear();
  ToWire(user, &wire_user);
  EXPECT_FALSE(wire_user.has_max_connections());
  EXPECT_EQ(FromWire(wire_user).limits, UserLimits{});
}

TEST(Codec, AppendFrameOutputDecodesAndParsesBack) {
  wire::Frame publish;
  publish.set_request_id(5);
  publish.mutable_publish()->set_exchange("amq.topic");
  publish.mutable_publish()->set_routing_key("a.b");
  publish.mutable_publish()->set_mandatory(true);
  ToWire(FullMessage(), publish.mutable_publish()->mutable_message());
  wire::Frame ping;
  ping.set_request_id(6);
  ping.mutable_ping()->set_nonce(99);
  wire::Frame empty;  // serializes to zero bytes

  std::string stream = "prefix";
  AppendFrame(publish, &stream);
  AppendFrame(ping, &stream);
  AppendFrame(empty, &stream);
  ASSERT_EQ(stream.substr(0, 6), "prefix");  // appended, not overwritten

  net::FrameDecoder decoder(1 << 20);
  decoder.Append(std::string_view(stream).substr(6));
  std::vector<wire::Frame> frames;
  while (true) {
    auto next = decoder.Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    if (!next->has_value()) break;
    wire::Frame frame;
    ASSERT_TRUE(frame.ParseFromArray((*next)->data(), static_cast<int>((*next)->size())));
    frames.push_back(std::move(frame));
  }
  EXPECT_TRUE(decoder.Finish().ok());
  ASSERT_EQ(frames.size(), 3u);

  EXPECT_EQ(frames[0].request_id(), 5u);
  ASSERT_TRUE(frames[0].has_publish());
  EXPECT_EQ(frames[0].publish().exchange(), "amq.topic");
  EXPECT_EQ(frames[0].publish().routing_key(), "a.b");
  EXPECT_TRUE(frames[0].publish().mandatory());
  Message back = MoveFromWire(frames[0].mutable_publish()->mutable_message());
  ExpectSameMessage(back, FullMessage());

  EXPECT_EQ(frames[1].request_id(), 6u);
  ASSERT_TRUE(frames[1].has_ping());
  EXPECT_EQ(frames[1].ping().nonce(), 99u);

  EXPECT_EQ(frames[2].body_case(), wire::Frame::BODY_NOT_SET);
}

TEST(Codec, AppendFrameLengthPrefixIsTheSerializedSize) {
  wire::Frame frame;
  frame.set_request_id(1);
  frame.mutable_error()->set_message(std::string(300, 'e'));
  std::string out;
  AppendFrame(frame, &out);
  ASSERT_GE(out.size(), net::kFrameHeaderBytes);
  size_t length = (size_t{static_cast<unsigned char>(out[0])} << 24) |
                  (size_t{static_cast<unsigned char>(out[1])} << 16) |
                  (size_t{static_cast<unsigned char>(out[2])} << 8) |
                  size_t{static_cast<unsigned char>(out[3])};
  EXPECT_EQ(length, frame.ByteSizeLong());
  EXPECT_EQ(out.size(), net::kFrameHeaderBytes + length);
  EXPECT_EQ(out.substr(net::kFrameHeaderBytes), frame.SerializeAsString());
}

// PeekFrame counts a publish's headers without parsing the frame, duplicates included, and
// finds the request id wherever it is.
TEST(Codec, PeekFrameCountsAPublishsHeadersWithoutParsing) {
  wire::Frame frame;
  frame.mutable_publish()->set_exchange("ex");
  frame.mutable_publish()->set_routing_key("key");
  Message message = FullMessage();
  message.deaths.resize(3);  // empty records: 2 bytes each on the wire
  ToWire(message, frame.mutable_publish()->mutable_message());
  frame.set_request_id(0x123456789ull);
  std::string payload = frame.SerializeAsString();
  FramePeek peek = PeekFrame(payload);
  EXPECT_EQ(peek.request_id, 0x123456789ull);
  EXPECT_EQ(peek.publish_headers, message.headers.size());
  EXPECT_EQ(peek.publish_deaths, 3u);
  // A second copy of the same publish merges on parsing; every entry still counts.
  FramePeek twice = PeekFrame(payload + payload);
  EXPECT_EQ(twice.publish_headers, 2 * message.headers.size());
  EXPECT_EQ(twice.publish_deaths, 6u);

  wire::Frame ack;
  ack.set_request_id(7);
  ack.mutable_ack()->set_delivery_tag(3);
  EXPECT_EQ(PeekFrame(ack.SerializeAsString()).publish_headers, 0u);
  EXPECT_EQ(PeekFrame(ack.SerializeAsString()).request_id, 7u);
}

TEST(Codec, PeekFrameCountsNothingInBytesItCannotRead) {
  wire::Frame frame;
  ToWire(FullMessage(), frame.mutable_publish()->mutable_message());
  std::string payload = frame.SerializeAsString();
  // Cut short: the entries before the cut may count, never more than there are.
  for (size_t cut : {size_t{0}, size_t{1}, size_t{3}, payload.size() / 2, payload.size() - 1}) {
    EXPECT_LE(PeekFrame(payload.substr(0, cut)).publish_headers, FullMessage().headers.size());
  }
  EXPECT_EQ(PeekFrame("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"s).publish_headers, 0u);
  EXPECT_EQ(PeekFrame(""s).request_id, 0u);
}

TEST(Codec, CheckHeaderValuesRefusesAValuelessHeader) {
  wire::Message m;
  ToWire(FullMessage(), &m);
  EXPECT_TRUE(CheckHeaderValues(m.headers()).ok());
  (*m.mutable_headers())["empty"];
  EXPECT_EQ(CheckHeaderValues(m.headers()).code(), StatusCode::kInvalidArgument);
}

// A delivery counts at least its encoded size towards a connection's output cap, headers
// included (broker::OutputBytes).
TEST(Codec, OutputBytesAreAtLeastTheEncodedDelivery) {
  for (int headers : {0, 1, 100, 10'000}) {
    Envelope e;
    e.message = FullMessage();
    for (int i = 0; i < headers; ++i) e.message.headers["k" + std::to_string(i)] = int64_t{i};
    e.exchange = "exchange";
    e.routing_key = "routing.key";
    broker::Delivery d;
    d.consumer_tag = "ctag-1";
    d.delivery_tag = 123456;
    d.queue = "queue";
    d.envelope = MakeEnvelope(std::move(e));
    wire::Frame frame;
    wire::Delivery* out = frame.mutable_delivery();
    ToWire(d.envelope->message, out->mutable_message());
    out->set_consumer_tag(d.consumer_tag);
    out->set_delivery_tag(d.delivery_tag);
    out->set_exchange(d.envelope->exchange);
    out->set_routing_key(d.envelope->routing_key);
    out->set_queue(d.queue);
    out->set_receive_count(1);
    out->set_lease_ms(30'000);
    std::string encoded;
    AppendFrame(frame, &encoded);
    EXPECT_GE(broker::OutputBytes(d), encoded.size()) << headers << " headers";
  }
}

}  // namespace
}  // namespace wharf::protocol
