// amqp/erlang_text.h
//
// Pieces of RabbitMQ's error texts that Erlang's formatter writes: a binary as ~w and ~p print
// it, and the frame snippet rabbit_reader puts in a frame error ("type 1, all octets =
// <<0,20,0,10,0>>"), so that Wharf's reply texts for bad frames are RabbitMQ's
// (tests/integration/amqp_bad_input_test.py records them).
//
// ~p prints a binary whose octets are all printable ASCII (or \t \n \v \f \r \b \e) as a
// string, <<"x">>, escaping " and \; any other as its octets in decimal, <<0,50>>. (Erlang's
// wider latin-1 and Unicode forms are not reproduced; no test of RabbitMQ's needs them.) ~w
// always prints the octets.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "amqp/field_table.h"

namespace wharf::amqp {

// The type RabbitMQ's table parser gives a field value (rabbit_binary_parser), as its
// argument errors name it: bool, byte, unsignedbyte, short, unsignedshort, signedint,
// unsignedint, long, float, double, decimal, longstr, binary, timestamp, table, array, void.
std::string_view ErlangTypeName(const FieldValue& value);

std::string ErlangBinaryP(std::string_view bytes);
std::string ErlangBinaryW(std::string_view bytes);
// "type T, all octets = <<...>>" for a payload of at most 16 octets, else "type T, first 16
// octets = <<...>>" (rabbit_reader's payload_snippet), the binary as ~p prints it.
std::string FrameSnippet(uint8_t type, std::string_view payload);

}  // namespace wharf::amqp
