// broker/broker_access.cc: the one place where a session's operations are checked against its
// user's rights (broker/access.h), for both protocols and every operator request.
#include <algorithm>

#include "broker/broker.h"

namespace wharf::broker {
namespace {

// The session's user's Access, taken again from `source` when its generation moved.
const Access* CurrentAccess(const AccessSource& source, SessionState& session) {
  const uint64_t generation = source.access_generation();
  if (!session.access || session.access_generation != generation) {
    session.access = source.AccessOf(session.user());
    session.access_generation = generation;
    session.allowed.clear();
  }
  return session.access.get();
}

}  // namespace

const Access* Broker::AccessOf(uint64_t session_id) {
  if (access_source_ == nullptr) return nullptr;
  SessionState* session = FindSession(session_id);
  return session == nullptr ? nullptr : CurrentAccess(*access_source_, *session);
}

Status Broker::Authorize(uint64_t session_id, Permission permission, ResourceKind kind,
                         std::string_view name) {
  thread_checker_.Check();
  if (access_source_ == nullptr) return Status::Ok();
  // One session lookup per check: this runs for every publish.
  SessionState* session = FindSession(session_id);
  if (session == nullptr || session->trusted()) return Status::Ok();
  const Access* access = CurrentAccess(*access_source_, *session);
  auto& allowed = session->allowed;
  auto cached = std::find_if(allowed.begin(), allowed.end(), [&](const auto& check) {
    return check.permission == permission && check.kind == kind && check.name == name;
  });
  if (cached != allowed.end()) return Status::Ok();
  // RabbitMQ checks the default exchange under the name amq.default.
  const std::string_view checked =
      kind == ResourceKind::kExchange && name.empty() ? std::string_view("amq.default") : name;
  Status s = access->Check(session->vhost(), permission, kind, checked);
  if (!s.ok()) return s;
  if (allowed.size() == SessionState::kAllowedChecks) allowed.erase(allowed.begin());
  allowed.push_back(SessionState::AllowedCheck{permission, kind, std::string(name)});
  return Status::Ok();
}

Status Broker::AuthorizeTag(uint64_t session_id, uint32_t any_of, std::string_view action) {
  thread_checker_.Check();
  const Access* access = AccessOf(session_id);
  if (access == nullptr) return Status::Ok();
  return access->CheckTag(any_of, action);
}

Status Broker::AuthorizeOperator(uint64_t session_id, std::string_view queue,
                                 std::string_view action) {
  WHARF_RETURN_IF_ERROR(AuthorizeTag(session_id, kAnyManagementTag, action));
  return Authorize(session_id, Permission::kRead, ResourceKind::kQueue, queue);
}

}  // namespace wharf::broker
