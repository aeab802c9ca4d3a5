#include "router/shared/replica_sync_metrics.h"

#include "router/metric_families.h"

namespace switchyard::router {

std::vector<prometheus::MetricFamily> ReplicaSyncMetrics(const ReplicaSyncStats& s) {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  const auto gauge = [&families](const char* name, const char* help, double value) {
    prometheus::MetricFamily& f = families.emplace_back(NewFamily(name, help, MetricType::Gauge));
    f.metric.push_back(Gauged({}, value));
  };
  const auto counter = [&families](const char* name, const char* help, uint64_t value) {
    prometheus::MetricFamily& f = families.emplace_back(NewFamily(name, help, MetricType::Counter));
    f.metric.push_back(Counted({}, value));
  };
  gauge("switchyard_router_shared_state_connected",
        "1 while the shared store (Redis) answers; 0: this replica schedules on its own view",
        s.connected ? 1 : 0);
  gauge("switchyard_router_shared_state_replicas",
        "Other router replicas whose last update is fresh", static_cast<double>(s.replicas));
  counter("switchyard_router_shared_state_updates_sent_total",
          "Updates this replica wrote to the shared store", s.updates_sent);
  counter("switchyard_router_shared_state_updates_received_total",
          "Other replicas' updates this replica applied", s.updates_received);
  counter("switchyard_router_shared_state_errors_total",
          "Failed connections and commands to the shared store (each one fails open)", s.errors);
  counter("switchyard_router_shared_state_dropped_total",
          "Observations not shared: the queue was full while the store was away", s.dropped);
  counter("switchyard_router_shared_state_malformed_total",
          "Stream entries that were not replica updates", s.malformed);
  return families;
}

}  // namespace switchyard::router
