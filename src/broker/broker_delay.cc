// The broker's scheduler of delayed messages (docs/scheduler.md): releasing what is due in
// due order across queues at a bounded rate, loading timelines back from the store, cancel
// and listing. Part of class Broker (broker.h); split from broker.cc by concern. Each queue's
// timeline is a DelayTimeline (delay_timeline.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "broker/broker.h"
#include "common/log_safe.h"

namespace wharf::broker {
namespace {

// Due messages released per queue before the next queue in due order gets its turn, and per
// timer tick in all: between ticks the broker thread serves everything else.
constexpr size_t kReleaseSlice = 64;
constexpr size_t kReleasePerTick = 1'000;
// The scheduler looks at the wall clock at least this often, so a clock step is noticed.
constexpr auto kMaxSleep = std::chrono::milliseconds(1000);
// Bodies of listed messages are not sent; this caps what one listing reads.
constexpr uint64_t kListBytes = 4u << 20;

// A listing's view of a waiting message: everything but the body (never copied).
DelayedInfo ToInfo(const DelayKey& key, const Envelope& envelope, uint32_t receive_count) {
  const Message& m = envelope.message;
  DelayedInfo info;
  info.message = MessageWithoutBody(m);
  info.body_bytes = m.body.size();
  info.deliver_at_ms = key.due_ms;
  info.receive_count = receive_count;
  info.exchange = envelope.exchange;
  info.routing_key = envelope.routing_key;
  return info;
}

}  // namespace

void Broker::ForgetDelayHead(Queue* queue) {
  if (queue->scheduled_due) {
    delay_heads_.erase({*queue->scheduled_due, queue});
    queue->scheduled_due.reset();
  }
}

void Broker::UpdateDelayHead(const std::shared_ptr<Queue>& queue) {
  std::optional<int64_t> head = queue->deleted ? std::nullopt : queue->delayed().head_due();
  if (head != queue->scheduled_due) {
    ForgetDelayHead(queue.get());
    if (head) {
      delay_heads_.emplace(*head, queue.get());
      queue->scheduled_due = head;
    }
  }
  if (!queue->deleted && store_ && queue->delayed().NeedsLoad() && !queue->delayed_load_pending) {
    queue->delayed_load_pending = true;
    pending_delayed_loads_.push_back(queue);
  }
}

void Broker::ReleaseDue() {
  if (delay_heads_.empty()) {
    release_backlog_ = false;
    return;
  }
  SteadyTime now = clock_->Now();
  const double rate = options_.delay_release_per_second;
  double elapsed = std::chrono::duration<double>(now - release_refilled_at_).count();
  release_refilled_at_ = now;
  // At most a tenth of a second's worth saved up: a burst is spread, not released at once.
  release_tokens_ = std::min(release_tokens_ + elapsed * rate, std::max(rate / 10, 1.0));
  const int64_t wall = clock_->WallMillis();
  size_t budget = std::min<size_t>(kReleasePerTick, static_cast<size_t>(release_tokens_));
  size_t released = 0;
  while (released < budget && !delay_heads_.empty() && delay_heads_.begin()->first <= wall) {
    Queue* raw = delay_heads_.begin()->second;
    auto it = queues_.find(raw->key());
    if (it == queues_.end() || it->second.get() != raw) {  // cannot happen: dropped queues leave
      delay_heads_.erase(delay_heads_.begin());
      raw->scheduled_due.reset();
      continue;
    }
    std::shared_ptr<Queue> queue = it->second;
    auto due = queue->delayed().TakeDue(wall, std::min(kReleaseSlice, budget - released));
    released += due.size();
    for (auto& [key, message] : due) ReleaseOne(*queue, key, std::move(message));
    UpdateDelayHead(queue);
    if (!due.empty()) ScheduleDispatch(queue);
  }
  release_tokens_ -= static_cast<double>(released);
  release_backlog_ = !delay_heads_.empty() && delay_heads_.begin()->first <= wall;
}

void Broker::DelayDelivered(Queue& queue, QueuedMessage message, int64_t due_ms) {
  DelayKey key{due_ms, message.envelope->message.id};
  uint8_t flags = 0;
  if (queue.delayed().backed()) {
    store::EntryRef ref{queue.store_id(),
                        message.seq,
                        key.message_id,
                        message.receive_count,
                        message.store_flags,
                        nullptr,
                        message.first_received_at_ms,
                        message.failures};
    if (message.stored) {
      // From the entries to the timeline in one batch; the body stays where it is.
      flags = message.store_flags;
      if (flags & store::kEntryInline) ref.envelope = message.envelope;
      Persist(store::StoreBatch::DelayEntry{ref, due_ms});
    } else {
      // A non-persistent message held in RAM only: a stored timeline holds it on disk too.
      flags = store::kEntryInline | store::kEntryTransient;
      ref.flags = flags;
      ref.envelope = message.envelope;
      Persist(store::StoreBatch::PutDelayed{ref, due_ms});
    }
  }
  queue.delayed().Add(key,
                      DelayedMessage{std::move(message.envelope), message.receive_count, flags,
                                     message.first_received_at_ms, std::move(message.failures)});
}

void Broker::ReleaseOne(Queue& queue, DelayKey key, DelayedMessage message) {
  const Envelope& envelope = *message.envelope;
  if (!queue.delayed().backed()) {
    queue.Enqueue(std::move(message.envelope), false, 0, false, message.receive_count,
                  message.first_received_at_ms, std::move(message.failures));
    return;
  }
  // On disk it moves from the timeline to the queue's entries in one batch. A non-persistent
  // message was on the timeline only to survive the queue's RAM limits: it leaves the disk,
  // unless the queue pages.
  const bool page = queue.ShouldPage(options_.page_limits, *message.envelope);
  const bool keep = envelope.message.persistent || page;
  store::EntryRef ref{queue.store_id(),
                      0,
                      key.message_id,
                      message.receive_count,
                      message.store_flags,
                      nullptr,
                      message.first_received_at_ms,
                      message.failures};
  Persist(store::StoreBatch::RemoveDelayed{ref, key.due_ms, /*release=*/!keep});
  const uint8_t flags = keep ? message.store_flags : 0;
  EnvelopePtr inline_body = (flags & store::kEntryInline) ? message.envelope : nullptr;
  ref.seq = queue.Enqueue(std::move(message.envelope), keep, flags, page, message.receive_count,
                          message.first_received_at_ms, message.failures);
  if (keep) {
    ref.envelope = std::move(inline_body);
    Persist(store::StoreBatch::PutEntry{ref});
  }
}

std::optional<SteadyTime> Broker::NextReleaseDeadline() const {
  if (delay_heads_.empty()) return std::nullopt;
  SteadyTime now = clock_->Now();
  if (release_backlog_) {
    // Due now, waiting for the rate: when a slice's worth of tokens is back.
    // At least one whole token: ReleaseDue releases whole messages only.
    double rate = std::max<double>(options_.delay_release_per_second, 1);
    double need = std::max(1.0, std::min<double>(kReleaseSlice, rate / 10));
    double missing = std::max(0.0, need - release_tokens_);
    return now + std::chrono::microseconds(static_cast<int64_t>(std::ceil(missing / rate * 1e6)));
  }
  // Milliseconds first (due times are capped at kMaxDueMs, but stay clear of overflow), then
  // to the microsecond: waking at the start of the due millisecond, not up to 1 ms after it.
  int64_t wait_ms = delay_heads_.begin()->first - clock_->WallMillis();
  if (wait_ms > 1'000) return now + kMaxSleep;
  int64_t wait_us = delay_heads_.begin()->first * 1000 - clock_->WallMicros();
  if (wait_us <= 0) return now;
  return now + std::min<std::chrono::microseconds>(std::chrono::microseconds(wait_us), kMaxSleep);
}

void Broker::RequestDelayedLoad(const std::shared_ptr<Queue>& queue) {
  queue->delayed_load_pending = false;
  DelayTimeline& timeline = queue->delayed();
  if (queue->deleted || !timeline.NeedsLoad()) return;
  timeline.BeginLoad();
  ++loads_in_flight_;
  DelayKey from = timeline.disk_from();
  std::weak_ptr<Queue> weak = queue;
  uint64_t generation = timeline.generation();
  store_->LoadDelayed(queue->store_id(), from.due_ms, from.message_id, options_.delay_load_batch,
                      LoadBytes(),
                      [this, weak, generation](Result<std::vector<store::LoadedMessage>> loaded) {
                        OnDelayedLoaded(weak, generation, std::move(loaded));
                      });
}

void Broker::OnDelayedLoaded(const std::weak_ptr<Queue>& weak, uint64_t generation,
                             Result<std::vector<store::LoadedMessage>> loaded) {
  thread_checker_.Check();
  --loads_in_flight_;
  std::shared_ptr<Queue> queue = weak.lock();
  if (!queue || queue->deleted || queue->delayed().generation() != generation) return;
  DelayTimeline& timeline = queue->delayed();
  if (!loaded.ok()) {
    spdlog::error("queue={} cannot load delayed messages (retrying in 1 s): {}",
                  LogSafe(queue->name()), LogSafe(loaded.status().ToString(), kLogSafeStatusBytes));
    timeline.AbortLoad();
    load_retries_.push_back(queue);
    if (!load_retry_at_) load_retry_at_ = clock_->Now() + std::chrono::seconds(1);
    return;
  }
  std::vector<DelayTimeline::Loaded> items;
  items.reserve(loaded->size());
  uint64_t bytes = 0, dropped = 0;
  for (store::LoadedMessage& m : *loaded) {
    DelayTimeline::Loaded& item = items.emplace_back();
    item.key = DelayKey{m.due_ms, m.message_id};
    if (m.envelope) bytes += m.envelope->whole_bytes();  // as the store counts
    if (!m.envelope || ((m.flags & store::kEntryTransient) && m.message_id < run_start_id_)) {
      // No body, or a non-persistent message from before the restart: it goes.
      store::EntryRef ref{queue->store_id(), 0, m.message_id, m.receive_count, m.flags};
      Persist(store::StoreBatch::RemoveDelayed{ref, m.due_ms, /*release=*/true});
      ++dropped;
      continue;
    }
    item.message = DelayedMessage{std::move(m.envelope), m.receive_count, m.flags,
                                  m.first_received_at_ms, std::move(m.failures)};
  }
  bool reached_end = loaded->size() < options_.delay_load_batch && bytes < LoadBytes();
  timeline.AddLoaded(std::move(items), reached_end);
  if (dropped > 0) {
    spdlog::info(
        "queue={} dropped {} delayed messages on load (non-persistent from before the "
        "restart, or without a body)",
        LogSafe(queue->name()), dropped);
  }
  UpdateDelayHead(queue);
}

// --- Cancel and list
// ------------------------------------------------------------------------------

Status Broker::CancelDelayed(uint64_t session_id, uint64_t request_id, const std::string& name,
                             uint64_t message_id) {
  thread_checker_.Check();
  WHARF_RETURN_IF_ERROR(AuthorizeOperator(session_id, name, "cancel delayed messages"));
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, name));
  DelayTimeline& timeline = queue->delayed();
  bool sync = false;
  if (CancelInRam(queue, message_id, &sync)) {
    FinishCancel(session_id, request_id, true, sync, timeline.backed());
    return Status::Ok();
  }
  if (!timeline.backed() || !store_ ||
      (timeline.disk_count() == 0 && !timeline.count_estimated())) {
    FinishCancel(session_id, request_id, false, false, false);
    return Status::Ok();
  }
  // It may be on disk only: ask the store, after this batch's commit so that the answer
  // reflects every change made before this request.
  std::weak_ptr<Queue> weak = queue;
  uint64_t generation = timeline.generation();
  uint64_t store_id = queue->store_id();
  pending_reads_.push_back([this, session_id, request_id, weak, generation, store_id, message_id] {
    ++loads_in_flight_;
    store_->FindDelayed(store_id, message_id,
                        [this, session_id, request_id, weak, generation,
                         message_id](Result<std::optional<store::DelayedRef>> found) {
                          --loads_in_flight_;
                          OnDelayedFound(session_id, request_id, weak, generation, message_id,
                                         std::move(found));
                        });
  });
  return Status::Ok();
}

