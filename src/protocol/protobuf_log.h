// protocol/protobuf_log.h
//
// libprotobuf logs on its own, to stderr: a string field that is not valid UTF-8 in a frame a
// client sent is a line "[libprotobuf ERROR ...] String field 'wharf.wire.v1.Hello.client_name'
// contains invalid UTF-8 data ..." written past spdlog, which breaks a JSON log stream and
// lets any client add unformatted lines to the broker's log. InstallProtobufLogHandler sends
// those lines through spdlog instead (at debug: they are about a peer's bytes, and the
// connection's own error is logged where it is handled) and keeps the last one of each thread,
// so that a failed parse can tell the client why (TakeParseError).
//
// Only a program installs it (wharfd's main): a library must not take over its host's
// protobuf log. With protobuf 22 and later (Abseil logging) there is no such hook and both
// calls do nothing.
//
// Thread safety: InstallProtobufLogHandler once, at start, before other threads parse;
// TakeParseError from any thread (each sees its own).
#pragma once

#include <string>

namespace wharf::protocol {

void InstallProtobufLogHandler();

// Why the last parse on this thread failed, for the peer: "string field
// 'wharf.wire.v1.Hello.client_name' is not valid UTF-8", else libprotobuf's own words, else ""
// (it logged nothing: the bytes are simply not a valid encoding). Clears it.
std::string TakeParseError();

}  // namespace wharf::protocol
