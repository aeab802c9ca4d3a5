#include "router/flow/token_bucket.h"

#include <algorithm>
#include <cmath>

namespace switchyard::router::flow {
namespace {

// Refills sum durations converted to doubles: a bucket refilled for exactly the time Wait
// named may hold a hair less than asked. Shortfalls this small count as held.
constexpr double kTolerance = 1e-6;
// Bounds a debt's wait (and the conversion to integer seconds): about 31 years.
constexpr double kMaxWaitSeconds = 1e9;

}  // namespace

TokenBucket::TokenBucket(double capacity, double rate_per_second)
    : capacity_(capacity), rate_per_second_(rate_per_second), available_(capacity) {}

void TokenBucket::Refill(Clock::time_point now) {
  if (last_refill_.has_value() && now > *last_refill_) {
    const double seconds = std::chrono::duration<double>(now - *last_refill_).count();
    available_ = std::min(capacity_, available_ + seconds * rate_per_second_);
  }
  if (!last_refill_.has_value() || now > *last_refill_)
    last_refill_ = now;
}

std::chrono::seconds TokenBucket::Wait(double amount) const {
  const double shortfall = amount - available_;
  if (shortfall <= kTolerance)
    return std::chrono::seconds(0);
  const double seconds = std::min(std::ceil(shortfall / rate_per_second_), kMaxWaitSeconds);
  return std::chrono::seconds(std::max<int64_t>(1, static_cast<int64_t>(seconds)));
}

}  // namespace switchyard::router::flow
