#include "router/flow/fleet_gate.h"

#include <memory>
#include <vector>

namespace switchyard::router::flow {

bool FleetGate::MayDispatch(int32_t priority, Clock::time_point now) {
  const std::shared_ptr<const std::vector<Endpoint>> snapshot = table_->Snapshot(now);
  if (detector_->Saturation(*snapshot, now) >= 1.0)
    return false;
  return priority >= 0 || detector_->HasIdleCapacity(*snapshot, now);
}

double FleetGate::Saturation(Clock::time_point now) const {
  return detector_->Saturation(*table_->Snapshot(now), now);
}

bool FleetGate::HasEndpoints() {
  return !table_->Snapshot(Clock::now())->empty();
}

}  // namespace switchyard::router::flow
