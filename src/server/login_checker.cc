#include "server/login_checker.h"

#include <pthread.h>

#include "common/password.h"

namespace wharf::server {

LoginChecker::LoginChecker(uint32_t threads, uint32_t queue_limit)
    : queue_limit_(queue_limit),
      dummy_hash_(HashPassword("wharf: no such user", kDefaultPasswordIterations)) {
  for (uint32_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this, i] {
      std::string name = "wharf-login-" + std::to_string(i);
      pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
      Run();
    });
  }
}

LoginChecker::~LoginChecker() { Stop(); }

bool LoginChecker::Submit(std::string password, std::string password_hash,
                          std::function<void(bool)> done) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= queue_limit_) return false;
    queue_.push_back(Job{std::move(password), std::move(password_hash), std::move(done)});
  }
  cv_.notify_one();
  return true;
}

size_t LoginChecker::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void LoginChecker::Run() {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    bool matches;
    if (job.password_hash.empty()) {
      VerifyPassword(job.password, dummy_hash_);  // the same cost, never a match
      matches = false;
    } else {
      matches = VerifyPassword(job.password, job.password_hash);
    }
    job.done(matches);
  }
}

void LoginChecker::Stop() {
  std::deque<Job> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
}

}  // namespace wharf::server
