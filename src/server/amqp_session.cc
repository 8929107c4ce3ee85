#include "server/amqp_session.h"

#include <spdlog/spdlog.h>

#include "amqp/frame.h"
#include "amqp/reply.h"
#include "common/log_safe.h"
#include "server/amqp_channel.h"

namespace wharf::server {

AmqpSession::AmqpSession(uint64_t connection_id, std::string user, std::string vhost,
                         std::string peer, ServerContext* context,
                         std::shared_ptr<SessionCore> core, AmqpClientInfo client,
                         uint32_t frame_max)
    : id_(connection_id),
      user_(std::move(user)),
      vhost_(std::move(vhost)),
      peer_(std::move(peer)),
      context_(context),
      core_(std::move(core)),
      client_(std::move(client)),
      frame_max_(frame_max) {}

AmqpSession::~AmqpSession() = default;

void AmqpSession::Execute(std::vector<AmqpRequest>& batch) {
  for (AmqpRequest& request : batch) {
    if (failed_ || closed_) break;  // after a hard error or connection.close nothing runs
    if (request.kind == AmqpRequest::Kind::kCloseAll) {
      CloseAll();
      break;
    }
    if (std::holds_alternative<amqp::ChannelOpen>(request.method)) {
      OpenChannel(request.channel);
      continue;
    }
    auto it = channels_.find(request.channel);
    // Closed by a soft error: what the client sent before it saw channel.close is dropped.
    if (it == channels_.end()) continue;
    std::shared_ptr<AmqpChannel> channel = it->second;  // it may forget itself meanwhile
    if (std::holds_alternative<amqp::ChannelClose>(request.method)) {
      channel->Close();
      ForgetChannel(request.channel);
      std::string bytes;
      amqp::AppendMethodFrame(request.channel, amqp::ChannelCloseOk{}, &bytes);
      core_->AddBytes(request.channel, std::move(bytes));
      core_->AddNotice(request.channel, CodecNotice{kAmqpChannelCloseOk, 0, {}, 0, 0});
      continue;
    }
    channel->Handle(request);
  }
  for (auto& [number, channel] : channels_) channel->FlushConfirms();
  core_->EndBatch();
}

void AmqpSession::OpenChannel(uint16_t number) {
  auto channel = std::make_shared<AmqpChannel>(shared_from_this(), number);
  channels_[number] = channel;
  channel->Open();
}

void AmqpSession::ForgetChannel(uint16_t number) { channels_.erase(number); }

void AmqpSession::Resume() {
  for (auto& [number, channel] : channels_) {
    context_->broker->ResumeSession(channel->session_id());
  }
}

void AmqpSession::CloseAll() {
  if (closed_) return;
  closed_ = true;
  auto channels = std::move(channels_);
  channels_.clear();
  for (auto& [number, channel] : channels) channel->Close();
  context_->broker->CloseOwner(id_);
}

void AmqpSession::ConnectionError(uint16_t code, std::string text, uint16_t class_id,
                                  uint16_t method_id) {
  if (failed_) return;
  failed_ = true;
  core_->AddNotice(0,
                   CodecNotice{kAmqpConnectionError, code, std::move(text), class_id, method_id});
}

}  // namespace wharf::server
