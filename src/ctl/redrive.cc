// wharfctl redrive, move, requeue and purge: long operations inside the broker, followed from here
// (docs/lifecycle.md, "Redrive"; docs/operations.md).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "ctl/ctl.h"

namespace wharf::ctl {

std::string RedriveJson(const wharf::RedriveInfo& r) {
  std::string targets = "{";
  for (size_t i = 0; i < r.targets.size(); ++i) {
    targets += (i ? "," : "") + JsonString(r.targets[i].queue) + ":" +
               std::to_string(r.targets[i].messages);
  }
  targets += "}";
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.1f", r.rate_per_second);
  return std::string("{\"queue\":") + JsonString(r.spec.queue) +
         ",\"to\":" + JsonString(r.spec.to) + ",\"reason\":" + JsonString(r.spec.reason) +
         ",\"limit\":" + std::to_string(r.spec.limit) + ",\"rate\":" + std::to_string(r.spec.rate) +
         ",\"dry_run\":" + (r.spec.dry_run ? "true" : "false") +
         ",\"state\":" + JsonString(std::string(wharf::RedriveStateName(r.state))) +
         ",\"detail\":" + JsonString(r.detail) +
         ",\"started_at_ms\":" + std::to_string(r.started_at_ms) +
         ",\"finished_at_ms\":" + std::to_string(r.finished_at_ms) +
         ",\"total\":" + std::to_string(r.total) + ",\"moved\":" + std::to_string(r.moved) +
         ",\"remaining\":" + std::to_string(r.remaining) +
         ",\"skipped_not_matching\":" + std::to_string(r.skipped_not_matching) +
         ",\"skipped_no_target\":" + std::to_string(r.skipped_no_target) +
         ",\"skipped_target_full\":" + std::to_string(r.skipped_target_full) +
         ",\"rate_per_second\":" + rate + ",\"targets\":" + targets + "}";
}

// "moved 1200 (orders 1200); left 3 not matching, 1 without a target queue".
std::string RedriveSummary(const wharf::RedriveInfo& r) {
  std::string out = (r.spec.dry_run ? "would move " : "moved ") + std::to_string(r.moved);
  if (!r.targets.empty()) {
    out += " (";
    for (size_t i = 0; i < r.targets.size(); ++i) {
      out += (i ? ", " : "") + r.targets[i].queue + " " + std::to_string(r.targets[i].messages);
    }
    out += ")";
  }
  std::string left;
  auto add = [&](uint64_t n, const char* why) {
    if (n == 0) return;
    left += (left.empty() ? "" : ", ") + std::to_string(n) + " " + why;
  };
  add(r.skipped_not_matching, "not matching");
  add(r.skipped_no_target, "without a target queue");
  add(r.skipped_target_full, "for full targets");
  if (!left.empty()) out += "; left " + left;
  return out;
}

// One progress line on stderr: "[#####.....] 1200/3000  400 msg/s".
void DrawProgress(uint64_t done, uint64_t all, const std::string& suffix) {
  const int width = 30;
  const int filled =
      all == 0 ? width : static_cast<int>(width * std::min<uint64_t>(done, all) / all);
  std::fprintf(stderr, "\r\033[K[%s%s] %llu/%llu%s", std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), static_cast<unsigned long long>(done),
               static_cast<unsigned long long>(all), suffix.c_str());
  std::fflush(stderr);
}

// Polls the queue's redrive until it is no longer running; on a terminal, one line shows how
// far it got.
wharf::Result<wharf::RedriveInfo> FollowRedrive(wharf::Client& client, const std::string& queue) {
  // The progress line goes to stderr, so that stdout stays the result alone (--json).
  const bool tty = isatty(STDERR_FILENO);
  while (true) {
    auto tasks = client.RedriveStatus(queue);
    if (!tasks.ok()) return tasks.status();
    if (tasks->empty()) {
      return wharf::Status(wharf::StatusCode::kPreconditionFailed,
                           "queue '" + queue + "' has no redrive");
    }
    const wharf::RedriveInfo& r = tasks->front();
    if (r.state != wharf::RedriveInfo::State::kRunning) {
      if (tty) std::fprintf(stderr, "\r\033[K");
      return r;
    }
    if (tty) {
      uint64_t done =
          r.moved + r.skipped_not_matching + r.skipped_no_target + r.skipped_target_full;
      char rate[48];
      std::snprintf(rate, sizeof rate, "  %.0f msg/s", r.rate_per_second);
      DrawProgress(done, done + r.remaining, rate);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(tty ? 250 : 100));
  }
}

