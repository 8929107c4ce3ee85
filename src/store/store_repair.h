// store/store_repair.h
//
// `wharfd --repair` (docs/operations.md, "A corrupt store"): salvages every readable key of a
// damaged message store into a clean one. The damaged directory is kept, renamed
// `<store>.corrupt-<UTC time>`; nothing of the operator's data is deleted.
//
//   1. The store's LOCK is taken (a running wharfd holds it: refused).
//   2. The source is opened read-only with the logs replayed skipping damaged records. If it
//      cannot be opened at all (CURRENT or MANIFEST damaged, a table truncated), a working copy
//      is made beside it (tables hard-linked, the rest copied) and RocksDB's RepairDB rebuilds
//      its MANIFEST from the files (each of Wharf's column families without a table gets an
//      empty one first, or RepairDB would drop its log records); tables it cannot read whole
//      go to lost/ and their readable keys are salvaged one by one.
//   3. Every column family is read in key order with WalkReadable (store/store_check.h): a
//      damaged block loses its own keys, nothing after it, and never yields a wrong one.
//      What reads is written to a new store in `<store>.repair-<UTC time>`.
//   4. The highest message id is raised to the highest found (so new ids never collide), the
//      new store is synced and closed, and only then are the directories swapped.
//
// Thread safety: run alone, on a store no process has open.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "wharf/result.h"

namespace wharf::store {

struct RepairReport {
  std::string store;              // the repaired store (the same path as before)
  std::string set_aside;          // where the damaged store was moved
  bool rebuilt_manifest = false;  // RocksDB's RepairDB had to rebuild it (step 2)
  // Salvaged messages per queue name (entries), and delayed messages per queue name.
  std::map<std::string, uint64_t> messages;
  std::map<std::string, uint64_t> delayed;
  uint64_t keys = 0;                         // every key copied, of every column family
  std::vector<std::string> lost;             // what could not be read, one line each
  std::vector<std::string> files_set_aside;  // files RocksDB could not use at all
  // Queues made for salvaged messages whose queue record was lost (wharf.recovered.<id>).
  std::vector<std::string> recovered_queues;
  uint64_t deleted_leftovers = 0;  // entries of deleted queues: not salvaged, removed at start
};

// Repairs the store at `path` (docs/operations.md). On error nothing is renamed: the store
// is as it was (a half-built new store is removed), but for the last step's failures, which
// say where each store is.
Result<RepairReport> RepairStore(const std::string& path);

// When `path` holds no store (no CURRENT) but a finished repair of it waits beside it
// (`<path>.repair-*` with a CURRENT: the repair stopped between its two renames, on a file
// system that cannot exchange two names at once), says so, naming the directories; a start
// must not make a new, empty store there. Nullopt otherwise.
std::optional<std::string> InterruptedRepair(const std::string& path);

// The report as lines for the operator.
std::string FormatRepairReport(const RepairReport& report);

}  // namespace wharf::store
