// The AMQP 0-9-1 listener driven by a real third-party client: rabbitmq-c (librabbitmq, from
// Debian), against the real wharfd. Python clients (pika, kombu) have their own tests
// (tests/integration/amqp_clients_test.py).
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "support/test_server.h"

namespace wharf {
namespace {

using testing::TestServer;

std::string ToString(amqp_bytes_t bytes) {
  return std::string(static_cast<const char*>(bytes.bytes), bytes.len);
}

// One rabbitmq-c connection, logged in as guest on vhost "/".
class AmqpConnection {
 public:
  explicit AmqpConnection(uint16_t port) : conn_(amqp_new_connection()) {
    amqp_socket_t* socket = amqp_tcp_socket_new(conn_);
    if (socket == nullptr || amqp_socket_open(socket, "127.0.0.1", port) != AMQP_STATUS_OK) {
      ADD_FAILURE() << "cannot connect to 127.0.0.1:" << port;
      return;
    }
    amqp_rpc_reply_t login =
        amqp_login(conn_, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest");
    if (login.reply_type != AMQP_RESPONSE_NORMAL) {
      ADD_FAILURE() << "login failed: " << Describe(login);
      return;
    }
    ok_ = true;
  }
  ~AmqpConnection() {
    if (ok_) amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn_);
  }
  bool ok() const { return ok_; }
  amqp_connection_state_t get() { return conn_; }

  bool OpenChannel(uint16_t channel) {
    amqp_channel_open(conn_, channel);
    return Check("channel.open");
  }
  // The last synchronous call's outcome; "" when it succeeded.
  std::string LastError() { return Describe(amqp_get_rpc_reply(conn_)); }
  bool Check(const std::string& what) {
    std::string error = LastError();
    if (!error.empty()) ADD_FAILURE() << what << ": " << error;
    return error.empty();
  }
  static std::string Describe(const amqp_rpc_reply_t& reply) {
    switch (reply.reply_type) {
      case AMQP_RESPONSE_NORMAL:
        return "";
      case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        return std::string("library: ") + amqp_error_string2(reply.library_error);
      case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
          auto* m = static_cast<amqp_channel_close_t*>(reply.reply.decoded);
          return "channel.close " + std::to_string(m->reply_code) + " " + ToString(m->reply_text) +
                 " class " + std::to_string(m->class_id) + " method " +
                 std::to_string(m->method_id);
        }
        if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
          auto* m = static_cast<amqp_connection_close_t*>(reply.reply.decoded);
          return "connection.close " + std::to_string(m->reply_code) + " " +
                 ToString(m->reply_text) + " class " + std::to_string(m->class_id) + " method " +
                 std::to_string(m->method_id);
        }
        return "server exception " + std::to_string(reply.reply.id);
      default:
        return "no reply";
    }
  }

  std::string DeclareQueue(uint16_t channel, const std::string& name, bool durable, bool exclusive,
                           bool auto_delete) {
    amqp_queue_declare_ok_t* ok =
        amqp_queue_declare(conn_, channel, amqp_cstring_bytes(name.c_str()), 0, durable, exclusive,
                           auto_delete, amqp_empty_table);
    if (!Check("queue.declare") || ok == nullptr) return "";
    return ToString(ok->queue);
  }

  // Waits (10 s at most) for publisher confirms up to `tag`: true once a basic.ack covers it.
  bool WaitConfirmed(uint64_t tag) {
    uint64_t confirmed = 0;
    while (confirmed < tag) {
      amqp_frame_t frame;
      timeval timeout{10, 0};
      if (amqp_simple_wait_frame_noblock(conn_, &frame, &timeout) != AMQP_STATUS_OK ||
          frame.frame_type != AMQP_FRAME_METHOD ||
          frame.payload.method.id != AMQP_BASIC_ACK_METHOD) {
        return false;
      }
      confirmed = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded)->delivery_tag;
    }
    return true;
  }

  bool Publish(uint16_t channel, const std::string& exchange, const std::string& routing_key,
               const std::string& body, const amqp_basic_properties_t* properties,
               bool mandatory = false) {
    amqp_bytes_t b{body.size(), const_cast<char*>(body.data())};
    return amqp_basic_publish(conn_, channel, amqp_cstring_bytes(exchange.c_str()),
                              amqp_cstring_bytes(routing_key.c_str()), mandatory, 0, properties,
                              b) == AMQP_STATUS_OK;
  }

 private:
  amqp_connection_state_t conn_;
  bool ok_ = false;
};

