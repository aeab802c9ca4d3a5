// The built-in flow-control policies, by llm-d's type names: what a fairnessPolicyRef or
// orderingPolicyRef may resolve to, and a fresh instance of each.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "router/flow/fairness_policy.h"
#include "router/flow/ordering_policy.h"

namespace switchyard::router::flow {

enum class FairnessPolicyType {
  kGlobalStrict,  // global-strict-fairness-policy
  kRoundRobin,    // round-robin-fairness-policy
  kProgramAware,  // program-aware-fairness (least attained service)
};

enum class OrderingPolicyType {
  kFcfs,         // fcfs-ordering-policy
  kEdf,          // edf-ordering-policy
  kSloDeadline,  // slo-deadline-ordering-policy
};

// nullopt: not a built-in policy of that kind.
std::optional<FairnessPolicyType> FairnessPolicyTypeNamed(std::string_view type);
std::optional<OrderingPolicyType> OrderingPolicyTypeNamed(std::string_view type);

std::unique_ptr<FairnessPolicy> MakeFairnessPolicy(FairnessPolicyType type);
std::unique_ptr<OrderingPolicy> MakeOrderingPolicy(OrderingPolicyType type);

}  // namespace switchyard::router::flow
