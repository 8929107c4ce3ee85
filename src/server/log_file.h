// server/log_file.h
//
// RotatingLogFile is wharfd's log file (`--log-file`, `[log] file`): an spdlog sink that
// rotates by size (wharfd.log -> wharfd.log.1 -> ... -> wharfd.log.N, the oldest dropped)
// and can be reopened, so that both ways of rotating work: its own, by size, and an external
// logrotate that moves the file away and sends SIGHUP (wharfd then calls Reopen()).
//
// Thread safety: thread-safe (spdlog's base_sink takes its mutex around every call; Reopen
// takes the same one).
#pragma once

#include <spdlog/details/file_helper.h>
#include <spdlog/sinks/base_sink.h>

#include <cstdint>
#include <mutex>
#include <string>

namespace wharf::server {

class RotatingLogFile final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  // Opens (appends to) `path`; throws spdlog::spdlog_ex when it cannot.
  // `max_bytes` 0: never rotates by size. `max_files`: rotated files kept.
  RotatingLogFile(std::string path, uint64_t max_bytes, uint32_t max_files);

  // Closes and opens the path again (after logrotate moved the file away). Throws
  // spdlog::spdlog_ex when it cannot.
  void Reopen();

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override;

 private:
  void Rotate();

  std::string path_;
  uint64_t max_bytes_;
  uint32_t max_files_;
  spdlog::details::file_helper file_;
  uint64_t size_ = 0;
};

}  // namespace wharf::server
