// The native driver: the Wharf C++ client, one connection per producer or consumer.
#include <charconv>
#include <semaphore>
#include <thread>

#include "perf/perf.h"
#include "wharf/client.h"

namespace wharf::perf {
namespace {

ClientOptions ClientOptionsFor(const Options& o, const std::string& name) {
  ClientOptions c;
  c.host = o.host;
  c.port = o.port;
  c.user = o.user;
  c.password = o.password;
  c.vhost = o.vhost;
  c.client_name = name;
  c.tls.enabled = o.tls;
  c.tls.ca_file = o.ca_file;
  return c;
}

class NativeDriver final : public Driver {
 public:
  Status Setup(Run& run) override {
    const Options& o = run.options;
    auto client = Client::Connect(ClientOptionsFor(o, "wharf-perf setup"));
    if (!client.ok()) return client.status();
    if (!o.exchange_type.empty()) {
      ExchangeSpec spec;
      spec.name = o.ExchangeName();
      spec.type = *ParseExchangeType(o.exchange_type);
      spec.durable = o.persistent;
      WHARF_RETURN_IF_ERROR((*client)->DeclareExchange(spec));
    }
    for (int i = 0; i < o.queues; ++i) {
      QueueSpec spec;
      spec.name = o.QueueName(i);
      spec.durable = o.persistent;
      if (o.dedup_window_ms > 0) {
        spec.arguments["x-deduplication-window"] = static_cast<int64_t>(o.dedup_window_ms);
      }
      if (o.max_priority > 0) spec.arguments["x-max-priority"] = int64_t{o.max_priority};
      if (o.groups > 0) spec.arguments["x-message-groups"] = true;
      auto declared = (*client)->DeclareQueue(spec);
      if (!declared.ok()) return declared.status();
      if (!o.exchange_type.empty()) {
        WHARF_RETURN_IF_ERROR((*client)->Bind({spec.name, o.ExchangeName(), o.RoutingKey(i), {}}));
      }
    }
    return Status::Ok();
  }

  Status Teardown(Run& run) override {
    const Options& o = run.options;
    auto client = Client::Connect(ClientOptionsFor(o, "wharf-perf teardown"));
    if (!client.ok()) return client.status();
    for (int i = 0; i < o.queues; ++i) {
      auto deleted = (*client)->DeleteQueue(o.QueueName(i));
      if (!deleted.ok()) return deleted.status();
    }
    if (!o.exchange_type.empty()) return (*client)->DeleteExchange(o.ExchangeName());
    return Status::Ok();
  }

