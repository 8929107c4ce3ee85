// Peek: a queue's ready messages in delivery order, shown without being taken (docs/
// operations.md, "Peek"). Part of class Broker (broker.h).
//
// The walk is the redrive's (broker/redrive_task.h): the ready messages in RAM by sequence
// number, then the paged ones read from the store. Nothing is changed: no receive count, no
// lease, no position. The cursor is the position (sequence number) in the queue, which stays
// meaningful when the message at it is consumed meanwhile (an id would lose its place).
#include <algorithm>

#include "broker/broker.h"

namespace wharf::broker {
namespace {

constexpr uint64_t kPeekBodyBytes = 4u << 20;  // bodies per page, about (at least one message)

PeekedMessage ToPeeked(const Envelope& envelope, uint64_t position, uint32_t receive_count,
                       int64_t first_received_at_ms, const FailuresPtr& failures, bool with_body) {
  const Message& m = envelope.message;
  PeekedMessage out;
  out.message = with_body ? m : MessageWithoutBody(m);
  out.position = position;
  out.body_bytes = m.body.size();
  out.receive_count = receive_count;
  out.first_received_at_ms = first_received_at_ms;
  if (failures) {
    out.failure_count = failures->count;
    out.last_failed_at_ms = failures->last_failed_at_ms;
    out.last_error = failures->last_error;
  }
  out.exchange = envelope.exchange;
  out.routing_key = envelope.routing_key;
  return out;
}

}  // namespace

Status Broker::Peek(uint64_t session_id, uint64_t request_id, const std::string& name,
                    uint64_t after_position, uint32_t limit, bool with_body) {
  thread_checker_.Check();
  WHARF_RETURN_IF_ERROR(AuthorizeOperator(session_id, name, "peek at messages"));
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, name));
  limit = std::clamp<uint32_t>(limit == 0 ? 20 : limit, 1, 1000);
  auto reply = [this, session_id, request_id](const Result<PeekPage>& page) {
    SessionState* session = FindSession(session_id);
    if (!session) return;
    session->peer().PeekDone(request_id, page);
    MarkDirty(*session);
  };
  PeekPage page;
  uint64_t bytes = 0;
  auto full = [&] {
    return page.messages.size() == limit || (with_body && bytes >= kPeekBodyBytes);
  };
  // Lane by lane (one lane unless the queue has priorities), in delivery order: in each, RAM
  // first (everything there precedes what is paged), then the disk.
  const uint64_t from = after_position == UINT64_MAX ? UINT64_MAX : after_position + 1;
  for (std::optional<uint64_t> at = from; at; at = queue->NextLaneStart(*at)) {
    for (const QueuedMessage* m = queue->NextReadyInLane(*at); m;
         m = queue->NextReadyInLane(m->seq + 1)) {
      if (full()) {
        page.more = true;
        reply(page);
        return Status::Ok();
      }
      page.messages.push_back(ToPeeked(*m->envelope, m->seq, m->receive_count,
                                       m->first_received_at_ms, m->failures, with_body));
      bytes += m->envelope->whole_bytes();
      page.next_after = m->seq;
    }
    if (queue->PagedInLane(*at) == 0 || queue->store_id() == 0 || !store_) continue;
    if (full()) {
      page.more = true;
      reply(page);
      return Status::Ok();
    }
    // Computed before `page` is moved into the call.
    const uint32_t wanted = limit - static_cast<uint32_t>(page.messages.size());
    const uint64_t budget = with_body ? kPeekBodyBytes - bytes : LoadBytes();
    PeekDisk(queue, *at, wanted, budget, with_body, std::move(page), std::move(reply));
    return Status::Ok();
  }
  reply(page);
  return Status::Ok();
}

void Broker::PeekDisk(const std::shared_ptr<Queue>& queue, uint64_t at, uint32_t wanted,
                      uint64_t budget, bool with_body, PeekPage page,
                      std::function<void(const Result<PeekPage>&)> reply) {
  // The rest of the lane of `at` from disk, after this flush's commit (so it sees what was
  // settled before). A page ends with the lane: the next one starts at the next lane.
  const uint64_t disk_from = std::max(at, queue->LoadFromSeq(at));
  const uint64_t to = queue->LoadEndSeq(at);  // held messages are not shown yet
  const uint64_t store_id = queue->store_id();
  const uint64_t run_start = run_start_id_;
  const std::optional<uint64_t> next_lane = queue->NextLaneStart(at);
  pending_reads_.push_back([this, weak = std::weak_ptr<Queue>(queue), store_id, disk_from, to,
                            wanted, budget, run_start, with_body, next_lane, page = std::move(page),
                            reply = std::move(reply)]() mutable {
    ++loads_in_flight_;
    // One more than wanted: it only says whether there is more.
    store_->Load(
        store_id, disk_from, to, wanted + 1, budget,
        [this, weak, wanted, budget, run_start, with_body, next_lane, page = std::move(page),
         reply](Result<std::vector<store::LoadedMessage>> loaded) mutable {
          --loads_in_flight_;
          if (!loaded.ok()) return reply(loaded.status());
          std::shared_ptr<Queue> queue = weak.lock();
          uint64_t read_bytes = 0;
          size_t looked_at = std::min<size_t>(loaded->size(), wanted);
          for (size_t i = 0; i < looked_at; ++i) {
            store::LoadedMessage& m = (*loaded)[i];
            page.next_after = m.seq;  // past every entry read, shown or not
            if (!m.envelope) continue;
            read_bytes += m.envelope->whole_bytes();  // as the store counts
            // Not persistent and from before a restart: dropped when loaded.
            if ((m.flags & store::kEntryTransient) && m.message_id < run_start) continue;
            // Delivered before a restart (the lane's mark), as a load counts it.
            if (m.receive_count == 0 && queue && queue->DeliveredBefore(m.seq)) {
              m.receive_count = 1;
            }
            page.messages.push_back(ToPeeked(*m.envelope, m.seq, m.receive_count,
                                             m.first_received_at_ms, m.failures, with_body));
          }
          page.more = loaded->size() > wanted || read_bytes >= budget;
          if (!page.more && next_lane) {
            // The lane is done; lower priorities follow.
            page.more = true;
            page.next_after = *next_lane - 1;
          }
          reply(page);
        });
  });
}

}  // namespace wharf::broker
