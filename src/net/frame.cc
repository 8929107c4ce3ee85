#include "net/frame.h"

#include <cstring>

namespace wharf::net {

void AppendFrameHeader(uint32_t length, std::string* out) {
  char header[kFrameHeaderBytes] = {static_cast<char>(length >> 24),
                                    static_cast<char>(length >> 16), static_cast<char>(length >> 8),
                                    static_cast<char>(length)};
  out->append(header, sizeof header);
}

char* FrameDecoder::PrepareWrite(size_t n) {
  // After a large frame, give the memory back once everything has been consumed.
  constexpr size_t kKeepBytes = 256u << 10;
  if (begin_ == end_ && buffer_.size() > kKeepBytes && n <= kKeepBytes) {
    std::string().swap(buffer_);
    begin_ = end_ = 0;
  }
  // Slide unconsumed bytes to the front before growing, so the buffer stays bounded by
  // max_frame_bytes plus one read.
  if (begin_ > 0 && (begin_ == end_ || buffer_.size() - end_ < n)) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - end_ < n) buffer_.resize(end_ + n);
  return buffer_.data() + end_;
}

void FrameDecoder::CommitWrite(size_t n) { end_ += n; }

void FrameDecoder::Append(std::string_view bytes) {
  std::memcpy(PrepareWrite(bytes.size()), bytes.data(), bytes.size());
  CommitWrite(bytes.size());
}

Result<std::optional<std::string_view>> FrameDecoder::Next() {
  if (too_large_) {
    return Status(StatusCode::kFrameTooLarge, "frame exceeds the maximum frame size");
  }
  if (end_ - begin_ < kFrameHeaderBytes) return std::optional<std::string_view>();
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + begin_);
  size_t length = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
  if (length > max_frame_bytes_) {
    too_large_ = true;
    return Status(StatusCode::kFrameTooLarge, "frame of " + std::to_string(length) +
                                                  " bytes exceeds the maximum of " +
                                                  std::to_string(max_frame_bytes_));
  }
  if (end_ - begin_ < kFrameHeaderBytes + length) return std::optional<std::string_view>();
  std::string_view payload(buffer_.data() + begin_ + kFrameHeaderBytes, length);
  begin_ += kFrameHeaderBytes + length;
  return std::optional<std::string_view>(payload);
}

bool FrameDecoder::FrameReady() const {
  if (too_large_) return true;
  if (end_ - begin_ < kFrameHeaderBytes) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + begin_);
  size_t length = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
  return length > max_frame_bytes_ || end_ - begin_ >= kFrameHeaderBytes + length;
}

Status FrameDecoder::Finish() const {
  if (end_ == begin_) return Status::Ok();
  return Status(StatusCode::kFrameTruncated, "stream ended " + std::to_string(end_ - begin_) +
                                                 " bytes into an incomplete frame");
}

}  // namespace wharf::net
