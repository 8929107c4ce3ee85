// server/user_changes.h
//
// UserChanges runs the changes of users (PutUser, DeleteUser, SetUserLimits, SetUserTags,
// SetPermissions, ClearPermissions) one at a time: each reads the user as the one before left
// it, after that one was committed and applied. Without it, two administrators changing one
// user at once (its tags and its permissions, say) could both read it before either commit
// lands, and the second write would undo the first.
//
// Thread safety: confined to the broker thread (changes start there, and their commits answer
// there).
#pragma once

#include <deque>
#include <functional>

namespace wharf::server {

class UserChanges {
 public:
  // A change: reads the directory, commits, and calls `done` once when its commit has answered
  // and it applied (or refused) the change; `done` may be called inside the change.
  using Change = std::function<void(std::function<void()> done)>;

  // Starts `change` now, or after every change before it called its `done`.
  void Run(Change change);
  size_t waiting() const { return waiting_.size(); }

 private:
  void StartNext();

  bool running_ = false;
  std::deque<Change> waiting_;
};

}  // namespace wharf::server
