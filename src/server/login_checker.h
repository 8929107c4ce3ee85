// server/login_checker.h
//
// LoginChecker runs password checks (PBKDF2, milliseconds each) on its own small pool of
// threads, so that no login ever takes time from an I/O thread and its connections. At most
// `queue_limit` checks wait for a thread; beyond that Submit refuses, and the session refuses
// the login (RESOURCE_EXHAUSTED) instead of letting the queue, and the wait, grow.
//
// A login for a user that does not exist is checked against a dummy hash of the default cost
// (common/password.h), so that the answer takes as long as for a real user with a wrong
// password and does not tell which names exist.
//
// Thread safety: thread-safe. Submit from any thread; `done` runs on a hashing thread
// ("wharf-login-N") and should only post to the caller's executor.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace wharf::server {

class LoginChecker {
 public:
  LoginChecker(uint32_t threads, uint32_t queue_limit);
  ~LoginChecker();  // Stop()

  LoginChecker(const LoginChecker&) = delete;
  LoginChecker& operator=(const LoginChecker&) = delete;

  // Checks `password` against `password_hash` (empty: an unknown user, checked against the
  // dummy hash and never matching) on a hashing thread, then calls `done(matches)` there.
  // Returns false, without calling `done`, when `queue_limit` checks already wait or the
  // checker is stopped.
  bool Submit(std::string password, std::string password_hash, std::function<void(bool)> done);

  // Checks waiting for a thread (not those running).
  size_t queued() const;

  // Joins the threads; checks still waiting are dropped without calling their `done`.
  // Idempotent.
  void Stop();

 private:
  struct Job {
    std::string password;
    std::string password_hash;
    std::function<void(bool)> done;
  };
  void Run();

  // Set at construction, then immutable.
  const size_t queue_limit_;
  const std::string dummy_hash_;

  // Guarded by mu_ (a leaf lock: `done` runs outside it).
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;

  std::vector<std::thread> threads_;
};

}  // namespace wharf::server