TEST(Amqp, PublishAndGetRoundTripBodyAndProperties) {
  TestServer server;
  ASSERT_NE(server.amqp_port(), 0);
  AmqpConnection c(server.amqp_port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.OpenChannel(1));
  std::string queue = c.DeclareQueue(1, "", false, true, false);
  ASSERT_TRUE(queue.starts_with("amq.gen-")) << queue;

  amqp_basic_properties_t props{};
  props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                 AMQP_BASIC_CORRELATION_ID_FLAG | AMQP_BASIC_HEADERS_FLAG |
                 AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_PRIORITY_FLAG;
  props.content_type = amqp_cstring_bytes("application/octet-stream");
  props.delivery_mode = 2;
  props.correlation_id = amqp_cstring_bytes("corr-1");
  props.timestamp = 1700000000;
  props.priority = 3;
  amqp_table_entry_t entries[3];
  entries[0].key = amqp_cstring_bytes("i16");
  entries[0].value.kind = AMQP_FIELD_KIND_I16;
  entries[0].value.value.i16 = -7;
  entries[1].key = amqp_cstring_bytes("dec");
  entries[1].value.kind = AMQP_FIELD_KIND_DECIMAL;
  entries[1].value.value.decimal = {2, 12345};
  entries[2].key = amqp_cstring_bytes("void");
  entries[2].value.kind = AMQP_FIELD_KIND_VOID;
  props.headers = {3, entries};
  std::string body("binary\0body\xff", 12);
  ASSERT_TRUE(c.Publish(1, "", queue, body, &props));

  amqp_rpc_reply_t reply = amqp_basic_get(c.get(), 1, amqp_cstring_bytes(queue.c_str()), 1);
  ASSERT_EQ(reply.reply_type, AMQP_RESPONSE_NORMAL) << AmqpConnection::Describe(reply);
  ASSERT_EQ(reply.reply.id, AMQP_BASIC_GET_OK_METHOD);
  auto* get_ok = static_cast<amqp_basic_get_ok_t*>(reply.reply.decoded);
  EXPECT_EQ(get_ok->message_count, 0u);
  EXPECT_EQ(get_ok->redelivered, 0);
  EXPECT_EQ(ToString(get_ok->routing_key), queue);
  amqp_message_t message;
  reply = amqp_read_message(c.get(), 1, &message, 0);
  ASSERT_EQ(reply.reply_type, AMQP_RESPONSE_NORMAL) << AmqpConnection::Describe(reply);
  EXPECT_EQ(ToString(message.body), body);
  EXPECT_EQ(ToString(message.properties.content_type), "application/octet-stream");
  EXPECT_EQ(message.properties.delivery_mode, 2);
  EXPECT_EQ(ToString(message.properties.correlation_id), "corr-1");
  EXPECT_EQ(message.properties.timestamp, 1700000000u);
  EXPECT_EQ(message.properties.priority, 3);
  ASSERT_EQ(message.properties.headers.num_entries, 3);
  EXPECT_EQ(message.properties.headers.entries[0].value.kind, AMQP_FIELD_KIND_I16);
  EXPECT_EQ(message.properties.headers.entries[0].value.value.i16, -7);
  EXPECT_EQ(message.properties.headers.entries[1].value.kind, AMQP_FIELD_KIND_DECIMAL);
  EXPECT_EQ(message.properties.headers.entries[1].value.value.decimal.value, 12345u);
  EXPECT_EQ(message.properties.headers.entries[2].value.kind, AMQP_FIELD_KIND_VOID);
  amqp_destroy_message(&message);

  reply = amqp_basic_get(c.get(), 1, amqp_cstring_bytes(queue.c_str()), 1);
  ASSERT_EQ(reply.reply_type, AMQP_RESPONSE_NORMAL);
  EXPECT_EQ(reply.reply.id, AMQP_BASIC_GET_EMPTY_METHOD);
}

