#include "router/flow/utilization_detector.h"

#include <algorithm>

namespace switchyard::router::flow {

bool UtilizationDetector::Stale(const Endpoint& e, Clock::time_point now) const {
  return !e.metrics.fresh || now - e.metrics.scraped_at > options_.metrics_staleness_threshold;
}

int64_t UtilizationDetector::Queue(const Endpoint& e) {
  const int64_t seen = e.metrics.waiting_requests + e.metrics.running_requests;
  return e.metrics.waiting_requests + std::max<int64_t>(0, e.active_requests() - seen);
}

double UtilizationDetector::Score(const Endpoint& e, Clock::time_point now) const {
  if (Stale(e, now))
    return 1.0;
  return std::max(
      static_cast<double>(Queue(e)) / static_cast<double>(options_.queue_depth_threshold),
      e.metrics.kv_cache_usage / options_.kv_cache_util_threshold);
}

double UtilizationDetector::Saturation(std::span<const Endpoint> endpoints,
                                       Clock::time_point now) const {
  if (endpoints.empty())
    return 1.0;
  double sum = 0;
  for (const Endpoint& e : endpoints)
    sum += Score(e, now);
  return sum / static_cast<double>(endpoints.size());
}

bool UtilizationDetector::HasIdleCapacity(std::span<const Endpoint> endpoints,
                                          Clock::time_point now) const {
  return std::any_of(endpoints.begin(), endpoints.end(), [&](const Endpoint& e) {
    return !Stale(e, now) && Queue(e) == 0 &&
           e.metrics.kv_cache_usage < options_.kv_cache_util_threshold;
  });
}

Candidates UtilizationDetector::Apply(const SchedulingRequest&, CycleState&,
                                      const Candidates& candidates) {
  const Clock::time_point now = Clock::now();
  const double max_queue =
      static_cast<double>(options_.queue_depth_threshold) * (1 + options_.headroom);
  const double max_kv = std::min(1.0, options_.kv_cache_util_threshold * (1 + options_.headroom));
  Candidates kept;
  for (const Endpoint* e : candidates) {
    if (!Stale(*e, now) && static_cast<double>(Queue(*e)) <= max_queue &&
        e->metrics.kv_cache_usage <= max_kv) {
      kept.push_back(e);
    }
  }
  return kept.empty() ? candidates : kept;
}

}  // namespace switchyard::router::flow
