// common/thread_checker.h
//
// ThreadChecker records the first thread that calls Check() and, in debug builds, aborts if a
// later call comes from another thread. It guards objects confined to one thread (the broker).
//
// Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace wharf {

class ThreadChecker {
 public:
  void Check() {
#ifndef NDEBUG
    std::thread::id self = std::this_thread::get_id();
    std::thread::id expected{};
    if (!owner_.compare_exchange_strong(expected, self) && expected != self) {
      std::fprintf(stderr, "wharf: object used from a thread that does not own it\n");
      std::abort();
    }
#endif
  }
  // Hands the object to whichever thread calls Check() next (e.g. after start-up).
  void Detach() { owner_.store(std::thread::id{}); }

 private:
  std::atomic<std::thread::id> owner_{};
};

}  // namespace wharf
