// Power loss (issue 20): the broker on the real RocksDB store over a file system that forgets
// every unsynced byte at a "power cut" (tests/unit/store/power_cut_fs.h), cut at a random
// call (inside a group commit, a flush, a compaction, a purge's removal step, a redrive step,
// a delayed release), then started again on what a powered-off disk would hold.
//
// Each cycle: boot, check everything the last cycle was promised, empty the queues, then load:
// confirmed publishes to a queue with a dead-letter queue, consumers that ack, reject (into the
// dead-letter queue) and leave deliveries in flight, delayed messages (some falling due during
// the cycle, some an hour out), a redrive of the dead-letter queue and a purge of a paged queue,
// and keep going (timer ticks, publishes, acks) until the power goes off. After the boot:
//   - the store opens without an error;
//   - no confirmed message is missing (an acked one may come back, a confirmed one may not
//     vanish): every confirmed, unacked message is in the queue or its dead-letter queue;
//   - a delayed message is never ready before its time, and every confirmed one arrives;
//   - a queue whose declaration was answered, or that a confirmed message went into, is
//     there, with those messages;
//   - an answered redrive is still there and runs to its end;
//   - an answered purge is not undone, and an unanswered one is all or nothing.
//
// WHARF_POWER_CYCLES sets the number of cycles (make test: 6; the 100-cycle run is
// bench/power-loss.sh, figures in docs/testing.md), WHARF_POWER_SEED the seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "unit/broker/broker_store_fixture.h"
#include "unit/store/power_cut_fs.h"

namespace wharf::broker {
namespace {

using std::chrono::milliseconds;
using store::testing::PowerCutFileSystem;

uint64_t EnvNumber(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::strtoull(value, nullptr, 10) : fallback;
}

class PowerLossTest : public BrokerStoreTest {
 protected:
  // Small memtables, so that flushes and compactions happen within a cycle; small pages, so
  // that queues page to disk and load back.
  static BrokerOptions Options() {
    BrokerOptions options;
    options.page_limits.max_messages = 256;
    options.load_batch = 128;
    options.delay_load_batch = 64;
    return options;
  }

  void Boot() {
    fs_ = std::make_shared<PowerCutFileSystem>();
    store_options_.file_system = fs_;
    store_options_.memtable_bytes = 1u << 20;
    Start(Options());  // asserts that the store opens and recovers without an error
  }

  void PowerCut(std::mt19937_64& rng) {
    if (!fs_->cut()) fs_->CutNow();
    const bool torn = rng() % 2 == 0;
    Crash();  // nothing reaches the disk any more: every write fails after the cut
    auto dropped = fs_->DropUnsynced(rng, torn);
    bytes_dropped_ += dropped.bytes;
    files_removed_ += dropped.files_removed;
    torn_cycles_ += torn ? 1 : 0;
  }

  bool Ok(const Status& s) {
    if (!s.ok() && !fs_->cut()) ADD_FAILURE() << "before the power cut: " << s.ToString();
    return s.ok();
  }

  // Publishes with a confirm; the confirm arrives through the peer (Confirmed()).
  void PublishTo(const std::string& queue, const std::string& body, PublishTiming timing = {}) {
    const uint64_t id = next_request_++;
    Message m;
    m.body = body;
    m.persistent = true;
    auto outcome = broker_->Publish(kS1, "", queue, std::move(m), id, timing);
    if (Ok(outcome.status())) pending_[id] = body;
  }

  // Bodies whose confirms arrived since the last call, successful ones only.
  std::vector<std::string> Confirmed() {
    std::vector<std::string> out;
    for (const auto& c : peer_->confirms) {
      auto it = pending_.find(c.request_id);
      if (it == pending_.end()) continue;
      if (c.status.ok()) out.push_back(it->second);
      pending_.erase(it);
    }
    peer_->confirms.clear();
    return out;
  }

