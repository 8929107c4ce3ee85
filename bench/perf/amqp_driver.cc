// The amqp driver: AMQP 0-9-1 through rabbitmq-c (Debian's librabbitmq-dev), one connection and
// one channel per producer or consumer thread, so the same scenarios run against RabbitMQ.
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <deque>
#include <thread>

#include "perf/perf.h"

namespace wharf::perf {
namespace {

constexpr amqp_channel_t kChannel = 1;

std::string ReplyError(const amqp_rpc_reply_t& reply, const std::string& what) {
  switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL:
      return "";
    case AMQP_RESPONSE_NONE:
      return what + ": missing RPC reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
      return what + ": " + amqp_error_string2(reply.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD ||
          reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        auto* m = static_cast<amqp_channel_close_t*>(reply.reply.decoded);
        return what + ": server error " + std::to_string(m->reply_code) + " " +
               std::string(static_cast<const char*>(m->reply_text.bytes), m->reply_text.len);
      }
      return what + ": server exception";
  }
  return what + ": unknown reply";
}

// One AMQP connection with channel 1 open.
class Connection {
 public:
  ~Connection() {
    if (conn_) {
      if (open_) {
        amqp_channel_close(conn_, kChannel, AMQP_REPLY_SUCCESS);
        amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
      }
      amqp_destroy_connection(conn_);
    }
  }

  std::string Open(const Options& o) {
    conn_ = amqp_new_connection();
    amqp_socket_t* socket = amqp_tcp_socket_new(conn_);
    if (!socket) return "cannot create socket";
    if (amqp_socket_open(socket, o.host.c_str(), o.port) != AMQP_STATUS_OK) {
      return "cannot connect to " + o.host + ":" + std::to_string(o.port);
    }
    std::string err =
        ReplyError(amqp_login(conn_, o.vhost.c_str(), 0, 131072, 0, AMQP_SASL_METHOD_PLAIN,
                              o.user.c_str(), o.password.c_str()),
                   "login");
    if (!err.empty()) return err;
    amqp_channel_open(conn_, kChannel);
    err = ReplyError(amqp_get_rpc_reply(conn_), "channel.open");
    if (!err.empty()) return err;
    open_ = true;
    return "";
  }

  std::string Check(const std::string& what) { return ReplyError(amqp_get_rpc_reply(conn_), what); }
  amqp_connection_state_t get() { return conn_; }

 private:
  amqp_connection_state_t conn_ = nullptr;
  bool open_ = false;
};

amqp_bytes_t Bytes(const std::string& s) {
  return amqp_bytes_t{s.size(), const_cast<char*>(s.data())};
}

// --amqp-writes batched: frames encoded by rabbitmq-c's own encoders (amqp_encode_method,
// amqp_encode_properties) into one buffer and written many per send(), the way Wharf's own
// client writes whatever accumulated while its previous write was in flight. rabbitmq-c's
// amqp_basic_publish makes three send() calls per message, amqp_basic_ack one per ack. Frames
// are read by rabbitmq-c as usual; only publishes and acks bypass its writer, on its own (plain
// TCP) socket.
class FrameWriter {
 public:
  // Buffered bytes past which the caller should Flush.
  static constexpr size_t kFlushBytes = 16 * 1024;

  explicit FrameWriter(amqp_connection_state_t conn) : conn_(conn) {
    int frame_max = amqp_get_frame_max(conn);
    body_max_ = frame_max > 8 ? static_cast<size_t>(frame_max) - 8 : SIZE_MAX;
  }

  // Encodes one method frame; false if rabbitmq-c cannot encode it.
  bool AppendMethod(amqp_method_number_t id, void* decoded, size_t max_args) {
    scratch_.resize(max_args);
    size_t start = BeginFrame(AMQP_FRAME_METHOD);
    Put32(id);
    int n = amqp_encode_method(id, decoded, amqp_bytes_t{scratch_.size(), scratch_.data()});
    if (n < 0) return false;
    buf_.append(scratch_.data(), static_cast<size_t>(n));
    EndFrame(start);
    return true;
  }

