#include "server/user_changes.h"

#include <memory>
#include <utility>

namespace wharf::server {

void UserChanges::Run(Change change) {
  waiting_.push_back(std::move(change));
  if (!running_) StartNext();
}

void UserChanges::StartNext() {
  // A loop, not recursion: changes that finish inside their call (refused at once) do not
  // deepen the stack.
  while (!running_ && !waiting_.empty()) {
    Change change = std::move(waiting_.front());
    waiting_.pop_front();
    running_ = true;
    struct Call {
      bool inside = true;  // the change has not returned yet
      bool done = false;   // `done` was called
    };
    auto call = std::make_shared<Call>();
    change([this, call] {
      if (call->done) return;  // once
      call->done = true;
      if (call->inside) return;  // the loop goes on
      running_ = false;
      StartNext();
    });
    call->inside = false;
    if (call->done) running_ = false;
  }
}

}  // namespace wharf::server
