// client/client_admin.cc: the operators' calls of wharf::Client: listings (queues, exchanges,
// bindings, consumers, connections, users), peek, delayed messages, redrive, users and
// backups. The connection is client/client_impl.h.
#include "client/client_impl.h"

namespace wharf {

Result<std::vector<QueueInfo>> Client::ListQueues(const std::string& prefix) {
  pb::Frame frame;
  frame.mutable_list_queues()->set_prefix(prefix);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<QueueInfo> out;
  for (const auto& q : reply->list_queues_ok().queues()) out.push_back(protocol::FromWire(q));
  return out;
}

Result<DelayedPage> Client::ListDelayed(const std::string& queue, int64_t after_deliver_at_ms,
                                        uint64_t after_message_id, uint32_t limit) {
  pb::Frame frame;
  auto* list = frame.mutable_list_delayed();
  list->set_queue(queue);
  list->set_after_deliver_at_ms(after_deliver_at_ms);
  list->set_after_message_id(after_message_id);
  list->set_limit(limit);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  DelayedPage page;
  for (const auto& m : reply->list_delayed_ok().messages()) {
    WHARF_ASSIGN_OR_RETURN(auto info, protocol::FromWire(m));
    page.messages.push_back(std::move(info));
  }
  page.more = reply->list_delayed_ok().more();
  page.next_after_deliver_at_ms = reply->list_delayed_ok().next_after_deliver_at_ms();
  page.next_after_message_id = reply->list_delayed_ok().next_after_message_id();
  return page;
}

Result<bool> Client::CancelDelayed(const std::string& queue, uint64_t message_id) {
  pb::Frame frame;
  frame.mutable_cancel_delayed()->set_queue(queue);
  frame.mutable_cancel_delayed()->set_message_id(message_id);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  return reply->cancel_delayed_ok().cancelled();
}

Result<PeekPage> Client::Peek(const std::string& queue, uint64_t after_position, uint32_t limit,
                              bool with_body) {
  pb::Frame frame;
  auto* peek = frame.mutable_peek();
  peek->set_queue(queue);
  peek->set_after_position(after_position);
  peek->set_limit(limit);
  peek->set_with_body(with_body);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  PeekPage page;
  for (const auto& m : reply->peek_ok().messages()) {
    WHARF_ASSIGN_OR_RETURN(auto info, protocol::FromWire(m));
    page.messages.push_back(std::move(info));
  }
  page.more = reply->peek_ok().more();
  page.next_after = reply->peek_ok().next_after_position();
  return page;
}

Result<std::vector<BindingSpec>> Client::ListBindings(const std::string& exchange,
                                                      const std::string& queue) {
  pb::Frame frame;
  frame.mutable_list_bindings()->set_exchange(exchange);
  frame.mutable_list_bindings()->set_queue(queue);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<BindingSpec> out;
  for (const auto& b : reply->list_bindings_ok().bindings()) {
    auto spec = protocol::FromWire(b);
    if (!spec.ok()) return spec.status();
    out.push_back(std::move(*spec));
  }
  return out;
}

Result<std::vector<ConsumerInfo>> Client::ListConsumers(const std::string& queue) {
  pb::Frame frame;
  frame.mutable_list_consumers()->set_queue(queue);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<ConsumerInfo> out;
  for (const auto& c : reply->list_consumers_ok().consumers()) {
    out.push_back(protocol::FromWire(c));
  }
  return out;
}

Result<std::vector<ConnectionInfo>> Client::ListConnections() {
  pb::Frame frame;
  frame.mutable_list_connections();
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<ConnectionInfo> out;
  for (const auto& c : reply->list_connections_ok().connections()) {
    out.push_back(protocol::FromWire(c));
  }
  return out;
}

Result<RedriveInfo> Client::StartRedrive(const RedriveSpec& spec) {
  pb::Frame frame;
  protocol::ToWire(spec, frame.mutable_start_redrive());
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  return protocol::FromWire(reply->redrive_ok().task());
}

Result<RedriveInfo> Client::CancelRedrive(const std::string& queue) {
  pb::Frame frame;
  frame.mutable_cancel_redrive()->set_queue(queue);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  return protocol::FromWire(reply->redrive_ok().task());
}

Result<std::vector<RedriveInfo>> Client::RedriveStatus(const std::string& queue) {
  pb::Frame frame;
  frame.mutable_redrive_status()->set_queue(queue);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<RedriveInfo> out;
  for (const auto& task : reply->redrive_status_ok().tasks()) {
    out.push_back(protocol::FromWire(task));
  }
  return out;
}

Result<std::vector<ExchangeInfo>> Client::ListExchanges() {
  pb::Frame frame;
  frame.mutable_list_exchanges();
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<ExchangeInfo> out;
  for (const auto& e : reply->list_exchanges_ok().exchanges()) {
    out.push_back(protocol::FromWire(e));
  }
  return out;
}

// --- Users --------------------------------------------------------------------------------------

Status Client::PutUser(const std::string& name, const std::string& password_hash, bool admin) {
  pb::Frame frame;
  auto* put = frame.mutable_put_user();
  put->set_name(name);
  put->set_password_hash(password_hash);
  put->set_admin(admin);
  return impl_->CallStatus(std::move(frame));
}

Status Client::DeleteUser(const std::string& name) {
  pb::Frame frame;
  frame.mutable_delete_user()->set_name(name);
  return impl_->CallStatus(std::move(frame));
}

Status Client::SetUserLimits(const std::string& name, std::optional<int64_t> max_connections,
                             std::optional<int64_t> max_channels) {
  pb::Frame frame;
  auto* set = frame.mutable_set_user_limits();
  set->set_name(name);
  if (max_connections) set->set_max_connections(*max_connections);
  if (max_channels) set->set_max_channels(*max_channels);
  return impl_->CallStatus(std::move(frame));
}

Status Client::SetUserTags(const std::string& name, const std::vector<std::string>& tags) {
  pb::Frame frame;
  auto* set = frame.mutable_set_user_tags();
  set->set_name(name);
  for (const std::string& tag : tags) set->add_tags(tag);
  return impl_->CallStatus(std::move(frame));
}

Status Client::SetPermissions(const std::string& name, const UserPermission& permission) {
  pb::Frame frame;
  auto* set = frame.mutable_set_permissions();
  set->set_name(name);
  set->set_vhost(permission.vhost);
  set->set_configure(permission.configure);
  set->set_write(permission.write);
  set->set_read(permission.read);
  return impl_->CallStatus(std::move(frame));
}

Status Client::ClearPermissions(const std::string& name, const std::string& vhost) {
  pb::Frame frame;
  auto* clear = frame.mutable_clear_permissions();
  clear->set_name(name);
  clear->set_vhost(vhost);
  return impl_->CallStatus(std::move(frame));
}

Result<std::vector<UserInfo>> Client::ListUsers() {
  pb::Frame frame;
  frame.mutable_list_users();
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<UserInfo> out;
  for (const auto& u : reply->list_users_ok().users()) {
    out.push_back(protocol::FromWire(u));
  }
  return out;
}

// --- Virtual hosts ------------------------------------------------------------------------------

Status Client::AddVhost(const std::string& name, const std::string& description) {
  pb::Frame frame;
  frame.mutable_add_vhost()->set_name(name);
  frame.mutable_add_vhost()->set_description(description);
  return impl_->CallStatus(std::move(frame));
}

Status Client::DeleteVhost(const std::string& name) {
  pb::Frame frame;
  frame.mutable_delete_vhost()->set_name(name);
  return impl_->CallStatus(std::move(frame));
}

Status Client::SetVhostLimits(const std::string& name, std::optional<int64_t> max_connections,
                              std::optional<int64_t> max_queues) {
  pb::Frame frame;
  auto* set = frame.mutable_set_vhost_limits();
  set->set_name(name);
  if (max_connections) set->set_max_connections(*max_connections);
  if (max_queues) set->set_max_queues(*max_queues);
  return impl_->CallStatus(std::move(frame));
}

Result<std::vector<VhostInfo>> Client::ListVhosts() {
  pb::Frame frame;
  frame.mutable_list_vhosts();
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<VhostInfo> out;
  for (const auto& v : reply->list_vhosts_ok().vhosts()) out.push_back(protocol::FromWire(v));
  return out;
}

// --- Policies -----------------------------------------------------------------------------------

Status Client::SetPolicy(const PolicyInfo& policy) {
  pb::Frame frame;
  protocol::ToWire(policy, frame.mutable_set_policy()->mutable_policy());
  return impl_->CallStatus(std::move(frame));
}

Status Client::ClearPolicy(const std::string& name) {
  pb::Frame frame;
  frame.mutable_clear_policy()->set_name(name);
  return impl_->CallStatus(std::move(frame));
}

Result<std::vector<PolicyInfo>> Client::ListPolicies(bool all_vhosts) {
  pb::Frame frame;
  frame.mutable_list_policies()->set_all_vhosts(all_vhosts);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  std::vector<PolicyInfo> out;
  for (const auto& p : reply->list_policies_ok().policies()) {
    auto policy = protocol::FromWire(p);
    if (!policy.ok()) return policy.status();
    out.push_back(std::move(*policy));
  }
  return out;
}

// --- Definitions --------------------------------------------------------------------------------

Result<std::string> Client::ExportDefinitions(std::optional<std::string> vhost) {
  pb::Frame frame;
  auto* request = frame.mutable_export_definitions();
  if (vhost) request->set_vhost(*vhost);
  auto reply = impl_->Call(std::move(frame));
  if (!reply.ok()) return reply.status();
  return reply->export_definitions_ok().json();
}

Result<Client::DefinitionsImport> Client::ImportDefinitions(const std::string& json,
                                                            std::optional<std::string> vhost,
                                                            std::chrono::milliseconds wait) {
  pb::Frame frame;
  auto* request = frame.mutable_import_definitions();
  request->set_json(json);
  if (vhost) request->set_vhost(*vhost);
  auto reply = impl_->Call(std::move(frame), wait);
  if (!reply.ok()) return reply.status();
  return DefinitionsImport{reply->import_definitions_ok().ok(),
                           reply->import_definitions_ok().report()};
}

// --- Backup -------------------------------------------------------------------------------------

Result<BackupInfo> Client::Backup(const std::string& directory, std::chrono::milliseconds wait) {
  pb::Frame frame;
  frame.mutable_backup()->set_directory(directory);
  auto reply = impl_->Call(std::move(frame), wait);
  if (!reply.ok()) return reply.status();
  return protocol::FromWire(reply->backup_ok());
}

}  // namespace wharf
