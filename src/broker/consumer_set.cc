#include "broker/consumer_set.h"

#include <algorithm>

namespace wharf::broker {

void ConsumerSet::Add(std::shared_ptr<Consumer> consumer) {
  // After every consumer of the same or a higher priority: subscription order within one,
  // and the last in its priority's turn.
  auto at = std::find_if(list_.begin(), list_.end(), [&](const std::shared_ptr<Consumer>& c) {
    return c->priority < consumer->priority;
  });
  if (single_active_mode_ && !single_active_) single_active_ = consumer;
  list_.insert(at, std::move(consumer));
  Regroup();
}

void ConsumerSet::Remove(const std::shared_ptr<Consumer>& consumer) {
  auto it = std::find(list_.begin(), list_.end(), consumer);
  if (it == list_.end()) return;
  // The turn stays with the consumer that had it: one before it going moves it back by one.
  const size_t index = static_cast<size_t>(it - list_.begin());
  for (Group& group : groups_) {
    if (index >= group.begin && index < group.end && index - group.begin < group.cursor) {
      --group.cursor;
    }
  }
  list_.erase(it);
  if (single_active_ == consumer) {
    // RabbitMQ's choice: the highest priority waiting, the earliest subscribed of them.
    single_active_ = list_.empty() ? nullptr : list_.front();
  }
  Regroup();
}

void ConsumerSet::Regroup() {
  std::vector<Group> old = std::move(groups_);
  groups_.clear();
  for (size_t i = 0; i < list_.size(); ++i) {
    if (groups_.empty() || groups_.back().priority != list_[i]->priority) {
      groups_.push_back(Group{list_[i]->priority, i, i, 0});
    }
    groups_.back().end = i + 1;
  }
  // A priority's round-robin resumes where it was. Both lists run from the highest priority
  // down, so one walk matches them (consumers of many distinct priorities cost O(n), not n^2).
  auto was = old.begin();
  for (Group& group : groups_) {
    while (was != old.end() && was->priority > group.priority) ++was;
    if (was != old.end() && was->priority == group.priority) {
      group.cursor = was->cursor % (group.end - group.begin);
    }
  }
}

}  // namespace wharf::broker