TEST(Amqp, ABodyLargerThanFrameMaxIsSplitAndJoined) {
  TestServer server;
  AmqpConnection c(server.amqp_port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.OpenChannel(1));
  std::string queue = c.DeclareQueue(1, "big", false, false, true);
  ASSERT_EQ(queue, "big");
  std::string body(1'000'000, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(c.Publish(1, "", "big", body, nullptr));
  amqp_basic_consume(c.get(), 1, amqp_cstring_bytes("big"), amqp_empty_bytes, 0, 1, 0,
                     amqp_empty_table);
  ASSERT_TRUE(c.Check("basic.consume"));
  amqp_envelope_t envelope;
  timeval timeout{10, 0};
  amqp_rpc_reply_t reply = amqp_consume_message(c.get(), &envelope, &timeout, 0);
  ASSERT_EQ(reply.reply_type, AMQP_RESPONSE_NORMAL) << AmqpConnection::Describe(reply);
  EXPECT_EQ(ToString(envelope.message.body), body);
  amqp_destroy_envelope(&envelope);
}

TEST(Amqp, UnackedDeliveriesComeBackRedeliveredWhenTheChannelCloses) {
  TestServer server;
  AmqpConnection c(server.amqp_port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.OpenChannel(1));
  ASSERT_EQ(c.DeclareQueue(1, "work", true, false, false), "work");
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(c.Publish(1, "", "work", "m" + std::to_string(i), nullptr));
  ASSERT_TRUE(c.OpenChannel(2));
  amqp_basic_qos(c.get(), 2, 0, 2, 0);
  ASSERT_TRUE(c.Check("basic.qos"));
  amqp_basic_consume(c.get(), 2, amqp_cstring_bytes("work"), amqp_cstring_bytes("c1"), 0, 0, 0,
                     amqp_empty_table);
  ASSERT_TRUE(c.Check("basic.consume"));
  // Reads one delivery on channel 2 and checks its tag, body and flag.
  auto expect_delivery = [&](uint64_t tag, const std::string& body) {
    amqp_envelope_t envelope;
    timeval timeout{10, 0};
    amqp_rpc_reply_t reply = amqp_consume_message(c.get(), &envelope, &timeout, 0);
    ASSERT_EQ(reply.reply_type, AMQP_RESPONSE_NORMAL) << AmqpConnection::Describe(reply);
    EXPECT_EQ(envelope.channel, 2);
    EXPECT_EQ(envelope.delivery_tag, tag);  // per channel, from 1
    EXPECT_EQ(ToString(envelope.message.body), body);
    EXPECT_FALSE(envelope.redelivered);
    amqp_destroy_envelope(&envelope);
  };
  expect_delivery(1, "m0");
  expect_delivery(2, "m1");
  // Prefetch 2: the third waits until the first is acked. It is read before the channel
  // closes: deliveries that cross the client's channel.close are legal, but rabbitmq-c would
  // hold them for the next channel 2 and trip over them there.
  ASSERT_EQ(amqp_basic_ack(c.get(), 2, 1, 0), AMQP_STATUS_OK);
  expect_delivery(3, "m2");
  amqp_channel_close(c.get(), 2, AMQP_REPLY_SUCCESS);
  ASSERT_TRUE(c.Check("channel.close"));
  // The same number opens again at once (close-ok came after the broker's cleanup), and both
  // unacked deliveries are back at their places, marked redelivered.
  ASSERT_TRUE(c.OpenChannel(2));
  for (std::string body : {"m1", "m2"}) {
    amqp_rpc_reply_t reply = amqp_basic_get(c.get(), 2, amqp_cstring_bytes("work"), 0);
    ASSERT_EQ(reply.reply.id, AMQP_BASIC_GET_OK_METHOD);
    auto* ok = static_cast<amqp_basic_get_ok_t*>(reply.reply.decoded);
    EXPECT_EQ(ok->redelivered, 1);
    EXPECT_EQ(ok->message_count, body == "m1" ? 1u : 0u);
    amqp_message_t message;
    ASSERT_EQ(amqp_read_message(c.get(), 2, &message, 0).reply_type, AMQP_RESPONSE_NORMAL);
    EXPECT_EQ(ToString(message.body), body);
    amqp_destroy_message(&message);
  }
}

TEST(Amqp, OperatorsSeeTheConnectionItsChannelsAndConsumers) {
  TestServer server;
  AmqpConnection c(server.amqp_port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.OpenChannel(1));
  ASSERT_TRUE(c.OpenChannel(2));
  ASSERT_EQ(c.DeclareQueue(1, "listed", false, false, true), "listed");
  amqp_basic_consume(c.get(), 2, amqp_cstring_bytes("listed"), amqp_cstring_bytes("lc"), 0, 0, 0,
                     amqp_empty_table);
  ASSERT_TRUE(c.Check("basic.consume"));

  auto admin = server.Connect();
  ASSERT_NE(admin, nullptr);
  auto connections = admin->ListConnections();
  ASSERT_TRUE(connections.ok()) << connections.status().ToString();
  ASSERT_EQ(connections->size(), 2u);  // the AMQP one and this native one
  const ConnectionInfo* amqp = nullptr;
  for (const ConnectionInfo& info : *connections) {
    if (info.protocol == "amqp") {
      amqp = &info;
    } else {
      EXPECT_EQ(info.protocol, "wharf");
      EXPECT_EQ(info.client, "wharf-cpp");
      EXPECT_EQ(info.channels, 1u);
    }
  }
  ASSERT_NE(amqp, nullptr);
  EXPECT_EQ(amqp->client, "rabbitmq-c");  // its product client property
  EXPECT_FALSE(amqp->client_version.empty());
  EXPECT_EQ(amqp->user, "guest");
  EXPECT_EQ(amqp->channels, 2u);
  EXPECT_EQ(amqp->consumers, 1u);
  auto consumers = admin->ListConsumers("listed");
  ASSERT_TRUE(consumers.ok());
  ASSERT_EQ(consumers->size(), 1u);
  EXPECT_EQ((*consumers)[0].consumer_tag, "lc");
  EXPECT_EQ((*consumers)[0].connection_id, amqp->id);
  EXPECT_EQ((*consumers)[0].channel, 2u);

  // A channel closed is gone from the count; the connection stays listed.
  amqp_channel_close(c.get(), 2, AMQP_REPLY_SUCCESS);
  ASSERT_TRUE(c.Check("channel.close"));
  connections = admin->ListConnections();
  ASSERT_TRUE(connections.ok());
  for (const ConnectionInfo& info : *connections) {
    if (info.protocol == "amqp") {
      EXPECT_EQ(info.channels, 1u);
    }
  }
}

TEST(Amqp, ADeliveryUnackedPastTheConsumerTimeoutClosesItsChannelWith406AndComesBack) {
  std::string config = testing::MakeTempDir("wharf-amqp-timeout") + "/wharfd.toml";
  std::ofstream(config) << "[amqp]\nconsumer_timeout_ms = 300\n";
  TestServer server({"--config", config});
  AmqpConnection c(server.amqp_port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.OpenChannel(1));
  ASSERT_EQ(c.DeclareQueue(1, "slow", false, false, false), "slow");
  ASSERT_TRUE(c.Publish(1, "", "slow", "task", nullptr));
  amqp_basic_consume(c.get(), 1, amqp_cstring_bytes("slow"), amqp_cstring_bytes("worker"), 0, 0, 0,
                     amqp_empty_table);
  ASSERT_TRUE(c.Check("basic.consume"));
  amqp_envelope_t envelope;
  timeval timeout{10, 0};
  amqp_rpc_reply_t reply = amqp_consume_message(c.get(), &envelope, &timeout, 0);
  ASSERT_EQ(reply.reply_type, AMQP_RESPONSE_NORMAL) << AmqpConnection::Describe(reply);
  amqp_destroy_envelope(&envelope);
  const auto delivered = std::chrono::steady_clock::now();
  // Not acked: RabbitMQ's consumer timeout closes the channel, blaming no method.
  amqp_frame_t frame;
  ASSERT_EQ(amqp_simple_wait_frame_noblock(c.get(), &frame, &timeout), AMQP_STATUS_OK);
  EXPECT_GE(std::chrono::steady_clock::now() - delivered, std::chrono::milliseconds(250));
  ASSERT_EQ(frame.frame_type, AMQP_FRAME_METHOD);
  ASSERT_EQ(frame.channel, 1);
  ASSERT_EQ(frame.payload.method.id, AMQP_CHANNEL_CLOSE_METHOD);
  auto* close = static_cast<amqp_channel_close_t*>(frame.payload.method.decoded);
  EXPECT_EQ(close->reply_code, 406);
  EXPECT_EQ(ToString(close->reply_text),
            "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value "
            "used: 300 ms. This timeout value can be configured, see consumers doc guide to learn "
            "more");
  EXPECT_EQ(close->class_id, 0);
  EXPECT_EQ(close->method_id, 0);
  amqp_channel_close_ok_t close_ok{};
  ASSERT_EQ(amqp_send_method(c.get(), 1, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok), AMQP_STATUS_OK);
  // The connection serves on, and the task is back for another worker.
  ASSERT_TRUE(c.OpenChannel(2));
  reply = amqp_basic_get(c.get(), 2, amqp_cstring_bytes("slow"), 1);
  ASSERT_EQ(reply.reply.id, AMQP_BASIC_GET_OK_METHOD) << AmqpConnection::Describe(reply);
  EXPECT_EQ(static_cast<amqp_basic_get_ok_t*>(reply.reply.decoded)->redelivered, 1);
  amqp_message_t message;
  ASSERT_EQ(amqp_read_message(c.get(), 2, &message, 0).reply_type, AMQP_RESPONSE_NORMAL);
  EXPECT_EQ(ToString(message.body), "task");
  amqp_destroy_message(&message);
}

TEST(Amqp, ConfirmsAckEveryPersistentPublishAndAcksMayCoverRanges) {
  TestServer server;
  AmqpConnection c(server.amqp_port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.OpenChannel(1));
  ASSERT_EQ(c.DeclareQueue(1, "confirmed", true, false, false), "confirmed");
  amqp_confirm_select(c.get(), 1);
  ASSERT_TRUE(c.Check("confirm.select"));
  amqp_basic_properties_t props{};
  props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
  props.delivery_mode = 2;
  constexpr uint64_t kCount = 500;
  for (uint64_t i = 0; i < kCount; ++i) ASSERT_TRUE(c.Publish(1, "", "confirmed", "x", &props));
  std::vector<bool> acked(kCount + 1, false);
  uint64_t highest = 0;
  bool saw_multiple = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (highest < kCount && std::chrono::steady_clock::now() < deadline) {
    amqp_frame_t frame;
    timeval timeout{5, 0};
    ASSERT_EQ(amqp_simple_wait_frame_noblock(c.get(), &frame, &timeout), AMQP_STATUS_OK);
    ASSERT_EQ(frame.frame_type, AMQP_FRAME_METHOD);
    ASSERT_EQ(frame.payload.method.id, AMQP_BASIC_ACK_METHOD);
    auto* ack = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
    ASSERT_GT(ack->delivery_tag, highest) << "confirms go in order, once each";
    if (ack->multiple) {
      saw_multiple = true;
      for (uint64_t t = highest + 1; t <= ack->delivery_tag; ++t) acked[t] = true;
    } else {
      acked[ack->delivery_tag] = true;
    }
    highest = ack->delivery_tag;
  }
  for (uint64_t t = 1; t <= kCount; ++t) EXPECT_TRUE(acked[t]) << t;
  EXPECT_TRUE(saw_multiple) << "500 pipelined publishes are confirmed with multiple acks";
}

TEST(Amqp, AMissingQueueClosesTheChannelWith404AndTheConnectionServesOn) {
  TestServer server;
  AmqpConnection c(server.amqp_port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.OpenChannel(1));
  amqp_queue_declare(c.get(), 1, amqp_cstring_bytes("nowhere"), /*passive=*/1, 0, 0, 0,
                     amqp_empty_table);
  std::string error = c.LastError();
  EXPECT_EQ(error,
            "channel.close 404 NOT_FOUND - no queue 'nowhere' in vhost '/' class 50 method 10");
  // rabbitmq-c answers close-ok itself; the connection goes on.
  amqp_maybe_release_buffers(c.get());
  ASSERT_TRUE(c.OpenChannel(3));
  EXPECT_EQ(c.DeclareQueue(3, "somewhere", false, false, true), "somewhere");
}

TEST(Amqp, AnAckOfAnUnknownTagIs406) {
  TestServer server;
  AmqpConnection c(server.amqp_port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.OpenChannel(1));
  ASSERT_EQ(amqp_basic_ack(c.get(), 1, 42, 0), AMQP_STATUS_OK);
  // The channel.close comes back as the answer to the next synchronous method.
  amqp_queue_declare(c.get(), 1, amqp_cstring_bytes("q"), 0, 0, 0, 1, amqp_empty_table);
  EXPECT_EQ(c.LastError(),
            "channel.close 406 PRECONDITION_FAILED - unknown delivery tag 42 class 60 method 80");
}

TEST(Amqp, AMethodOnAChannelNotOpenClosesTheConnectionWith504) {
  TestServer server;
  AmqpConnection c(server.amqp_port());
  ASSERT_TRUE(c.ok());
  amqp_queue_declare(c.get(), 5, amqp_cstring_bytes("q"), 0, 0, 0, 1, amqp_empty_table);
  std::string error = c.LastError();
  EXPECT_TRUE(error.starts_with("connection.close 504 CHANNEL_ERROR")) << error;
  // Others are still served.
  AmqpConnection other(server.amqp_port());
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(other.OpenChannel(1));
}

TEST(Amqp, AnotherProtocolHeaderIsAnsweredWithAmqp0091) {
  TestServer server;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), server.amqp_port()});
  asio::write(socket, asio::buffer(std::string("HELO\n\n\n\n")));
  std::string answer(8, '\0');
  asio::read(socket, asio::buffer(answer));
  EXPECT_EQ(answer, std::string("AMQP\0\0\x09\x01", 8));
  // Then the broker closes the connection.
  char byte;
  asio::error_code ec;
  socket.read_some(asio::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, asio::error::eof);
}

