#include "server/session_core.h"

#include "server/connection.h"

namespace wharf::server {

void SessionCore::Add(uint16_t channel, protocol::wire::Frame frame) {
  outbox_.push_back(Outbound{channel, std::move(frame)});
}

void SessionCore::AddBytes(uint16_t channel, std::string bytes) {
  outbox_.push_back(Outbound{channel, std::move(bytes)});
}

void SessionCore::AddDelivery(uint16_t channel, broker::Delivery delivery) {
  uint64_t size = broker::OutputBytes(delivery);
  outbox_queued_bytes_ += size;
  queued_bytes.fetch_add(size, std::memory_order_acq_rel);
  outbox_.push_back(Outbound{channel, std::move(delivery)});
}

void SessionCore::AddReceiveDone(uint16_t channel, ReceiveDone done) {
  uint64_t size = 0;
  for (const auto& d : done.deliveries) size += broker::OutputBytes(d);
  outbox_queued_bytes_ += size;
  queued_bytes.fetch_add(size, std::memory_order_acq_rel);
  outbox_.push_back(Outbound{channel, std::move(done)});
}

void SessionCore::AddCancelNotice(uint16_t channel, CancelNotice notice) {
  outbox_.push_back(Outbound{channel, std::move(notice)});
}

void SessionCore::AddNotice(uint16_t channel, CodecNotice notice) {
  outbox_.push_back(Outbound{channel, std::move(notice)});
}

bool SessionCore::Writable() const {
  // A closing connection takes nothing more: what it got would only come back redelivered.
  return !closing.load(std::memory_order_acquire) &&
         queued_bytes.load(std::memory_order_acquire) < kMaxQueuedBytes;
}

void SessionCore::EndBatch() {
  ++batches_done_;
  context_->after_broker_work();
  Flush();
}

void SessionCore::Flush() {
  if (outbox_.empty() && batches_done_ == 0) return;
  OutboxBatch outbox{std::move(outbox_), batches_done_, outbox_queued_bytes_};
  outbox_.clear();
  batches_done_ = 0;
  outbox_queued_bytes_ = 0;
  if (!connection_) {
    // Closed: the deliveries in it are requeued by the broker's CloseSession.
    queued_bytes.fetch_sub(outbox.queued_bytes, std::memory_order_acq_rel);
    return;
  }
  asio::post(connection_->executor(),
             [connection = connection_, outbox = std::move(outbox)]() mutable {
               connection->OnOutbox(std::move(outbox));
             });
}

}  // namespace wharf::server
