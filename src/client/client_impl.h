// client/client_impl.h: the connection behind wharf::Client (include/wharf/client.h), shared by
// the files that implement its calls: client.cc (connecting, topology, publish, consume,
// settle) and client_admin.cc (listings, peek, delayed messages, redrive, users).
//
// Client::Impl owns the stream (net/stream.h: TCP, or TLS over it) and the client's one I/O thread:
// the read loop, the send buffer (bounded for publishes, ClientOptions::max_buffered_bytes),
// request/reply matching, and the accounting of publishes without a confirm
// (unconfirmed_publishes()).
//
// Thread safety: fields are marked with what guards them (mu, or the I/O thread alone).
#pragma once

#include <asio.hpp>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "net/frame.h"
#include "net/stream.h"
#include "net/tls.h"
#include "protocol/codec.h"
#include "wharf/client.h"

namespace wharf {
namespace pb = ::wharf::wire::v1;

namespace client_internal {
inline constexpr size_t kClientMaxFrameBytes = (512u << 20) + (1u << 20);
inline constexpr size_t kReadChunk = 64u << 10;

inline Delivery FromWireDelivery(pb::Delivery* in) {
  Delivery d;
  d.consumer_tag = std::move(*in->mutable_consumer_tag());
  d.delivery_tag = in->delivery_tag();
  d.message = protocol::MoveFromWire(in->mutable_message());
  d.receive_count = in->receive_count();
  d.redelivered = in->redelivered();
  d.exchange = std::move(*in->mutable_exchange());
  d.routing_key = std::move(*in->mutable_routing_key());
  d.queue = std::move(*in->mutable_queue());
  d.lease_ms = in->lease_ms();
  d.first_received_at_ms = in->first_received_at_ms();
  d.failure_count = in->failure_count();
  d.last_failed_at_ms = in->last_failed_at_ms();
  d.last_error = std::move(*in->mutable_last_error());
  return d;
}

}  // namespace client_internal

struct Client::Impl {
  using ReplyFn = std::function<void(Result<pb::Frame>)>;

  explicit Impl(const ClientOptions& opts) : options(opts) {}

  // Set before the I/O thread starts, then immutable.
  ClientOptions options;
  asio::io_context io{1};
  asio::ip::tcp::socket socket{io};  // until connected; then in `stream`
  // Made on the I/O thread once connected (plain, or TLS after its handshake); confined to it.
  std::unique_ptr<net::Stream> stream;
  asio::steady_timer connect_timer{io};
  std::thread thread;
  std::thread::id io_thread_id;

  // Confined to the I/O thread.
  net::FrameDecoder decoder{client_internal::kClientMaxFrameBytes};
  std::string writing;

  // Guarded by mu.
  std::mutex mu;
  std::condition_variable disconnected_cv;
  // Publishes wait here for room in the send buffer (ClientOptions::max_buffered_bytes).
  std::condition_variable room_cv;
  size_t writing_bytes = 0;  // bytes in `writing`, the write in flight
  // Publishes without a confirm: how many were queued, and how many the broker is known to
  // have read (it answered a request queued after them; it reads frames in order). A request
  // queued while some are unknown records how many were queued before it.
  uint64_t unconfirmed_queued = 0;
  uint64_t unconfirmed_known_read = 0;
  std::map<uint64_t, uint64_t> unconfirmed_before_request;  // request id -> queued before it
  uint64_t next_request_id = 1;
  std::unordered_map<uint64_t, ReplyFn> pending;
  std::string out;
  bool write_scheduled = false;
  bool disconnected = false;
  bool user_closed = false;
  std::unordered_map<std::string, std::shared_ptr<DeliveryHandler>> consumers;
  ReturnHandler on_return;
  ErrorHandler on_error;
  CancelHandler on_cancel;
  BlockedHandler on_blocked;
  std::atomic<bool> publishing_blocked{false};
  std::string close_reason;                           // from the broker's Close frame
  std::unordered_set<uint64_t> abandoned_subscribes;  // Subscribe request ids that timed out

  std::atomic<uint64_t> connection_id{0};
  std::atomic<uint64_t> max_message_bytes{0};

