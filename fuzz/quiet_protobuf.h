// fuzz/quiet_protobuf.h
//
// For targets that parse protobuf: libprotobuf logs every string field that is not UTF-8 to
// stderr, thousands of lines a second under a fuzzer, which slows it and buries its report.
// LLVMFuzzerInitialize (run once by libFuzzer, and by replay_main.cc) turns that off; a failed
// parse is still seen by its return value. Include it in one .cc per target.
#pragma once

#include <google/protobuf/stubs/common.h>
#if GOOGLE_PROTOBUF_VERSION < 4022000
#include <google/protobuf/stubs/logging.h>
#endif

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
#if GOOGLE_PROTOBUF_VERSION < 4022000
  google::protobuf::SetLogHandler(nullptr);
#endif
  return 0;
}