  void Produce(Run& run, int index) override {
    const Options& o = run.options;
    auto connected = Client::Connect(ClientOptionsFor(o, "wharf-perf producer"));
    if (!connected.ok()) return run.Abort("producer connect: " + connected.status().ToString());
    Client& client = **connected;
    client.SetErrorHandler([&run](Status s) {
      if (s.code() == StatusCode::kUnavailable) {
        run.Abort("producer: " + s.ToString());
      } else {
        run.Fail(s.ToString());
      }
    });
    Message message;
    message.body = MakeBody(o.size);
    message.persistent = o.persistent;
    const uint32_t window = o.confirm;
    std::counting_semaphore<> slots(window == 0 ? 1 : window);
    std::atomic<uint64_t> outstanding{0};
    auto interval = o.rate > 0
                        ? std::chrono::nanoseconds(static_cast<int64_t>(1e9 * o.producers / o.rate))
                        : std::chrono::nanoseconds(0);
    auto next_send = std::chrono::steady_clock::now();
    uint64_t n = static_cast<uint64_t>(index);
    PublishOptions publish_options;
    publish_options.delay_ms = o.delay_ms;
    // Deduplication keys, unique across producers and runs of one broker: the run, the
    // producer, then the sequence. Made in place, as a publisher that has its ids would not
    // spend allocations on them.
    const std::string key_prefix = std::to_string(NowNanos()) + "-" + std::to_string(index) + "-";
    std::string key;
    const std::string exchange = o.ExchangeName();
    while (run.TakeTicket()) {
      if (interval.count() > 0) {
        std::this_thread::sleep_until(next_send);
        next_send += interval;
      }
      if (window > 0) {
        while (!slots.try_acquire_for(std::chrono::milliseconds(100))) {
          if (run.stop) break;
        }
        if (run.stop) break;
      }
      if (o.dedup_window_ms > 0 || o.dedup_keys) {
        std::string& to = o.dedup_header ? key : publish_options.deduplication_id;
        char digits[20];
        to.assign(key_prefix);
        if (o.dedup_random) {
          // splitmix64's finalizer: a bijection, so the keys stay unique, in no order.
          uint64_t z = n + 0x9e3779b97f4a7c15ull;
          z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
          z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
          z ^= z >> 31;
          char* end = std::to_chars(digits, digits + sizeof(digits), z, 16).ptr;
          to.append(16 - static_cast<size_t>(end - digits), '0').append(digits, end);
        } else {
          char* end = std::to_chars(digits, digits + sizeof(digits), n).ptr;
          if (o.dedup_ordered) to.append(20 - static_cast<size_t>(end - digits), '0');
          to.append(digits, end);
        }
        if (o.dedup_header) message.headers["x-deduplication-header"] = key;
      }
      message.properties.priority = o.PriorityOf(n);
      if (o.groups > 0) message.headers["x-group-id"] = "g" + std::to_string(n % o.groups);
      int q = static_cast<int>(n++ % static_cast<uint64_t>(o.queues));
      StampBody(&message.body);
      run.stats.published.fetch_add(1, std::memory_order_relaxed);
      if (window == 0) {
        // Waits while the client's send buffer is full (the broker blocking publishers).
        if (Status s = client.PublishNoConfirm(exchange, o.RoutingKey(q), message, publish_options);
            !s.ok()) {
          run.stats.published.fetch_sub(1, std::memory_order_relaxed);
          if (s.code() != StatusCode::kUnavailable) run.Fail(s.ToString());
          break;
        }
        continue;
      }
      uint64_t sent = NowNanos();
      outstanding.fetch_add(1);
      client.PublishAsync(
          exchange, o.RoutingKey(q), message,
          [&run, &slots, &outstanding, sent](Result<PublishResult> r) {
            if (r.ok()) {
              run.stats.confirmed.fetch_add(1, std::memory_order_relaxed);
              run.stats.confirm_latency.Add((NowNanos() - sent) / 1000);
            } else if (r.status().code() != StatusCode::kUnavailable) {
              run.Fail(r.status().ToString());
            }
            outstanding.fetch_sub(1);
            slots.release();
          },
          publish_options);
    }
    // Wait for the last confirms (or for the connection to fail them).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (outstanding.load() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (window == 0 && !run.stop) (void)client.Ping();  // everything sent has been read
    client.Close();
    // Published means read by the broker: what it may not have read is not counted.
    const uint64_t unsent = client.unconfirmed_publishes();
    if (unsent > 0) {
      run.stats.published.fetch_sub(unsent, std::memory_order_relaxed);
      run.stats.unsent.fetch_add(unsent, std::memory_order_relaxed);
    }
  }

  void Consume(Run& run, int index) override {
    const Options& o = run.options;
    auto connected = Client::Connect(ClientOptionsFor(o, "wharf-perf consumer"));
    if (!connected.ok()) return run.Abort("consumer connect: " + connected.status().ToString());
    Client& client = **connected;
    client.SetErrorHandler([&run](Status s) {
      if (s.code() == StatusCode::kUnavailable) {
        run.Abort("consumer: " + s.ToString());
      } else {
        run.Fail(s.ToString());
      }
    });
    uint64_t unacked = 0;   // touched only on the client's I/O thread
    uint64_t last_tag = 0;  // likewise
    const uint32_t ack_every = std::max<uint32_t>(1, o.ack_every);
    auto tag = client.Subscribe(o.QueueName(index % o.queues), o.prefetch, [&](Delivery d) {
      uint64_t age = BodyAgeMicros(d.message.body.data(), d.message.body.size());
      run.stats.e2e_latency.Add(age);
      if (o.delay_ms > 0) {
        // The send time is stamped just before the publish, so "due" here is a little
        // earlier than the broker's: lateness is overstated by the publish's own latency.
        uint64_t delay_us = o.delay_ms * 1000;
        if (age < delay_us) run.stats.early.fetch_add(1, std::memory_order_relaxed);
        run.stats.lateness.Add(age > delay_us ? age - delay_us : 0);
      }
      run.stats.received.fetch_add(1, std::memory_order_relaxed);
      if (d.redelivered) run.stats.redelivered.fetch_add(1, std::memory_order_relaxed);
      last_tag = d.delivery_tag;
      if (++unacked >= ack_every) {
        client.Ack(d.delivery_tag, /*multiple=*/ack_every > 1);
        unacked = 0;
      }
    });
    if (!tag.ok()) return run.Abort("subscribe: " + tag.status().ToString());
    while (!run.stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // Stop deliveries, then settle the tail that --ack-every left unacked.
    if (client.Cancel(*tag).ok() && client.Ping().ok() && unacked > 0) {
      (void)client.AckSync(last_tag, /*multiple=*/true);
    }
    client.Close();
  }
};

}  // namespace

std::unique_ptr<Driver> MakeNativeDriver() { return std::make_unique<NativeDriver>(); }

}  // namespace wharf::perf