  bool OnIoThread() const { return std::this_thread::get_id() == io_thread_id; }

  // Queues `frame`; when `reply` is set, a request id is assigned and `reply` runs on the I/O
  // thread with the answer (or the error). A publish first waits for room in the send buffer.
  // Returns the error if the frame was not queued (and then `reply` has already been called
  // with it): kUnavailable when the connection is gone, kResourceExhausted when no room came.
  Status Enqueue(pb::Frame& frame, ReplyFn reply) {
    const bool publish = frame.has_publish();
    std::unique_lock lock(mu);
    Status refused;
    if (disconnected) {
      refused = Status(StatusCode::kUnavailable, DisconnectedMessage());
    } else if (publish) {
      refused = WaitForRoomLocked(lock);
    }
    if (!refused.ok()) {
      lock.unlock();
      if (reply) reply(refused);
      return refused;
    }
    if (reply) {
      uint64_t id = next_request_id++;
      frame.set_request_id(id);
      pending.emplace(id, std::move(reply));
      if (unconfirmed_queued > unconfirmed_known_read) {
        unconfirmed_before_request.emplace(id, unconfirmed_queued);
      }
    } else if (publish) {
      ++unconfirmed_queued;
    }
    protocol::AppendFrame(frame, &out);
    ScheduleWriteLocked();
    return Status::Ok();
  }

  // REQUIRES: mu held. The broker answered `request_id`: it read everything queued before.
  void AnsweredLocked(uint64_t request_id) {
    auto end = unconfirmed_before_request.upper_bound(request_id);
    if (end == unconfirmed_before_request.begin()) return;
    unconfirmed_known_read = std::max(unconfirmed_known_read, std::prev(end)->second);
    unconfirmed_before_request.erase(unconfirmed_before_request.begin(), end);
  }

  // Enqueue for callers whose `reply` (or the error handler) hears of a failure.
  bool Send(pb::Frame& frame, ReplyFn reply) { return Enqueue(frame, std::move(reply)).ok(); }

  // REQUIRES: mu held (through `lock`), connected. Waits until the send buffer is under its
  // limit, so it holds at most max_buffered_bytes plus the one publish let in last (no size is
  // worked out on the publish path for this). Never waits on the I/O thread (a callback): that
  // thread is the one that empties the buffer.
  Status WaitForRoomLocked(std::unique_lock<std::mutex>& lock) {
    auto full = [&] {
      return !disconnected && out.size() + writing_bytes >= options.max_buffered_bytes;
    };
    if (!full()) return Status::Ok();
    auto refusal = [&](const std::string& why) {
      return Status(StatusCode::kResourceExhausted,
                    "the client's send buffer is full (" +
                        std::to_string(out.size() + writing_bytes) + " bytes, limit " +
                        std::to_string(options.max_buffered_bytes) + "): " + why);
    };
    if (OnIoThread()) return refusal("cannot wait for room from a client callback");
    if (!room_cv.wait_for(lock, options.request_timeout, [&] { return !full(); })) {
      return refusal("the broker took nothing for request_timeout (publishing blocked?)");
    }
    if (disconnected) return Status(StatusCode::kUnavailable, DisconnectedMessage());
    return Status::Ok();
  }

  // REQUIRES: mu held.
  void ScheduleWriteLocked() {
    if (!write_scheduled && !disconnected) {
      write_scheduled = true;
      asio::post(io, [this] { DoWrite(); });
    }
  }

  std::string DisconnectedMessage() {
    return close_reason.empty() ? "not connected to the broker"
                                : "connection closed by the broker: " + close_reason;
  }

  // Blocking request/reply.
  Result<pb::Frame> Call(pb::Frame frame, std::chrono::milliseconds extra_wait = {}) {
    if (OnIoThread()) {
      return Status(StatusCode::kFailedPrecondition,
                    "blocking client call from a client callback; use the async variant");
    }
    auto promise = std::make_shared<std::promise<Result<pb::Frame>>>();
    auto future = promise->get_future();
    Send(frame, [promise](Result<pb::Frame> r) { promise->set_value(std::move(r)); });
    uint64_t id = frame.request_id();
    if (future.wait_for(options.request_timeout + extra_wait) != std::future_status::ready) {
      std::lock_guard lock(mu);
      if (pending.erase(id) > 0) {
        return Status(StatusCode::kDeadlineExceeded, "no answer from the broker in time");
      }
    }
    return future.get();
  }

