#include "wharf/client.h"

#include <asio.hpp>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "net/frame.h"
#include "protocol/codec.h"

namespace wharf {
namespace pb = ::wharf::wire::v1;

namespace {

constexpr size_t kClientMaxFrameBytes = (512u << 20) + (1u << 20);
constexpr size_t kReadChunk = 64u << 10;

Delivery FromWireDelivery(pb::Delivery* in) {
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

}  // namespace

struct Client::Impl {
  using ReplyFn = std::function<void(Result<pb::Frame>)>;

  explicit Impl(const ClientOptions& opts) : options(opts) {}

  // Set before the I/O thread starts, then immutable.
  ClientOptions options;
  asio::io_context io{1};
  asio::ip::tcp::socket socket{io};
  asio::steady_timer connect_timer{io};
  std::thread thread;
  std::thread::id io_thread_id;

  // Confined to the I/O thread.
  net::FrameDecoder decoder{kClientMaxFrameBytes};
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
      refused = WaitForRoomLocked(lock, frame.ByteSizeLong());
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

  // REQUIRES: mu held (through `lock`). Waits until a publish of `bytes` fits in the send
  // buffer; one that is alone may be larger. Never waits on the I/O thread (a callback):
  // that thread is the one that empties the buffer.
  Status WaitForRoomLocked(std::unique_lock<std::mutex>& lock, size_t bytes) {
    auto full = [&] {
      const size_t buffered = out.size() + writing_bytes;
      return !disconnected && buffered > 0 && buffered + bytes > options.max_buffered_bytes;
    };
    if (!full())
      return disconnected ? Status(StatusCode::kUnavailable, DisconnectedMessage()) : Status::Ok();
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
    asio::async_write(socket, asio::buffer(writing), [this](const asio::error_code& ec, size_t) {
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
    char* buffer = decoder.PrepareWrite(kReadChunk);
    socket.async_read_some(
        asio::buffer(buffer, kReadChunk), [this](const asio::error_code& ec, size_t n) {
          if (ec) {
            Fail(Status(StatusCode::kUnavailable, ec == asio::error::eof
                                                      ? std::string("broker closed the connection")
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
          (*handler)(FromWireDelivery(frame.mutable_delivery()));
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
    asio::error_code ignored;
    socket.close(ignored);
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

Client::Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() { Close(); }

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  auto impl = std::make_shared<Impl>(options);
  Impl* raw = impl.get();
  asio::error_code ec;
  asio::ip::tcp::resolver resolver(raw->io);
  auto endpoints = resolver.resolve(options.host, std::to_string(options.port), ec);
  if (ec) {
    return Status(StatusCode::kUnavailable,
                  "cannot resolve '" + options.host + "': " + ec.message());
  }
  // Connect with a deadline, on the I/O thread.
  auto connected = std::make_shared<std::promise<asio::error_code>>();
  raw->connect_timer.expires_after(options.connect_timeout);
  asio::async_connect(raw->socket, endpoints,
                      [connected, raw](const asio::error_code& e, const auto&) {
                        raw->connect_timer.cancel();
                        connected->set_value(e);
                      });
  raw->connect_timer.async_wait([raw](const asio::error_code& e) {
    if (!e) {
      asio::error_code ignored;
      raw->socket.close(ignored);
    }
  });
  auto work = asio::make_work_guard(raw->io);
  raw->thread = std::thread([self = impl] { self->io.run(); });
  raw->io_thread_id = raw->thread.get_id();
  std::unique_ptr<Client> client(new Client(std::move(impl)));
  ec = connected->get_future().get();
  if (ec) {
    work.reset();
    client->impl_->Fail(Status(StatusCode::kUnavailable, ""));
    std::string what = ec == asio::error::operation_aborted ? "timed out" : ec.message();
    return Status(StatusCode::kUnavailable, "cannot connect to " + options.host + ":" +
                                                std::to_string(options.port) + ": " + what);
  }
  asio::post(raw->io, [raw] {
    asio::error_code ignored;
    raw->socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    raw->ReadLoop();
  });
  work.reset();  // the read loop keeps the context busy from now on

  pb::Frame hello;
  hello.mutable_hello()->set_protocol_version(protocol::kProtocolVersion);
  hello.mutable_hello()->set_client_name(options.client_name);
  auto hello_ok = raw->Call(std::move(hello));
  if (!hello_ok.ok()) return hello_ok.status();
  raw->max_message_bytes = hello_ok->hello_ok().max_message_bytes();

  pb::Frame auth;
  auth.mutable_authenticate()->set_mechanism("PLAIN");
  auth.mutable_authenticate()->set_user(options.user);
  auth.mutable_authenticate()->set_password(options.password);
  auto auth_ok = raw->Call(std::move(auth));
  if (!auth_ok.ok()) return auth_ok.status();
  raw->connection_id = auth_ok->authenticate_ok().connection_id();
  return client;
}

void Client::Close() {
  if (impl_) impl_->Stop();
}

bool Client::connected() const {
  std::lock_guard lock(impl_->mu);
  return !impl_->disconnected;
}

uint64_t Client::connection_id() const { return impl_->connection_id; }
uint64_t Client::max_message_bytes() const { return impl_->max_message_bytes; }

Status Client::Ping() {
  pb::Frame frame;
  frame.mutable_ping()->set_nonce(42);
  return impl_->CallStatus(std::move(frame));
}

// --- Topology -----------------------------------------------------------------------------------

Status Client::DeclareExchange(const ExchangeSpec& spec) {
  pb::Frame frame;
  auto* d = frame.mutable_declare_exchange();
  d->set_name(spec.name);
  d->set_type(protocol::ToWire(spec.type));
  d->set_durable(spec.durable);
  d->set_auto_delete(spec.auto_delete);
  d->set_alternate_exchange(spec.alternate_exchange);
  d->set_passive(spec.passive);
  return impl_->CallStatus(std::move(frame));
}

Status Client::DeleteExchange(const std::string& name, bool if_unused) {
  pb::Frame frame;
  frame.mutable_delete_exchange()->set_name(name);
  frame.mutable_delete_exchange()->set_if_unused(if_unused);
  return impl_->CallStatus(std::move(frame));
}

Result<QueueInfo> Client::DeclareQueue(const QueueSpec& spec) {
  pb::Frame frame;
  auto* d = frame.mutable_declare_queue();
  d->set_name(spec.name);
  d->set_durable(spec.durable);
  d->set_exclusive(spec.exclusive);
  d->set_auto_delete(spec.auto_delete);
  d->set_passive(spec.passive);
  protocol::ToWire(spec.arguments, d->mutable_arguments());
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  const auto& ok = reply->declare_queue_ok();
  QueueInfo info;
  info.name = ok.name();
  info.durable = spec.durable;
  info.exclusive = spec.exclusive;
  info.auto_delete = spec.auto_delete;
  info.ready = ok.ready();
  info.in_flight = ok.in_flight();
  info.consumers = ok.consumers();
  return info;
}

Result<uint64_t> Client::DeleteQueue(const std::string& name, bool if_unused, bool if_empty) {
  pb::Frame frame;
  auto* d = frame.mutable_delete_queue();
  d->set_name(name);
  d->set_if_unused(if_unused);
  d->set_if_empty(if_empty);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  return reply->delete_queue_ok().messages_deleted();
}

Result<uint64_t> Client::PurgeQueue(const std::string& name) {
  pb::Frame frame;
  frame.mutable_purge_queue()->set_name(name);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  return reply->purge_queue_ok().messages_purged();
}

namespace {
template <typename WireBinding>
void FillBinding(const BindingSpec& spec, WireBinding* b) {
  b->set_queue(spec.queue);
  b->set_exchange(spec.exchange);
  b->set_routing_key(spec.routing_key);
  protocol::ToWire(spec.arguments, b->mutable_arguments());
  b->set_destination_exchange(spec.destination_exchange);
}
}  // namespace

Status Client::Bind(const BindingSpec& binding) {
  pb::Frame frame;
  FillBinding(binding, frame.mutable_bind());
  return impl_->CallStatus(std::move(frame));
}

Status Client::Unbind(const BindingSpec& binding) {
  pb::Frame frame;
  FillBinding(binding, frame.mutable_unbind());
  return impl_->CallStatus(std::move(frame));
}

Result<std::vector<QueueInfo>> Client::ListQueues(const std::string& prefix) {
  pb::Frame frame;
  frame.mutable_list_queues()->set_prefix(prefix);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<QueueInfo> out;
  for (const auto& q : reply->list_queues_ok().queues()) out.push_back(protocol::FromWire(q));
  return out;
}

Result<DelayedPage> Client::ListDelayed(const std::string& queue, int64_t after_deliver_at_ms,
                                        uint64_t after_message_id, uint32_t limit) {
  pb::Frame frame;
  auto* list = frame.mutable_list_delayed();
  list->set_queue(queue);
  list->set_after_deliver_at_ms(after_deliver_at_ms);
  list->set_after_message_id(after_message_id);
  list->set_limit(limit);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  DelayedPage page;
  for (const auto& m : reply->list_delayed_ok().messages()) {
    WHARF_ASSIGN_OR_RETURN(auto info, protocol::FromWire(m));
    page.messages.push_back(std::move(info));
  }
  page.more = reply->list_delayed_ok().more();
  page.next_after_deliver_at_ms = reply->list_delayed_ok().next_after_deliver_at_ms();
  page.next_after_message_id = reply->list_delayed_ok().next_after_message_id();
  return page;
}

Result<bool> Client::CancelDelayed(const std::string& queue, uint64_t message_id) {
  pb::Frame frame;
  frame.mutable_cancel_delayed()->set_queue(queue);
  frame.mutable_cancel_delayed()->set_message_id(message_id);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  return reply->cancel_delayed_ok().cancelled();
}

Result<PeekPage> Client::Peek(const std::string& queue, uint64_t after_position, uint32_t limit,
                              bool with_body) {
  pb::Frame frame;
  auto* peek = frame.mutable_peek();
  peek->set_queue(queue);
  peek->set_after_position(after_position);
  peek->set_limit(limit);
  peek->set_with_body(with_body);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  PeekPage page;
  for (const auto& m : reply->peek_ok().messages()) {
    WHARF_ASSIGN_OR_RETURN(auto info, protocol::FromWire(m));
    page.messages.push_back(std::move(info));
  }
  page.more = reply->peek_ok().more();
  page.next_after = reply->peek_ok().next_after_position();
  return page;
}

Result<std::vector<BindingSpec>> Client::ListBindings(const std::string& exchange,
                                                      const std::string& queue) {
  pb::Frame frame;
  frame.mutable_list_bindings()->set_exchange(exchange);
  frame.mutable_list_bindings()->set_queue(queue);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<BindingSpec> out;
  for (const auto& b : reply->list_bindings_ok().bindings()) {
    BindingSpec spec;
    spec.queue = b.queue();
    spec.exchange = b.exchange();
    spec.routing_key = b.routing_key();
    spec.destination_exchange = b.destination_exchange();
    WHARF_RETURN_IF_ERROR(protocol::FromWire(b.arguments(), &spec.arguments));
    out.push_back(std::move(spec));
  }
  return out;
}

Result<std::vector<ConsumerInfo>> Client::ListConsumers(const std::string& queue) {
  pb::Frame frame;
  frame.mutable_list_consumers()->set_queue(queue);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<ConsumerInfo> out;
  for (const auto& c : reply->list_consumers_ok().consumers()) {
    out.push_back(ConsumerInfo{c.queue(), c.consumer_tag(), c.connection_id(), c.user(),
                               c.prefetch(), c.unacked(), c.lease_ms(), c.exclusive()});
  }
  return out;
}

Result<std::vector<ConnectionInfo>> Client::ListConnections() {
  pb::Frame frame;
  frame.mutable_list_connections();
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<ConnectionInfo> out;
  for (const auto& c : reply->list_connections_ok().connections()) {
    out.push_back(ConnectionInfo{c.id(), c.user(), c.address(), c.connected_at_ms(), c.consumers(),
                                 c.unacked(), c.pending_receives()});
  }
  return out;
}

Result<RedriveInfo> Client::StartRedrive(const RedriveSpec& spec) {
  pb::Frame frame;
  auto* start = frame.mutable_start_redrive();
  start->set_queue(spec.queue);
  start->set_to(spec.to);
  start->set_reason(spec.reason);
  start->set_limit(spec.limit);
  start->set_rate(spec.rate);
  start->set_dry_run(spec.dry_run);
  start->set_message_id(spec.message_id);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  return protocol::FromWire(reply->redrive_ok().task());
}

Result<RedriveInfo> Client::CancelRedrive(const std::string& queue) {
  pb::Frame frame;
  frame.mutable_cancel_redrive()->set_queue(queue);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  return protocol::FromWire(reply->redrive_ok().task());
}

Result<std::vector<RedriveInfo>> Client::RedriveStatus(const std::string& queue) {
  pb::Frame frame;
  frame.mutable_redrive_status()->set_queue(queue);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<RedriveInfo> out;
  for (const auto& task : reply->redrive_status_ok().tasks()) {
    out.push_back(protocol::FromWire(task));
  }
  return out;
}

Result<std::vector<ExchangeInfo>> Client::ListExchanges() {
  pb::Frame frame;
  frame.mutable_list_exchanges();
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<ExchangeInfo> out;
  for (const auto& e : reply->list_exchanges_ok().exchanges()) {
    out.push_back(protocol::FromWire(e));
  }
  return out;
}

// --- Users --------------------------------------------------------------------------------------

Status Client::PutUser(const std::string& name, const std::string& password_hash, bool admin) {
  pb::Frame frame;
  auto* put = frame.mutable_put_user();
  put->set_name(name);
  put->set_password_hash(password_hash);
  put->set_admin(admin);
  return impl_->CallStatus(std::move(frame));
}

Status Client::DeleteUser(const std::string& name) {
  pb::Frame frame;
  frame.mutable_delete_user()->set_name(name);
  return impl_->CallStatus(std::move(frame));
}

Result<std::vector<UserInfo>> Client::ListUsers() {
  pb::Frame frame;
  frame.mutable_list_users();
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<UserInfo> out;
  for (const auto& u : reply->list_users_ok().users()) {
    out.push_back(UserInfo{u.name(), u.admin(), u.source()});
  }
  return out;
}

// --- Publish ------------------------------------------------------------------------------------

namespace {
pb::Frame PublishFrame(const std::string& exchange, const std::string& routing_key,
                       const Message& message, PublishOptions options) {
  pb::Frame frame;
  auto* p = frame.mutable_publish();
  p->set_exchange(exchange);
  p->set_routing_key(routing_key);
  p->set_mandatory(options.mandatory);
  p->set_delay_ms(options.delay_ms);
  p->set_deliver_at_ms(options.deliver_at_ms);
  protocol::ToWire(message, p->mutable_message());
  return frame;
}
}  // namespace

void Client::PublishAsync(const std::string& exchange, const std::string& routing_key,
                          const Message& message, PublishCallback done, PublishOptions options) {
  pb::Frame frame = PublishFrame(exchange, routing_key, message, options);
  impl_->Send(frame, [done = std::move(done)](Result<pb::Frame> reply) {
    if (!reply.ok()) return done(reply.status());
    PublishResult result;
    result.message_id = reply->publish_ok().message_id();
    result.routed_queues = reply->publish_ok().routed_queues();
    done(result);
  });
}

std::future<Result<PublishResult>> Client::PublishAsync(const std::string& exchange,
                                                        const std::string& routing_key,
                                                        const Message& message,
                                                        PublishOptions options) {
  auto promise = std::make_shared<std::promise<Result<PublishResult>>>();
  auto future = promise->get_future();
  PublishAsync(
      exchange, routing_key, message,
      [promise](Result<PublishResult> r) { promise->set_value(std::move(r)); }, options);
  return future;
}

Result<PublishResult> Client::Publish(const std::string& exchange, const std::string& routing_key,
                                      const Message& message, PublishOptions options) {
  auto reply = impl_->Call(PublishFrame(exchange, routing_key, message, options));
  if (!reply.ok()) return reply.status();
  PublishResult result;
  result.message_id = reply->publish_ok().message_id();
  result.routed_queues = reply->publish_ok().routed_queues();
  return result;
}

Status Client::PublishNoConfirm(const std::string& exchange, const std::string& routing_key,
                                const Message& message, PublishOptions options) {
  pb::Frame frame = PublishFrame(exchange, routing_key, message, options);
  return impl_->Enqueue(frame, nullptr);
}

uint64_t Client::unconfirmed_publishes() const { return impl_->UnconfirmedPublishes(); }

// --- Consume ------------------------------------------------------------------------------------

Result<std::string> Client::Subscribe(const std::string& queue, uint32_t prefetch,
                                      DeliveryHandler handler, const std::string& consumer_tag,
                                      bool exclusive, std::chrono::milliseconds lease) {
  // Register the handler before the broker can deliver: deliveries may follow the reply
  // immediately, on the I/O thread, before this thread wakes up.
  auto shared = std::make_shared<DeliveryHandler>(std::move(handler));
  pb::Frame frame;
  auto* s = frame.mutable_subscribe();
  s->set_queue(queue);
  s->set_prefetch(prefetch);
  s->set_exclusive(exclusive);
  s->set_consumer_tag(consumer_tag);
  s->set_lease_ms(static_cast<uint32_t>(std::max<int64_t>(lease.count(), 0)));
  auto promise = std::make_shared<std::promise<Result<std::string>>>();
  auto future = promise->get_future();
  Impl* impl = impl_.get();
  if (impl->OnIoThread()) {
    return Status(StatusCode::kFailedPrecondition, "Subscribe from a client callback");
  }
  impl->Send(frame, [impl, shared, promise](Result<pb::Frame> reply) {
    if (!reply.ok()) return promise->set_value(reply.status());
    std::string tag = reply->subscribe_ok().consumer_tag();
    {
      std::lock_guard lock(impl->mu);
      impl->consumers[tag] = shared;  // runs on the I/O thread, before any delivery is read
    }
    promise->set_value(tag);
  });
  if (future.wait_for(impl->options.request_timeout) != std::future_status::ready) {
    std::lock_guard lock(impl->mu);
    if (impl->pending.erase(frame.request_id()) > 0) {
      // If the broker answers after all, the consumer it made is cancelled (OnFrame).
      impl->abandoned_subscribes.insert(frame.request_id());
      return Status(StatusCode::kDeadlineExceeded, "no answer to Subscribe in time");
    }
  }
  return future.get();
}

Status Client::Cancel(const std::string& consumer_tag) {
  pb::Frame frame;
  frame.mutable_cancel()->set_consumer_tag(consumer_tag);
  Status s = impl_->CallStatus(std::move(frame));
  if (s.ok()) {
    std::lock_guard lock(impl_->mu);
    impl_->consumers.erase(consumer_tag);
  }
  return s;
}

Result<std::vector<Delivery>> Client::Receive(const std::string& queue, uint32_t max_messages,
                                              std::chrono::milliseconds wait,
                                              std::chrono::milliseconds lease) {
  pb::Frame frame;
  auto* r = frame.mutable_receive();
  r->set_queue(queue);
  r->set_max_messages(max_messages);
  r->set_wait_ms(static_cast<uint32_t>(wait.count()));
  r->set_lease_ms(static_cast<uint32_t>(std::max<int64_t>(lease.count(), 0)));
  auto reply = impl_->Call(std::move(frame), wait);
  if (!reply.ok()) return reply.status();
  std::vector<Delivery> out;
  for (auto& d : *reply->mutable_receive_ok()->mutable_deliveries()) {
    out.push_back(FromWireDelivery(&d));
  }
  return out;
}

namespace {
pb::Frame SettleFrame(int kind, uint64_t tag, bool multiple, bool requeue) {
  pb::Frame frame;
  if (kind == 0) {
    frame.mutable_ack()->set_delivery_tag(tag);
    frame.mutable_ack()->set_multiple(multiple);
  } else if (kind == 1) {
    frame.mutable_nack()->set_delivery_tag(tag);
    frame.mutable_nack()->set_multiple(multiple);
    frame.mutable_nack()->set_requeue(requeue);
  } else {
    frame.mutable_reject()->set_delivery_tag(tag);
    frame.mutable_reject()->set_requeue(requeue);
  }
  return frame;
}
}  // namespace

void Client::Ack(uint64_t tag, bool multiple) {
  pb::Frame frame = SettleFrame(0, tag, multiple, false);
  impl_->Send(frame, nullptr);
}
void Client::Nack(uint64_t tag, bool multiple, bool requeue) {
  pb::Frame frame = SettleFrame(1, tag, multiple, requeue);
  impl_->Send(frame, nullptr);
}
namespace {
pb::Frame NackFrame(uint64_t tag, const NackOptions& options) {
  pb::Frame frame;
  auto* nack = frame.mutable_nack();
  nack->set_delivery_tag(tag);
  nack->set_multiple(options.multiple);
  nack->set_requeue(options.requeue);
  nack->set_immediate(options.immediate);
  nack->set_delay_ms(static_cast<uint64_t>(std::max<int64_t>(options.delay.count(), 0)));
  nack->set_error(options.error);
  return frame;
}
pb::Frame ExtendFrame(uint64_t tag, std::chrono::milliseconds lease) {
  pb::Frame frame;
  frame.mutable_extend_lease()->set_delivery_tag(tag);
  frame.mutable_extend_lease()->set_lease_ms(
      static_cast<uint32_t>(std::clamp<int64_t>(lease.count(), 0, UINT32_MAX)));
  return frame;
}
}  // namespace
void Client::Nack(uint64_t tag, const NackOptions& options) {
  pb::Frame frame = NackFrame(tag, options);
  impl_->Send(frame, nullptr);
}
Status Client::NackSync(uint64_t tag, const NackOptions& options) {
  return impl_->CallStatus(NackFrame(tag, options));
}
Status Client::ExtendLease(uint64_t tag, std::chrono::milliseconds lease) {
  return impl_->CallStatus(ExtendFrame(tag, lease));
}
void Client::ExtendLeaseAsync(uint64_t tag, std::chrono::milliseconds lease) {
  pb::Frame frame = ExtendFrame(tag, lease);
  impl_->Send(frame, nullptr);
}
void Client::NackWithDelay(uint64_t tag, std::chrono::milliseconds delay, bool multiple) {
  pb::Frame frame = SettleFrame(1, tag, multiple, true);
  frame.mutable_nack()->set_delay_ms(static_cast<uint64_t>(std::max<int64_t>(delay.count(), 0)));
  impl_->Send(frame, nullptr);
}
Status Client::NackWithDelaySync(uint64_t tag, std::chrono::milliseconds delay, bool multiple) {
  pb::Frame frame = SettleFrame(1, tag, multiple, true);
  frame.mutable_nack()->set_delay_ms(static_cast<uint64_t>(std::max<int64_t>(delay.count(), 0)));
  return impl_->CallStatus(std::move(frame));
}
void Client::Reject(uint64_t tag, bool requeue) {
  pb::Frame frame = SettleFrame(2, tag, false, requeue);
  impl_->Send(frame, nullptr);
}
Status Client::AckSync(uint64_t tag, bool multiple) {
  return impl_->CallStatus(SettleFrame(0, tag, multiple, false));
}
Status Client::NackSync(uint64_t tag, bool multiple, bool requeue) {
  return impl_->CallStatus(SettleFrame(1, tag, multiple, requeue));
}
Status Client::RejectSync(uint64_t tag, bool requeue) {
  return impl_->CallStatus(SettleFrame(2, tag, false, requeue));
}

// --- Events -------------------------------------------------------------------------------------

void Client::SetReturnHandler(ReturnHandler handler) {
  std::lock_guard lock(impl_->mu);
  impl_->on_return = std::move(handler);
}
void Client::SetErrorHandler(ErrorHandler handler) {
  std::lock_guard lock(impl_->mu);
  impl_->on_error = std::move(handler);
}
void Client::SetBlockedHandler(BlockedHandler handler) {
  std::lock_guard lock(impl_->mu);
  impl_->on_blocked = std::move(handler);
}

bool Client::publishing_blocked() const { return impl_->publishing_blocked.load(); }

void Client::SetCancelHandler(CancelHandler handler) {
  std::lock_guard lock(impl_->mu);
  impl_->on_cancel = std::move(handler);
}

}  // namespace wharf
