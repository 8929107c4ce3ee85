#include "server/log_file.h"

#include <cstdio>
#include <filesystem>

namespace wharf::server {

RotatingLogFile::RotatingLogFile(std::string path, uint64_t max_bytes, uint32_t max_files)
    : path_(std::move(path)), max_bytes_(max_bytes), max_files_(max_files) {
  file_.open(path_, /*truncate=*/false);
  size_ = file_.size();
}

void RotatingLogFile::Reopen() {
  std::lock_guard lock(mutex_);
  file_.close();
  file_.open(path_, /*truncate=*/false);
  size_ = file_.size();
}

void RotatingLogFile::sink_it_(const spdlog::details::log_msg& msg) {
  spdlog::memory_buf_t line;
  formatter_->format(msg, line);
  if (max_bytes_ > 0 && size_ > 0 && size_ + line.size() > max_bytes_) Rotate();
  file_.write(line);
  size_ += line.size();
}

void RotatingLogFile::flush_() { file_.flush(); }

void RotatingLogFile::Rotate() {
  file_.close();
  std::error_code ec;
  if (max_files_ == 0) {
    std::filesystem::remove(path_, ec);
  } else {
    // wharfd.log.N-1 -> .N, ..., wharfd.log -> .1; what was .N is overwritten (dropped).
    for (uint32_t i = max_files_; i > 1; --i) {
      std::filesystem::rename(path_ + "." + std::to_string(i - 1), path_ + "." + std::to_string(i),
                              ec);
    }
    std::filesystem::rename(path_, path_ + ".1", ec);
  }
  // A rename that failed (permissions) leaves the file: truncating it loses the old lines
  // but never blocks logging, and the size limit holds.
  file_.open(path_, /*truncate=*/true);
  size_ = 0;
}

}  // namespace wharf::server
