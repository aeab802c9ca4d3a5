#include "router/scheduling/load_scorers.h"

#include <algorithm>
#include <limits>

namespace switchyard::router {
namespace {

// Fewer is better, min-max normalized over the fresh candidates.
template <typename Get>
void MinMaxLowerIsBetter(const Candidates& candidates, std::span<double> scores, Get get) {
  int64_t lo = std::numeric_limits<int64_t>::max();
  int64_t hi = std::numeric_limits<int64_t>::min();
  for (const Endpoint* e : candidates) {
    if (!e->metrics.fresh)
      continue;
    lo = std::min(lo, get(*e));
    hi = std::max(hi, get(*e));
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Endpoint& e = *candidates[i];
    if (!e.metrics.fresh) {
      scores[i] = 0;
    } else if (hi == lo) {
      scores[i] = 1;
    } else {
      scores[i] = static_cast<double>(hi - get(e)) / static_cast<double>(hi - lo);
    }
  }
}

}  // namespace

void QueueScorer::Score(const SchedulingRequest&, CycleState&, const Candidates& candidates,
                        std::span<double> scores) {
  MinMaxLowerIsBetter(candidates, scores,
                      [](const Endpoint& e) { return e.metrics.waiting_requests; });
}

void RunningRequestsSizeScorer::Score(const SchedulingRequest&, CycleState&,
                                      const Candidates& candidates, std::span<double> scores) {
  MinMaxLowerIsBetter(candidates, scores,
                      [](const Endpoint& e) { return e.metrics.running_requests; });
}

void KvCacheUtilizationScorer::Score(const SchedulingRequest&, CycleState&,
                                     const Candidates& candidates, std::span<double> scores) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    const EndpointMetrics& m = candidates[i]->metrics;
    scores[i] = m.fresh ? 1.0 - m.kv_cache_usage : 0.0;
  }
}

void ActiveRequestScorer::Score(const SchedulingRequest&, CycleState&, const Candidates& candidates,
                                std::span<double> scores) {
  int64_t max_active = 0;
  for (const Endpoint* e : candidates)
    max_active = std::max(max_active, e->active_requests());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const int64_t a = candidates[i]->active_requests();
    if (a <= idle_threshold_) {
      scores[i] = 1.0;
    } else {
      scores[i] =
          max_busy_score_ * (1.0 - static_cast<double>(a) / static_cast<double>(max_active + 1));
    }
  }
}

}  // namespace switchyard::router
