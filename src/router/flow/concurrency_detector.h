// concurrency-detector (llm-d's): synchronous, from the router's own in-flight accounting
// (EndpointLoad) rather than scraped metrics, so a burst is seen at once; blind to what the
// engines' KV caches actually hold.
//
//   requests mode: saturation = in-flight requests / (endpoints * maxConcurrency)
//   tokens mode:   saturation = in-flight tokens (prompt + generated so far)
//                                / (endpoints * maxTokenConcurrency)
//   hybrid:        the larger of the two
//
// Idle capacity: an endpoint under its limit in every dimension the mode counts. As a filter
// it keeps the endpoints under limit * (1 + headroom), every candidate when none is.
//
//   parameters: concurrencyMode requests | tokens | hybrid (requests), maxConcurrency int > 0
//               (100), maxTokenConcurrency int > 0 (1000000), headroom >= 0 (0)
#pragma once

#include <cstdint>
#include <span>

#include "router/flow/saturation_detector.h"
#include "router/scheduling/plugin.h"

namespace switchyard::router::flow {

struct ConcurrencyDetectorOptions {
  enum class Mode { kRequests, kTokens, kHybrid };
  Mode mode = Mode::kRequests;
  int64_t max_concurrency = 100;
  int64_t max_token_concurrency = 1'000'000;
  double headroom = 0;
};

class ConcurrencyDetector final : public SaturationDetector, public Filter {
 public:
  // REQUIRES: the options are in the ranges above.
  explicit ConcurrencyDetector(const ConcurrencyDetectorOptions& options) : options_(options) {}

  double Saturation(std::span<const Endpoint> endpoints, Clock::time_point now) const override;
  bool HasIdleCapacity(std::span<const Endpoint> endpoints, Clock::time_point now) const override;
  Candidates Apply(const SchedulingRequest& request, CycleState& cycle,
                   const Candidates& candidates) override;

 private:
  // The endpoint's load as a fraction of its limit, in the mode's most constrained dimension.
  double Load(const Endpoint& e) const;

  const ConcurrencyDetectorOptions options_;
};

}  // namespace switchyard::router::flow
