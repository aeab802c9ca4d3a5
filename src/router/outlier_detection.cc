#include "router/outlier_detection.h"

#include <algorithm>

namespace switchyard::router {

bool MayEject(const OutlierDetectionConfig& config, int members, int ejected) {
  return ejected == 0 || static_cast<int64_t>(ejected + 1) * 100 <=
                             static_cast<int64_t>(config.max_ejection_percent) * members;
}

void OutlierState::Eject(const OutlierDetectionConfig& config, Clock::time_point now) {
  // Each interval spent in the routing set since the last ejection forgives one.
  if (multiplier_ > 0 && config.interval.count() > 0) {
    const int64_t intervals = (now - ejected_until_) / config.interval;
    multiplier_ = static_cast<int>(std::max<int64_t>(0, multiplier_ - intervals));
  }
  // As Envoy: the cap is never below the base time. The multiplier stops where the cap is
  // reached, so that forgiving it takes no longer than reaching it did.
  const std::chrono::milliseconds cap =
      std::max(config.max_ejection_time, config.base_ejection_time);
  if (config.base_ejection_time * multiplier_ < cap)
    ++multiplier_;
  ++ejections_;
  ejected_until_ = now + std::min(config.base_ejection_time * multiplier_, cap);
}

}  // namespace switchyard::router