  // Encodes one basic.publish with its content.
  bool AppendPublish(const std::string& exchange, const std::string& key,
                     const amqp_basic_properties_t& properties, const std::string& body) {
    amqp_basic_publish_t m{};
    m.exchange = Bytes(exchange);
    m.routing_key = Bytes(key);
    if (!AppendMethod(AMQP_BASIC_PUBLISH_METHOD, &m, 16 + exchange.size() + key.size())) {
      return false;
    }
    size_t start = BeginFrame(AMQP_FRAME_HEADER);
    Put16(AMQP_BASIC_CLASS);
    Put16(0);  // weight
    Put32(static_cast<uint32_t>(static_cast<uint64_t>(body.size()) >> 32));
    Put32(static_cast<uint32_t>(body.size()));
    scratch_.resize(512);
    amqp_basic_properties_t props = properties;
    int n = amqp_encode_properties(AMQP_BASIC_CLASS, &props,
                                   amqp_bytes_t{scratch_.size(), scratch_.data()});
    if (n < 0) return false;
    buf_.append(scratch_.data(), static_cast<size_t>(n));
    EndFrame(start);

    for (size_t off = 0; off < body.size(); off += body_max_) {
      start = BeginFrame(AMQP_FRAME_BODY);
      buf_.append(body, off, std::min(body_max_, body.size() - off));
      EndFrame(start);
    }
    return true;
  }

  size_t buffered() const { return buf_.size(); }

  // Writes everything buffered; an AMQP_STATUS_* code.
  int Flush() {
    int fd = amqp_get_sockfd(conn_);
    size_t done = 0;
    while (done < buf_.size()) {
      ssize_t n = ::send(fd, buf_.data() + done, buf_.size() - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 1000);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        return AMQP_STATUS_SOCKET_ERROR;
      }
    }
    buf_.clear();
    return AMQP_STATUS_OK;
  }

 private:
  size_t BeginFrame(uint8_t type) {
    size_t start = buf_.size();
    buf_.push_back(static_cast<char>(type));
    Put16(kChannel);
    Put32(0);  // the payload size, set by EndFrame
    return start;
  }
  void EndFrame(size_t start) {
    uint32_t size = static_cast<uint32_t>(buf_.size() - start - 7);
    for (int i = 0; i < 4; ++i) buf_[start + 3 + i] = static_cast<char>(size >> (24 - 8 * i));
    buf_.push_back(static_cast<char>(AMQP_FRAME_END));
  }
  void Put16(uint16_t v) {
    buf_.push_back(static_cast<char>(v >> 8));
    buf_.push_back(static_cast<char>(v));
  }
  void Put32(uint32_t v) {
    for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>(v >> (24 - 8 * i)));
  }

  amqp_connection_state_t conn_;
  size_t body_max_;
  std::string buf_;
  std::string scratch_;
};

class AmqpDriver final : public Driver {
 public:
  Status Setup(Run& run) override {
    const Options& o = run.options;
    Connection c;
    if (auto err = c.Open(o); !err.empty()) return Status(StatusCode::kUnavailable, err);
    if (!o.exchange_type.empty()) {
      amqp_exchange_declare(c.get(), kChannel, amqp_cstring_bytes(o.ExchangeName().c_str()),
                            amqp_cstring_bytes(o.exchange_type.c_str()), 0, o.persistent, 0, 0,
                            amqp_empty_table);
      if (auto err = c.Check("exchange.declare"); !err.empty()) {
        return Status(StatusCode::kPreconditionFailed, err);
      }
    }
    for (int i = 0; i < o.queues; ++i) {
      std::string name = o.QueueName(i);
      amqp_table_entry_t priority_entry;
      priority_entry.key = amqp_cstring_bytes("x-max-priority");
      priority_entry.value.kind = AMQP_FIELD_KIND_I32;
      priority_entry.value.value.i32 = static_cast<int32_t>(o.max_priority);
      amqp_table_t arguments = amqp_empty_table;
      if (o.max_priority > 0) arguments = amqp_table_t{1, &priority_entry};
      amqp_queue_declare(c.get(), kChannel, Bytes(name), 0, o.persistent, 0, 0, arguments);
      if (auto err = c.Check("queue.declare"); !err.empty()) {
        return Status(StatusCode::kPreconditionFailed, err);
      }
      if (!o.exchange_type.empty()) {
        std::string key = o.RoutingKey(i);
        std::string exchange = o.ExchangeName();
        amqp_queue_bind(c.get(), kChannel, Bytes(name), Bytes(exchange), Bytes(key),
                        amqp_empty_table);
        if (auto err = c.Check("queue.bind"); !err.empty()) {
          return Status(StatusCode::kPreconditionFailed, err);
        }
      }
    }
    return Status::Ok();
  }

  Status Teardown(Run& run) override {
    const Options& o = run.options;
    Connection c;
    if (auto err = c.Open(o); !err.empty()) return Status(StatusCode::kUnavailable, err);
    for (int i = 0; i < o.queues; ++i) {
      std::string name = o.QueueName(i);
      amqp_queue_delete(c.get(), kChannel, Bytes(name), 0, 0);
      if (auto err = c.Check("queue.delete"); !err.empty())
        return Status(StatusCode::kIoError, err);
    }
    if (!o.exchange_type.empty()) {
      std::string exchange = o.ExchangeName();
      amqp_exchange_delete(c.get(), kChannel, Bytes(exchange), 0);
      if (auto err = c.Check("exchange.delete"); !err.empty()) {
        return Status(StatusCode::kIoError, err);
      }
    }
    return Status::Ok();
  }

