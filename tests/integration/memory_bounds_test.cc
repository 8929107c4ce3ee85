// Memory bounds with messages heavy in headers, through the real wharfd (docs/architecture.md,
// "A message's size"): a message counts whole (body, headers, properties) wherever memory is
// bounded, so headers page like bodies, fill a stuck consumer's output cap like bodies, and a
// lease that keeps running out on a stuck consumer cannot pile copies up; and a publish with a
// million tiny headers is refused before it is parsed. wharfd's resident memory is read from
// /proc; the bounds are generous, and each is several times below what the code before these
// fixes reached. Meaningless under AddressSanitizer (its shadow memory and quarantine hold
// freed memory): skipped there, run in Release builds.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "integration/helpers.h"
#include "integration/raw_connection.h"
#include "support/test_server.h"

#if defined(__SANITIZE_ADDRESS__)
#define WHARF_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WHARF_TEST_ASAN 1
#endif
#endif

namespace wharf {
namespace {

using std::chrono::milliseconds;
constexpr uint64_t kMiB = 1u << 20;

#define SKIP_UNDER_ASAN()                                                              \
  do {                                                                                 \
    if (kAsan) GTEST_SKIP() << "resident memory means nothing under AddressSanitizer"; \
  } while (0)

#ifdef WHARF_TEST_ASAN
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

// A config file in `server_dir`'s parent temp dir: small store buffers, so that what the
// broker keeps, not RocksDB's memtables, is what moves the figures.
std::string WriteBoundsConfig(const std::string& dir, const std::string& extra) {
  std::string path = dir + "/wharfd.toml";
  FILE* f = std::fopen(path.c_str(), "w");
  std::string text = "[store]\nmemtable_bytes = 8388608\nblock_cache_bytes = 1048576\n" + extra;
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return path;
}

uint64_t Rss(const testing::TestServer& server) {
  return testing::ProcStatusBytes(server.pid(), "VmRSS");
}

std::string Mb(uint64_t bytes) { return std::to_string(bytes / kMiB) + " MiB"; }

// Prints what `what` did to wharfd's resident memory (the figures the test bounds) and checks
// it grew by less than `bound`.
void ExpectGrowthBelow(const char* what, uint64_t before, uint64_t after, uint64_t bound) {
  std::printf("%s: resident %s -> %s (+%s)\n", what, Mb(before).c_str(), Mb(after).c_str(),
              Mb(after - std::min(after, before)).c_str());
  EXPECT_LT(after, before + bound) << what << ": grew by more than " << Mb(bound);
}

// A message whose `header_bytes` are all in headers of 256 KiB (or one smaller), body tiny.
Message HeaderHeavy(uint64_t header_bytes) {
  Message m;
  m.body = "b";
  for (uint64_t i = 0; header_bytes > 0; ++i) {
    uint64_t n = std::min<uint64_t>(header_bytes, 256u << 10);
    m.headers["h" + std::to_string(i)] = std::string(n, static_cast<char>('a' + i % 26));
    header_bytes -= n;
  }
  return m;
}

// Declares the queue `name`; false (after a test failure) when it cannot.
bool Declare(Client& client, const std::string& name, bool durable = false,
             Headers arguments = {}) {
  QueueSpec spec;
  spec.name = name;
  spec.durable = durable;
  spec.arguments = std::move(arguments);
  Status s = client.DeclareQueue(spec).status();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return s.ok();
}

class MemoryBounds : public ::testing::Test {
 protected:
  MemoryBounds() : dir_(testing::MakeTempDir("wharf-mem")) {}
  ~MemoryBounds() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<testing::TestServer> Start(const std::string& extra_config = "") {
    return std::make_unique<testing::TestServer>(
        std::vector<std::string>{"--config", WriteBoundsConfig(dir_, extra_config)});
  }