// --limit and --rate into `spec` (left as they are when absent); the problem, or "".
std::string ReadLimitAndRate(const Args& args, wharf::RedriveSpec* spec) {
  auto number = [&](const char* name, uint64_t max) -> std::optional<uint64_t> {
    const std::string& text = args.options.at(name);
    if (text.empty() || text.size() > 19 ||
        text.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    uint64_t v = std::stoull(text);
    return v > max ? std::nullopt : std::optional<uint64_t>(v);
  };
  if (args.options.count("--limit")) {
    auto limit = number("--limit", UINT64_MAX);
    if (!limit) return "--limit needs a number of messages";
    spec->limit = *limit;
  }
  if (args.options.count("--rate")) {
    auto rate = number("--rate", 1'000'000);
    if (!rate || *rate == 0) return "--rate needs messages per second, 1 to 1000000";
    spec->rate = static_cast<uint32_t>(*rate);
  }
  return "";
}

int Redrive(wharf::Client& client, const Args& args) {
  const auto& p = args.positional;
  const bool json = args.flags.count("--json") > 0;
  if (p.empty()) return Usage("redrive needs DLQ, 'status [DLQ]' or 'cancel DLQ'");
  if (p[0] == "status" && p.size() <= 2) {
    auto tasks = client.RedriveStatus(p.size() == 2 ? p[1] : "");
    if (!tasks.ok()) return Refused(tasks.status());
    if (json) {
      std::string out = "[";
      for (size_t i = 0; i < tasks->size(); ++i)
        out += (i ? ",\n " : "") + RedriveJson((*tasks)[i]);
      std::puts((out + "]").c_str());
      return 0;
    }
    if (tasks->empty()) {
      std::puts(p.size() == 2 ? ("queue '" + p[1] + "' has had no redrive").c_str()
                              : "no redrives");
      return 0;
    }
    std::printf("%-24s %-10s %10s %10s %8s  %-24s %s\n", "QUEUE", "STATE", "MOVED", "REMAINING",
                "MSG/S", "STARTED (UTC)", "DETAIL");
    for (const auto& r : *tasks) {
      std::string state(wharf::RedriveStateName(r.state));
      if (r.spec.dry_run) state += "*";
      std::printf("%-24s %-10s %10llu %10llu %8.0f  %-24s %s\n", r.spec.queue.c_str(),
                  state.c_str(), static_cast<unsigned long long>(r.moved),
                  static_cast<unsigned long long>(r.remaining), r.rate_per_second,
                  FormatTime(r.started_at_ms).c_str(), RedriveSummary(r).c_str());
    }
    return 0;
  }
  if ((p[0] == "status" || p[0] == "cancel") && p.size() > 2) {
    return Usage("redrive " + p[0] + " takes one DLQ");
  }
  if (p[0] == "cancel" && p.size() != 2) return Usage("redrive cancel needs DLQ");
  if (p[0] == "cancel") {
    auto task = client.CancelRedrive(p[1]);
    if (!task.ok()) return Refused(task.status());
    if (json) {
      std::puts(RedriveJson(*task).c_str());
    } else {
      std::printf("redrive of '%s' cancelled: %s\n", p[1].c_str(), RedriveSummary(*task).c_str());
    }
    return 0;
  }
  size_t at = p[0] == "start" ? 1 : 0;
  if (p.size() != at + 1) return Usage("redrive needs one DLQ");
  wharf::RedriveSpec spec;
  spec.queue = p[at];
  if (args.options.count("--to")) spec.to = args.options.at("--to");
  if (args.options.count("--reason")) spec.reason = args.options.at("--reason");
  if (std::string error = ReadLimitAndRate(args, &spec); !error.empty()) return Usage(error);
  spec.dry_run = args.flags.count("--dry-run") > 0;
  auto started = client.StartRedrive(spec);
  if (!started.ok()) return Refused(started.status());
  if (!spec.dry_run && !args.flags.count("--follow")) {
    if (json) {
      std::puts(RedriveJson(*started).c_str());
    } else {
      std::printf(
          "redrive of '%s' started: %llu ready, to %s, at most %u per second\n"
          "follow it with: wharfctl redrive status %s\n",
          spec.queue.c_str(), static_cast<unsigned long long>(started->total),
          spec.to.empty() ? "the queue each message died in" : ("'" + spec.to + "'").c_str(),
          started->spec.rate, spec.queue.c_str());
    }
    return 0;
  }
  auto done = FollowRedrive(client, spec.queue);
  if (!done.ok()) return Refused(done.status());
  if (json) {
    std::puts(RedriveJson(*done).c_str());
  } else {
    std::printf("redrive of '%s'%s %s: %s\n", spec.queue.c_str(), spec.dry_run ? " (dry run)" : "",
                std::string(wharf::RedriveStateName(done->state)).c_str(),
                RedriveSummary(*done).c_str());
  }
  return done->state == wharf::RedriveInfo::State::kFinished ? 0 : 1;
}

// `wharfctl move SRC --to DST` and `wharfctl requeue QUEUE ID`: a redrive to a named queue
// (every ready message, or one by id), followed to its end.
// `wharfctl purge QUEUE`: the queue is empty when the broker answers; a large purge's
// messages are then removed from the disk in the background, which this follows to the end
// (a progress bar on a terminal) unless --no-wait.
int Purge(wharf::Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("purge needs QUEUE");
  const std::string& queue = args.positional[0];
  auto purged = client.PurgeQueue(queue);
  if (!purged.ok()) return Refused(purged.status());
  const bool wait = !args.flags.count("--no-wait");
  const bool tty = isatty(STDERR_FILENO);
  uint64_t reclaiming = 0, total = 0;
  // A store that cannot write (a full disk) stops the removal: say so rather than wait forever.
  constexpr auto kStalled = std::chrono::seconds(15);
  auto progressed_at = std::chrono::steady_clock::now();
  bool stalled = false;
  while (true) {
    auto queues = client.ListQueues(queue);
    if (!queues.ok()) return Refused(queues.status());
    auto it = std::find_if(queues->begin(), queues->end(),
                           [&](const wharf::QueueInfo& q) { return q.name == queue; });
    const uint64_t now_reclaiming = it == queues->end() ? 0 : it->purge_reclaiming;  // deleted
    if (now_reclaiming != reclaiming) progressed_at = std::chrono::steady_clock::now();
    reclaiming = now_reclaiming;
    total = std::max(total, reclaiming);
    if (!wait || reclaiming == 0) break;
    if (std::chrono::steady_clock::now() - progressed_at > kStalled) {
      stalled = true;
      break;
    }
    if (tty) DrawProgress(total - reclaiming, total, "  removed from disk");
    std::this_thread::sleep_for(std::chrono::milliseconds(tty ? 250 : 100));
  }
  if (tty && wait && total > 0) std::fprintf(stderr, "\r\033[K");
  if (stalled) {
    std::fprintf(stderr,
                 "wharfctl: the removal from the disk made no progress for %llds (see wharfd's "
                 "log: can the store write?); it goes on in the broker\n",
                 static_cast<long long>(kStalled.count()));
  }
  if (args.flags.count("--json")) {
    std::printf("{\"queue\":%s,\"purged\":%llu,\"purge_reclaiming\":%llu}\n",
                JsonString(queue).c_str(), static_cast<unsigned long long>(*purged),
                static_cast<unsigned long long>(reclaiming));
  } else if (reclaiming > 0) {
    std::printf("purged %llu messages from '%s' (%llu still being removed from the disk)\n",
                static_cast<unsigned long long>(*purged), queue.c_str(),
                static_cast<unsigned long long>(reclaiming));
  } else {
    std::printf("purged %llu messages from '%s'\n", static_cast<unsigned long long>(*purged),
                queue.c_str());
  }
  return 0;
}

int MoveMessages(wharf::Client& client, const Args& args, bool one) {
  const auto& p = args.positional;
  if (one ? p.size() != 2 : p.size() != 1) {
    return Usage(one ? "requeue needs QUEUE ID" : "move needs SRC (and --to DST)");
  }
  wharf::RedriveSpec spec;
  spec.queue = p[0];
  if (args.options.count("--to")) spec.to = args.options.at("--to");
  if (one) {
    auto id = ParseMessageId(p[1]);
    if (!id) return Usage("message id '" + p[1] + "' is not a hex id like 0190a3c5e2f40001");
    spec.message_id = *id;
    spec.limit = 1;
  } else if (spec.to.empty()) {
    return Usage("move needs --to DST");
  }
  // An operator's move goes as fast as the broker allows, unless --rate says otherwise.
  if (!one) spec.rate = 100'000;
  if (std::string error = ReadLimitAndRate(args, &spec); !error.empty()) return Usage(error);
  if (one) spec.limit = 1;
  auto started = client.StartRedrive(spec);
  if (!started.ok()) return Refused(started.status());
  auto done = FollowRedrive(client, spec.queue);
  if (!done.ok()) return Refused(done.status());
  if (args.flags.count("--json")) {
    std::puts(RedriveJson(*done).c_str());
  } else if (!one) {
    std::printf("%s from '%s' to '%s': %s\n",
                std::string(wharf::RedriveStateName(done->state)).c_str(), spec.queue.c_str(),
                spec.to.c_str(), RedriveSummary(*done).c_str());
  }
  if (one) {
    if (done->moved != 1) {
      std::fprintf(stderr,
                   "wharfctl: message %016llx is not ready in queue '%s' (in flight, delayed, "
                   "settled, or never there)%s\n",
                   static_cast<unsigned long long>(spec.message_id), spec.queue.c_str(),
                   done->skipped_no_target > 0 ? ", or it has no queue to go back to (--to)" : "");
      return 1;
    }
    if (!args.flags.count("--json")) {
      std::printf("message %016llx requeued from '%s' to '%s'\n",
                  static_cast<unsigned long long>(spec.message_id), spec.queue.c_str(),
                  done->targets.empty() ? "?" : done->targets[0].queue.c_str());
    }
  }
  return done->state == wharf::RedriveInfo::State::kFinished ? 0 : 1;
}

}  // namespace wharf::ctl