TEST(Amqp, AWrongPasswordIsRefusedAndGuestStillLogsIn) {
  TestServer server;
  amqp_connection_state_t conn = amqp_new_connection();
  amqp_socket_t* socket = amqp_tcp_socket_new(conn);
  ASSERT_EQ(amqp_socket_open(socket, "127.0.0.1", server.amqp_port()), AMQP_STATUS_OK);
  amqp_rpc_reply_t login =
      amqp_login(conn, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "wrong");
  EXPECT_NE(login.reply_type, AMQP_RESPONSE_NORMAL);
  // rabbitmq-c advertises authentication_failure_close: it is told why.
  std::string error = AmqpConnection::Describe(login);
  EXPECT_TRUE(error.starts_with("connection.close 403 ACCESS_REFUSED")) << error;
  amqp_destroy_connection(conn);
  AmqpConnection good(server.amqp_port());
  EXPECT_TRUE(good.ok());
}

TEST(Amqp, ConfirmedPersistentMessagesSurviveKill9) {
  TestServer server;
  {
    AmqpConnection c(server.amqp_port());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.OpenChannel(1));
    ASSERT_EQ(c.DeclareQueue(1, "kept", true, false, false), "kept");
    amqp_confirm_select(c.get(), 1);
    ASSERT_TRUE(c.Check("confirm.select"));
    amqp_basic_properties_t props{};
    props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG;
    props.delivery_mode = 2;
    props.message_id = amqp_cstring_bytes("id-7");
    ASSERT_TRUE(c.Publish(1, "", "kept", "survives", &props));
    ASSERT_TRUE(c.WaitConfirmed(1));
    ASSERT_TRUE(server.Restart());  // kill -9, then start again on the same data
  }
  AmqpConnection c(server.amqp_port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.OpenChannel(1));
  amqp_rpc_reply_t reply = amqp_basic_get(c.get(), 1, amqp_cstring_bytes("kept"), 1);
  ASSERT_EQ(reply.reply.id, AMQP_BASIC_GET_OK_METHOD) << AmqpConnection::Describe(reply);
  amqp_message_t message;
  ASSERT_EQ(amqp_read_message(c.get(), 1, &message, 0).reply_type, AMQP_RESPONSE_NORMAL);
  EXPECT_EQ(ToString(message.body), "survives");
  EXPECT_EQ(ToString(message.properties.message_id), "id-7");
  EXPECT_EQ(message.properties.delivery_mode, 2);
  amqp_destroy_message(&message);
}

