// include/wharf/client.h
//
// Client is the C++ client library for Wharf's native protocol: one TCP connection (or TLS
// over one, ClientOptions::tls) to wharfd,
// used by the tests, wharfctl and wharf-perf. It connects and logs in, declares and binds,
// publishes with broker confirms (callback, future or blocking), consumes by push subscription
// with a prefetch limit or by long-polling pull, and settles deliveries.
//
// Thread safety: every method is thread-safe. The client runs one I/O thread of its own;
// delivery, confirm, return and error callbacks run on it, one at a time, and must not block.
// From inside a callback, use the asynchronous calls (PublishAsync, Ack, Nack, Reject): a
// blocking call there returns kFailedPrecondition instead of deadlocking. Close() and the
// destructor work from a callback too; no further callbacks run after Close() returns.
//
// Errors: calls return the broker's error code and message (wharf/status.h, docs/errors.md).
// When the connection drops, every waiting call completes with kUnavailable and the error
// handler is told once; the client does not reconnect by itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wharf/message.h"
#include "wharf/result.h"
#include "wharf/status.h"
#include "wharf/types.h"

namespace wharf {

// TLS to a broker's TLS listener ([tls] listen; docs/security.md).
struct ClientTlsOptions {
  bool enabled = false;
  std::string ca_file;  // PEM CAs the broker's certificate must chain to; "" = the system's
  // A client certificate and its key (PEM) for brokers that ask for one (mutual TLS).
  std::string cert_file;
  std::string key_file;
  // The broker's certificate must verify and carry this name (DNS or IP; "" = `host`).
  // verify = false takes any certificate: encryption without knowing who answers.
  bool verify = true;
  std::string server_name;
  // Log in as the user the client certificate names (SASL EXTERNAL), not with user and
  // password; the broker must offer it ([tls] cert_login, docs/security.md).
  bool certificate_login = false;
};

struct ClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 5680;
  // The built-in loopback-only user; set both for a configured user.
  std::string user = "guest";
  std::string password = "guest";
  std::string client_name = "wharf-cpp";
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{30000};  // for blocking calls
  // Publishes queued in this client and not yet written to the socket, at most (bytes, plus
  // the one publish let in last). When the broker stops reading this
  // connection (flow control, docs/operations.md), publishing calls wait for room, at most
  // request_timeout, then fail with kResourceExhausted: memory stays bounded and nothing is
  // taken that cannot be sent. Acks and other small frames are never held.
  size_t max_buffered_bytes = 64u << 20;
  ClientTlsOptions tls;
  // The virtual host to open (docs/security.md, "Virtual hosts"): every name this client
  // gives is looked up there. The user needs permissions in it.
  std::string vhost = "/";
};

// One message handed to this client.
struct Delivery {
  std::string consumer_tag;  // "" for Receive()
  uint64_t delivery_tag = 0;
  Message message;
  uint32_t receive_count = 0;  // 1 on the first delivery
  bool redelivered = false;
  std::string exchange;
  std::string routing_key;
  std::string queue;
  // Settle (or ExtendLease) within this, or the message is redelivered (docs/lifecycle.md).
  uint32_t lease_ms = 0;
  // Attempt accounting: when it was first delivered, and its failures (nacks, rejects, lease
  // expiries) with the time and text of the last one.
  int64_t first_received_at_ms = 0;
  uint32_t failure_count = 0;
  int64_t last_failed_at_ms = 0;
  std::string last_error;
};

// A failed delivery (Client::Nack): see docs/lifecycle.md for what each choice does.
struct NackOptions {
  bool multiple = false;
  bool requeue = true;                 // false: rejected (dropped)
  bool immediate = false;              // back at once, whatever the queue's retry policy
  std::chrono::milliseconds delay{0};  // back after this (overrides the retry policy)
  std::string error;                   // kept as the message's last_error (first 1 KiB)
};

// A mandatory message the broker could not route.
struct ReturnedMessage {
  Status reason;  // kNoRoute
  std::string exchange;
  std::string routing_key;
  Message message;
};

struct PublishOptions {
  bool mandatory = false;  // return the message (ReturnHandler) if it reaches no queue
  // Delayed delivery: routed now, delivered from this time on (at most one of the two).
  uint64_t delay_ms = 0;
  int64_t deliver_at_ms = 0;  // Unix ms (UTC)
  // The key a queue with a deduplication window (x-deduplication-window) checks, 1 to 128
  // bytes; "" = the message's x-deduplication-header, if any (docs/lifecycle.md,
  // "Deduplication"). Cheaper than the header: the broker neither decodes nor stores it, and
  // consumers do not see it.
  std::string deduplication_id;
};

