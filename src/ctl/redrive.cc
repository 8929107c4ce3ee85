// wharfctl redrive, move, requeue and purge: long operations inside the broker, followed from here
// (docs/lifecycle.md, "Redrive"; docs/operations.md).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ctl/ctl.h"
#include "ctl/json.h"

namespace wharf::ctl {
namespace {

// "moved 1200 (orders 1200); left 3 not matching, 1 without a target queue".
std::string RedriveSummary(const wharf::RedriveInfo& r) {
  std::string out = (r.spec.dry_run ? "would move " : "moved ") + std::to_string(r.moved);
  if (!r.targets.empty()) {
    out += " (";
    for (size_t i = 0; i < r.targets.size(); ++i) {
      out += (i ? ", " : "") + Printable(r.targets[i].queue) + " " +
             std::to_string(r.targets[i].messages);
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

struct RedriveOptions {
  std::string queue, to, reason, id;
  uint64_t limit = 0;
  uint32_t rate = 0;
  bool dry_run = false, follow = false, json = false, no_wait = false;
};

int PrintRedrives(const std::vector<RedriveInfo>& tasks, const std::string& queue, bool json) {
  if (json) {
    Json out = Json::array();
    for (const RedriveInfo& r : tasks) out.push_back(RedriveJson(r));
    return PrintJson(out);
  }
  if (tasks.empty()) {
    std::puts(queue.empty() ? "no redrives"
                            : ("queue '" + Printable(queue) + "' has had no redrive").c_str());
    return kExitOk;
  }
  std::printf("%-24s %-10s %10s %10s %8s  %-24s %s\n", "QUEUE", "STATE", "MOVED", "REMAINING",
              "MSG/S", "STARTED (UTC)", "DETAIL");
  for (const RedriveInfo& r : tasks) {
    std::string state(RedriveStateName(r.state));
    if (r.spec.dry_run) state += "*";
    std::printf("%-24s %-10s %10llu %10llu %8.0f  %-24s %s\n", Printable(r.spec.queue).c_str(),
                state.c_str(), static_cast<unsigned long long>(r.moved),
                static_cast<unsigned long long>(r.remaining), r.rate_per_second,
                FormatTime(r.started_at_ms).c_str(), RedriveSummary(r).c_str());
  }
  return kExitOk;
}

int StartRedrive(Client& client, const RedriveOptions& o) {
  RedriveSpec spec;
  spec.queue = o.queue;
  spec.to = o.to;
  spec.reason = o.reason;
  spec.limit = o.limit;
  spec.rate = o.rate;
  spec.dry_run = o.dry_run;
  auto started = client.StartRedrive(spec);
  if (!started.ok()) return Refused(started.status());
  if (!spec.dry_run && !o.follow) {
    if (o.json) return PrintJson(RedriveJson(*started));
    std::printf(
        "redrive of '%s' started: %llu ready, to %s, at most %u per second\n"
        "follow it with: wharfctl redrive status %s\n",
        Printable(spec.queue).c_str(), static_cast<unsigned long long>(started->total),
        spec.to.empty() ? "the queue each message died in"
                        : ("'" + Printable(spec.to) + "'").c_str(),
        started->spec.rate, Printable(spec.queue).c_str());
    return kExitOk;
  }
  auto done = FollowRedrive(client, spec.queue);
  if (!done.ok()) return Refused(done.status());
  int rc = done->state == RedriveInfo::State::kFinished ? kExitOk : kExitRefused;
  if (o.json) return PrintJson(RedriveJson(*done)) == kExitOk ? rc : kExitRefused;
  std::printf("redrive of '%s'%s %s: %s\n", Printable(spec.queue).c_str(),
              spec.dry_run ? " (dry run)" : "", std::string(RedriveStateName(done->state)).c_str(),
              RedriveSummary(*done).c_str());
  return rc;
}

// `wharfctl move SRC --to DST` and `wharfctl requeue QUEUE ID`: a redrive to a named queue
// (every ready message, or one by id), followed to its end.
int MoveMessages(Client& client, const RedriveOptions& o, bool one) {
  RedriveSpec spec;
  spec.queue = o.queue;
  spec.to = o.to;
  spec.limit = o.limit;
  // An operator's move goes as fast as the broker allows, unless --rate says otherwise.
  spec.rate = o.rate ? o.rate : (one ? 0 : 100'000);
  if (one) {
    auto id = ParseMessageId(o.id);
    if (!id) return Usage("message id '" + o.id + "' is not a hex id like 0190a3c5e2f40001");
    spec.message_id = *id;
    spec.limit = 1;
  }
  auto started = client.StartRedrive(spec);
  if (!started.ok()) return Refused(started.status());
  auto done = FollowRedrive(client, spec.queue);
  if (!done.ok()) return Refused(done.status());
  int rc = done->state == RedriveInfo::State::kFinished ? kExitOk : kExitRefused;
  if (one && done->moved != 1) {
    std::fprintf(stderr,
                 "wharfctl: message %s is not ready in queue '%s' (in flight, delayed, settled, "
                 "or never there)%s\n",
                 HexId(spec.message_id).c_str(), Printable(spec.queue).c_str(),
                 done->skipped_no_target > 0 ? ", or it has no queue to go back to (--to)" : "");
    rc = kExitRefused;
  }
  if (o.json) return PrintJson(RedriveJson(*done)) == kExitOk ? rc : kExitRefused;
  if (!one) {
    std::printf("%s from '%s' to '%s': %s\n", std::string(RedriveStateName(done->state)).c_str(),
                Printable(spec.queue).c_str(), Printable(spec.to).c_str(),
                RedriveSummary(*done).c_str());
  } else if (rc == kExitOk) {
    std::printf("message %s requeued from '%s' to '%s'\n", HexId(spec.message_id).c_str(),
                Printable(spec.queue).c_str(),
                done->targets.empty() ? "?" : Printable(done->targets[0].queue).c_str());
  }
  return rc;
}

// `wharfctl purge QUEUE`: the queue is empty, and the purge synced to disk, when the broker
// answers; the purged messages are then removed from the disk in the background, which this
// follows to the end (a progress bar on a terminal) unless --no-wait.
int Purge(Client& client, const RedriveOptions& o) {
  const std::string& queue = o.queue;
  auto purged = client.PurgeQueue(queue);
  if (!purged.ok()) return Refused(purged.status());
  const bool wait = !o.no_wait;
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
                           [&](const QueueInfo& q) { return q.name == queue; });
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
  if (o.json) {
    return PrintJson(Json{{"queue", queue}, {"purged", *purged}, {"purge_reclaiming", reclaiming}});
  }
  if (reclaiming > 0) {
    std::printf("purged %llu messages from '%s' (%llu still being removed from the disk)\n",
                static_cast<unsigned long long>(*purged), Printable(queue).c_str(),
                static_cast<unsigned long long>(reclaiming));
  } else {
    std::printf("purged %llu messages from '%s'\n", static_cast<unsigned long long>(*purged),
                Printable(queue).c_str());
  }
  return kExitOk;
}

// --limit and --rate, as redrive, move and requeue take them.
void AddLimitAndRate(CLI::App* command, RedriveOptions* o) {
  command->add_option("--limit", o->limit, "move at most N messages")
      ->check(Unsigned(1, UINT64_MAX));
  command->add_option("--rate", o->rate, "at most N messages per second")
      ->check(Unsigned(1, 1'000'000));
}

}  // namespace

void AddRedriveCommands(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<RedriveOptions>();
  const char* kReasons = "rejected, max_attempts, expired or max_length";

  CLI::App* redrive = app.add_subcommand(
      "redrive",
      "move a dead-letter queue's messages back to the queue each died in (or to --to), at a "
      "rate (default 1000/s); 'redrive start DLQ' for a queue named status or cancel");
  redrive->add_option("dlq", o->queue, "the dead-letter queue");
  auto add_start_options = [&](CLI::App* c) {
    c->add_option("--to", o->to, "move every message to this queue instead");
    c->add_option("--reason", o->reason, "only messages whose last death was this")
        ->check(CLI::IsMember({"rejected", "max_attempts", "expired", "max_length"}))
        ->description(std::string("only messages whose last death was: ") + kReasons);
    AddLimitAndRate(c, o.get());
    c->add_flag("--dry-run", o->dry_run, "count what would move, move nothing");
    c->add_flag("--follow", o->follow, "show it to the end");
    c->add_flag("--json", o->json, "print the redrive as JSON");
  };
  add_start_options(redrive);
  redrive->callback([o, redrive]() {
    if (redrive->get_subcommands().empty() && o->queue.empty()) {
      throw CLI::ValidationError("redrive needs DLQ, 'status [DLQ]' or 'cancel DLQ'");
    }
  });
  commands.OnBroker(redrive, [o](Client& client) { return StartRedrive(client, *o); });
  CLI::App* start = redrive->add_subcommand("start", "the same as redrive DLQ");
  start->add_option("dlq", o->queue, "the dead-letter queue")->required();
  add_start_options(start);
  commands.OnBroker(start, [o](Client& client) { return StartRedrive(client, *o); });
  CLI::App* status =
      redrive->add_subcommand("status", "the last redrive of DLQ, or of every queue");
  status->add_option("dlq", o->queue, "the dead-letter queue");
  status->add_flag("--json", o->json, "as JSON");
  commands.OnBroker(status, [o](Client& client) {
    auto tasks = client.RedriveStatus(o->queue);
    if (!tasks.ok()) return Refused(tasks.status());
    return PrintRedrives(*tasks, o->queue, o->json);
  });
  CLI::App* cancel =
      redrive->add_subcommand("cancel", "stop a running redrive (what moved stays moved)");
  cancel->add_option("dlq", o->queue, "the dead-letter queue")->required();
  cancel->add_flag("--json", o->json, "as JSON");
  commands.OnBroker(cancel, [o](Client& client) {
    auto task = client.CancelRedrive(o->queue);
    if (!task.ok()) return Refused(task.status());
    if (o->json) return PrintJson(RedriveJson(*task));
    std::printf("redrive of '%s' cancelled: %s\n", Printable(o->queue).c_str(),
                RedriveSummary(*task).c_str());
    return kExitOk;
  });

  CLI::App* move = app.add_subcommand(
      "move",
      "move SRC's ready messages to DST in order, inside the broker (exactly once, "
      "survives restarts; shows progress)");
  move->add_option("src", o->queue, "the queue to empty")->required();
  move->add_option("--to", o->to, "the queue they go to")->required();
  AddLimitAndRate(move, o.get());
  move->add_flag("--json", o->json, "print the result as JSON");
  commands.OnBroker(move, [o](Client& client) { return MoveMessages(client, *o, false); });

  CLI::App* requeue = app.add_subcommand(
      "requeue", "move one ready message by id back to the queue it died in, or to --to");
  requeue->add_option("queue", o->queue, "the queue it is in")->required();
  requeue->add_option("id", o->id, "its id, in hex")->required()->check(MessageIdText());
  requeue->add_option("--to", o->to, "the queue it goes to");
  requeue->add_flag("--json", o->json, "print the result as JSON");
  commands.OnBroker(requeue, [o](Client& client) { return MoveMessages(client, *o, true); });

  CLI::App* purge = app.add_subcommand(
      "purge",
      "remove QUEUE's ready and delayed messages (not those in flight); waits while a "
      "large purge is removed from the disk, with a progress bar on a terminal");
  purge->alias("purge-queue");
  purge->add_option("queue", o->queue, "the queue")->required();
  purge->add_flag("--no-wait", o->no_wait, "answer once the queue is empty, not when the disk is");
  purge->add_flag("--json", o->json, "print the result as JSON");
  commands.OnBroker(purge, [o](Client& client) { return Purge(client, *o); });
}

}  // namespace wharf::ctl
