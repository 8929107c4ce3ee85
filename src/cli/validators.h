// cli/validators.h: checks for command-line values that CLI11 (Debian's libcli11-dev) does not
// make on its own, shared by wharfctl and wharf-perf. CLI11's conversion of an unsigned
// option takes "-5" for 2^64-5 and "010" for octal 8; these validators refuse a sign, leading
// "0x", and anything out of range, and rewrite the text to the plain decimal they checked.
//
// Thread safety: plain functions.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace wharf::cli {

// A whole number from min to max, in decimal: "UINT" and "INT" options.
CLI::Validator Unsigned(uint64_t min, uint64_t max);
CLI::Validator Integer(int64_t min, int64_t max);
// A finite number from min to max (CLI::Range lets "nan" through).
CLI::Validator Finite(double min, double max);
// HOST:PORT, [IPv6]:PORT; port 1-65535.
CLI::Validator HostPort();
bool ParseHostPort(const std::string& text, std::string* host, uint16_t* port);

}  // namespace wharf::cli
