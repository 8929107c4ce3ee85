// Robustness of the amqp/ decoders: random bytes and mutated valid encodings, a few thousand
// of each with a fixed seed (deterministic), must give an error or a value, never a crash or a
// read out of bounds (the ASan build runs these). A value decoded from mutated bytes must
// encode and decode to itself again.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "amqp/field_table.h"
#include "amqp/frame.h"
#include "amqp/methods.h"
#include "amqp/properties.h"
#include "amqp/sasl.h"

namespace wharf::amqp {
namespace {

std::string RandomBytes(std::mt19937& rng, size_t max_size) {
  std::uniform_int_distribution<size_t> size(0, max_size);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s(size(rng), '\0');
  for (char& c : s) c = static_cast<char>(byte(rng));
  return s;
}

// Flips, overwrites, inserts or deletes a few bytes.
std::string Mutate(std::string s, std::mt19937& rng) {
  std::uniform_int_distribution<int> edits(1, 4);
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int n = edits(rng); n > 0; --n) {
    if (s.empty()) {
      s.push_back(static_cast<char>(byte(rng)));
      continue;
    }
    std::uniform_int_distribution<size_t> at(0, s.size() - 1);
    const size_t i = at(rng);
    switch (kind(rng)) {
      case 0:
        s[i] = static_cast<char>(s[i] ^ (1 << (byte(rng) % 8)));
        break;
      case 1:
        s[i] = static_cast<char>(byte(rng));
        break;
      case 2:
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(i), static_cast<char>(byte(rng)));
        break;
      default:
        s.erase(i, 1);
        break;
    }
  }
  return s;
}

FieldTable SampleTable() {
  FieldTable inner;
  inner.Set("x", FieldValue::Array({FieldValue::Int('l', 1), FieldValue::Table({}),
                                    FieldValue::Dec({1, 5}), FieldValue::Void()}));
  FieldTable t;
  t.Set("s", FieldValue::LongStr("value"));
  t.Set("n", FieldValue::Int('I', -5));
  t.Set("f", FieldValue::Table(inner));
  t.Set("T", FieldValue::Timestamp(9));
  t.Set("b", FieldValue::Bool(true));
  return t;
}

std::vector<std::string> SampleMethods() {
  const Method methods[] = {
      QueueDeclare{.queue = "q", .durable = true, .arguments = SampleTable()},
      BasicPublish{.exchange = "x", .routing_key = "rk", .mandatory = true},
      BasicDeliver{.consumer_tag = "c", .delivery_tag = 5, .exchange = "x", .routing_key = "k"},
      ConnectionStartOk{.client_properties = SampleTable(),
                        .mechanism = "PLAIN",
                        .response = std::string("\0u\0p", 4),
                        .locale = "en_US"},
      ConnectionTuneOk{.channel_max = 1, .frame_max = 4096, .heartbeat = 60},
      BasicAck{.delivery_tag = 1, .multiple = true},
      ChannelClose{.reply_code = 406, .reply_text = "text", .class_id = 50, .method_id = 10},
      ExchangeBind{.destination = "d", .source = "s", .arguments = SampleTable()},
  };
  std::vector<std::string> out;
  for (const Method& m : methods) {
    std::string payload;
    EncodeMethod(m, &payload);
    out.push_back(payload);
  }
  return out;
}

void CheckMethod(std::string_view bytes) {
  Method m;
  if (!DecodeMethod(bytes, &m).ok()) return;
  std::string again;
  EncodeMethod(m, &again);
  Method back;
  ASSERT_TRUE(DecodeMethod(again, &back).ok());
  EXPECT_TRUE(back == m);
}

void CheckTable(std::string_view bytes) {
  FieldTable t;
  if (!DecodeTable(bytes, &t).ok()) return;
  std::string again;
  AppendTable(t, &again);
  FieldTable back;
  ASSERT_TRUE(DecodeTable(std::string_view(again).substr(4), &back).ok());
  // Floats may be NaN (never equal to themselves): compare the bytes of a second encoding.
  std::string third;
  AppendTable(back, &third);
  EXPECT_EQ(third, again);
}

void CheckProperties(std::string_view bytes) {
  BasicProperties p;
  if (!DecodeProperties(bytes, &p).ok()) return;
  std::string again;
  EncodeProperties(p, &again);
  BasicProperties back;
  ASSERT_TRUE(DecodeProperties(again, &back).ok());
  std::string third;
  EncodeProperties(back, &third);
  EXPECT_EQ(third, again);
}

void CheckEverything(std::string_view bytes) {
  CheckMethod(bytes);
  CheckTable(bytes);
  CheckProperties(bytes);
  Frame f;
  (void)ParseFrame(bytes, &f);
  ContentHeader h;
  (void)DecodeContentHeader(bytes, &h);
  Credentials c;
  (void)ParsePlain(bytes, &c);
  (void)ParseAmqplain(bytes, &c);
}

TEST(AmqpFuzz, RandomBytes) {
  std::mt19937 rng(20240601);
  for (int i = 0; i < 2000; ++i) CheckEverything(RandomBytes(rng, 64));
}

TEST(AmqpFuzz, RandomBytesWithAPlausibleMethodId) {
  std::mt19937 rng(7);
  const std::vector<std::string> samples = SampleMethods();
  for (int i = 0; i < 3000; ++i) {
    std::string bytes = samples[static_cast<size_t>(i) % samples.size()].substr(0, 4);
    bytes += RandomBytes(rng, 48);
    CheckMethod(bytes);
  }
}

TEST(AmqpFuzz, MutatedMethods) {
  std::mt19937 rng(42);
  const std::vector<std::string> samples = SampleMethods();
  for (int i = 0; i < 8000; ++i) {
    CheckMethod(Mutate(samples[static_cast<size_t>(i) % samples.size()], rng));
  }
}

TEST(AmqpFuzz, MutatedTablesAndProperties) {
  std::mt19937 rng(1234);
  std::string table;
  AppendTable(SampleTable(), &table);
  table.erase(0, 4);
  BasicProperties p;
  p.content_type = "t";
  p.headers = SampleTable();
  p.priority = 1;
  p.timestamp = 2;
  p.app_id = "a";
  std::string props;
  EncodeProperties(p, &props);
  for (int i = 0; i < 4000; ++i) {
    CheckTable(Mutate(table, rng));
    CheckProperties(Mutate(props, rng));
  }
}

}  // namespace
}  // namespace wharf::amqp