class Client {
 public:
  using DeliveryHandler = std::function<void(Delivery)>;
  using PublishCallback = std::function<void(Result<PublishResult>)>;
  using ReturnHandler = std::function<void(ReturnedMessage)>;
  using ErrorHandler = std::function<void(Status)>;
  using CancelHandler = std::function<void(const std::string& consumer_tag, std::string reason)>;
  // Flow control (docs/operations.md): the broker stopped taking this connection's publishes
  // (blocked, with the watermark that was crossed) or takes them again. While blocked,
  // publishes wait (a blocking Publish may run into request_timeout); consuming goes on.
  using BlockedHandler = std::function<void(bool blocked, std::string reason)>;

  // Connects, says Hello and logs in. kUnavailable (cannot connect), kDeadlineExceeded,
  // kAuthenticationFailed, kAccessRefused, kUnsupportedVersion.
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();  // Close()

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // --- Topology (blocking) ------------------------------------------------------------------
  Status DeclareExchange(const ExchangeSpec& spec);
  Status DeleteExchange(const std::string& name, bool if_unused = false);
  Result<QueueInfo> DeclareQueue(const QueueSpec& spec);
  // Returns the number of ready messages deleted with the queue.
  Result<uint64_t> DeleteQueue(const std::string& name, bool if_unused = false,
                               bool if_empty = false);
  Result<uint64_t> PurgeQueue(const std::string& name);
  Status Bind(const BindingSpec& binding);
  Status Unbind(const BindingSpec& binding);
  Result<std::vector<QueueInfo>> ListQueues(const std::string& prefix = "");
  Result<std::vector<ExchangeInfo>> ListExchanges();
  // Operators' listings: bindings from `exchange` and/or to `queue` ("" = any); consumers of
  // `queue` ("" = all); connections logged in.
  Result<std::vector<BindingSpec>> ListBindings(const std::string& exchange = "",
                                                const std::string& queue = "");
  Result<std::vector<ConsumerInfo>> ListConsumers(const std::string& queue = "");
  Result<std::vector<ConnectionInfo>> ListConnections();

  // --- Delayed messages ----------------------------------------------------------------------
  // One page of `queue`'s delayed messages in delivery order, after (after_deliver_at_ms,
  // after_message_id); (0, 0) for the first page. `limit` 1..1000.
  Result<DelayedPage> ListDelayed(const std::string& queue, int64_t after_deliver_at_ms = 0,
                                  uint64_t after_message_id = 0, uint32_t limit = 100);
  // True when the message was still waiting and now never will be delivered; false when it
  // was not waiting in `queue` (delivered already, cancelled before, or never delayed there).
  Result<bool> CancelDelayed(const std::string& queue, uint64_t message_id);

  // --- Peek (docs/operations.md) ---------------------------------------------------------------
  // Up to `limit` (1..1000) ready messages of `queue` after `after_position` (0: from the head),
  // in delivery order, without taking them: receive counts, leases and order stay as they are.
  Result<PeekPage> Peek(const std::string& queue, uint64_t after_position = 0, uint32_t limit = 20,
                        bool with_body = true);

  // --- Redrive (docs/lifecycle.md) -------------------------------------------------------------
  // Starts moving a dead-letter queue's messages back; returns once the task is on disk (for a
  // dry run: at once, with nothing counted yet; poll RedriveStatus until it is not running).
  Result<RedriveInfo> StartRedrive(const RedriveSpec& spec);
  Result<RedriveInfo> CancelRedrive(const std::string& queue);
  // The last redrive of `queue`, or of every queue that had one ("").
  Result<std::vector<RedriveInfo>> RedriveStatus(const std::string& queue = "");

  // --- Users (the administrator tag only; kAccessRefused otherwise) ---------------------------
  // Creates or replaces a user kept in the broker's store. `password_hash` as made by
  // wharf::HashPassword / `wharfctl hash-password`: the password itself is never sent.
  // `admin` sets or clears the administrator tag; a replaced user keeps its other tags, its
  // permissions and limits; a new one has no permissions until SetPermissions.
  Status PutUser(const std::string& name, const std::string& password_hash, bool admin);
  Status DeleteUser(const std::string& name);
  // Sets a stored user's limits (admins only; RabbitMQ's set_user_limits). Each limit given
  // (std::nullopt: left as it is) replaces the user's: negative clears it, 0 allows none.
  // Connections and channels already open stay.
  Status SetUserLimits(const std::string& name, std::optional<int64_t> max_connections,
                       std::optional<int64_t> max_channels);
  // Replaces a stored user's tags (RabbitMQ's set_user_tags): administrator, monitoring,
  // policymaker, management (others are kept and grant nothing). docs/security.md.
  Status SetUserTags(const std::string& name, const std::vector<std::string>& tags);
  // Sets (replaces) a stored user's permissions in `permission.vhost` ("/"), as RabbitMQ's
  // set_permissions; ClearPermissions removes them. Open sessions see the change at their
  // next operation.
  Status SetPermissions(const std::string& name, const UserPermission& permission);
  Status ClearPermissions(const std::string& name, const std::string& vhost = "/");
  Result<std::vector<UserInfo>> ListUsers();

