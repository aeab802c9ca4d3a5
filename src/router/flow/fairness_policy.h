// FairnessPolicy: which flow of a priority band dispatches next, llm-d's second tier of flow
// control. Each band owns its own instance (a policy's state, such as a round-robin cursor or
// attained service, is per band); the flow controller calls it under its lock, so an instance
// needs no lock of its own and is never called by two threads at once.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "router/flow/flow_item.h"
#include "router/flow/ordering_policy.h"

namespace switchyard::router::flow {

// A flow that may dispatch now: it has queued requests and is under its concurrency limit.
struct FlowCandidate {
  std::string_view flow_id;
  const QueuedItem* head = nullptr;  // its first request by the band's ordering policy
  double weight = 1;                 // its fairness weight, > 0
};

class FairnessPolicy {
 public:
  virtual ~FairnessPolicy() = default;

  // The index of the flow to dispatch from. REQUIRES: `candidates` is non-empty and sorted by
  // flow id; `ordering` is the band's.
  virtual size_t Pick(std::span<const FlowCandidate> candidates, const OrderingPolicy& ordering,
                      Clock::time_point now) = 0;
  // `flow`'s head was dispatched (the pick was taken).
  virtual void Dispatched(const FlowCandidate& flow, Clock::time_point now) = 0;

  // llm-d's type name.
  virtual std::string_view type() const = 0;
};

}  // namespace switchyard::router::flow
