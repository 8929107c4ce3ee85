// server/amqp_channel.h
//
// AmqpChannel is one open AMQP channel on the broker thread: one broker session (delivery tags,
// unacknowledged deliveries, consumers, the channel-wide prefetch), and what AMQP adds to it:
// publisher confirms (ConfirmTracker), a transaction's buffered publishes and settles, the
// prefetch given to later consumers (basic.qos global=false), the last queue declared (the
// empty-name shortcut), and the order of its replies. It runs each method against the Broker
// and answers with RabbitMQ's replies; a soft error closes it (channel.close with RabbitMQ's
// reply code and text and the failing method's ids), a hard error the whole connection.
//
// Reply order: a reply that waits for the disk (a durable declaration or binding, a purge, a
// delete) keeps its place: the replies after it wait for it, as AMQP clients expect.
//
// Thread safety: confined to the broker thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amqp/methods.h"
#include "broker/session_peer.h"
#include "server/amqp_confirms.h"
#include "server/amqp_session.h"

namespace wharf::server {

class AmqpChannel final : public broker::SessionPeer,
                          public std::enable_shared_from_this<AmqpChannel> {
 public:
  AmqpChannel(std::shared_ptr<AmqpSession> session, uint16_t number);

  uint16_t number() const { return number_; }
  uint64_t session_id() const { return session_id_; }
  bool closed() const { return closed_; }

  // Opens the broker session and answers channel.open-ok.
  void Open();
  // One method (or publish) of this channel.
  void Handle(AmqpRequest& request);
  // The broker session closes (requeueing what it held); nothing more is sent.
  void Close();
  // Sends the confirms settled since the last call.
  void FlushConfirms();

  // SessionPeer.
  void Deliver(broker::Delivery delivery) override;
  void CompleteReceive(uint64_t, std::vector<broker::Delivery>) override {}
  void PublishDone(uint64_t request_id, const PublishResult& result, const Status& status) override;
  void CancelDelayedDone(uint64_t, const Result<bool>&) override {}
  void ListDelayedDone(uint64_t, const Result<DelayedPage>&) override {}
  void PeekDone(uint64_t, const Result<PeekPage>&) override {}
  void RedriveDone(uint64_t, const Result<RedriveInfo>&) override {}
  void PurgeDone(uint64_t request_id, const Result<uint64_t>& result) override;
  void DeleteQueueDone(uint64_t request_id, const Result<uint64_t>& result) override;
  void ConsumerCancelled(const std::string& consumer_tag, std::string_view reason) override;
  // RabbitMQ's consumer timeout ([amqp] consumer_timeout_ms): the channel closes (406).
  void AckTimedOut(uint64_t delivery_tag, const std::string& consumer_tag,
                   uint32_t timeout_ms) override;
  void Flush() override;
  bool Writable() const override;

 private:
  // A reply's place in the channel's order: filled now, or when its wait ends.
  struct Slot {
    uint64_t id = 0;
    std::optional<std::string> bytes;
  };

  void Dispatch(AmqpRequest& request);
  void HandlePublish(AmqpRequest& request);
  void Publish(AmqpRequest& request);
  void HandleExchangeDeclare(const amqp::ExchangeDeclare& m);
  void HandleExchangeDelete(const amqp::ExchangeDelete& m);
  void HandleExchangeBind(const std::string& destination, const std::string& source,
                          const std::string& routing_key, const amqp::FieldTable& arguments,
                          bool bind, bool no_wait);
  // Binds or unbinds, answering `ok` (after the disk when the binding is durable).
  void ChangeBinding(const BindingSpec& spec, bool bind, bool no_wait, amqp::Method ok,
                     uint16_t class_id, uint16_t method_id);
  void HandleQueueDeclare(const amqp::QueueDeclare& m);
  void HandleQueueBind(std::string queue, const std::string& exchange, std::string routing_key,
                       const amqp::FieldTable& arguments, bool bind, bool no_wait);
  void HandleConsume(const amqp::BasicConsume& m);
  void HandleGet(const amqp::BasicGet& m);
  void HandleSettle(AmqpRequest& request);
  void HandleCommit();
  // A purge's or a delete's answer (`method_id`) with its count, in its slot.
  void FinishCount(uint64_t slot, const Result<uint64_t>& result, uint16_t method_id);

  // Answers: in order (Reply), after the disk (ReplyWhenDurable), or later (Reserve + Fill).
  void Reply(const amqp::Method& method);
  void ReplyBytes(std::string bytes);
  void ReplyWhenDurable(amqp::Method method);
  uint64_t Reserve();
  void Fill(uint64_t slot, std::string bytes);
  void Drop(uint64_t slot);
  void EmitReady();
  // A soft error: channel.close, the channel ends. A hard one: the connection ends.
  void SoftError(uint16_t code, std::string text, uint16_t class_id, uint16_t method_id);
  void HardError(uint16_t code, std::string text, uint16_t class_id, uint16_t method_id);
  // A broker error as RabbitMQ answers it (soft or hard by its code).
  void Fail(const Status& status, uint16_t class_id, uint16_t method_id);
  // "" means the last queue declared on the channel (RabbitMQ's shortcut).
  bool ExpandQueue(std::string* name, uint16_t class_id, uint16_t method_id);

  const std::shared_ptr<AmqpSession> session_;
  const uint16_t number_;
  const uint64_t session_id_;
  bool closed_ = false;
  bool confirming_ = false;
  ConfirmTracker confirms_;
  bool tx_ = false;
  std::vector<AmqpRequest> tx_buffer_;
  uint32_t consumer_prefetch_ = 0;  // basic.qos global=false: for consumers made later
  std::string last_queue_;
  std::deque<Slot> slots_;
  uint64_t next_slot_ = 1;
};

}  // namespace wharf::server
