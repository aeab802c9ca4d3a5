#include "router/flow/round_robin_fairness_policy.h"

#include <algorithm>

namespace switchyard::router::flow {

size_t RoundRobinFairnessPolicy::Pick(std::span<const FlowCandidate> candidates,
                                      const OrderingPolicy&, Clock::time_point) {
  if (!last_.has_value())
    return 0;
  const auto next = std::upper_bound(
      candidates.begin(), candidates.end(), *last_,
      [](const std::string& last, const FlowCandidate& c) { return last < c.flow_id; });
  return next == candidates.end() ? 0 : static_cast<size_t>(next - candidates.begin());
}

void RoundRobinFairnessPolicy::Dispatched(const FlowCandidate& flow, Clock::time_point) {
  last_ = std::string(flow.flow_id);
}

}  // namespace switchyard::router::flow
