// Unit tests for common/envelope.h: a message's whole size, the one figure memory bounds use.
#include "common/envelope.h"

#include <gtest/gtest.h>

#include <string>

namespace wharf {
namespace {

TEST(Envelope, HeaderBytesCountNamesAndValues) {
  Headers headers;
  headers["text"] = std::string(10, 'x');        // 4 + 10
  headers["raw"] = Bytes{std::string(5, '\0')};  // 3 + 5
  headers["n"] = int64_t{7};                     // 1 + 8
  headers["d"] = 1.5;                            // 1 + 8
  headers["b"] = true;                           // 1 + 1
  EXPECT_EQ(HeaderBytes(headers), 14u + 8u + 9u + 9u + 2u);
  EXPECT_EQ(HeaderBytes({}), 0u);
}

TEST(Envelope, WholeBytesCountEverythingTheMessageHolds) {
  Envelope bare;
  const uint64_t fixed = bare.whole_bytes();
  EXPECT_GT(fixed, sizeof(Envelope));

  Envelope body = bare;
  body.message.body = std::string(1000, 'b');
  EXPECT_EQ(body.whole_bytes(), fixed + 1000);

  // A header weighs at least its bytes, plus its map node.
  Envelope header = bare;
  header.message.headers["h"] = std::string(999, 'h');
  EXPECT_GT(header.whole_bytes(), fixed + 1000);
  EXPECT_LT(header.whole_bytes(), fixed + 1000 + 256);

  Envelope rest = bare;
  rest.exchange = "exchange";
  rest.routing_key = "key";
  rest.message.properties.correlation_id = "corr";
  rest.message.properties.reply_to = "replies";
  rest.message.deaths.push_back(Death{"rejected", "q", "", "k", 1, 0, 0, 1, 1, "boom"});
  EXPECT_GT(rest.whole_bytes(), fixed + 8 + 3 + 4 + 7 + sizeof(Death));
}

TEST(Envelope, WholeBytesCountAmqpProperties) {
  Envelope bare;
  Envelope amqp = bare;
  amqp.message.amqp_properties = std::string(700, '\0');
  EXPECT_EQ(amqp.whole_bytes(), bare.whole_bytes() + 700);
  EXPECT_EQ(MakeEnvelope(amqp)->whole_bytes(), bare.whole_bytes() + 700);
}

TEST(Envelope, MakeEnvelopeWorksTheSizeOutOnce) {
  Envelope e;
  e.message.body = "body";
  e.message.headers["h"] = std::string(100, 'h');
  const uint64_t expected = e.whole_bytes();
  EXPECT_EQ(e.cached_bytes, 0u);
  EnvelopePtr shared = MakeEnvelope(std::move(e));
  EXPECT_EQ(shared->cached_bytes, expected);
  EXPECT_EQ(shared->whole_bytes(), expected);
}

}  // namespace
}  // namespace wharf
