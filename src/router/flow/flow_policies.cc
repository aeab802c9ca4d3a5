#include "router/flow/flow_policies.h"

#include "router/flow/edf_ordering_policy.h"
#include "router/flow/fcfs_ordering_policy.h"
#include "router/flow/global_strict_fairness_policy.h"
#include "router/flow/program_aware_fairness_policy.h"
#include "router/flow/round_robin_fairness_policy.h"
#include "router/flow/slo_deadline_ordering_policy.h"

namespace switchyard::router::flow {

std::optional<FairnessPolicyType> FairnessPolicyTypeNamed(std::string_view type) {
  if (type == GlobalStrictFairnessPolicy::kType)
    return FairnessPolicyType::kGlobalStrict;
  if (type == RoundRobinFairnessPolicy::kType)
    return FairnessPolicyType::kRoundRobin;
  if (type == ProgramAwareFairnessPolicy::kType)
    return FairnessPolicyType::kProgramAware;
  return std::nullopt;
}

std::optional<OrderingPolicyType> OrderingPolicyTypeNamed(std::string_view type) {
  if (type == FcfsOrderingPolicy::kType)
    return OrderingPolicyType::kFcfs;
  if (type == EdfOrderingPolicy::kType)
    return OrderingPolicyType::kEdf;
  if (type == SloDeadlineOrderingPolicy::kType)
    return OrderingPolicyType::kSloDeadline;
  return std::nullopt;
}

std::unique_ptr<FairnessPolicy> MakeFairnessPolicy(FairnessPolicyType type) {
  switch (type) {
    case FairnessPolicyType::kGlobalStrict:
      return std::make_unique<GlobalStrictFairnessPolicy>();
    case FairnessPolicyType::kRoundRobin:
      return std::make_unique<RoundRobinFairnessPolicy>();
    case FairnessPolicyType::kProgramAware:
      return std::make_unique<ProgramAwareFairnessPolicy>();
  }
  return std::make_unique<GlobalStrictFairnessPolicy>();
}

std::unique_ptr<OrderingPolicy> MakeOrderingPolicy(OrderingPolicyType type) {
  switch (type) {
    case OrderingPolicyType::kFcfs:
      return std::make_unique<FcfsOrderingPolicy>();
    case OrderingPolicyType::kEdf:
      return std::make_unique<EdfOrderingPolicy>();
    case OrderingPolicyType::kSloDeadline:
      return std::make_unique<SloDeadlineOrderingPolicy>();
  }
  return std::make_unique<FcfsOrderingPolicy>();
}

}  // namespace switchyard::router::flow
