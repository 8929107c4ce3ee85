// Bad input over a raw socket: every kind of broken frame gets its specific error code and a
// Close, the broker closes only that connection, and other clients carry on.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <asio.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include "integration/raw_connection.h"
#include "support/test_server.h"

namespace wharf {
namespace {

namespace pb = ::wharf::wire::v1;
using std::chrono::milliseconds;

using testing::LengthPrefix;
using testing::RawConnection;

class ProtocolErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bystander_ = server_.Connect();
    ASSERT_NE(bystander_, nullptr);
    QueueSpec spec;
    spec.name = "steady";
    ASSERT_TRUE(bystander_->DeclareQueue(spec).ok());
  }
  // After each bad client, an ordinary one must still be served.
  void TearDown() override {
    Message m;
    m.body = "still here";
    auto r = bystander_->Publish("", "steady", m);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(server_.running());
  }

  testing::TestServer server_;
  std::unique_ptr<Client> bystander_;
};

TEST_F(ProtocolErrorsTest, GarbageBeforeHandshakeIsFrameTooLarge) {
  RawConnection raw(server_.port());
  raw.SendBytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n");  // "GET " reads as a 1.2 GB length
  EXPECT_EQ(raw.ExpectErrorThenClose(), pb::FRAME_TOO_LARGE);
}

TEST_F(ProtocolErrorsTest, LargeFrameBeforeLoginIsRefused) {
  RawConnection raw(server_.port());
  raw.SendBytes(LengthPrefix(100u << 10));  // fine after login, too big for a handshake
  EXPECT_EQ(raw.ExpectErrorThenClose(), pb::FRAME_TOO_LARGE);
}

TEST_F(ProtocolErrorsTest, OversizedFrameIsRefusedBeforeItsPayload) {
  RawConnection raw(server_.port());
  raw.Handshake();
  raw.SendBytes(LengthPrefix((17u << 20) + 1));  // limit: 16 MiB bodies + 1 MiB
  EXPECT_EQ(raw.ExpectErrorThenClose(), pb::FRAME_TOO_LARGE);
}

TEST_F(ProtocolErrorsTest, InvalidProtobufIsMalformedFrame) {
  RawConnection raw(server_.port());
  raw.Handshake();
  raw.SendBytes(LengthPrefix(4) + "\xff\xff\xff\xff");
  EXPECT_EQ(raw.ExpectErrorThenClose(), pb::MALFORMED_FRAME);
}

// Regression: libprotobuf logged "[libprotobuf ERROR ...] String field ... contains invalid
// UTF-8" to stderr itself, past spdlog (a raw line in a JSON log, written for any client that
// asked), and the client was told only that its frame was not a valid Frame.
TEST_F(ProtocolErrorsTest, InvalidUtf8IsMalformedFrameNamingTheFieldAndStaysOutOfTheLog) {
  RawConnection raw(server_.port());
  // Frame{request_id: 1, hello: Hello{protocol_version: 1, client_name: "\xff\xfe"}}.
  const std::string frame("\x08\x01\x52\x06\x08\x01\x12\x02\xff\xfe", 10);
  raw.SendBytes(LengthPrefix(frame.size()) + frame);
  std::string message;
  EXPECT_EQ(raw.ExpectErrorThenClose(&message), pb::MALFORMED_FRAME);
  EXPECT_NE(message.find("string field 'wharf.wire.v1.Hello.client_name' is not valid UTF-8"),
            std::string::npos)
      << message;
  // Through spdlog (at debug, formatted like every line), not libprotobuf's own "[libprotobuf".
  EXPECT_EQ(server_.Log().find("[libprotobuf"), std::string::npos) << server_.Log();
}

TEST_F(ProtocolErrorsTest, TruncatedFrameIsReportedWhenTheStreamEnds) {
  RawConnection raw(server_.port());
  raw.Handshake();
  raw.SendBytes(LengthPrefix(100) + "only a few bytes");
  raw.ShutdownWrite();
  EXPECT_EQ(raw.ExpectErrorThenClose(), pb::FRAME_TRUNCATED);
}

TEST_F(ProtocolErrorsTest, RequestBeforeHandshakeIsUnexpected) {
  RawConnection raw(server_.port());
  pb::Frame frame;
  frame.set_request_id(1);
  frame.mutable_list_queues();
  raw.SendFrame(frame);
  EXPECT_EQ(raw.ExpectErrorThenClose(), pb::UNEXPECTED_FRAME);
}

TEST_F(ProtocolErrorsTest, RequestBeforeLoginIsUnexpected) {
  RawConnection raw(server_.port());
  pb::Frame hello;
  hello.set_request_id(1);
  hello.mutable_hello()->set_protocol_version(1);
  raw.SendFrame(hello);
  ASSERT_TRUE(raw.ReadFrame());
  pb::Frame frame;
  frame.set_request_id(2);
  frame.mutable_list_queues();
  raw.SendFrame(frame);
  EXPECT_EQ(raw.ExpectErrorThenClose(), pb::UNEXPECTED_FRAME);
}

TEST_F(ProtocolErrorsTest, UnknownProtocolVersionIsRefused) {
  RawConnection raw(server_.port());
  pb::Frame hello;
  hello.set_request_id(1);
  hello.mutable_hello()->set_protocol_version(99);
  raw.SendFrame(hello);
  EXPECT_EQ(raw.ExpectErrorThenClose(), pb::UNSUPPORTED_VERSION);
}

TEST_F(ProtocolErrorsTest, BrokerOnlyFrameFromAClientIsUnexpected) {
  RawConnection raw(server_.port());
  raw.Handshake();
  pb::Frame frame;
  frame.mutable_delivery()->set_delivery_tag(1);
  raw.SendFrame(frame);
  EXPECT_EQ(raw.ExpectErrorThenClose(), pb::UNEXPECTED_FRAME);
}

