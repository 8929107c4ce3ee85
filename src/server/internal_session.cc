#include "server/internal_session.h"

#include <asio/post.hpp>
#include <atomic>
#include <utility>

#include "broker/broker.h"
#include "common/log_safe.h"

namespace wharf::server {
namespace {

constexpr uint64_t kInternalSessionBit = uint64_t{1} << 61;
std::atomic<uint64_t> next_internal_session{1};

}  // namespace

uint64_t NextInternalSessionId() {
  return kInternalSessionBit | next_internal_session.fetch_add(1);
}

Result<uint64_t> OpenInternalSession(const ServerContext& context, const std::string& vhost,
                                     const std::string& user) {
  if (!context.broker->HasVhost(vhost)) {
    return Status(StatusCode::kVhostNotFound, "vhost '" + CutForDisplay(vhost) + "' not found");
  }
  const uint64_t id = NextInternalSessionId();
  broker::SessionOptions options;
  options.vhost = vhost;
  options.amqp = true;  // RabbitMQ's rules for names and arguments
  options.internal = true;
  options.trusted = true;
  WHARF_RETURN_IF_ERROR(context.broker->OpenSession(
      id, "(" + user + ")", std::make_shared<InternalPeer>(), user, options));
  return id;
}

void WhenSynced(const ServerContext& context, std::function<void(const Status&)> answer) {
  auto session = OpenInternalSession(context, std::string(broker::kDefaultVhost), "sync");
  if (!session.ok()) return answer(session.status());  // "/" is never deleted: not reached
  const uint64_t id = *session;
  context.broker->AnswerWhenDurable(
      id, [context, id, answer = std::move(answer)](broker::SessionPeer&, const Status& status) {
        // Not from inside the broker's call into the session: closed once it returns.
        asio::post(*context.broker_context, [context, id] {
          context.broker->CloseSession(id);
          if (context.after_broker_work) context.after_broker_work();
        });
        answer(status);
      });
  if (context.after_broker_work) context.after_broker_work();
}

}  // namespace wharf::server