  Status CallStatus(pb::Frame frame) { return Call(std::move(frame)).status(); }

  void DoWrite() {
    {
      std::lock_guard lock(mu);
      writing.swap(out);
      if (writing.empty() || disconnected) {
        writing.clear();
        write_scheduled = false;
        return;
      }
      writing_bytes = writing.size();
    }
    stream->AsyncWrite(asio::buffer(writing), [this](const asio::error_code& ec, size_t) {
      if (ec) {
        Fail(Status(StatusCode::kUnavailable, "write failed: " + ec.message()));
        return;
      }
      writing.clear();
      {
        std::lock_guard lock(mu);
        writing_bytes = 0;
      }
      room_cv.notify_all();
      DoWrite();
    });
  }

  void ReadLoop() {
    std::span<char> space = decoder.PrepareWrite(client_internal::kReadChunk);
    stream->AsyncReadSome(
        asio::buffer(space.data(), space.size()), [this](const asio::error_code& ec, size_t n) {
          if (ec) {
            const bool eof = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
            Fail(Status(StatusCode::kUnavailable, eof ? std::string("broker closed the connection")
                                                      : "read failed: " + ec.message()));
            return;
          }
          decoder.CommitWrite(n);
          while (true) {
            auto next = decoder.Next();
            if (!next.ok()) return Fail(next.status());
            if (!next->has_value()) break;
            pb::Frame frame;
            if (!frame.ParseFromArray((*next)->data(), static_cast<int>((*next)->size()))) {
              return Fail(Status(StatusCode::kMalformedFrame, "broker sent an unparsable frame"));
            }
            OnFrame(frame);
            if (Disconnected()) return;  // e.g. closed from inside that callback
          }
          ReadLoop();
        });
  }

  void OnFrame(pb::Frame& frame) {
    switch (frame.body_case()) {
      case pb::Frame::kDelivery: {
        std::shared_ptr<DeliveryHandler> handler;
        {
          std::lock_guard lock(mu);
          auto it = consumers.find(frame.delivery().consumer_tag());
          if (it != consumers.end()) handler = it->second;
        }
        if (handler) {
          (*handler)(client_internal::FromWireDelivery(frame.mutable_delivery()));
        } else {
          // No handler (an abandoned or cancelled consumer): give the message back at once.
          pb::Frame nack;
          nack.mutable_nack()->set_delivery_tag(frame.delivery().delivery_tag());
          nack.mutable_nack()->set_requeue(true);
          Send(nack, nullptr);
        }
        return;
      }
      case pb::Frame::kReturned: {
        ReturnHandler handler;
        {
          std::lock_guard lock(mu);
          handler = on_return;
        }
        if (!handler) return;
        auto* r = frame.mutable_returned();
        ReturnedMessage returned;
        returned.reason = Status(static_cast<StatusCode>(r->reason_code()), r->reason());
        returned.exchange = r->exchange();
        returned.routing_key = r->routing_key();
        returned.message = protocol::MoveFromWire(r->mutable_message());
        handler(std::move(returned));
        return;
      }
      case pb::Frame::kConsumerCancelled: {
        CancelHandler handler;
        {
          std::lock_guard lock(mu);
          consumers.erase(frame.consumer_cancelled().consumer_tag());
          handler = on_cancel;
        }
        if (handler) {
          handler(frame.consumer_cancelled().consumer_tag(), frame.consumer_cancelled().reason());
        }
        return;
      }
      case pb::Frame::kClose: {
        std::lock_guard lock(mu);
        close_reason = frame.close().reason();
        return;
      }
      case pb::Frame::kPublishingBlocked: {
        BlockedHandler handler;
        {
          std::lock_guard lock(mu);
          handler = on_blocked;
        }
        const auto& notice = frame.publishing_blocked();
        publishing_blocked.store(notice.blocked());
        if (handler) handler(notice.blocked(), notice.reason());
        return;
      }
      default:
        break;
    }
    if (frame.request_id() == 0) {
      if (frame.body_case() == pb::Frame::kError) {
        ErrorHandler handler;
        {
          std::lock_guard lock(mu);
          handler = on_error;
        }
        if (handler) handler(protocol::FromWire(frame.error()));
      }
      return;
    }
    ReplyFn reply;
    {
      std::lock_guard lock(mu);
      AnsweredLocked(frame.request_id());
      auto it = pending.find(frame.request_id());
      if (it == pending.end()) {
        // A Subscribe the caller gave up on: nobody will consume, so cancel the consumer.
        if (abandoned_subscribes.erase(frame.request_id()) > 0 &&
            frame.body_case() == pb::Frame::kSubscribeOk) {
          pb::Frame cancel;
          cancel.mutable_cancel()->set_consumer_tag(frame.subscribe_ok().consumer_tag());
          protocol::AppendFrame(cancel, &out);
          ScheduleWriteLocked();
        }
        return;
      }
      reply = std::move(it->second);
      pending.erase(it);
    }
    if (frame.body_case() == pb::Frame::kError) {
      reply(protocol::FromWire(frame.error()));
    } else {
      reply(std::move(frame));
    }
  }