// Regression (found while fuzzing the store's decoders, issue 18): AMQP lets a routing key, a
// shortstr property and a table key be any bytes, and the store kept them in protobuf
// `string` fields, which do not parse unless UTF-8: after a restart the confirmed messages were
// dropped as "no readable body". A native consumer could not parse such a delivery either.
TEST(Amqp, ConfirmedMessagesCarryingBytesThatAreNotUtf8SurviveARestartForBothProtocols) {
  TestServer server;
  const std::string key("\xff\xfe"), id("\xc3\x28"), header("\xff");
  {
    AmqpConnection c(server.amqp_port());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.OpenChannel(1));
    ASSERT_EQ(c.DeclareQueue(1, "raw", true, false, false), "raw");
    amqp_queue_bind(c.get(), 1, amqp_cstring_bytes("raw"), amqp_cstring_bytes("amq.fanout"),
                    amqp_empty_bytes, amqp_empty_table);
    ASSERT_TRUE(c.Check("queue.bind"));
    amqp_confirm_select(c.get(), 1);
    ASSERT_TRUE(c.Check("confirm.select"));
    amqp_basic_properties_t props{};
    props._flags =
        AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_HEADERS_FLAG;
    props.delivery_mode = 2;
    props.message_id = amqp_cstring_bytes(id.c_str());
    amqp_table_entry_t entry;
    entry.key = amqp_cstring_bytes(header.c_str());
    entry.value.kind = AMQP_FIELD_KIND_UTF8;
    entry.value.value.bytes = amqp_cstring_bytes("v");
    props.headers = {1, &entry};
    ASSERT_TRUE(c.Publish(1, "amq.fanout", key, "for amqp", &props));
    ASSERT_TRUE(c.Publish(1, "amq.fanout", key, "for native", &props));
    ASSERT_TRUE(c.WaitConfirmed(2));
    ASSERT_TRUE(server.Restart());  // kill -9, then start again on the same data
  }
  AmqpConnection c(server.amqp_port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.OpenChannel(1));
  amqp_rpc_reply_t reply = amqp_basic_get(c.get(), 1, amqp_cstring_bytes("raw"), 1);
  ASSERT_EQ(reply.reply.id, AMQP_BASIC_GET_OK_METHOD) << AmqpConnection::Describe(reply);
  EXPECT_EQ(ToString(static_cast<amqp_basic_get_ok_t*>(reply.reply.decoded)->routing_key), key);
  amqp_message_t message;
  ASSERT_EQ(amqp_read_message(c.get(), 1, &message, 0).reply_type, AMQP_RESPONSE_NORMAL);
  EXPECT_EQ(ToString(message.body), "for amqp");
  EXPECT_EQ(ToString(message.properties.message_id), id);
  ASSERT_EQ(message.properties.headers.num_entries, 1);  // the publisher's bytes, as they came
  EXPECT_EQ(ToString(message.properties.headers.entries[0].key), header);
  amqp_destroy_message(&message);

  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  auto got = client->Receive("raw", 10, std::chrono::seconds(5));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].message.body, "for native");
  EXPECT_EQ((*got)[0].routing_key, key);
  EXPECT_EQ((*got)[0].message.properties.message_id, id);
  EXPECT_TRUE((*got)[0].message.headers.empty()) << "Wharf's header names are UTF-8 only";
  EXPECT_TRUE(client->Ping().ok()) << "the native connection parsed the delivery";
}

