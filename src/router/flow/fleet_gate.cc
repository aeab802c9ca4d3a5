#include "router/flow/fleet_gate.h"

#include <memory>
#include <vector>

namespace switchyard::router::flow {

bool FleetGate::MayDispatch(int32_t priority, Clock::time_point now) {
  const std::shared_ptr<const std::vector<Endpoint>> snapshot = table_->Snapshot(now);
  const double saturation = detector_->Saturation(*snapshot, now);
  last_saturation_.store(saturation, std::memory_order_relaxed);
  if (saturation >= 1.0)
    return false;
  return priority >= 0 || detector_->HasIdleCapacity(*snapshot, now);
}

bool FleetGate::HasEndpoints() {
  return !table_->Snapshot(Clock::now())->empty();
}

}  // namespace switchyard::router::flow
