// global-strict-fairness-policy (llm-d's default): no fairness between flows; the band is one
// queue and the request its ordering policy ranks first, whichever flow it is in, goes next.
#pragma once

#include "router/flow/fairness_policy.h"

namespace switchyard::router::flow {

class GlobalStrictFairnessPolicy final : public FairnessPolicy {
 public:
  static constexpr std::string_view kType = "global-strict-fairness-policy";

  size_t Pick(std::span<const FlowCandidate> candidates, const OrderingPolicy& ordering,
              Clock::time_point now) override;
  void Dispatched(const FlowCandidate&, Clock::time_point) override {}
  std::string_view type() const override { return kType; }
};

}  // namespace switchyard::router::flow
