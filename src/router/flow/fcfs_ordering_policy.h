// fcfs-ordering-policy (llm-d's default): first enqueued, first out.
#pragma once

#include "router/flow/ordering_policy.h"

namespace switchyard::router::flow {

class FcfsOrderingPolicy final : public OrderingPolicy {
 public:
  static constexpr std::string_view kType = "fcfs-ordering-policy";
  std::string_view type() const override { return kType; }

 private:
  bool Less(const QueuedItem& a, const QueuedItem& b) const override;
};

}  // namespace switchyard::router::flow
