// server/codec.h
//
// Codec is one protocol's side of a client connection on its I/O thread: what the frames a
// Connection (server/connection.h) cuts from the socket mean, and how the output of the broker
// thread is written. The Connection owns the socket, back-pressure, flow control, login and the
// close sequence for every protocol; the codec decides, frame by frame, what to ask of them.
//
//   decoding   OnFrame for each complete frame, in order: a handshake step, or a request added
//              to the batch being built (or held while publishing is blocked); PostBatch hands
//              the batch to the broker thread, where the protocol's handler runs it and ends with
//              SessionCore::EndBatch.
//   login      the codec calls Connection::StartLogin with the client's credentials; OnLoggedIn
//              opens its broker sessions and answers the client.
//   encoding   Encode for each outbox item; EncodeClose and EncodeBlocked for the connection's
//              own notices.
//   closing    CloseSessions once the socket is closed.
//
// Thread safety: every method is called on the connection's I/O thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "net/frame.h"
#include "server/session_core.h"
#include "wharf/status.h"

namespace wharf::server {

class Codec {
 public:
  virtual ~Codec() = default;

  // The largest frame accepted before login (no one unauthenticated may make the broker buffer
  // a full-size frame).
  virtual size_t handshake_frame_bytes() const = 0;
  // How the first bytes are cut into frames (the codec may change it: Connection::SetFraming).
  virtual net::Framing initial_framing() const { return net::Framing::kLengthPrefixed; }
  // After its close is written, the connection reads (and drops) what the peer still sends
  // until the peer closes (or 5 s pass), instead of closing at once: a protocol whose peer
  // answers a close (AMQP's close-ok) then reads the close whole, never a reset.
  virtual bool drains_after_close() const { return false; }
  // Whether the connection takes its place in the user's max-connections at login (the
  // native protocol); AMQP takes it itself at connection.open, where RabbitMQ checks it.
  virtual bool counts_user_at_login() const { return true; }

  // One complete frame. A non-OK status stops reading and closes the connection with it; after
  // Connection::NoteClientClosed it is the client's own close. `*ends_batch`: the request's
  // answer can be large (a listing, a pull), so the batch ends with it, and a client cannot ask
  // for more output at once than back-pressure can hold back.
  virtual Status OnFrame(std::string_view frame, bool* ends_batch) = 0;
  // A request is held by flow control (Connection::HoldPublish).
  virtual bool holding() const = 0;
  // The codec waits for the broker (Connection::OpenInBroker): nothing more is decoded until
  // it calls Connection::ResumeReading.
  virtual bool paused() const { return false; }
  // Publishing is allowed again: the held request goes first into the next batch.
  virtual void ReleaseHeld() = 0;
  // Posts the requests decoded since the last call to the broker thread (with
  // Connection::NoteBatchPosted); false when there were none.
  virtual bool PostBatch() = 0;

  // The login succeeded: open the broker session(s) and answer the client.
  virtual void OnLoggedIn() = 0;

  virtual void Encode(Outbound& item, std::string* out) = 0;
  // The connection closes: with `status` when it is an error, else for `reason`.
  virtual void EncodeClose(const Status& status, std::string_view reason, std::string* out) = 0;
  // Publishing is blocked (for `reason`) or unblocked.
  virtual void EncodeBlocked(bool blocked, std::string_view reason, std::string* out) = 0;

  // The output the broker held back can go now (the connection's output drained).
  virtual void PostResume() = 0;
  // The socket is closed: the broker closes every session this connection opened, then the
  // SessionCore is detached.
  virtual void CloseSessions() = 0;
};

}  // namespace wharf::server
