// Helpers shared by the integration tests (the real wharfd, client and wharfctl).
#pragma once

#include <string>

#include "support/test_server.h"

namespace wharf::testing {

// Runs wharfctl against `server` with `args`; returns stdout and stderr together.
inline std::string Ctl(const TestServer& server, const std::string& args, int* code) {
  return RunCommand(
      std::string(WHARFCTL_PATH) + " --server " + server.address() + " " + args + " 2>&1", code);
}

// Declares `dlq` and `queue`, which dead-letters into it (both durable).
inline void DeclareWithDeadLetterQueue(Client& client, const std::string& queue,
                                       const std::string& dlq) {
  QueueSpec d;
  d.name = dlq;
  d.durable = true;
  Status s = client.DeclareQueue(d).status();
  if (!s.ok()) ADD_FAILURE() << s.ToString();
  QueueSpec q;
  q.name = queue;
  q.durable = true;
  q.arguments["x-dead-letter-queue"] = dlq;
  s = client.DeclareQueue(q).status();
  if (!s.ok()) ADD_FAILURE() << s.ToString();
}

}  // namespace wharf::testing