  void Collect() {
    for (const std::string& body : Confirmed()) {
      if (acked_.count(body)) continue;  // acked before its confirm arrived
      switch (body[0]) {
        case 'w':
          alive_.insert(body);
          break;
        case 'p':
          purge_pre_.insert(body);
          break;
        case 'l':
          delayed_.insert(body);
          break;
        case 'd':
          declared_alive_.insert(body);
          break;
        default:
          break;  // purged queue's later messages: not tracked
      }
    }
  }

  // Takes every ready message of `queue` now (loading paged ones), acks them, returns bodies.
  std::vector<std::string> TakeAll(const std::string& queue) {
    std::vector<std::string> got;
    for (int empty = 0; empty < 3;) {
      auto taken = Take(queue, 500);
      if (taken.empty()) {
        ++empty;
        Drain();
        continue;
      }
      empty = 0;
      for (const auto& d : taken) {
        got.push_back(d.envelope->message.body);
        EXPECT_TRUE(broker_->Ack(kS1, d.delivery_tag, false).ok());
      }
    }
    Drain();
    return got;
  }

  // One failure naming the first few of `missing`.
  void Report(const std::vector<std::string>& missing, const char* what) {
    if (missing.empty()) return;
    lost_ += missing.size();
    std::string first;
    for (size_t i = 0; i < missing.size() && i < 5; ++i) first += " " + missing[i];
    ADD_FAILURE() << missing.size() << " " << what << " lost, among them" << first;
  }

  static int64_t DueOf(const std::string& body) {
    // "l<cycle>-<n>@<due ms>"
    return std::stoll(body.substr(body.find('@') + 1));
  }

