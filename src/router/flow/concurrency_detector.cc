#include "router/flow/concurrency_detector.h"

#include <algorithm>

namespace switchyard::router::flow {

double ConcurrencyDetector::Load(const Endpoint& e) const {
  using Mode = ConcurrencyDetectorOptions::Mode;
  const double requests =
      static_cast<double>(e.active_requests()) / static_cast<double>(options_.max_concurrency);
  const double tokens = static_cast<double>(e.inflight_tokens()) /
                        static_cast<double>(options_.max_token_concurrency);
  switch (options_.mode) {
    case Mode::kRequests:
      return requests;
    case Mode::kTokens:
      return tokens;
    case Mode::kHybrid:
      return std::max(requests, tokens);
  }
  return requests;
}

double ConcurrencyDetector::Saturation(std::span<const Endpoint> endpoints,
                                       Clock::time_point) const {
  if (endpoints.empty())
    return 1.0;
  // Every endpoint has the same capacity, so the aggregate fraction is the mean load.
  double sum = 0;
  for (const Endpoint& e : endpoints)
    sum += Load(e);
  return sum / static_cast<double>(endpoints.size());
}

bool ConcurrencyDetector::HasIdleCapacity(std::span<const Endpoint> endpoints,
                                          Clock::time_point) const {
  return std::any_of(endpoints.begin(), endpoints.end(),
                     [&](const Endpoint& e) { return Load(e) < 1.0; });
}

Candidates ConcurrencyDetector::Apply(const SchedulingRequest&, CycleState&,
                                      const Candidates& candidates) {
  const double limit = 1.0 + options_.headroom;
  Candidates kept;
  for (const Endpoint* e : candidates) {
    if (Load(*e) < limit)
      kept.push_back(e);
  }
  return kept.empty() ? candidates : kept;
}

}  // namespace switchyard::router::flow
