// utilization-detector (llm-d's default saturation detector): reactive, from the scraped
// metrics. Each endpoint scores its most constrained resource,
//
//   score = max((waiting + credit) / queueDepthThreshold, kv_cache_usage / kvCacheUtilThreshold)
//
// where credit = max(0, requests the router has in flight to it - (waiting + running))
// counts what the router sent since the last scrape (llm-d's scrape-lag compensation: the
// queue it reads is stale-low between scrapes), and an endpoint whose metrics are older than
// metricsStalenessThreshold scores 1. Pool saturation is the mean score. Idle capacity: a
// fresh endpoint with no queue term and its KV cache under the threshold.
//
// As a filter it drops stale endpoints and those past queueDepthThreshold * (1 + headroom)
// or min(1, kvCacheUtilThreshold * (1 + headroom)), keeping every candidate when it would drop
// them all.
//
//   parameters: queueDepthThreshold int > 0 (5), kvCacheUtilThreshold in (0, 1] (0.8),
//               metricsStalenessThreshold duration > 0 ("200ms"), headroom >= 0 (0)
#pragma once

#include <chrono>
#include <cstdint>
#include <span>

#include "router/flow/saturation_detector.h"
#include "router/scheduling/plugin.h"

namespace switchyard::router::flow {

struct UtilizationDetectorOptions {
  int64_t queue_depth_threshold = 5;
  double kv_cache_util_threshold = 0.8;
  std::chrono::nanoseconds metrics_staleness_threshold = std::chrono::milliseconds(200);
  double headroom = 0;
};

class UtilizationDetector final : public SaturationDetector, public Filter {
 public:
  // REQUIRES: the options are in the ranges above.
  explicit UtilizationDetector(const UtilizationDetectorOptions& options) : options_(options) {}

  double Saturation(std::span<const Endpoint> endpoints, Clock::time_point now) const override;
  bool HasIdleCapacity(std::span<const Endpoint> endpoints, Clock::time_point now) const override;
  Candidates Apply(const SchedulingRequest& request, CycleState& cycle,
                   const Candidates& candidates) override;

 private:
  bool Stale(const Endpoint& e, Clock::time_point now) const;
  // waiting + credit, the queue the endpoint has once the router's unscraped sends land.
  static int64_t Queue(const Endpoint& e);
  double Score(const Endpoint& e, Clock::time_point now) const;

  const UtilizationDetectorOptions options_;
};

}  // namespace switchyard::router::flow