  void Produce(Run& run, int index) override {
    const Options& o = run.options;
    Connection c;
    if (auto err = c.Open(o); !err.empty()) return run.Abort("producer: " + err);
    amqp_connection_state_t conn = c.get();
    const uint32_t window = o.confirm;
    if (window > 0) {
      amqp_confirm_select(conn, kChannel);
      if (auto err = c.Check("confirm.select"); !err.empty()) return run.Abort(err);
    }
    std::string body = MakeBody(o.size);
    amqp_basic_properties_t props;
    props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
    props.delivery_mode = o.persistent ? 2 : 1;
    std::string exchange = o.ExchangeName();
    std::vector<std::string> keys;
    for (int i = 0; i < o.queues; ++i) keys.push_back(o.RoutingKey(i));
    std::deque<uint64_t> sent_at;    // send time of each unconfirmed publish, by sequence
    uint64_t first_unconfirmed = 1;  // publisher sequence numbers start at 1
    auto interval = o.rate > 0
                        ? std::chrono::nanoseconds(static_cast<int64_t>(1e9 * o.producers / o.rate))
                        : std::chrono::nanoseconds(0);
    auto next_send = std::chrono::steady_clock::now();
    uint64_t n = static_cast<uint64_t>(index);
    std::unique_ptr<FrameWriter> writer;
    if (o.amqp_writes == "batched") writer = std::make_unique<FrameWriter>(conn);

    // Reads one frame (blocking up to `timeout`, or not at all when zero) and applies acks.
    auto read_confirms = [&](timeval* timeout) -> bool {
      amqp_frame_t frame;
      int rc = amqp_simple_wait_frame_noblock(conn, &frame, timeout);
      if (rc == AMQP_STATUS_TIMEOUT) return true;
      if (rc != AMQP_STATUS_OK) {
        run.Abort(std::string("producer: ") + amqp_error_string2(rc));
        return false;
      }
      if (frame.frame_type != AMQP_FRAME_METHOD) return true;
      uint64_t tag = 0;
      bool multiple = false;
      bool nack = false;
      if (frame.payload.method.id == AMQP_BASIC_ACK_METHOD) {
        auto* ack = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
        tag = ack->delivery_tag;
        multiple = ack->multiple;
      } else if (frame.payload.method.id == AMQP_BASIC_NACK_METHOD) {
        auto* m = static_cast<amqp_basic_nack_t*>(frame.payload.method.decoded);
        tag = m->delivery_tag;
        multiple = m->multiple;
        nack = true;
      } else if (frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
                 frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
        run.Abort("producer: broker closed the channel");
        return false;
      } else {
        return true;
      }
      uint64_t now = NowNanos();
      uint64_t from = multiple ? first_unconfirmed : tag;
      for (uint64_t t = from; t <= tag && t >= first_unconfirmed; ++t) {
        uint64_t sent = sent_at[t - first_unconfirmed];
        if (sent != 0) {
          if (nack) {
            run.Fail("publish nacked by the broker");
          } else {
            run.stats.confirmed.fetch_add(1, std::memory_order_relaxed);
            run.stats.confirm_latency.Add((now - sent) / 1000);
          }
          sent_at[t - first_unconfirmed] = 0;
        }
      }
      while (!sent_at.empty() && sent_at.front() == 0) {
        sent_at.pop_front();
        ++first_unconfirmed;
      }
      return true;
    };

    while (run.TakeTicket()) {
      if (interval.count() > 0) {
        std::this_thread::sleep_until(next_send);
        next_send += interval;
      }
      if (writer && window > 0 && sent_at.size() >= window && writer->buffered() > 0 &&
          writer->Flush() != AMQP_STATUS_OK) {
        run.Abort("producer: write failed");
        break;
      }
      while (window > 0 && sent_at.size() >= window && !run.stop) {
        timeval wait{0, 100'000};
        if (!read_confirms(&wait)) break;
      }
      if (run.stop) break;
      StampBody(&body);
      if (o.max_priority > 0) {
        props._flags |= AMQP_BASIC_PRIORITY_FLAG;
        props.priority = o.PriorityOf(n);
      }
      int q = static_cast<int>(n++ % static_cast<uint64_t>(o.queues));
      int rc = AMQP_STATUS_OK;
      if (writer) {
        if (!writer->AppendPublish(exchange, keys[q], props, body)) {
          run.Abort("producer: cannot encode basic.publish");
          break;
        }
        // Written once enough is buffered, or at once when paced (--rate) or one at a time.
        if (writer->buffered() >= FrameWriter::kFlushBytes || interval.count() > 0 || window == 1) {
          rc = writer->Flush();
        }
      } else {
        rc = amqp_basic_publish(conn, kChannel, Bytes(exchange), Bytes(keys[q]), 0, 0, &props,
                                Bytes(body));
      }
      if (rc != AMQP_STATUS_OK) {
        run.Abort(std::string("producer: ") + amqp_error_string2(rc));
        break;
      }
      run.stats.published.fetch_add(1, std::memory_order_relaxed);
      if (window > 0) {
        sent_at.push_back(NowNanos());
        if (sent_at.size() % 64 == 0) {
          timeval poll{0, 0};
          if (!read_confirms(&poll)) break;
        }
      }
    }
    if (writer && writer->buffered() > 0 && writer->Flush() != AMQP_STATUS_OK && !run.stop) {
      run.Abort("producer: write failed");
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (window > 0 && !sent_at.empty() && !run.stop &&
           std::chrono::steady_clock::now() < deadline) {
      timeval wait{0, 100'000};
      if (!read_confirms(&wait)) break;
    }
  }

  void Consume(Run& run, int index) override {
    const Options& o = run.options;
    Connection c;
    if (auto err = c.Open(o); !err.empty()) return run.Abort("consumer: " + err);
    amqp_connection_state_t conn = c.get();
    amqp_basic_qos(conn, kChannel, 0, static_cast<uint16_t>(std::min<uint32_t>(o.prefetch, 65535)),
                   0);
    if (auto err = c.Check("basic.qos"); !err.empty()) return run.Abort(err);
    std::string queue = o.QueueName(index % o.queues);
    amqp_basic_consume(conn, kChannel, Bytes(queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    if (auto err = c.Check("basic.consume"); !err.empty()) return run.Abort(err);
    const uint32_t ack_every = std::max<uint32_t>(1, o.ack_every);
    uint32_t unacked = 0;
    uint64_t last_tag = 0;
    std::unique_ptr<FrameWriter> writer;
    if (o.amqp_writes == "batched") writer = std::make_unique<FrameWriter>(conn);
    auto ack = [&](uint64_t tag, bool multiple) -> int {
      if (!writer) return amqp_basic_ack(conn, kChannel, tag, multiple);
      amqp_basic_ack_t m{tag, multiple};
      if (!writer->AppendMethod(AMQP_BASIC_ACK_METHOD, &m, 16)) return AMQP_STATUS_BAD_AMQP_DATA;
      // Written once nothing more is buffered to read (the next read would wait for the
      // broker, which waits for these acks once the prefetch is used up), or enough is buffered.
      if ((amqp_data_in_buffer(conn) == 0 && amqp_frames_enqueued(conn) == 0) ||
          writer->buffered() >= FrameWriter::kFlushBytes) {
        return writer->Flush();
      }
      return AMQP_STATUS_OK;
    };
    while (!run.stop) {
      amqp_maybe_release_buffers(conn);
      amqp_envelope_t envelope;
      timeval timeout{0, 100'000};
      amqp_rpc_reply_t reply = amqp_consume_message(conn, &envelope, &timeout, 0);
      if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
          reply.library_error == AMQP_STATUS_TIMEOUT) {
        continue;
      }
      if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
        if (!run.stop) run.Abort(ReplyError(reply, "consumer"));
        break;
      }
      run.stats.e2e_latency.Add(BodyAgeMicros(static_cast<const char*>(envelope.message.body.bytes),
                                              envelope.message.body.len));
      run.stats.received.fetch_add(1, std::memory_order_relaxed);
      if (envelope.redelivered) run.stats.redelivered.fetch_add(1, std::memory_order_relaxed);
      last_tag = envelope.delivery_tag;
      amqp_destroy_envelope(&envelope);
      if (++unacked >= ack_every) {
        unacked = 0;
        if (ack(last_tag, ack_every > 1) != AMQP_STATUS_OK) {
          if (!run.stop) run.Abort("consumer: ack failed");
          break;
        }
      }
    }
    if (unacked > 0) ack(last_tag, true);  // the tail --ack-every left
    if (writer && writer->buffered() > 0) writer->Flush();
  }
};

}  // namespace

std::unique_ptr<Driver> MakeAmqpDriver() { return std::make_unique<AmqpDriver>(); }

}  // namespace wharf::perf
