// DispatchGate: what the flow controller asks before each dispatch, llm-d's saturation
// detector seen from flow control. The router implements it over its endpoints' metrics.
//
// The controller calls it with its own lock held: an implementation must not call back into
// the FlowController, and should answer quickly (from state it keeps, not by scraping).
#pragma once

#include <cstdint>

#include "router/flow/flow_item.h"

namespace switchyard::router::flow {

class DispatchGate {
 public:
  virtual ~DispatchGate() = default;

  // Whether a request of `priority` may be dispatched now. Sheddable bands (priority < 0)
  // are asked too: the gate decides that they need idle capacity.
  virtual bool MayDispatch(int32_t priority, Clock::time_point now) = 0;
  // Whether the pool has any endpoint: chooses between the defaultRequestTTL and the
  // noEndpointRequestTTL budgets.
  virtual bool HasEndpoints() = 0;
};

}  // namespace switchyard::router::flow
