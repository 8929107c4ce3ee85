// A small example of the Wharf C++ client: declare a queue, subscribe with a prefetch limit,
// publish ten messages with broker confirms, ack each delivery, and close.
//
//   build/src/examples/wharf-example [HOST:PORT]     (default 127.0.0.1:5680, user guest)
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>

#include "wharf/client.h"

int main(int argc, char** argv) {
  wharf::ClientOptions options;
  if (argc > 1) {
    std::string server = argv[1];
    options.host = server.substr(0, server.rfind(':'));
    options.port = static_cast<uint16_t>(std::stoi(server.substr(server.rfind(':') + 1)));
  }
  auto client = wharf::Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  wharf::Client& c = **client;

  wharf::QueueSpec queue;
  queue.name = "example.greetings";
  if (auto declared = c.DeclareQueue(queue); !declared.ok()) {
    std::fprintf(stderr, "declare: %s\n", declared.status().ToString().c_str());
    return 1;
  }

  // Deliveries arrive on the client's I/O thread; Ack there is fine (it does not block).
  std::mutex mu;
  std::condition_variable cv;
  int received = 0;
  auto tag = c.Subscribe(queue.name, /*prefetch=*/4, [&](wharf::Delivery d) {
    std::printf("got '%s' (receive count %u)\n", d.message.body.c_str(), d.receive_count);
    c.Ack(d.delivery_tag);
    std::lock_guard lock(mu);
    ++received;
    cv.notify_all();
  });
  if (!tag.ok()) {
    std::fprintf(stderr, "subscribe: %s\n", tag.status().ToString().c_str());
    return 1;
  }

  for (int i = 0; i < 10; ++i) {
    wharf::Message m;
    m.body = "hello #" + std::to_string(i);
    m.persistent = true;
    auto confirm = c.Publish("", queue.name, m);  // blocks until the broker confirms
    if (!confirm.ok()) {
      std::fprintf(stderr, "publish: %s\n", confirm.status().ToString().c_str());
      return 1;
    }
  }

  std::unique_lock lock(mu);
  bool done = cv.wait_for(lock, std::chrono::seconds(5), [&] { return received == 10; });
  lock.unlock();
  c.Close();
  return done ? 0 : 1;
}
