// FlowMetrics: the tenants' and flow control's series on the router's /metrics, llm-d's EPP
// flow-control metrics under our prefix:
//
//   switchyard_router_flow_control_request_queue_duration_seconds{fairness_id,priority,outcome}
//       histogram, llm_d_epp_flow_control_request_queue_duration_seconds (its buckets): enqueue
//       to dispatch (outcome "dispatched") or to rejection (outcome the dropped reason,
//       "rejected-ttl-expired" ...).
//   switchyard_router_flow_control_queue_size{fairness_id,priority}        gauge
//       llm_d_epp_flow_control_queue_size: requests waiting in the router.
//   switchyard_router_flow_control_queue_bytes{fairness_id,priority}       gauge
//   switchyard_router_flow_control_inflight_requests{fairness_id,priority} gauge
//       dispatched and not yet ended.
//   switchyard_router_flow_control_pool_saturation                         gauge
//       llm_d_epp_flow_control_pool_saturation: what the saturation detector last said.
//   switchyard_router_tenant_requests_rejected_total{tenant,reason}        counter
//       requests the router answered itself: unauthenticated (401, tenant ""),
//       unknown-objective (400), forbidden-objective (403), the limiter's reasons (429:
//       rate-limited-requests, rate-limited-tokens, exceeds-token-quota), max-concurrent
//       (429, flow control off) and flow control's dropped reasons.
//   switchyard_router_tenant_tokens_total{tenant,kind}                     counter
//       prompt tokens admitted and generated tokens streamed, as the tenant's token quota
//       is charged (kind prompt, generated).
//
// Fairness ids come from trusted headers too, so the series per id are capped: past
// kMaxFairnessIds distinct ids, the rest record under fairness_id "other". Recording takes a
// short lock to find the series; collecting builds the families. Any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "prometheus/metric_family.h"

#include "base/atomic_histogram.h"
#include "base/mutex.h"
#include "router/flow/flow_controller.h"
#include "router/flow/tenant_limiter.h"

namespace switchyard::router::flow {

class FlowMetrics {
 public:
  static constexpr size_t kMaxFairnessIds = 1000;

  // A request left the flow controller after `seconds` in it: dispatched, or rejected.
  void QueueTime(std::string_view fairness_id, int32_t priority, std::string_view outcome,
                 double seconds);
  // The router answered a request of `tenant` ("" before one was known) itself, for
  // `reason`. (The limiter's refusals are counted by the limiter: Collect reads them.)
  void Rejected(std::string_view tenant, std::string_view reason);

  // The families: the recorded series, the queue gauges from `flows` (null: flow control
  // off), the pool saturation, and the limiter's token and refusal counts from `usage`.
  std::vector<prometheus::MetricFamily> Collect(const FlowControlSnapshot* flows, double saturation,
                                                const std::vector<TenantUsage>& usage) const;

 private:
  using QueueKey = std::tuple<std::string, int32_t, std::string>;  // fairness id, priority,
                                                                   // outcome
  mutable base::Mutex mu_;
  std::map<QueueKey, std::unique_ptr<base::AtomicHistogram>> queue_times_ ABSL_GUARDED_BY(mu_);
  std::set<std::string, std::less<>> fairness_ids_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, uint64_t> rejected_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router::flow
