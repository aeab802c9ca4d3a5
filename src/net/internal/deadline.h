// Deadline: a steady_timer whose expiry is forgotten when it is re-armed or cancelled, even
// when the expiry was already queued to run. Loop thread only; the callback must keep the
// Deadline's owner alive (it captures a shared_ptr to it).
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>

#include "net/internal/beast.h"

namespace switchyard::net::internal {

class Deadline {
 public:
  explicit Deadline(const asio::any_io_executor& executor) : timer_(executor) {}

  // Runs on_expiry on the loop after `timeout`, unless re-armed or cancelled first.
  template <typename F>
  void Arm(std::chrono::milliseconds timeout, F on_expiry) {
    const uint64_t generation = ++generation_;
    // expires_after and cancel have throwing signatures but only forward the timer
    // service's error code, which is always success for a steady_timer.
    timer_.expires_after(timeout);
    timer_.async_wait(
        [this, generation, on_expiry = std::move(on_expiry)](const ErrorCode& ec) mutable {
          if (!ec && generation == generation_)
            on_expiry();
        });
  }

  void Cancel() {
    ++generation_;
    timer_.cancel();
  }

 private:
  asio::steady_timer timer_;
  uint64_t generation_ = 0;
};

}  // namespace switchyard::net::internal
