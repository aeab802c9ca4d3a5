// FleetGate: flow control's dispatch gate over the router's endpoint table and a saturation
// detector (llm-d's). A request may go while the fleet's saturation is under 1; a sheddable
// one (priority < 0) only into idle capacity as well (an endpoint with nothing waiting on
// it), so batch traffic never queues inside the engines ahead of interactive requests.
// Every answer reads a fresh snapshot, whose in-flight counts include the requests the gate
// let through a moment ago (the router marks an endpoint busy as it sends), so a burst of
// dispatches between two scrapes does not overshoot. Any thread.
#pragma once

#include <cstdint>

#include "router/endpoint_table.h"
#include "router/flow/dispatch_gate.h"
#include "router/flow/saturation_detector.h"

namespace switchyard::router::flow {

class FleetGate final : public DispatchGate {
 public:
  // Both outlive the gate.
  FleetGate(const EndpointTable* table, const SaturationDetector* detector)
      : table_(table), detector_(detector) {}

  bool MayDispatch(int32_t priority, Clock::time_point now) override;
  bool HasEndpoints() override;
  // The fleet's saturation now (for /metrics and /debug/flows).
  double Saturation(Clock::time_point now) const;

 private:
  const EndpointTable* const table_;
  const SaturationDetector* const detector_;
};

}  // namespace switchyard::router::flow