bool Broker::CancelInRam(const std::shared_ptr<Queue>& queue, uint64_t message_id, bool* sync) {
  auto removed = queue->delayed().RemoveFromRam(message_id);
  if (!removed) return false;
  auto& [key, message] = *removed;
  if (queue->delayed().backed()) {
    Persist(store::StoreBatch::RemoveDelayed{
        store::EntryRef{queue->store_id(), 0, message_id, message.receive_count,
                        message.store_flags},
        key.due_ms, /*release=*/true});
    *sync = message.envelope->message.persistent;
  }
  spdlog::debug("queue={} message={} delayed message cancelled", LogSafe(queue->name()),
                message_id);
  UpdateDelayHead(queue);
  return true;
}

void Broker::OnDelayedFound(uint64_t session_id, uint64_t request_id,
                            const std::weak_ptr<Queue>& weak, uint64_t generation,
                            uint64_t message_id, Result<std::optional<store::DelayedRef>> found) {
  thread_checker_.Check();
  std::shared_ptr<Queue> queue = weak.lock();
  if (!found.ok()) {
    SessionState* session = FindSession(session_id);
    if (!session) return;
    session->peer().CancelDelayedDone(request_id, found.status());
    MarkDirty(*session);
    return;
  }
  if (!queue || queue->deleted || queue->delayed().generation() != generation || !*found) {
    FinishCancel(session_id, request_id, false, false, false);
    return;
  }
  DelayKey key{(*found)->due_ms, message_id};
  DelayTimeline& timeline = queue->delayed();
  bool sync = false;
  if (timeline.ClaimOnDisk(key)) {
    Persist(store::StoreBatch::RemoveDelayed{
        store::EntryRef{queue->store_id(), 0, message_id, 0, (*found)->flags}, key.due_ms,
        /*release=*/true});
    spdlog::debug("queue={} message={} delayed message cancelled (on disk)", LogSafe(queue->name()),
                  message_id);
    UpdateDelayHead(queue);
    FinishCancel(session_id, request_id, true, !((*found)->flags & store::kEntryTransient), true);
    return;
  }
  // Loaded since the lookup: still waiting in RAM, or released.
  FinishCancel(session_id, request_id, CancelInRam(queue, message_id, &sync), sync, true);
}

