// server/native_codec.h
//
// NativeCodec is the native protocol (docs/protocol.md) on a connection's I/O thread: it parses
// each length-prefixed frame as a wharf.wire.v1.Frame, runs the handshake (Hello, then
// Authenticate through the shared Login), converts a publish's message off the broker thread,
// collects requests into batches for the broker thread (NativeSession runs them there), and
// serializes what comes back: replies, deliveries (converted here), cancelled consumers,
// PublishingBlocked and the Error/Close pair that ends a connection.
//
// Thread safety: confined to the connection's I/O thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "server/codec.h"
#include "server/connection.h"
#include "server/native_session.h"

namespace wharf::server {

class NativeCodec final : public Codec {
 public:
  explicit NativeCodec(Connection& connection);

  size_t handshake_frame_bytes() const override;
  Status OnFrame(std::string_view frame, bool* ends_batch) override;
  bool holding() const override { return held_.has_value(); }
  void ReleaseHeld() override;
  bool PostBatch() override;
  void OnLoggedIn() override;
  void Encode(Outbound& item, std::string* out) override;
  void EncodeClose(const Status& status, std::string_view reason, std::string* out) override;
  void EncodeBlocked(bool blocked, std::string_view reason, std::string* out) override;
  void PostResume() override;
  void CloseSessions() override;

 private:
  enum class Stage { kAwaitHello, kAwaitAuth, kOpen };

  // Frames before login are small (Hello, Authenticate).
  static constexpr size_t kMaxHandshakeFrameBytes = 64u << 10;

  static bool IsHeavy(const protocol::wire::Frame& frame);
  Status HandleHello(const protocol::wire::Frame& frame);
  Status HandleAuthenticate(const protocol::wire::Frame& frame);
  void Send(const protocol::wire::Frame& frame);

  Connection& connection_;
  ServerContext* const context_;
  Stage stage_ = Stage::kAwaitHello;
  std::vector<NativeRequest> batch_;
  // Flow control: a publish read while publishing is blocked, and everything after it, waits.
  std::optional<NativeRequest> held_;
  uint64_t close_request_id_ = 0;           // the Hello/Authenticate a handshake error answers
  std::string client_name_;                 // Hello's, for the listings
  std::string vhost_;                       // Authenticate's ("/" when it names none)
  std::shared_ptr<NativeSession> session_;  // from login on
};

}  // namespace wharf::server
