// include/wharf/result.h
//
// Result<T> holds either a T or a non-OK Status. Written so it can later be replaced by
// std::expected<T, Status> (C++23).
//
// Thread safety: a value type; not synchronised.
#pragma once

#include <cassert>
#include <utility>
#include <variant>

#include "wharf/status.h"

namespace wharf {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(value_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(value_); }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> value_;
};

#define WHARF_CONCAT_INNER_(a, b) a##b
#define WHARF_CONCAT_(a, b) WHARF_CONCAT_INNER_(a, b)
#define WHARF_ASSIGN_OR_RETURN(lhs, expr)                   \
  auto WHARF_CONCAT_(wharf_result_, __LINE__) = (expr);     \
  if (!WHARF_CONCAT_(wharf_result_, __LINE__).ok())         \
    return WHARF_CONCAT_(wharf_result_, __LINE__).status(); \
  lhs = std::move(WHARF_CONCAT_(wharf_result_, __LINE__)).value()

}  // namespace wharf
