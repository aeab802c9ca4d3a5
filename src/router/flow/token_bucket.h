// TokenBucket: a rate with a burst. It holds up to `capacity` tokens, full at first use, and
// earns `rate_per_second` more continuously; a caller takes what a request costs. Taking more
// than it holds leaves it in debt (below zero), which later refills pay back first: that is
// how tokens generated after admission still count against a quota.
//
// A value, not thread-safe: its owner locks.
#pragma once

#include <chrono>
#include <optional>

namespace switchyard::router::flow {

using Clock = std::chrono::steady_clock;

class TokenBucket {
 public:
  // REQUIRES: capacity > 0, rate_per_second > 0, both finite.
  TokenBucket(double capacity, double rate_per_second);

  // Adds what the time since the last refill earned, up to the capacity. A `now` earlier than
  // the last one adds nothing (callers read the clock on different threads).
  void Refill(Clock::time_point now);

  // Whole seconds (at least 1) until `amount` is held, at the rate, from what is held now; 0
  // when it is held now. REQUIRES: amount <= capacity.
  std::chrono::seconds Wait(double amount) const;

  // Takes `amount`, into debt if need be.
  void Take(double amount) { available_ -= amount; }

  double available() const { return available_; }
  double capacity() const { return capacity_; }

 private:
  double capacity_;
  double rate_per_second_;
  double available_;
  std::optional<Clock::time_point> last_refill_;
};

}  // namespace switchyard::router::flow
