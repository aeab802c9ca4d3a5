// slo-deadline-ordering-policy: earliest SLO deadline first, as llm-d's (deadline = received +
// x-llm-d-slo-ttft-ms, FlowItem::slo_deadline). Items without a deadline go after every item
// with one; equal deadlines, and items without one, in order of receipt.
#pragma once

#include "router/flow/ordering_policy.h"

namespace switchyard::router::flow {

class SloDeadlineOrderingPolicy final : public OrderingPolicy {
 public:
  static constexpr std::string_view kType = "slo-deadline-ordering-policy";
  std::string_view type() const override { return kType; }

 private:
  bool Less(const QueuedItem& a, const QueuedItem& b) const override;
};

}  // namespace switchyard::router::flow
