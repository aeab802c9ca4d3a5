// The shared-state sync's metrics (switchyard_router_shared_state_*), built at scrape time
// from ReplicaSync::Stats.
#pragma once

#include <vector>

#include "prometheus/metric_family.h"

#include "router/shared/replica_sync.h"

namespace switchyard::router {

std::vector<prometheus::MetricFamily> ReplicaSyncMetrics(const ReplicaSyncStats& stats);

}  // namespace switchyard::router
