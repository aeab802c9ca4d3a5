#include "router/flow/global_strict_fairness_policy.h"

namespace switchyard::router::flow {

size_t GlobalStrictFairnessPolicy::Pick(std::span<const FlowCandidate> candidates,
                                        const OrderingPolicy& ordering, Clock::time_point) {
  size_t best = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (ordering.Before(*candidates[i].head, *candidates[best].head))
      best = i;
  }
  return best;
}

}  // namespace switchyard::router::flow
