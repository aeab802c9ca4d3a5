// edf-ordering-policy: earliest deadline first, as llm-d's, whose deadline is the enqueue time
// plus the request's TTL: here the TTL budget in force when it was enqueued (QueuedItem::ttl).
// An item without one (a "0s" TTL) goes after every item with one; equal deadlines in enqueue
// order. With one TTL for every request this is FCFS until the TTL regime changes (an empty
// pool's requests then keep their noEndpointRequestTTL deadlines).
#pragma once

#include "router/flow/ordering_policy.h"

namespace switchyard::router::flow {

class EdfOrderingPolicy final : public OrderingPolicy {
 public:
  static constexpr std::string_view kType = "edf-ordering-policy";
  std::string_view type() const override { return kType; }

 private:
  bool Less(const QueuedItem& a, const QueuedItem& b) const override;
};

}  // namespace switchyard::router::flow
