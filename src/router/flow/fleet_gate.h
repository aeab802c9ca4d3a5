// FleetGate: flow control's dispatch gate over the router's endpoint table and a saturation
// detector (llm-d's). A request may go while the fleet's saturation is under 1; a sheddable
// one (priority < 0) only into idle capacity as well (an endpoint with nothing waiting on
// it), so batch traffic never queues inside the engines ahead of interactive requests.
// Every answer reads a fresh snapshot, whose in-flight counts include the requests the gate
// let through a moment ago (the router marks an endpoint busy as it sends), so a burst of
// dispatches between two scrapes does not overshoot. Remembers the last saturation for the
// metrics. Any thread.
#pragma once

#include <atomic>
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
  // The saturation the last MayDispatch saw (1 before any).
  double last_saturation() const { return last_saturation_.load(std::memory_order_relaxed); }

 private:
  const EndpointTable* const table_;
  const SaturationDetector* const detector_;
  std::atomic<double> last_saturation_{1.0};
};

}  // namespace switchyard::router::flow