TEST_F(ProtocolErrorsTest, EmptyRequestGetsAnErrorButKeepsTheConnection) {
  RawConnection raw(server_.port());
  raw.Handshake();
  pb::Frame empty;
  empty.set_request_id(7);
  raw.SendFrame(empty);
  auto error = raw.ReadFrame();
  ASSERT_TRUE(error && error->has_error());
  EXPECT_EQ(error->request_id(), 7u);
  EXPECT_EQ(error->error().code(), pb::EMPTY_REQUEST);
  pb::Frame ping;
  ping.set_request_id(8);
  ping.mutable_ping()->set_nonce(5);
  raw.SendFrame(ping);
  auto pong = raw.ReadFrame();
  ASSERT_TRUE(pong && pong->has_pong());
  EXPECT_EQ(pong->pong().nonce(), 5u);
}

TEST_F(ProtocolErrorsTest, WrongPasswordIsRefused) {
  ClientOptions options = server_.Options();
  options.password = "not-guest";
  auto client = Client::Connect(options);
  EXPECT_EQ(client.status().code(), StatusCode::kAuthenticationFailed);
  options.user = "nobody";
  EXPECT_EQ(Client::Connect(options).status().code(), StatusCode::kAuthenticationFailed);
  EXPECT_NE(server_.Log().find("login refused"), std::string::npos);
}

TEST_F(ProtocolErrorsTest, RequestErrorsKeepTheConnectionOpen) {
  EXPECT_EQ(bystander_->DeleteQueue("missing").status().code(), StatusCode::kQueueNotFound);
  EXPECT_EQ(bystander_->Bind({"steady", "missing", "k", {}}).code(), StatusCode::kExchangeNotFound);
  QueueSpec bad;
  bad.name = "has space";
  EXPECT_EQ(bystander_->DeclareQueue(bad).status().code(), StatusCode::kInvalidArgument);
  QueueSpec reserved;
  reserved.name = "amq.mine";
  EXPECT_EQ(bystander_->DeclareQueue(reserved).status().code(), StatusCode::kReservedName);
  QueueSpec unknown_arg;
  unknown_arg.name = "args";
  unknown_arg.arguments["x-bogus"] = int64_t{1};
  EXPECT_EQ(bystander_->DeclareQueue(unknown_arg).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(bystander_->Ping().ok());
}

// Random payloads after login: whatever they parse as (often a valid Frame with odd fields),
// the broker answers or closes that connection, and keeps serving. Seeded, so repeatable.
TEST_F(ProtocolErrorsTest, RandomFramesNeverTakeTheBrokerDown) {
  std::mt19937 rng(20261130);
  for (int round = 0; round < 40; ++round) {
    RawConnection raw(server_.port());
    raw.Handshake();
    std::string bytes;
    for (int frame = 0; frame < 20; ++frame) {
      std::string payload(rng() % 64, '\0');
      for (char& c : payload) c = static_cast<char>(rng());
      // Half the time, start with a valid oneof tag so the fuzz reaches the request handlers.
      if (rng() % 2 == 0 && !payload.empty()) {
        static const unsigned char kTags[] = {0xe2, 0xea, 0xf2, 0xfa};  // fields 60-63 (LEN)
        payload[0] = static_cast<char>(kTags[rng() % 4]);
        bytes += LengthPrefix(static_cast<uint32_t>(payload.size() + 1)) + payload.substr(0, 1) +
                 std::string(1, '\x03') + payload.substr(1);
        continue;
      }
      bytes += LengthPrefix(static_cast<uint32_t>(payload.size())) + payload;
    }
    raw.SendBytes(bytes);
    raw.ShutdownWrite();
    while (raw.ReadFrame()) {
    }
  }
  EXPECT_TRUE(server_.running());
}

TEST(Handshake, ConnectionThatNeverLogsInIsClosed) {
  std::string dir = testing::MakeTempDir("wharf-config");
  std::string config = dir + "/fast.toml";
  std::ofstream(config) << "[limits]\nhandshake_timeout_ms = 1000\n";
  testing::TestServer server({"--config", config});
  RawConnection idle(server.port());
  EXPECT_EQ(idle.ExpectErrorThenClose(), pb::HANDSHAKE_TIMEOUT);
  RawConnection half(server.port());  // Hello but no Authenticate
  pb::Frame hello;
  hello.set_request_id(1);
  hello.mutable_hello()->set_protocol_version(1);
  half.SendFrame(hello);
  ASSERT_TRUE(half.ReadFrame());
  EXPECT_EQ(half.ExpectErrorThenClose(), pb::HANDSHAKE_TIMEOUT);
  // A client that logs in in time is not affected.
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  EXPECT_TRUE(client->Ping().ok());
  std::filesystem::remove_all(dir);
}

// A small max_message_bytes makes the too-large path cheap to reach.
TEST(MessageLimits, TooLargeMessageIsRefusedAndTheConnectionStays) {
  std::string dir = testing::MakeTempDir("wharf-config");
  std::string config = dir + "/small.toml";
  std::ofstream(config) << "[limits]\nmax_message_bytes = 1024\n";
  testing::TestServer server({"--config", config});
  auto client = server.Connect();
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->max_message_bytes(), 1024u);
  QueueSpec spec;
  spec.name = "q";
  ASSERT_TRUE(client->DeclareQueue(spec).ok());
  Message big;
  big.body.assign(1025, 'x');
  auto r = client->Publish("", "q", big);
  EXPECT_EQ(r.status().code(), StatusCode::kMessageTooLarge) << r.status().ToString();
  Message fits;
  fits.body.assign(1024, 'x');
  EXPECT_TRUE(client->Publish("", "q", fits).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wharf