  // A raw connection subscribed to `queues` (prefetch 0) that then never reads again: the
  // broker's output to it can only pile up.
  static std::unique_ptr<testing::RawConnection> StuckConsumer(
      const testing::TestServer& server, const std::vector<std::string>& queues) {
    auto raw = std::make_unique<testing::RawConnection>(server.port(), 16 << 10);
    raw->Handshake();
    uint64_t id = 10;
    for (const auto& q : queues) {
      testing::RawConnection::Frame sub;
      sub.set_request_id(++id);
      sub.mutable_subscribe()->set_queue(q);
      raw->SendFrame(sub);
      auto ok = raw->ReadFrame();
      EXPECT_TRUE(ok && ok->has_subscribe_ok()) << (ok ? ok->DebugString() : "no reply");
    }
    return raw;
  }

  // Starts wharfd (server_) and connects to it (client_) with the queue "q" declared.
  bool StartWithQueue() {
    server_ = Start();
    client_ = server_->Connect();
    return client_ != nullptr && Declare(*client_, "q");
  }

  // Publishes `m` to "q" and checks wharfd's peak resident memory grew by less than `bound`
  // meanwhile; returns the publish's answer.
  Result<PublishResult> PublishWithinPeak(const Message& m, const char* what, uint64_t bound) {
    const uint64_t before = Rss(*server_);
    auto answer = client_->Publish("", "q", m);
    EXPECT_TRUE(client_->Ping().ok());  // the publish has been handled, whatever became of it
    if (!kAsan) {
      ExpectGrowthBelow(what, before, testing::ProcStatusBytes(server_->pid(), "VmHWM"), bound);
    }
    return answer;
  }

