// Deadline: a timeout on a loop that is cheap to arm, move and disarm many times per
// request. Arming runs on_expiry once `timeout` has passed, unless the deadline is re-armed
// or disarmed first.
//
// A pending wait on the timer is left alone when the deadline moves later (or is disarmed):
// that wait ends at its earlier time, finds the deadline moved, and waits again for the
// rest (or ends). Only a deadline earlier than the pending wait restarts the timer. So a
// connection that arms a header timeout, a body timeout and a keep-alive timeout per
// request touches its timer about once per timeout period, not three times per request:
// each restart of a timer that becomes its loop's earliest costs asio a timerfd_settime
// syscall, and each restart of a pending wait a cancelled completion.
//
// Ownership: on_expiry (given once) may point at the owner without holding it; the pending
// wait holds the `keep_alive` of the Arm that started it, so the owner outlives any wait
// that may still call on_expiry. Disarm keeps that wait (and so the owner) until its time;
// Cancel ends it at once, for an owner that is closing.
//
// Loop thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "net/internal/beast.h"

namespace switchyard::net::internal {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  Deadline(const Executor& executor, std::function<void()> on_expiry)
      : timer_(executor), on_expiry_(std::move(on_expiry)) {}
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  // Runs on_expiry on the loop once `timeout` has passed, unless re-armed or disarmed first.
  void Arm(std::chrono::milliseconds timeout, std::shared_ptr<void> keep_alive) {
    ArmAt(Clock::now() + timeout, std::move(keep_alive));
  }

  // The same at `deadline`: for an owner that has just read the clock.
  void ArmAt(Clock::time_point deadline, std::shared_ptr<void> keep_alive) {
    deadline_ = deadline;
    armed_ = true;
    if (waiting_ && wait_until_ <= deadline_)
      return;  // that wait ends first and looks again
    Wait(std::move(keep_alive));
  }

  // Forgets the deadline. A pending wait ends at its time without running on_expiry.
  void Disarm() { armed_ = false; }

  // Forgets the deadline and ends the pending wait now, releasing its keep_alive.
  void Cancel() {
    armed_ = false;
    if (!waiting_)
      return;
    waiting_ = false;
    ++generation_;
    // Has a throwing signature but only forwards the timer service's error code, which is
    // always success for a steady_timer.
    timer_.cancel();
  }

 private:
  void Wait(std::shared_ptr<void> keep_alive) {
    waiting_ = true;
    wait_until_ = deadline_;
    const uint64_t generation = ++generation_;
    // Cancels a pending wait: its handler runs with operation_aborted.
    timer_.expires_at(wait_until_);
    timer_.async_wait(
        [this, generation, keep_alive = std::move(keep_alive)](const ErrorCode& ec) mutable {
          // An aborted wait may outlive this Deadline: look at nothing else then.
          if (ec || generation != generation_)
            return;
          waiting_ = false;
          if (!armed_)
            return;
          if (Clock::now() < deadline_) {
            Wait(std::move(keep_alive));
            return;
          }
          armed_ = false;
          on_expiry_();
        });
  }

  SteadyTimer timer_;
  const std::function<void()> on_expiry_;
  Clock::time_point deadline_;
  bool armed_ = false;
  // A wait is pending on timer_, ending at wait_until_ (<= deadline_ while armed).
  bool waiting_ = false;
  Clock::time_point wait_until_;
  uint64_t generation_ = 0;
};

}  // namespace switchyard::net::internal