  // Thread: I/O. The connection is gone: fail everything that waits.
  void Fail(const Status& status) {
    std::unordered_map<uint64_t, ReplyFn> failed;
    ErrorHandler handler;
    Status reported = status;
    {
      std::lock_guard lock(mu);
      if (disconnected) return;
      disconnected = true;
      failed.swap(pending);
      // What was queued and not written is dropped; unconfirmed_publishes() tells how many
      // publishes without a confirm the broker is not known to have read.
      out.clear();
      writing_bytes = 0;
      if (!user_closed) handler = on_error;
      if (!close_reason.empty()) {
        reported = Status(StatusCode::kUnavailable, DisconnectedMessage());
      }
    }
    disconnected_cv.notify_all();
    room_cv.notify_all();
    if (stream) {
      stream->Close();
    } else {
      asio::error_code ignored;
      socket.close(ignored);
    }
    for (auto& [id, reply] : failed) reply(reported);
    if (handler) handler(reported);
  }

  uint64_t UnconfirmedPublishes() {
    std::lock_guard lock(mu);
    return unconfirmed_queued - unconfirmed_known_read;
  }

  bool Disconnected() {
    std::lock_guard lock(mu);
    return disconnected;
  }

  void Stop() {
    const bool on_io_thread = OnIoThread();
    {
      std::unique_lock lock(mu);
      user_closed = true;
      // Say goodbye and wait for the broker's answer, unless this is the I/O thread itself,
      // which is the one that would receive the answer.
      if (!disconnected && thread.joinable() && !on_io_thread) {
        lock.unlock();
        // Publishes without a confirm that the broker may not have read yet: one answer
        // tells that it did (unconfirmed_publishes() counts them when none comes).
        if (UnconfirmedPublishes() > 0) {
          auto answered = std::make_shared<std::promise<void>>();
          auto future = answered->get_future();
          pb::Frame ping;
          ping.mutable_ping()->set_nonce(0);
          Send(ping, [answered](Result<pb::Frame>) { answered->set_value(); });
          future.wait_for(std::chrono::seconds(2));
        }
        pb::Frame close;
        close.mutable_close()->set_reason("client closing");
        Send(close, nullptr);
        lock.lock();
        disconnected_cv.wait_for(lock, std::chrono::seconds(2), [this] { return disconnected; });
      }
    }
    if (!thread.joinable()) return;
    if (on_io_thread) {
      // Closing from a callback: finish up here; the thread ends once its work is gone and
      // then releases its reference to this Impl.
      Fail(Status(StatusCode::kUnavailable, "client closed"));
      thread.detach();
      return;
    }
    asio::post(io, [this] {
      Fail(Status(StatusCode::kUnavailable, "client closed"));
      io.stop();
    });
    thread.join();
  }
};

}  // namespace wharf