void Broker::FinishCancel(uint64_t session_id, uint64_t request_id, bool cancelled, bool sync,
                          bool stored) {
  auto answer = [this, session_id, request_id, cancelled](const Status& status) {
    SessionState* session = FindSession(session_id);
    if (!session) return;
    if (status.ok()) {
      session->peer().CancelDelayedDone(request_id, cancelled);
    } else {
      session->peer().CancelDelayedDone(request_id, status);
    }
    MarkDirty(*session);
  };
  if (!store_ || !cancelled || !stored) {
    answer(Status::Ok());
    return;
  }
  // Reported cancelled only once the removal is written: a crash must not bring it back.
  batch_sync_ = batch_sync_ || sync;
  after_commit_.push_back(std::move(answer));
}

Status Broker::ListDelayed(uint64_t session_id, uint64_t request_id, const std::string& name,
                           int64_t after_due_ms, uint64_t after_message_id, uint32_t limit) {
  thread_checker_.Check();
  WHARF_RETURN_IF_ERROR(AuthorizeOperator(session_id, name, "list delayed messages"));
  WHARF_ASSIGN_OR_RETURN(auto queue, FindQueue(session_id, name));
  limit = std::clamp<uint32_t>(limit == 0 ? 100 : limit, 1, 1000);
  DelayKey after{after_due_ms, after_message_id};
  auto reply = [this, session_id, request_id](const Result<DelayedPage>& page) {
    SessionState* session = FindSession(session_id);
    if (!session) return;
    session->peer().ListDelayedDone(request_id, page);
    MarkDirty(*session);
  };
  if (after == kDelayKeyMax) {  // nothing can follow the last possible key
    reply(DelayedPage{});
    return Status::Ok();
  }
  if (!queue->delayed().backed()) {
    DelayedPage page;
    for (auto& [key, message] : queue->delayed().ListRam(after, limit + 1)) {
      if (page.messages.size() == limit) {
        page.more = true;
        break;
      }
      page.messages.push_back(ToInfo(key, *message.envelope, message.receive_count));
      page.next_after_deliver_at_ms = key.due_ms;
      page.next_after_message_id = key.message_id;
    }
    reply(page);
    return Status::Ok();
  }
  // Every message of a stored timeline is on disk: list from there, after this batch's
  // commit. Starting one past `after`.
  DelayKey from = after;
  if (from.message_id == UINT64_MAX) {
    from = DelayKey{from.due_ms + 1, 0};
  } else {
    ++from.message_id;
  }
  uint64_t store_id = queue->store_id();
  const uint64_t run_start = run_start_id_;
  pending_reads_.push_back([this, store_id, from, limit, reply, run_start] {
    ++loads_in_flight_;
    store_->LoadDelayed(
        store_id, from.due_ms, from.message_id, limit + 1, kListBytes,
        [this, reply, limit, run_start](Result<std::vector<store::LoadedMessage>> loaded) {
          --loads_in_flight_;
          if (!loaded.ok()) return reply(loaded.status());
          DelayedPage page;
          uint64_t bytes = 0;
          // `limit` entries at most are looked at; the one after them only says "more".
          size_t looked_at = std::min<size_t>(loaded->size(), limit);
          for (size_t i = 0; i < looked_at; ++i) {
            store::LoadedMessage& m = (*loaded)[i];
            if (m.envelope) bytes += m.envelope->whole_bytes();  // as the store counts
            // The cursor moves past every entry read, listed or not.
            page.next_after_deliver_at_ms = m.due_ms;
            page.next_after_message_id = m.message_id;
            // Unreadable, or a non-persistent message from before a restart (dropped when
            // its turn comes to be loaded).
            if (!m.envelope || ((m.flags & store::kEntryTransient) && m.message_id < run_start)) {
              continue;
            }
            page.messages.push_back(
                ToInfo(DelayKey{m.due_ms, m.message_id}, *m.envelope, m.receive_count));
          }
          // More when the read found an entry beyond `limit`, or stopped at its byte budget.
          page.more = loaded->size() > limit || bytes >= kListBytes;
          reply(page);
        });
  });
  return Status::Ok();
}

uint64_t DelayHeader(const Headers& headers) {
  auto it = headers.find("x-delay");
  if (it == headers.end()) return 0;
  if (const auto* ms = std::get_if<int64_t>(&it->second); ms && *ms > 0) {
    return static_cast<uint64_t>(*ms);
  }
  return 0;
}

}  // namespace wharf::broker
