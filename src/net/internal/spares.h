// Spares: up to a fixed number of objects a loop keeps after use (read buffers, header lists,
// call timers), to hand out again instead of making new ones. Last in, first out. One
// thread (the loop's).
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace switchyard::net::internal {

template <typename T>
class Spares {
 public:
  explicit Spares(size_t max_kept) : max_kept_(max_kept) {}

  // A kept object, or nullopt when none is.
  std::optional<T> Take() {
    if (kept_.empty())
      return std::nullopt;
    std::optional<T> object(std::move(kept_.back()));
    kept_.pop_back();
    return object;
  }
  bool full() const { return kept_.size() >= max_kept_; }
  // REQUIRES: !full().
  void Keep(T object) { kept_.push_back(std::move(object)); }
  // The kept objects, dropped.
  std::vector<T> TakeAll() { return std::exchange(kept_, {}); }

 private:
  const size_t max_kept_;
  std::vector<T> kept_;
};

}  // namespace switchyard::net::internal
