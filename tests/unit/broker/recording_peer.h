// A SessionPeer for unit tests: records everything the broker pushes to one session.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "broker/session_peer.h"

namespace wharf::broker {

// Bodies in order, as the tests expect them.
using BodyList = std::vector<std::string>;

// The bodies of `deliveries`, in order.
inline BodyList Bodies(const std::vector<Delivery>& deliveries) {
  std::vector<std::string> out;
  for (const auto& d : deliveries) out.push_back(d.envelope->message.body);
  return out;
}

// Records everything the broker pushes to one session.
class RecordingPeer : public SessionPeer {
 public:
  struct Completion {
    uint64_t request_id;
    std::vector<Delivery> deliveries;
  };
  struct Confirm {
    uint64_t request_id;
    PublishResult result;
    Status status;
  };
  struct Cancellation {
    std::string consumer_tag;
    std::string reason;
  };
  struct AckTimeout {
    uint64_t delivery_tag;
    std::string consumer_tag;
    uint32_t timeout_ms;
  };

  void Deliver(Delivery delivery) override { deliveries.push_back(std::move(delivery)); }
  void CompleteReceive(uint64_t request_id, std::vector<Delivery> batch) override {
    completions.push_back(Completion{request_id, std::move(batch)});
  }
  void PublishDone(uint64_t request_id, const PublishResult& result,
                   const Status& status) override {
    confirms.push_back(Confirm{request_id, result, status});
  }
  void CancelDelayedDone(uint64_t request_id, const Result<bool>& result) override {
    cancels.emplace_back(request_id, result);
  }
  void ListDelayedDone(uint64_t request_id, const Result<DelayedPage>& result) override {
    listings.emplace_back(request_id, result);
  }
  void PeekDone(uint64_t request_id, const Result<PeekPage>& result) override {
    peeks.emplace_back(request_id, result);
  }
  void RedriveDone(uint64_t request_id, const Result<RedriveInfo>& result) override {
    redrives.emplace_back(request_id, result);
  }
  void PurgeDone(uint64_t request_id, const Result<uint64_t>& result) override {
    purges.emplace_back(request_id, result);
  }
  void DeleteQueueDone(uint64_t request_id, const Result<uint64_t>& result) override {
    deletions.emplace_back(request_id, result);
  }
  void ConsumerCancelled(const std::string& consumer_tag, std::string_view reason) override {
    cancellations.push_back(Cancellation{consumer_tag, std::string(reason)});
  }
  void AckTimedOut(uint64_t delivery_tag, const std::string& consumer_tag,
                   uint32_t timeout_ms) override {
    ack_timeouts.push_back(AckTimeout{delivery_tag, consumer_tag, timeout_ms});
  }
  void Flush() override { ++flushes; }
  bool Writable() const override { return writable; }

  BodyList DeliveredBodies() const { return Bodies(deliveries); }

  std::vector<Delivery> deliveries;
  std::vector<Completion> completions;
  std::vector<Cancellation> cancellations;
  std::vector<AckTimeout> ack_timeouts;
  std::vector<Confirm> confirms;
  std::vector<std::pair<uint64_t, Result<bool>>> cancels;          // CancelDelayedDone
  std::vector<std::pair<uint64_t, Result<DelayedPage>>> listings;  // ListDelayedDone
  std::vector<std::pair<uint64_t, Result<RedriveInfo>>> redrives;  // RedriveDone
  std::vector<std::pair<uint64_t, Result<PeekPage>>> peeks;        // PeekDone
  std::vector<std::pair<uint64_t, Result<uint64_t>>> purges;       // PurgeDone
  std::vector<std::pair<uint64_t, Result<uint64_t>>> deletions;    // DeleteQueueDone
  int flushes = 0;
  bool writable = true;  // set false to simulate a connection behind on writing
};

}  // namespace wharf::broker