  // Checks what the last cycle was promised, then leaves every queue empty.
  void Verify(int cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle) + ", power cut at " + cut_point_);
    // Delayed messages ready right after the start must have been due.
    const int64_t now = clock_.WallMillis();
    std::set<std::string> delayed_seen;
    for (const auto& body : TakeAll("later")) {
      EXPECT_LE(DueOf(body), now) << body << " was ready before its time";
      delayed_seen.insert(body);
    }
    // A purge answered is not undone; one unanswered happened wholly or not at all.
    size_t pre_back = 0;
    for (const auto& body : TakeAll("purged")) pre_back += purge_pre_.count(body);
    if (purge_answered_) {
      EXPECT_EQ(pre_back, 0u) << "purged messages came back";
    } else if (!purge_sent_) {
      EXPECT_EQ(pre_back, purge_pre_.size())
          << "confirmed messages of a queue never purged are lost";
      lost_ += purge_pre_.size() - pre_back;
    } else if (pre_back != 0) {
      EXPECT_EQ(pre_back, purge_pre_.size()) << "an unanswered purge was half undone";
    }
    // An answered redrive is still there and runs to its end.
    auto tasks = broker_->RedriveStatus(kS1, "dlq");
    if (redrive_answered_) {
      EXPECT_TRUE(tasks.ok() && !tasks->empty()) << "the redrive was forgotten";
    }
    for (int i = 0; i < 2'000 && tasks.ok() && !tasks->empty() &&
                    tasks->front().state == RedriveInfo::State::kRunning;
         ++i) {
      Tick(milliseconds(100));
      tasks = broker_->RedriveStatus(kS1, "dlq");
    }
    if (tasks.ok() && !tasks->empty()) {
      EXPECT_EQ(tasks->front().state, RedriveInfo::State::kFinished) << tasks->front().detail;
      if (tasks->front().state == RedriveInfo::State::kFinished) ++redrives_resumed_;
    }
    // No confirmed message is missing.
    std::set<std::string> present;
    for (const char* queue : {"work", "dlq"}) {
      for (auto& body : TakeAll(queue)) {
        if (!present.insert(body).second) ++duplicates_;
      }
    }
    std::vector<std::string> missing;
    for (const auto& body : alive_) {
      if (!present.count(body)) missing.push_back(body);
    }
    Report(missing, "confirmed messages");
    for (const auto& body : present) {
      if (acked_.count(body)) ++acked_back_;
    }
    confirmed_ += alive_.size() + acked_.size();
    // Every confirmed delayed message arrives once due.
    for (int i = 0; i < 20; ++i) Tick(milliseconds(1'000));
    clock_.Advance(std::chrono::hours(2));
    Tick();
    for (int i = 0; i < 50 && Info("later").ready + Info("later").delayed > 0; ++i) {
      for (auto& body : TakeAll("later")) delayed_seen.insert(body);
      Tick(milliseconds(100));
    }
    for (auto& body : TakeAll("later")) delayed_seen.insert(body);
    missing.clear();
    for (const auto& body : delayed_) {
      if (!delayed_seen.count(body)) missing.push_back(body);
    }
    Report(missing, "confirmed delayed messages");
    delayed_confirmed_ += delayed_.size();
    // The cycle's declared queue: there if answered or confirmed into, with what was confirmed.
    bool exists = false;
    for (const auto& q : broker_->ListQueues(declared_)) exists |= q.name == declared_;
    if (declared_answered_ || !declared_alive_.empty()) {
      EXPECT_TRUE(exists) << "queue " << declared_
                          << " was answered or confirmed into, and is gone";
    }
    if (exists) {
      std::set<std::string> back;
      for (auto& body : TakeAll(declared_)) back.insert(body);
      missing.clear();
      for (const auto& body : declared_alive_) {
        if (!back.count(body)) missing.push_back(body);
      }
      Report(missing, "confirmed messages of a declared queue");
      ASSERT_TRUE(broker_->DeleteQueue(kS1, declared_, false, false).ok());
      Drain();
    } else {
      Report(std::vector<std::string>(declared_alive_.begin(), declared_alive_.end()),
             "confirmed messages of a declared queue");
    }
    declared_queues_ += exists ? 1 : 0;
    for (const char* queue : {"work", "dlq", "later", "purged"}) {
      QueueInfo info = Info(queue);
      EXPECT_EQ(info.ready + info.in_flight + info.delayed, 0u) << queue << " is not empty";
    }
    alive_.clear();
    acked_.clear();
    declared_alive_.clear();
    declared_answered_ = false;
    purge_pre_.clear();
    delayed_.clear();
    purge_answered_ = purge_sent_ = redrive_answered_ = false;
  }

  // The cycle's traffic, until the power goes off or the script ends (`ops` > 0: the cut is
  // planned at that call).
  void Load(int cycle, std::mt19937_64& rng, size_t pre_purge) {
    const std::string c = std::to_string(cycle);
    auto stop = [&] { return fs_->cut(); };
    // A queue declared in each cycle: once its declaration is answered, or once a message
    // published into it is confirmed, it must be there after the boot, with those messages.
    Phase("declare a queue");
    declared_ = "t" + c;
    QueueSpec declared;
    declared.name = declared_;
    if (Ok(broker_->DeclareQueue(kS1, declared).status())) {
      broker_->AnswerWhenDurable(
          kS1, [this](SessionPeer&, const Status& status) { declared_answered_ |= status.ok(); });
      for (int i = 0; i < 20 && !stop(); ++i)
        PublishTo(declared_, "d" + c + "-" + std::to_string(i));
    }
    Drain();
    Collect();
    Phase("publish to the queue to purge");
    for (size_t i = 0; i < pre_purge && !stop(); ++i)
      PublishTo("purged", "p" + c + "-" + std::to_string(i));
    Drain();
    Collect();
    int n = 0;
    auto publish_work = [&](int count) {
      for (int i = 0; i < count && !stop(); ++i)
        PublishTo("work", "w" + c + "-" + std::to_string(n++));
    };
    Phase("publish");
    publish_work(1'500);
    Drain();
    Collect();
    if (stop()) return;
    // Reject some into the dead-letter queue, ack some, leave some in flight.
    Phase("reject, ack");
    auto taken = Take("work", 300);
    for (size_t i = 0; i < taken.size() && !stop(); ++i) {
      const auto& d = taken[i];
      if (i % 3 == 0) {
        Broker::NackOptions nack;
        nack.requeue = false;
        Ok(broker_->Nack(kS1, d.delivery_tag, false, nack));
      } else if (i % 3 == 1) {
        if (Ok(broker_->Ack(kS1, d.delivery_tag, false))) {
          alive_.erase(d.envelope->message.body);
          acked_.insert(d.envelope->message.body);
        }
      }
    }
    Drain();
    Phase("publish delayed");
    const int64_t now = clock_.WallMillis();
    for (int i = 0; i < 200 && !stop(); ++i) {
      // Half fall due within the cycle's ticks (released while it runs), half an hour out.
      const int64_t due =
          i % 2 == 0 ? now + 100 + static_cast<int64_t>(rng() % 3'000) : now + 3'600'000 + i;
      PublishTiming timing;
      timing.deliver_at_ms = due;
      PublishTo("later", "l" + c + "-" + std::to_string(i) + "@" + std::to_string(due), timing);
    }
    Drain();
    Collect();
    if (stop()) return;
    Phase("redrive started");
    peer_->redrives.clear();
    RedriveSpec spec{"dlq", "", "", 0, 200, false};
    if (Ok(broker_->StartRedrive(kS1, 41, spec))) Drain();
    for (const auto& [id, result] : peer_->redrives) redrive_answered_ |= id == 41 && result.ok();
    if (stop()) return;
    Phase("purge answered");
    peer_->purges.clear();
    purge_sent_ = true;
    if (Ok(broker_->PurgeQueue(kS1, "purged", 42).status())) Drain();
    for (const auto& [id, result] : peer_->purges) purge_answered_ |= id == 42 && result.ok();
    // Keep going: ticks release delayed messages and step the redrive while the purge is
    // removed on the writer; publishers and consumers go on.
    Phase("steady traffic");
    for (int round = 0; round < 60 && !stop(); ++round) {
      Tick(milliseconds(50));
      publish_work(50);
      for (int i = 0; i < 5 && !stop(); ++i)
        PublishTo("purged", "x" + c + "-" + std::to_string(round * 5 + i));
      for (const auto& d : Take("work", 40)) {
        if (stop()) break;
        if (Ok(broker_->Ack(kS1, d.delivery_tag, false))) {
          alive_.erase(d.envelope->message.body);
          acked_.insert(d.envelope->message.body);
        }
      }
      Drain();
      Collect();
    }
  }

  std::shared_ptr<PowerCutFileSystem> fs_;
  std::map<uint64_t, std::string> pending_;  // request id -> body, confirm not yet seen
  uint64_t next_request_ = 1'000;
  std::set<std::string> alive_;           // confirmed to "work" and not acked
  std::set<std::string> acked_;           // acked (may come back)
  std::set<std::string> purge_pre_;       // confirmed to "purged" before its purge
  std::set<std::string> delayed_;         // confirmed to "later"
  std::string declared_;                  // the queue this cycle declared
  bool declared_answered_ = false;        // its declaration answered (durable)
  std::set<std::string> declared_alive_;  // confirmed into it
  bool purge_answered_ = false;
  bool purge_sent_ = false;
  bool redrive_answered_ = false;
  std::string phase_;
  // Where each phase of the cycle began, in file system calls from the cycle's start.
  std::vector<std::pair<std::string, uint64_t>> phase_starts_;
  uint64_t cycle_start_ops_ = 0;
  void Phase(const std::string& name) {
    phase_ = name;
    phase_starts_.emplace_back(name, fs_->ops() - cycle_start_ops_);
  }
  std::string cut_point_ = "(none yet)";
  // Figures, printed at the end.
  uint64_t confirmed_ = 0, delayed_confirmed_ = 0, lost_ = 0, duplicates_ = 0, acked_back_ = 0;
  uint64_t bytes_dropped_ = 0, files_removed_ = 0, torn_cycles_ = 0, redrives_resumed_ = 0;
  uint64_t declared_queues_ = 0;  // declared queues found after a boot
};

TEST_F(PowerLossTest, NoConfirmedMessageIsLostAtAPowerCutAtAnyPoint) {
  const uint64_t cycles = EnvNumber("WHARF_POWER_CYCLES", 6);
  const uint64_t seed = EnvNumber("WHARF_POWER_SEED", std::random_device{}());
  std::mt19937_64 rng(seed);
  std::printf("power loss: %llu cycles, seed %llu (WHARF_POWER_SEED)\n",
              static_cast<unsigned long long>(cycles), static_cast<unsigned long long>(seed));
  Crash();  // the fixture's own start: this test boots on its own file system

  std::map<std::string, int> by_call, by_phase;
  std::vector<std::pair<uint64_t, uint64_t>> phases;  // [from, to) calls, from the first cycle
  for (uint64_t cycle = 0; cycle <= cycles; ++cycle) {
    Boot();
    if (HasFatalFailure()) return;
    if (cycle == 0) {
      DeclareQueue("dlq");
      DeclareQueue("work", true, {{"x-dead-letter-queue", std::string("dlq")}});
      DeclareQueue("later");
      DeclareQueue("purged");
      Drain();
    } else {
      Verify(static_cast<int>(cycle));
      if (HasFailure()) break;
      if (cycle == cycles) break;  // the last boot only checks
    }
    // The first cycle runs to its end to measure how many calls each phase makes; later
    // ones cut at a random call of a random phase (uniform over calls alone, nearly every cut
    // would fall in the steady traffic, which makes most of them).
    cycle_start_ops_ = fs_->ops();
    if (!phases.empty()) {
      const auto& [from, to] = phases[rng() % phases.size()];
      fs_->CutAfter(1 + from + rng() % (to - from));
    }
    phase_starts_.clear();
    Load(static_cast<int>(cycle), rng, /*pre_purge=*/5'000);
    if (phases.empty()) {
      const uint64_t end = fs_->ops() - cycle_start_ops_;
      for (size_t i = 0; i < phase_starts_.size(); ++i) {
        const uint64_t from = phase_starts_[i].second;
        const uint64_t to = i + 1 < phase_starts_.size() ? phase_starts_[i + 1].second : end;
        if (to > from) phases.emplace_back(from, to);
      }
    }
    cut_point_ = fs_->cut() ? fs_->cut_point() : "the end of the cycle";
    std::string call = cut_point_.substr(0, cut_point_.find(' '));
    const std::string file = cut_point_.substr(cut_point_.find(' ') + 1);
    const std::string ext =
        file.find('.') != std::string::npos ? file.substr(file.find('.')) : file.substr(0, 8);
    ++by_call[fs_->cut() ? call + " " + ext : cut_point_];
    // The phase the cut fell in: the last one begun before the cut call (phases the test
    // went through after the cut began at the same count).
    std::string cut_phase = phase_;
    if (fs_->cut()) {
      const uint64_t at = fs_->ops() - cycle_start_ops_;  // counts the cut call itself
      for (const auto& [name, from] : phase_starts_) {
        if (from < at) cut_phase = name;
      }
    }
    ++by_phase[cut_phase];
    PowerCut(rng);
  }
  std::printf("  confirmed %llu (+%llu delayed), lost %llu, duplicates %llu, acked and back %llu\n",
              static_cast<unsigned long long>(confirmed_),
              static_cast<unsigned long long>(delayed_confirmed_),
              static_cast<unsigned long long>(lost_), static_cast<unsigned long long>(duplicates_),
              static_cast<unsigned long long>(acked_back_));
  std::printf(
      "  unsynced bytes dropped %llu, files removed %llu, torn tails in %llu cycles, "
      "redrives run to the end after a cut %llu, declared queues back %llu\n",
      static_cast<unsigned long long>(bytes_dropped_),
      static_cast<unsigned long long>(files_removed_),
      static_cast<unsigned long long>(torn_cycles_),
      static_cast<unsigned long long>(redrives_resumed_),
      static_cast<unsigned long long>(declared_queues_));
  for (const auto& [call, count] : by_call) std::printf("  cut at %-28s %d\n", call.c_str(), count);
  for (const auto& [phase, count] : by_phase)
    std::printf("  cut during %-26s %d\n", phase.c_str(), count);
  EXPECT_EQ(lost_, 0u);
}

}  // namespace
}  // namespace wharf::broker