  // --- Virtual hosts (the administrator tag only) ----------------------------------------------
  // RabbitMQ's add_vhost, delete_vhost, set_vhost_limits, list_vhosts. Deleting a vhost deletes
  // every queue (with its messages) and exchange in it, closes its connections and removes
  // every stored user's permissions in it; "/" cannot be deleted.
  Status AddVhost(const std::string& name, const std::string& description = {});
  Status DeleteVhost(const std::string& name);
  // Each limit given (std::nullopt: left as it is) replaces the vhost's: negative clears it,
  // 0 allows none. Connections and queues already there stay.
  Status SetVhostLimits(const std::string& name, std::optional<int64_t> max_connections,
                        std::optional<int64_t> max_queues);
  Result<std::vector<VhostInfo>> ListVhosts();

  // Policies (docs/policies.md) of the connection's vhost: arguments applied by name pattern to
  // its queues and exchanges, at once. The policymaker or administrator tag. SetPolicy adds or
  // replaces one (policy.vhost is ignored) and returns once it is stored; ClearPolicy removes
  // one (kPolicyNotFound when there is none); ListPolicies lists them (of every vhost with
  // `all_vhosts`, administrators only).
  Status SetPolicy(const PolicyInfo& policy);
  Status ClearPolicy(const std::string& name);
  Result<std::vector<PolicyInfo>> ListPolicies(bool all_vhosts = false);

  // Definitions (docs/definitions.md; the administrator tag): users with their password hashes,
  // vhosts, permissions, policies and durable topology as RabbitMQ's definitions JSON, of every
  // vhost or of `vhost` alone. ImportDefinitions applies a document as RabbitMQ's
  // import_definitions (adds and updates, never deletes) and returns once it is on disk: `ok`
  // when nothing was refused, and the report as JSON. A document that does not parse is
  // kInvalidArgument and changes nothing.
  struct DefinitionsImport {
    bool ok = false;
    std::string report;  // {"vhosts": N, ..., "skipped": [...], "errors": [...]}
  };
  Result<std::string> ExportDefinitions(std::optional<std::string> vhost = std::nullopt);
  Result<DefinitionsImport> ImportDefinitions(
      const std::string& json, std::optional<std::string> vhost = std::nullopt,
      std::chrono::milliseconds wait = std::chrono::minutes(5));

  // --- Backup (admins only; docs/operations.md, "Backup and restore") ------------------------
  // Has the broker write a consistent copy of its store into `directory`, an absolute path on
  // the broker's machine that must not exist (its parent must) or be an empty directory, while
  // it goes on serving. Returns once the copy is complete, waiting up to request_timeout plus
  // `wait`; a backup still running after that carries on in the broker (its log says how it
  // ended). Every publish confirmed before the call is in the copy.
  Result<BackupInfo> Backup(const std::string& directory,
                            std::chrono::milliseconds wait = std::chrono::hours(1));

  // --- Publish ------------------------------------------------------------------------------
  // `done` runs on the client's I/O thread with the broker's confirm or error.
  void PublishAsync(const std::string& exchange, const std::string& routing_key,
                    const Message& message, PublishCallback done, PublishOptions options = {});
  std::future<Result<PublishResult>> PublishAsync(const std::string& exchange,
                                                  const std::string& routing_key,
                                                  const Message& message,
                                                  PublishOptions options = {});
  // Blocks until the broker confirms.
  Result<PublishResult> Publish(const std::string& exchange, const std::string& routing_key,
                                const Message& message, PublishOptions options = {});
  // No confirm is asked for; a failure the broker reports reaches the error handler. Returns
  // once the message is queued for sending: kResourceExhausted when the send buffer stayed
  // full for request_timeout (the broker is not reading), kUnavailable when disconnected.
  // Queued is not received: see unconfirmed_publishes().
  Status PublishNoConfirm(const std::string& exchange, const std::string& routing_key,
                          const Message& message, PublishOptions options = {});
  // Publishes made with PublishNoConfirm that the broker is not known to have read: it reads
  // frames in order, so any answer to a later request (a confirm, a Ping, a listing) vouches
  // for every publish queued before it. Close() asks for such an answer first (waiting up to
  // 2 s), so after a clean Close() this is 0; when the broker was not reading (flow control)
  // or the connection failed, it counts what may not have arrived (never written, or written
  // and not read), so a caller never counts as sent what may have been dropped. Publishes
  // with a confirm are not counted here: each gets its confirm or an error.
  uint64_t unconfirmed_publishes() const;

