// Helpers shared by the integration tests (the real wharfd, client and wharfctl).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/test_server.h"

namespace wharf::testing {

// Runs wharfctl against `server` with `args`; returns stdout and stderr together.
inline std::string Ctl(const TestServer& server, const std::string& args, int* code) {
  return RunCommand(
      std::string(WHARFCTL_PATH) + " --server " + server.address() + " " + args + " 2>&1", code);
}

// Runs wharfctl against `server` with `args`; returns stdout alone (stderr goes to the test's
// log), for output a parser reads.
inline std::string CtlStdout(const TestServer& server, const std::string& args, int* code) {
  return RunCommand(std::string(WHARFCTL_PATH) + " --server " + server.address() + " " + args,
                    code);
}

// `text` parsed by a real JSON parser; a test failure (and null) when it is not JSON.
inline nlohmann::json ParseJson(const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "): " << text;
    return nullptr;
  }
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
