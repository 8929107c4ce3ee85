// broker/broker_store_fixture.h: the broker with the real RocksDB store, for tests.
//
// The test thread is the broker thread: store completions queue up in a Mailbox and run when
// Drain() pumps it. Crash() drops the broker as kill -9 would.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "common/clock.h"
#include "unit/broker/recording_peer.h"
#include "unit/store/store_test_util.h"

namespace wharf::broker {

using store::testing::Mailbox;
using store::testing::TempDir;

class BrokerStoreTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kS1 = 1;

  BrokerStoreTest() { Start(); }
  ~BrokerStoreTest() override { Crash(); }

  void Start(BrokerOptions options = {}) {
    options_ = options;
    store::StoreOptions store_options = store_options_;
    store_options.write_faults = faults_;
    store_options.free_bytes_for_tests = [this]() -> std::optional<uint64_t> {
      uint64_t free = free_disk_bytes_.load();
      return free == 0 ? std::nullopt : std::optional<uint64_t>(free);
    };
    store_ = store::testing::OpenStore(dir_.path(), &mailbox_, store_options);
    ASSERT_NE(store_, nullptr);
    auto state = store_->Recover();
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    broker_ = std::make_unique<Broker>(options, &clock_, store_.get());
    ASSERT_TRUE(broker_->Recover(*state).ok());
    auto peer = std::make_shared<RecordingPeer>();
    peer_ = peer.get();
    EXPECT_TRUE(broker_->OpenSession(kS1, "alice", peer).ok());
    Drain();
  }

  // Drops the broker as kill -9 would: nothing is settled or requeued. What the store has
  // been handed is written (a crashed process's unsynced WAL writes survive in the OS).
  void Crash() {
    if (!broker_) return;
    store_->Close();
    mailbox_.Clear();
    broker_.reset();
    store_.reset();
  }

  void Restart(BrokerOptions options = {}) {
    Crash();
    Start(options);
  }

  // Flushes and runs store completions until nothing is in flight.
  void Drain() {
    ASSERT_TRUE(mailbox_.RunUntil([&] {
      broker_->Flush();
      return broker_->store_requests_in_flight() == 0;
    }));
  }

  void DeclareQueue(const std::string& name, bool durable = true, Headers arguments = {}) {
    QueueSpec spec;
    spec.name = name;
    spec.durable = durable;
    spec.arguments = std::move(arguments);
    auto declared = broker_->DeclareQueue(kS1, spec);
    ASSERT_TRUE(declared.ok()) << declared.status().ToString();
  }

  Result<PublishOutcome> Publish(const std::string& exchange, const std::string& key,
                                 const std::string& body, bool persistent = true,
                                 uint64_t request_id = 0) {
    Message m;
    m.body = body;
    m.persistent = persistent;
    return broker_->Publish(kS1, exchange, key, std::move(m), request_id);
  }

  Result<PublishOutcome> PublishDelayed(const std::string& queue, const std::string& body,
                                        PublishTiming timing, bool persistent = true,
                                        uint64_t request_id = 0) {
    Message m;
    m.body = body;
    m.persistent = persistent;
    return broker_->Publish(kS1, "", queue, std::move(m), request_id, timing);
  }

  // Advances the clock and runs the broker's timer and flush, as the server would.
  void Tick(std::chrono::milliseconds d = std::chrono::milliseconds(0)) {
    clock_.Advance(d);
    broker_->OnTimer();
    Drain();
  }

  std::vector<Delivery> Take(const std::string& queue, uint32_t max = 1000) {
    auto received = broker_->Receive(kS1, 77, queue, max, 0);
    EXPECT_TRUE(received.ok()) << received.ToString();
    Drain();
    std::vector<Delivery> out;
    for (auto& c : peer_->completions) {
      for (auto& d : c.deliveries) out.push_back(std::move(d));
    }
    peer_->completions.clear();
    return out;
  }

  // Takes and acks up to `count` messages, `batch` at a time, until the queue gives none.
  std::vector<std::string> TakeAndAck(const std::string& queue, uint32_t batch, size_t count) {
    std::vector<std::string> got;
    while (got.size() < count) {
      auto taken = Take(queue, batch);
      if (taken.empty()) break;
      for (const auto& d : taken) {
        got.push_back(d.envelope->message.body);
        EXPECT_TRUE(broker_->Ack(kS1, d.delivery_tag, false).ok());
      }
    }
    return got;
  }

  QueueInfo Info(const std::string& name) {
    for (const auto& q : broker_->ListQueues(name)) {
      if (q.name == name) return q;
    }
    ADD_FAILURE() << "no queue " << name;
    return {};
  }

  TempDir dir_;
  Mailbox mailbox_;
  std::shared_ptr<store::WriteFaults> faults_ = std::make_shared<store::WriteFaults>();
  // The store's options at each Start (write_faults and free_bytes_for_tests are the above).
  store::StoreOptions store_options_;
  // The free disk space the store sees; 0: the real one.
  std::atomic<uint64_t> free_disk_bytes_{0};
  ManualClock clock_;
  BrokerOptions options_;
  std::unique_ptr<store::RocksDbStore> store_;
  std::unique_ptr<Broker> broker_;
  RecordingPeer* peer_ = nullptr;
};

}  // namespace wharf::broker
