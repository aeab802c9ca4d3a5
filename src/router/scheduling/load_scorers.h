// Load scorers, named and defined as llm-d's (shared/reference/llm-d.md §3.2):
//   queue-scorer                 (maxQ - q) / (maxQ - minQ) over the candidates' waiting
//                                queues; 1 when all are equal
//   kv-cache-utilization-scorer  1 - KV cache usage
//   running-requests-size-scorer the same min-max form over running requests
//   active-request-scorer        router-tracked in-flight requests: <= idle_threshold
//                                scores 1, busier ones max_busy_score * (1 - a / (max a + 1))
// Endpoints whose metrics are stale score 0 on the metric scorers: an endpoint we cannot
// see is not assumed idle. Stateless; any thread.
#pragma once

#include <cstdint>

#include "router/scheduling/plugin.h"

namespace switchyard::router {

class QueueScorer final : public Scorer {
 public:
  void Score(const SchedulingRequest& request, CycleState& cycle, const Candidates& candidates,
             std::span<double> scores) override;
};

class KvCacheUtilizationScorer final : public Scorer {
 public:
  void Score(const SchedulingRequest& request, CycleState& cycle, const Candidates& candidates,
             std::span<double> scores) override;
};

class RunningRequestsSizeScorer final : public Scorer {
 public:
  void Score(const SchedulingRequest& request, CycleState& cycle, const Candidates& candidates,
             std::span<double> scores) override;
};

class ActiveRequestScorer final : public Scorer {
 public:
  explicit ActiveRequestScorer(int64_t idle_threshold = 0, double max_busy_score = 1.0)
      : idle_threshold_(idle_threshold), max_busy_score_(max_busy_score) {}
  void Score(const SchedulingRequest& request, CycleState& cycle, const Candidates& candidates,
             std::span<double> scores) override;

 private:
  int64_t idle_threshold_;
  double max_busy_score_;
};

}  // namespace switchyard::router
