#include "server/native_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/log_safe.h"
#include "server/definitions.h"
#include "wharf/version.h"

namespace wharf::server {
namespace wire = protocol::wire;

Status NativeSession::Open(std::string peer, std::string vhost, std::string client_name) {
  broker::SessionOptions options;
  options.connection.client = std::move(client_name);
  options.vhost = vhost;
  vhost_ = std::move(vhost);
  Status opened =
      context_->broker->OpenSession(id_, user_, shared_from_this(), std::move(peer), options);
  opened_ = opened.ok();
  return opened;
}

void NativeSession::Execute(std::vector<NativeRequest>& batch) {
  if (opened_) {
    for (NativeRequest& request : batch) HandleRequest(request);
  }
  core_->EndBatch();
}

void NativeSession::Reply(uint64_t request_id, wire::Frame frame) {
  if (request_id == 0) return;
  frame.set_request_id(request_id);
  core_->Add(0, std::move(frame));
}

void NativeSession::ReplyWhenDurable(uint64_t request_id, wire::Frame frame) {
  if (frame.body_case() == wire::Frame::BODY_NOT_SET) frame.mutable_ok();
  context_->broker->AnswerWhenDurable(
      id_, [request_id, frame = std::move(frame)](broker::SessionPeer& peer,
                                                  const Status& status) mutable {
        auto& session = static_cast<NativeSession&>(peer);
        if (!status.ok()) return session.ReplyStatus(request_id, status);
        session.Reply(request_id, std::move(frame));
      });
}

void NativeSession::ReplyStatus(uint64_t request_id, const Status& status) {
  if (!status.ok()) {
    spdlog::debug("conn={} user={} request {} failed: {}", id_, LogSafe(user_), request_id,
                  LogSafe(status.ToString(), kLogSafeStatusBytes));
    core_->Add(0, protocol::ErrorFrame(request_id, status));
    return;
  }
  wire::Frame frame;
  frame.mutable_ok();
  Reply(request_id, std::move(frame));
}

void NativeSession::HandleRequest(NativeRequest& request) {
  broker::Broker& broker = *context_->broker;
  const uint64_t rid = request.request_id;
  if (!request.early_error.ok()) return ReplyStatus(rid, request.early_error);
  wire::Frame& frame = request.frame;
  wire::Frame reply;
  switch (frame.body_case()) {
    case wire::Frame::kPing:
      // Answered here, in order, so a Pong means every earlier request has run.
      reply.mutable_pong()->set_nonce(frame.ping().nonce());
      reply.set_request_id(rid);
      core_->Add(0, std::move(reply));
      return;
    case wire::Frame::kPublish: {
      const auto& publish = frame.publish();
      auto outcome =
          broker.Publish(id_, publish.exchange(), publish.routing_key(), std::move(request.message),
                         rid, broker::PublishTiming{publish.delay_ms(), publish.deliver_at_ms()},
                         publish.deduplication_id());
      if (!outcome.ok()) return ReplyStatus(rid, outcome.status());
      if (outcome->deferred) return;  // PublishDone answers once it is on disk
      if (publish.mandatory() && outcome->result.routed_queues == 0) {
        wire::Frame returned;
        auto* r = returned.mutable_returned();
        r->set_publish_request_id(rid);
        r->set_reason_code(wire::NO_ROUTE);
        r->set_reason("message reached no queue");
        r->set_exchange(publish.exchange());
        r->set_routing_key(publish.routing_key());
        protocol::ToWire(outcome->envelope->message, r->mutable_message());
        core_->Add(0, std::move(returned));
      }
      reply.mutable_publish_ok()->set_message_id(outcome->result.message_id);
      reply.mutable_publish_ok()->set_routed_queues(outcome->result.routed_queues);
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kAck: {
      Status s = broker.Ack(id_, frame.ack().delivery_tag(), frame.ack().multiple());
      return ReplyStatus(rid, s);
    }
    case wire::Frame::kNack: {
      const auto& nack = frame.nack();
      broker::Broker::NackOptions options;
      options.requeue = nack.requeue();
      options.delay_ms = nack.delay_ms();
      options.immediate = nack.immediate();
      options.error = nack.error();
      return ReplyStatus(rid, broker.Nack(id_, nack.delivery_tag(), nack.multiple(), options));
    }
    case wire::Frame::kReject: {
      const auto& reject = frame.reject();
      broker::Broker::NackOptions options;
      options.requeue = reject.requeue();
      options.error = reject.error();
      return ReplyStatus(rid, broker.Nack(id_, reject.delivery_tag(), false, options));
    }
    case wire::Frame::kExtendLease: {
      const auto& extend = frame.extend_lease();
      return ReplyStatus(rid, broker.ExtendLease(id_, extend.delivery_tag(), extend.lease_ms()));
    }
    case wire::Frame::kListDelayed: {
      const auto& list = frame.list_delayed();
      // The answer comes through ListDelayedDone.
      Status s = broker.ListDelayed(id_, rid, list.queue(), list.after_deliver_at_ms(),
                                    list.after_message_id(), list.limit());
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kCancelDelayed: {
      const auto& cancel = frame.cancel_delayed();
      Status s = broker.CancelDelayed(id_, rid, cancel.queue(), cancel.message_id());
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kPeek: {
      const auto& peek = frame.peek();
      // The answer comes through PeekDone.
      Status s = broker.Peek(id_, rid, peek.queue(), peek.after_position(), peek.limit(),
                             peek.with_body());
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kStartRedrive: {
      const auto& start = frame.start_redrive();
      // The answer comes through RedriveDone.
      Status s = broker.StartRedrive(id_, rid, protocol::FromWire(start));
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kCancelRedrive: {
      Status s = broker.CancelRedrive(id_, rid, frame.cancel_redrive().queue());
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kRedriveStatus: {
      auto tasks = broker.RedriveStatus(id_, frame.redrive_status().queue());
      if (!tasks.ok()) return ReplyStatus(rid, tasks.status());
      auto* ok = reply.mutable_redrive_status_ok();
      for (const RedriveInfo& info : *tasks) protocol::ToWire(info, ok->add_tasks());
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kSubscribe: {
      const auto& sub = frame.subscribe();
      auto tag =
          broker.Subscribe(id_, sub.queue(), sub.consumer_tag(), sub.prefetch(), sub.exclusive(),
                           sub.lease_ms(), /*auto_ack=*/false, sub.priority());
      if (!tag.ok()) return ReplyStatus(rid, tag.status());
      reply.mutable_subscribe_ok()->set_consumer_tag(*tag);
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kCancel:
      return ReplyStatus(rid, broker.Cancel(id_, frame.cancel().consumer_tag()));
    case wire::Frame::kReceive: {
      const auto& receive = frame.receive();
      Status s = broker.Receive(id_, rid, receive.queue(), receive.max_messages(),
                                receive.wait_ms(), receive.lease_ms());
      if (!s.ok()) ReplyStatus(rid, s);
      return;
    }
    case wire::Frame::kDeclareExchange: {
      std::optional<ExchangeType> type;
      ExchangeSpec spec = protocol::FromWire(frame.declare_exchange(), &type);
      if (!type && !spec.passive) {
        return ReplyStatus(rid, Status(StatusCode::kInvalidArgument,
                                       "exchange type must be direct, fanout, topic or headers"));
      }
      Status declared = broker.DeclareExchange(id_, spec);
      if (!declared.ok() || spec.passive || !spec.durable) return ReplyStatus(rid, declared);
      return ReplyWhenDurable(rid);
    }
    case wire::Frame::kDeleteExchange: {
      broker.TakeDurableTopologyChange();
      Status deleted = broker.DeleteExchange(id_, frame.delete_exchange().name(),
                                             frame.delete_exchange().if_unused());
      if (!deleted.ok() || !broker.TakeDurableTopologyChange()) return ReplyStatus(rid, deleted);
      return ReplyWhenDurable(rid);
    }
    case wire::Frame::kDeclareQueue: {
      auto spec = protocol::FromWire(frame.declare_queue());
      if (!spec.ok()) return ReplyStatus(rid, spec.status());
      const bool stored = spec->durable && !spec->exclusive && !spec->passive;
      auto info = broker.DeclareQueue(id_, std::move(*spec));
      if (!info.ok()) return ReplyStatus(rid, info.status());
      auto* ok = reply.mutable_declare_queue_ok();
      ok->set_name(info->name);
      ok->set_ready(info->ready);
      ok->set_in_flight(info->in_flight);
      ok->set_consumers(info->consumers);
      if (stored) return ReplyWhenDurable(rid, std::move(reply));
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kDeleteQueue: {
      const auto& d = frame.delete_queue();
      // On OK the answer comes through DeleteQueueDone, once the deletion is on disk.
      auto n = broker.DeleteQueue(id_, d.name(), d.if_unused(), d.if_empty(), rid);
      if (!n.ok()) return ReplyStatus(rid, n.status());
      return;
    }
    case wire::Frame::kPurgeQueue: {
      // On OK the answer comes through PurgeDone, once the purge is on disk.
      auto n = broker.PurgeQueue(id_, frame.purge_queue().name(), rid);
      if (!n.ok()) return ReplyStatus(rid, n.status());
      return;
    }
    case wire::Frame::kBind:
    case wire::Frame::kUnbind: {
      bool bind = frame.body_case() == wire::Frame::kBind;
      auto spec = bind ? protocol::FromWire(frame.bind()) : protocol::FromWire(frame.unbind());
      if (!spec.ok()) return ReplyStatus(rid, spec.status());
      broker.TakeDurableTopologyChange();
      Status changed = bind ? broker.Bind(id_, *spec) : broker.Unbind(id_, *spec);
      if (!changed.ok() || !broker.TakeDurableTopologyChange()) return ReplyStatus(rid, changed);
      return ReplyWhenDurable(rid);
    }
    case wire::Frame::kListQueues: {
      if (Status s = broker.AuthorizeTag(id_, broker::kAnyManagementTag, "list queues"); !s.ok()) {
        return ReplyStatus(rid, s);
      }
      auto* ok = reply.mutable_list_queues_ok();
      for (const auto& info : broker.ListQueues(frame.list_queues().prefix(), vhost_)) {
        protocol::ToWire(info, ok->add_queues());
      }
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kListConnections: {
      if (Status s = broker.AuthorizeTag(id_, broker::kAnyManagementTag, "list connections");
          !s.ok()) {
        return ReplyStatus(rid, s);
      }
      // As RabbitMQ's management tags: monitoring and administrator see every connection,
      // the others their own.
      const broker::Access* access = broker.AccessOf(id_);
      const bool all = access == nullptr || access->HasTag(broker::kMonitoringTags);
      auto* ok = reply.mutable_list_connections_ok();
      for (const ConnectionInfo& c : broker.ListConnections()) {
        if (all || c.user == user_) protocol::ToWire(c, ok->add_connections());
      }
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kListConsumers: {
      if (Status s = broker.AuthorizeTag(id_, broker::kAnyManagementTag, "list consumers");
          !s.ok()) {
        return ReplyStatus(rid, s);
      }
      auto* ok = reply.mutable_list_consumers_ok();
      for (const ConsumerInfo& c : broker.ListConsumers(frame.list_consumers().queue(), vhost_)) {
        protocol::ToWire(c, ok->add_consumers());
      }
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kListBindings: {
      if (Status s = broker.AuthorizeTag(id_, broker::kAnyManagementTag, "list bindings");
          !s.ok()) {
        return ReplyStatus(rid, s);
      }
      auto* ok = reply.mutable_list_bindings_ok();
      const auto& list = frame.list_bindings();
      for (const BindingSpec& b : broker.ListBindings(list.exchange(), list.queue(), vhost_)) {
        protocol::ToWire(b, ok->add_bindings());
      }
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kListExchanges: {
      if (Status s = broker.AuthorizeTag(id_, broker::kAnyManagementTag, "list exchanges");
          !s.ok()) {
        return ReplyStatus(rid, s);
      }
      auto* ok = reply.mutable_list_exchanges_ok();
      for (const auto& info : broker.ListExchanges(vhost_)) {
        protocol::ToWire(info, ok->add_exchanges());
      }
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kPutUser:
    case wire::Frame::kDeleteUser:
    case wire::Frame::kListUsers:
    case wire::Frame::kSetUserLimits:
    case wire::Frame::kSetUserTags:
    case wire::Frame::kSetPermissions:
    case wire::Frame::kClearPermissions:
      return HandleUserRequest(rid, frame);
    case wire::Frame::kBackup:
      return HandleBackup(rid, frame.backup().directory());
    case wire::Frame::kAddVhost:
    case wire::Frame::kDeleteVhost:
    case wire::Frame::kSetVhostLimits:
    case wire::Frame::kListVhosts:
      return HandleVhostRequest(rid, frame);
    case wire::Frame::kSetPolicy:
    case wire::Frame::kClearPolicy:
    case wire::Frame::kListPolicies:
      return HandlePolicyRequest(rid, frame);
    case wire::Frame::kExportDefinitions:
    case wire::Frame::kImportDefinitions:
      return HandleDefinitionsRequest(rid, frame);
    default:
      return ReplyStatus(rid, Status(StatusCode::kInternal, "unhandled request kind"));
  }
}

void NativeSession::HandleUserRequest(uint64_t rid, const wire::Frame& frame) {
  UserDirectory& users = *context_->users;
  if (Status s = context_->broker->AuthorizeTag(id_, broker::kTagAdministrator, "manage users");
      !s.ok()) {
    spdlog::warn("conn={} user={} user request refused: {}", id_, LogSafe(user_),
                 LogSafe(s.message()));
    return ReplyStatus(rid, s);
  }
  if (frame.body_case() == wire::Frame::kListUsers) {
    wire::Frame reply;
    for (const UserInfo& info : users.List()) {
      protocol::ToWire(info, reply.mutable_list_users_ok()->add_users());
    }
    return Reply(rid, std::move(reply));
  }
  auto change = UserChangeOf(frame);
  if (!change.ok()) return ReplyStatus(rid, change.status());
  ChangeUser(*context_, std::move(*change), Actor(),
             [self = shared_from_this(), rid](const UserChangeDone& done) {
               self->ReplyLater(rid, done.status);
             });
}

Result<UserChange> NativeSession::UserChangeOf(const wire::Frame& frame) const {
  UserChange change;
  switch (frame.body_case()) {
    case wire::Frame::kPutUser:
      change.kind = UserChange::Kind::kPut;
      change.name = frame.put_user().name();
      change.password_hash = frame.put_user().password_hash();
      change.admin = frame.put_user().admin();
      break;
    case wire::Frame::kDeleteUser:
      change.kind = UserChange::Kind::kDelete;
      change.name = frame.delete_user().name();
      break;
    case wire::Frame::kSetUserLimits: {
      const auto& set = frame.set_user_limits();
      change.kind = UserChange::Kind::kLimits;
      change.name = set.name();
      if (set.has_max_connections()) change.max_connections = set.max_connections();
      if (set.has_max_channels()) change.max_channels = set.max_channels();
      break;
    }
    case wire::Frame::kSetUserTags: {
      const auto& set = frame.set_user_tags();
      change.kind = UserChange::Kind::kTags;
      change.name = set.name();
      change.tags.emplace(set.tags().begin(), set.tags().end());
      break;
    }
    case wire::Frame::kSetPermissions: {
      const auto& set = frame.set_permissions();
      change.kind = UserChange::Kind::kSetPermissions;
      change.name = set.name();
      change.permission = UserPermission{set.vhost(), set.configure(), set.write(), set.read()};
      break;
    }
    case wire::Frame::kClearPermissions:
      change.kind = UserChange::Kind::kClearPermissions;
      change.name = frame.clear_permissions().name();
      change.permission.vhost = frame.clear_permissions().vhost();
      break;
    default:
      return Status(StatusCode::kInternal, "not a user change");
  }
  return change;
}

void NativeSession::ReplyLater(uint64_t rid, const Status& status) {
  ReplyStatus(rid, status);
  Flush();
}

std::string NativeSession::Actor() const {
  return fmt::format("conn={} user={}", id_, LogSafe(user_));
}

Status NativeSession::CheckVhost(const std::string& vhost) const {
  if (context_->broker->HasVhost(vhost)) return Status::Ok();
  return Status(StatusCode::kVhostNotFound, "vhost '" + CutForDisplay(vhost) + "' not found");
}

void NativeSession::HandleVhostRequest(uint64_t rid, const wire::Frame& frame) {
  broker::Broker& broker = *context_->broker;
  if (Status s = broker.AuthorizeTag(id_, broker::kTagAdministrator, "manage vhosts"); !s.ok()) {
    spdlog::warn("conn={} user={} vhost request refused: {}", id_, LogSafe(user_),
                 LogSafe(s.message()));
    return ReplyStatus(rid, s);
  }
  switch (frame.body_case()) {
    case wire::Frame::kListVhosts: {
      wire::Frame reply;
      for (const VhostInfo& info : broker.ListVhosts()) {
        protocol::ToWire(info, reply.mutable_list_vhosts_ok()->add_vhosts());
      }
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kAddVhost: {
      const auto& add = frame.add_vhost();
      AddVhost(
          *context_, add.name(), add.description(), Actor(),
          [self = shared_from_this(), rid](const Status& s, bool) { self->ReplyLater(rid, s); });
      return;
    }
    case wire::Frame::kSetVhostLimits: {
      const auto& set = frame.set_vhost_limits();
      SetVhostLimits(
          *context_, set.name(),
          set.has_max_connections() ? std::optional<int64_t>(set.max_connections()) : std::nullopt,
          set.has_max_queues() ? std::optional<int64_t>(set.max_queues()) : std::nullopt, Actor(),
          [self = shared_from_this(), rid](const Status& s) { self->ReplyLater(rid, s); });
      return;
    }
    default:
      DeleteVhost(*context_, frame.delete_vhost().name(), Actor(),
                  [self = shared_from_this(), rid](const Status& s) { self->ReplyLater(rid, s); });
      return;
  }
}

void NativeSession::HandlePolicyRequest(uint64_t rid, const wire::Frame& frame) {
  broker::Broker& broker = *context_->broker;
  if (Status s = broker.AuthorizeTag(id_, broker::kTagAdministrator | broker::kTagPolicymaker,
                                     "manage policies");
      !s.ok()) {
    spdlog::warn("conn={} user={} policy request refused: {}", id_, LogSafe(user_),
                 LogSafe(s.message()));
    return ReplyStatus(rid, s);
  }
  switch (frame.body_case()) {
    case wire::Frame::kListPolicies: {
      std::optional<std::string_view> vhost = vhost_;
      if (frame.list_policies().all_vhosts()) {
        if (Status s = broker.AuthorizeTag(id_, broker::kTagAdministrator,
                                           "list the policies of every vhost");
            !s.ok()) {
          return ReplyStatus(rid, s);
        }
        vhost.reset();
      }
      wire::Frame reply;
      for (const PolicyInfo& info : broker.ListPolicies(vhost)) {
        protocol::ToWire(info, reply.mutable_list_policies_ok()->add_policies());
      }
      return Reply(rid, std::move(reply));
    }
    case wire::Frame::kSetPolicy: {
      auto policy = protocol::FromWire(frame.set_policy().policy());
      if (!policy.ok()) return ReplyStatus(rid, policy.status());
      policy->vhost = vhost_;
      const std::string name = policy->name;
      Status s = broker.SetPolicy(std::move(*policy));
      if (!s.ok()) return ReplyStatus(rid, s);
      spdlog::info("conn={} user={} set policy {} in vhost {}", id_, LogSafe(user_), LogSafe(name),
                   LogSafe(vhost_));
      return ReplyWhenDurable(rid);
    }
    default: {
      const std::string& name = frame.clear_policy().name();
      Status s = broker.ClearPolicy(vhost_, name);
      if (!s.ok()) return ReplyStatus(rid, s);
      spdlog::info("conn={} user={} cleared policy {} in vhost {}", id_, LogSafe(user_),
                   LogSafe(name), LogSafe(vhost_));
      return ReplyWhenDurable(rid);
    }
  }
}

void NativeSession::HandleDefinitionsRequest(uint64_t rid, const wire::Frame& frame) {
  broker::Broker& broker = *context_->broker;
  const bool exporting = frame.body_case() == wire::Frame::kExportDefinitions;
  if (Status s = broker.AuthorizeTag(id_, broker::kTagAdministrator,
                                     exporting ? "export definitions" : "import definitions");
      !s.ok()) {
    spdlog::warn("conn={} user={} definitions request refused: {}", id_, LogSafe(user_),
                 LogSafe(s.message()));
    return ReplyStatus(rid, s);
  }
  if (exporting) {
    const auto& request = frame.export_definitions();
    std::optional<std::string> vhost;
    if (request.has_vhost()) {
      if (Status s = CheckVhost(request.vhost()); !s.ok()) return ReplyStatus(rid, s);
      vhost = request.vhost();
    }
    wire::Frame reply;
    reply.mutable_export_definitions_ok()->set_json(json::Dump(
        json::DefinitionsJson(ExportDefinitions(broker, *context_->users, vhost), WHARF_VERSION)));
    return Reply(rid, std::move(reply));
  }
  const auto& request = frame.import_definitions();
  if (request.has_vhost()) {
    if (Status s = CheckVhost(request.vhost()); !s.ok()) return ReplyStatus(rid, s);
  }
  auto definitions = ParseDefinitions(
      request.json(),
      request.has_vhost() ? std::optional<std::string_view>(request.vhost()) : std::nullopt);
  if (!definitions.ok()) return ReplyStatus(rid, definitions.status());
  spdlog::info("conn={} user={} imports definitions", id_, LogSafe(user_));
  ImportDefinitions(*context_, std::move(*definitions),
                    [self = shared_from_this(), rid](ImportReport report) {
                      wire::Frame reply;
                      auto* ok = reply.mutable_import_definitions_ok();
                      ok->set_ok(report.ok());
                      ok->set_report(json::Dump(report.ToJson(), false));
                      self->Reply(rid, std::move(reply));
                      self->Flush();
                    });
}

void NativeSession::HandleBackup(uint64_t rid, const std::string& directory) {
  if (Status s = context_->broker->AuthorizeTag(id_, broker::kTagAdministrator, "take a backup");
      !s.ok()) {
    spdlog::warn("conn={} user={} backup to {} refused: {}", id_, LogSafe(user_),
                 LogSafe(directory), LogSafe(s.message()));
    return ReplyStatus(rid, s);
  }
  spdlog::info("conn={} user={} asks for a backup to {}", id_, LogSafe(user_), LogSafe(directory));
  // The store answers once the copy is complete (or failed), through the broker thread; its
  // writer and this thread go on meanwhile.
  context_->store->Backup(directory, [self = shared_from_this(), rid](Result<BackupInfo> result) {
    if (!result.ok()) {
      self->ReplyStatus(rid, result.status());
    } else {
      wire::Frame reply;
      protocol::ToWire(*result, reply.mutable_backup_ok());
      self->Reply(rid, std::move(reply));
    }
    self->Flush();
  });
}

void NativeSession::PublishDone(uint64_t request_id, const PublishResult& result,
                                const Status& status) {
  if (!status.ok()) {
    if (uint64_t held = 0; unconfirmed_log_.Allow(std::chrono::steady_clock::now(), &held)) {
      spdlog::warn(
          "conn={} user={} publish {} (message {}) not confirmed{}: {}", id_, LogSafe(user_),
          request_id, result.message_id,
          held == 0 ? std::string() : fmt::format(" ({} more since the last such line)", held),
          LogSafe(status.ToString(), kLogSafeStatusBytes));
    }
    return ReplyStatus(request_id, status);
  }
  wire::Frame reply;
  reply.mutable_publish_ok()->set_message_id(result.message_id);
  reply.mutable_publish_ok()->set_routed_queues(result.routed_queues);
  reply.mutable_publish_ok()->set_duplicate_of(result.duplicate_of);
  Reply(request_id, std::move(reply));
}

void NativeSession::CancelDelayedDone(uint64_t request_id, const Result<bool>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  reply.mutable_cancel_delayed_ok()->set_cancelled(*result);
  Reply(request_id, std::move(reply));
}

void NativeSession::ListDelayedDone(uint64_t request_id, const Result<DelayedPage>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  auto* ok = reply.mutable_list_delayed_ok();
  for (const DelayedInfo& info : result->messages) protocol::ToWire(info, ok->add_messages());
  ok->set_more(result->more);
  ok->set_next_after_deliver_at_ms(result->next_after_deliver_at_ms);
  ok->set_next_after_message_id(result->next_after_message_id);
  Reply(request_id, std::move(reply));
}

void NativeSession::PeekDone(uint64_t request_id, const Result<PeekPage>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  auto* ok = reply.mutable_peek_ok();
  for (const PeekedMessage& m : result->messages) protocol::ToWire(m, ok->add_messages());
  ok->set_more(result->more);
  ok->set_next_after_position(result->next_after);
  Reply(request_id, std::move(reply));
}

void NativeSession::RedriveDone(uint64_t request_id, const Result<RedriveInfo>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  protocol::ToWire(*result, reply.mutable_redrive_ok()->mutable_task());
  Reply(request_id, std::move(reply));
}

void NativeSession::PurgeDone(uint64_t request_id, const Result<uint64_t>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  reply.mutable_purge_queue_ok()->set_messages_purged(*result);
  Reply(request_id, std::move(reply));
}

void NativeSession::DeleteQueueDone(uint64_t request_id, const Result<uint64_t>& result) {
  if (!result.ok()) return ReplyStatus(request_id, result.status());
  wire::Frame reply;
  reply.mutable_delete_queue_ok()->set_messages_deleted(*result);
  Reply(request_id, std::move(reply));
}

void NativeSession::Deliver(broker::Delivery delivery) {
  core_->AddDelivery(0, std::move(delivery));
}

void NativeSession::CompleteReceive(uint64_t request_id, std::vector<broker::Delivery> deliveries) {
  core_->AddReceiveDone(0, ReceiveDone{request_id, std::move(deliveries)});
}

void NativeSession::ConsumerCancelled(const std::string& consumer_tag, std::string_view reason) {
  core_->AddCancelNotice(0, CancelNotice{consumer_tag, std::string(reason)});
}

}  // namespace wharf::server
