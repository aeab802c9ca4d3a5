// round-robin-fairness-policy: the band's flows take turns, one request each, in flow id
// order, as llm-d's: the next flow after the one that dispatched last (wrapping), skipping
// flows that cannot dispatch now.
#pragma once

#include <optional>
#include <string>

#include "router/flow/fairness_policy.h"

namespace switchyard::router::flow {

class RoundRobinFairnessPolicy final : public FairnessPolicy {
 public:
  static constexpr std::string_view kType = "round-robin-fairness-policy";

  size_t Pick(std::span<const FlowCandidate> candidates, const OrderingPolicy& ordering,
              Clock::time_point now) override;
  void Dispatched(const FlowCandidate& flow, Clock::time_point now) override;
  std::string_view type() const override { return kType; }

 private:
  std::optional<std::string> last_;  // the flow that dispatched last
};

}  // namespace switchyard::router::flow
