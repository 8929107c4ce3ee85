// client/client.cc: wharf::Client's connecting and closing, topology, publish, consume and
// settle calls. The connection itself is client/client_impl.h; the operators' calls are in
// client_admin.cc.
#include <algorithm>

#include "client/client_impl.h"

namespace wharf {

using client_internal::FromWireDelivery;

Client::Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() { Close(); }

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  std::shared_ptr<asio::ssl::context> tls;
  if (options.tls.enabled) {
    net::TlsClientSettings settings;
    settings.ca_file = options.tls.ca_file;
    settings.cert_file = options.tls.cert_file;
    settings.key_file = options.tls.key_file;
    settings.verify = options.tls.verify;
    WHARF_ASSIGN_OR_RETURN(tls, net::MakeClientTlsContext(settings));
  }
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
  // The stream, and over TLS its handshake (under the connect timeout), on the I/O thread.
  auto shaken = std::make_shared<std::promise<asio::error_code>>();
  asio::post(raw->io, [raw, tls, shaken] {
    asio::error_code ignored;
    raw->socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    if (!tls) {
      raw->stream = std::make_unique<net::Stream>(std::move(raw->socket));
      shaken->set_value({});
      return;
    }
    raw->stream = std::make_unique<net::Stream>(std::move(raw->socket), tls);
    const ClientTlsOptions& o = raw->options.tls;
    const std::string& name = o.server_name.empty() ? raw->options.host : o.server_name;
    net::Stream::Tls& t = *raw->stream->tls_stream();
    asio::error_code not_ip;
    asio::ip::make_address(name, not_ip);
    if (not_ip) SSL_set_tlsext_host_name(t.native_handle(), name.c_str());  // SNI: names only
    if (o.verify) t.set_verify_callback(asio::ssl::host_name_verification(name));
    raw->connect_timer.expires_after(raw->options.connect_timeout);
    raw->connect_timer.async_wait([raw](const asio::error_code& e) {
      if (!e) raw->stream->Close();
    });
    raw->stream->AsyncHandshake(asio::ssl::stream_base::client,
                                [raw, shaken](const asio::error_code& e) {
                                  raw->connect_timer.cancel();
                                  shaken->set_value(e);
                                });
  });
  ec = shaken->get_future().get();
  if (ec) {
    work.reset();
    client->impl_->Fail(Status(StatusCode::kUnavailable, ""));
    std::string what = ec == asio::error::operation_aborted ? "timed out" : ec.message();
    return Status(StatusCode::kUnavailable, "TLS handshake with " + options.host + ":" +
                                                std::to_string(options.port) + " failed: " + what);
  }
  asio::post(raw->io, [raw] { raw->ReadLoop(); });
  work.reset();  // the read loop keeps the context busy from now on

  pb::Frame hello;
  hello.mutable_hello()->set_protocol_version(protocol::kProtocolVersion);
  hello.mutable_hello()->set_client_name(options.client_name);
  auto hello_ok = raw->Call(std::move(hello));
  if (!hello_ok.ok()) return hello_ok.status();
  raw->max_message_bytes = hello_ok->hello_ok().max_message_bytes();

  pb::Frame auth;
  if (options.tls.certificate_login) {
    const auto& offered = hello_ok->hello_ok().auth_mechanisms();
    if (std::find(offered.begin(), offered.end(), "EXTERNAL") == offered.end()) {
      return Status(StatusCode::kAuthenticationFailed,
                    "the broker does not offer a login with the client certificate (EXTERNAL: "
                    "it needs a TLS listener with [tls] cert_login, and a certificate it "
                    "verified)");
    }
    auth.mutable_authenticate()->set_mechanism("EXTERNAL");
  } else {
    auth.mutable_authenticate()->set_mechanism("PLAIN");
    auth.mutable_authenticate()->set_user(options.user);
    auth.mutable_authenticate()->set_password(options.password);
  }
  auth.mutable_authenticate()->set_vhost(options.vhost);
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
  protocol::ToWire(spec, frame.mutable_declare_exchange());
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
  protocol::ToWire(spec, frame.mutable_declare_queue());
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

Status Client::Bind(const BindingSpec& binding) {
  pb::Frame frame;
  protocol::ToWire(binding, frame.mutable_bind());
  return impl_->CallStatus(std::move(frame));
}

Status Client::Unbind(const BindingSpec& binding) {
  pb::Frame frame;
  protocol::ToWire(binding, frame.mutable_unbind());
  return impl_->CallStatus(std::move(frame));
}

// --- Publish ------------------------------------------------------------------------------------

namespace {
pb::Frame PublishFrame(const std::string& exchange, const std::string& routing_key,
                       const Message& message, const PublishOptions& options) {
  pb::Frame frame;
  auto* p = frame.mutable_publish();
  p->set_exchange(exchange);
  p->set_routing_key(routing_key);
  p->set_mandatory(options.mandatory);
  p->set_delay_ms(options.delay_ms);
  p->set_deliver_at_ms(options.deliver_at_ms);
  if (!options.deduplication_id.empty()) p->set_deduplication_id(options.deduplication_id);
  protocol::ToWire(message, p->mutable_message());
  return frame;
}
PublishResult PublishResultOf(const pb::Frame& reply) {
  PublishResult result;
  result.message_id = reply.publish_ok().message_id();
  result.routed_queues = reply.publish_ok().routed_queues();
  result.duplicate_of = reply.publish_ok().duplicate_of();
  return result;
}

}  // namespace

void Client::PublishAsync(const std::string& exchange, const std::string& routing_key,
                          const Message& message, PublishCallback done, PublishOptions options) {
  pb::Frame frame = PublishFrame(exchange, routing_key, message, options);
  impl_->Send(frame, [done = std::move(done)](Result<pb::Frame> reply) {
    if (!reply.ok()) return done(reply.status());
    done(PublishResultOf(*reply));
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
      [promise](Result<PublishResult> r) { promise->set_value(std::move(r)); }, std::move(options));
  return future;
}

Result<PublishResult> Client::Publish(const std::string& exchange, const std::string& routing_key,
                                      const Message& message, PublishOptions options) {
  auto reply = impl_->Call(PublishFrame(exchange, routing_key, message, options));
  if (!reply.ok()) return reply.status();
  return PublishResultOf(*reply);
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
  SubscribeOptions options;
  options.prefetch = prefetch;
  options.consumer_tag = consumer_tag;
  options.exclusive = exclusive;
  options.lease = lease;
  return Subscribe(queue, std::move(handler), options);
}

Result<std::string> Client::Subscribe(const std::string& queue, DeliveryHandler handler,
                                      const SubscribeOptions& options) {
  // Register the handler before the broker can deliver: deliveries may follow the reply
  // immediately, on the I/O thread, before this thread wakes up.
  auto shared = std::make_shared<DeliveryHandler>(std::move(handler));
  pb::Frame frame;
  auto* s = frame.mutable_subscribe();
  s->set_queue(queue);
  s->set_prefetch(options.prefetch);
  s->set_exclusive(options.exclusive);
  s->set_consumer_tag(options.consumer_tag);
  s->set_lease_ms(static_cast<uint32_t>(std::max<int64_t>(options.lease.count(), 0)));
  s->set_priority(options.priority);
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
