// bench/null_peer.h: a SessionPeer that drops what the broker sends, counting pulled
// deliveries, for micro-benchmarks that drive the Broker directly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "broker/session_peer.h"

namespace wharf::bench {

class NullPeer final : public wharf::broker::SessionPeer {
 public:
  void Deliver(wharf::broker::Delivery) override {}
  void CompleteReceive(uint64_t, std::vector<wharf::broker::Delivery> d) override {
    received += d.size();
  }
  void PublishDone(uint64_t, const wharf::PublishResult&, const wharf::Status&) override {}
  void CancelDelayedDone(uint64_t, const wharf::Result<bool>&) override {}
  void ListDelayedDone(uint64_t, const wharf::Result<wharf::DelayedPage>&) override {}
  void PeekDone(uint64_t, const wharf::Result<wharf::PeekPage>&) override {}
  void RedriveDone(uint64_t, const wharf::Result<wharf::RedriveInfo>&) override {}
  void PurgeDone(uint64_t, const wharf::Result<uint64_t>&) override {}
  void DeleteQueueDone(uint64_t, const wharf::Result<uint64_t>&) override {}
  void ConsumerCancelled(const std::string&, std::string_view) override {}
  void AckTimedOut(uint64_t, const std::string&, uint32_t) override {}
  void Flush() override {}
  bool Writable() const override { return true; }
  size_t received = 0;
};

}  // namespace wharf::bench