// The same bytes as an argument name: refused (a durable queue's record must load again), and
// the broker restarts with the queue that was declared without it.
TEST(Amqp, AnArgumentNameThatIsNotUtf8Is406) {
  TestServer server;
  {
    AmqpConnection c(server.amqp_port());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.OpenChannel(1));
    amqp_table_entry_t entry;
    entry.key = amqp_cstring_bytes("\xff");
    entry.value.kind = AMQP_FIELD_KIND_I32;
    entry.value.value.i32 = 1;
    amqp_queue_declare(c.get(), 1, amqp_cstring_bytes("args"), 0, 1, 0, 0, {1, &entry});
    const std::string error = c.LastError();
    EXPECT_NE(error.find("channel.close 406 PRECONDITION_FAILED - argument name \"\\xff\" is "
                         "not valid UTF-8"),
              std::string::npos)
        << error;
    ASSERT_TRUE(c.OpenChannel(2));
    ASSERT_EQ(c.DeclareQueue(2, "args", true, false, false), "args");
    ASSERT_TRUE(server.Restart());
  }
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  auto queues = client->ListQueues();
  ASSERT_TRUE(queues.ok());
  ASSERT_EQ(queues->size(), 1u);
  EXPECT_EQ((*queues)[0].name, "args");
}

}  // namespace
}  // namespace wharf