  std::string dir_;
  std::unique_ptr<testing::TestServer> server_;
  std::unique_ptr<Client> client_;
};

// Before: headers did not count towards page_max_bytes, so 94 MiB of headers stayed in RAM
// (+134 MiB resident, nothing paged). Now they page like bodies (+20 MiB; the same bytes in
// bodies: +21 MiB).
TEST_F(MemoryBounds, HeaderHeavyMessagesPageLikeBodies) {
  SKIP_UNDER_ASAN();
  auto server = Start("page_max_bytes = 4194304\n");
  auto client = server->Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(Declare(*client, "deep", /*durable=*/true));
  const uint64_t before = Rss(*server);
  constexpr int kMessages = 6'000;
  Message m = HeaderHeavy(16u << 10);  // 16 KiB of headers each: 94 MiB in all
  m.persistent = true;
  // In windows of 100: a persistent publish is confirmed once written, after every one before
  // it, so the store's backlog stays small and what stays in RAM is what the queue keeps.
  for (int i = 1; i <= kMessages; ++i) {
    if (i % 100 == 0) {
      ASSERT_TRUE(client->Publish("", "deep", m).ok());
    } else {
      ASSERT_TRUE(client->PublishNoConfirm("", "deep", m).ok());
    }
  }
  ExpectGrowthBelow("headers must page as bodies do", before, Rss(*server), 48 * kMiB);
  // Nothing lost: the queue holds them all, the first one whole.
  auto got = client->Receive("deep", 1, milliseconds(2'000));
  ASSERT_TRUE(got.ok() && got->size() == 1u);
  EXPECT_EQ((*got)[0].message.headers, m.headers);
  auto queues = client->ListQueues("deep");
  ASSERT_TRUE(queues.ok() && queues->size() == 1u);
  EXPECT_EQ((*queues)[0].ready + (*queues)[0].in_flight, static_cast<uint64_t>(kMessages));
}

// Before: a 16 MB publish of a million one-byte headers held ~330 MB (the protobuf map, two
// copies of it as std::map). Now more than [limits] max_headers (10,000) are refused,
// MESSAGE_TOO_LARGE, before the frame is parsed (the peak is the frame's own bytes); the
// connection stays.
TEST_F(MemoryBounds, AMillionHeadersAreRefusedBeforeTheyAreParsed) {
  ASSERT_TRUE(StartWithQueue());
  Message many;
  char key[16];
  for (int i = 0; i < 1'000'000; ++i) {
    std::snprintf(key, sizeof key, "h%07d", i);
    many.headers.emplace_hint(many.headers.end(), key, true);
  }
  auto refused =
      PublishWithinPeak(many, "a million headers (peak: the frame is not parsed)", 96 * kMiB);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kMessageTooLarge) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("max_headers 10000"), std::string::npos)
      << refused.status().ToString();
  // The connection goes on, and 10,000 headers are taken whole.
  Message limit;
  for (int i = 0; i < 10'000; ++i) limit.headers["k" + std::to_string(i)] = int64_t{i};
  ASSERT_TRUE(client_->Publish("", "q", limit).ok());
  auto got = client_->Receive("q", 1, milliseconds(2'000));
  ASSERT_TRUE(got.ok() && got->size() == 1u);
  EXPECT_EQ((*got)[0].message.headers, limit.headers);
}

// Death records are the broker's to set, but a publish could carry any number: an empty one is
// 2 bytes on the wire and some 300 in RAM once parsed and converted. More than kMaxDeaths are
// refused before the frame is parsed (INVALID_ARGUMENT); the connection stays.
TEST_F(MemoryBounds, APublishWithAMillionDeathRecordsIsRefusedBeforeItIsParsed) {
  ASSERT_TRUE(StartWithQueue());
  Message m;
  m.deaths.resize(1'000'000);  // 2 MB on the wire
  auto refused = PublishWithinPeak(m, "a million death records (peak: not parsed)", 32 * kMiB);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  m.deaths.resize(kMaxDeaths);  // what a dead-lettered message passed on carries at most
  EXPECT_TRUE(client_->Publish("", "q", m).ok());
}

// Before: the 8 MiB output cap counted bodies only, so each fanout publish of 1 MiB of headers
// to 30 queues a stuck consumer subscribes to added 30 MiB of encoded deliveries (+300 MB
// for 10 publishes). Now the cap counts whole deliveries.
TEST_F(MemoryBounds, FanoutToAStuckConsumerStaysWithinTheOutputCap) {
  SKIP_UNDER_ASAN();
  auto server = Start();
  auto client = server->Connect();
  ASSERT_NE(client, nullptr);
  ExchangeSpec fanout;
  fanout.name = "fan";
  fanout.type = ExchangeType::kFanout;
  ASSERT_TRUE(client->DeclareExchange(fanout).ok());
  std::vector<std::string> names;
  for (int i = 0; i < 30; ++i) {
    names.push_back("fan-" + std::to_string(i));
    ASSERT_TRUE(Declare(*client, names.back()));
    BindingSpec b;
    b.exchange = "fan";
    b.queue = names.back();
    ASSERT_TRUE(client->Bind(b).ok());
  }
  auto stuck = StuckConsumer(*server, names);
  const uint64_t before = Rss(*server);
  Message m = HeaderHeavy(kMiB);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(client->Publish("fan", "", m).ok());
  ASSERT_TRUE(client->Ping().ok());
  std::this_thread::sleep_for(milliseconds(300));
  ExpectGrowthBelow("fanout to a stuck consumer (the output cap counts headers)", before,
                    Rss(*server), 64 * kMiB);
}

// Before: each time the leases ran out, the messages were delivered again to the consumer that
// never read, and since the cap did not count their headers, every round's copies piled up in
// its output (+4 MiB per 100 ms lease here, with nothing published). Now the cap stops that.
TEST_F(MemoryBounds, LeasesRunningOutOnAStuckConsumerDoNotGrowMemory) {
  SKIP_UNDER_ASAN();
  auto server = Start();
  auto client = server->Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(Declare(*client, "leased", false, {{"x-lease-ms", int64_t{100}}}));
  auto stuck = StuckConsumer(*server, {"leased"});
  Message m = HeaderHeavy(256u << 10);
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(client->Publish("", "leased", m).ok());
  std::this_thread::sleep_for(milliseconds(500));
  const uint64_t before = Rss(*server);
  std::this_thread::sleep_for(milliseconds(3'000));  // ~30 leases run out
  ExpectGrowthBelow("leases running out on a stuck consumer (redeliveries pile up)", before,
                    Rss(*server), 24 * kMiB);
}

}  // namespace
}  // namespace wharf