  // --- Consume ------------------------------------------------------------------------------
  // Push subscription: `handler` gets each delivery on the I/O thread. prefetch 0 = unlimited.
  // Returns the consumer tag (generated by the broker when `consumer_tag` is empty).
  // `lease`: each delivery's lease (0 = the queue's default).
  Result<std::string> Subscribe(const std::string& queue, uint32_t prefetch,
                                DeliveryHandler handler, const std::string& consumer_tag = "",
                                bool exclusive = false,
                                std::chrono::milliseconds lease = std::chrono::milliseconds(0));
  // The same, with every option of a subscription, the consumer priority among them.
  struct SubscribeOptions {
    uint32_t prefetch = 0;     // 0 = unlimited
    std::string consumer_tag;  // "" = generated by the broker
    bool exclusive = false;
    std::chrono::milliseconds lease{0};  // 0 = the queue's default
    // Consumer priority (RabbitMQ's x-priority): offered messages only while no consumer of
    // a higher priority on the queue can take them; equal priorities share round-robin.
    int32_t priority = 0;
  };
  Result<std::string> Subscribe(const std::string& queue, DeliveryHandler handler,
                                const SubscribeOptions& options);
  Status Cancel(const std::string& consumer_tag);
  // Pull: returns as soon as at least one message is there, or empty after `wait`.
  Result<std::vector<Delivery>> Receive(
      const std::string& queue, uint32_t max_messages, std::chrono::milliseconds wait,
      std::chrono::milliseconds lease = std::chrono::milliseconds(0));

  // Settle, without waiting for an answer: errors reach the error handler.
  void Ack(uint64_t delivery_tag, bool multiple = false);
  // requeue: back to the queue, after its retry policy's backoff if it has one.
  void Nack(uint64_t delivery_tag, bool multiple = false, bool requeue = true);
  void Nack(uint64_t delivery_tag, const NackOptions& options);
  void Reject(uint64_t delivery_tag, bool requeue = true);
  // Nack with requeue after `delay` (a retry with backoff): the message waits in its queue,
  // invisible, then comes back at the tail with its receive count.
  void NackWithDelay(uint64_t delivery_tag, std::chrono::milliseconds delay, bool multiple = false);
  // Settle and wait: kUnknownDeliveryTag for a tag that is unknown or already settled.
  Status AckSync(uint64_t delivery_tag, bool multiple = false);
  Status NackSync(uint64_t delivery_tag, bool multiple = false, bool requeue = true);
  Status RejectSync(uint64_t delivery_tag, bool requeue = true);
  Status NackSync(uint64_t delivery_tag, const NackOptions& options);
  // Moves the delivery's lease to end `lease` from now (0: its length again): a consumer still
  // working on a message keeps it. kLeaseExpired when it already ran out (the message was
  // redelivered; this consumer's result will not settle the new delivery).
  Status ExtendLease(uint64_t delivery_tag, std::chrono::milliseconds lease);
  void ExtendLeaseAsync(uint64_t delivery_tag, std::chrono::milliseconds lease);
  Status NackWithDelaySync(uint64_t delivery_tag, std::chrono::milliseconds delay,
                           bool multiple = false);

  // --- Events -------------------------------------------------------------------------------
  void SetReturnHandler(ReturnHandler handler);
  void SetErrorHandler(ErrorHandler handler);
  void SetCancelHandler(CancelHandler handler);
  void SetBlockedHandler(BlockedHandler handler);
  // True between the broker's "publishing blocked" and "publishing resumes".
  bool publishing_blocked() const;

  // Round trip to the broker.
  Status Ping();
  bool connected() const;
  uint64_t connection_id() const;
  uint64_t max_message_bytes() const;  // as announced by the broker

  // Sends Close, waits briefly for the broker's answer, closes the socket and joins the
  // I/O thread. Unsettled deliveries go back to their queues (broker side). Idempotent.
  void Close();

 private:
  struct Impl;
  explicit Client(std::shared_ptr<Impl> impl);
  // Shared with the client's I/O thread, which keeps it alive until it has finished, so that
  // a Client may even be destroyed from inside one of its own callbacks.
  std::shared_ptr<Impl> impl_;
};

}  // namespace wharf
