#include "router/flow/flow_metrics.h"

#include <algorithm>
#include <utility>

#include "prometheus/metric_type.h"

#include "router/metric_families.h"

namespace switchyard::router::flow {
namespace {

// llm_d_epp_flow_control_request_queue_duration_seconds's buckets.
std::vector<double> QueueBuckets() {
  return {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
          0.25,   0.5,    1.0,   2.5,   5.0,  10.0,  30.0, 60.0};
}

}  // namespace

void FlowMetrics::QueueTime(std::string_view fairness_id, int32_t priority,
                            std::string_view outcome, double seconds) {
  base::AtomicHistogram* histogram = nullptr;
  {
    base::MutexLock lock(&mu_);
    std::string id(fairness_id);
    if (!fairness_ids_.contains(id)) {
      if (fairness_ids_.size() >= kMaxFairnessIds)
        id = "other";
      fairness_ids_.insert(id);
    }
    std::unique_ptr<base::AtomicHistogram>& h =
        queue_times_[QueueKey(std::move(id), priority, std::string(outcome))];
    if (h == nullptr)
      h = std::make_unique<base::AtomicHistogram>(QueueBuckets());
    histogram = h.get();
  }
  histogram->Observe(seconds);
}

void FlowMetrics::Rejected(std::string_view tenant, std::string_view reason) {
  base::MutexLock lock(&mu_);
  ++rejected_[{std::string(tenant), std::string(reason)}];
}

std::vector<prometheus::MetricFamily> FlowMetrics::Collect(
    const FlowControlSnapshot* flows, double saturation,
    const std::vector<TenantUsage>& usage) const {
  using prometheus::MetricType;
  prometheus::MetricFamily queue_time =
      NewFamily("switchyard_router_flow_control_request_queue_duration_seconds",
                "Time requests spent in flow control, from enqueue to dispatch or rejection.",
                MetricType::Histogram);
  prometheus::MetricFamily rejected =
      NewFamily("switchyard_router_tenant_requests_rejected_total",
                "Requests the router refused itself, by tenant and reason.", MetricType::Counter);
  prometheus::MetricFamily tokens =
      NewFamily("switchyard_router_tenant_tokens_total",
                "Tokens charged to each tenant's quota: prompt tokens admitted, generated tokens "
                "streamed.",
                MetricType::Counter);
  {
    base::MutexLock lock(&mu_);
    for (const auto& [key, histogram] : queue_times_) {
      const auto& [id, priority, outcome] = key;
      queue_time.metric.push_back(Histogram(
          {{"fairness_id", id}, {"priority", std::to_string(priority)}, {"outcome", outcome}},
          *histogram));
    }
    for (const auto& [key, count] : rejected_)
      rejected.metric.push_back(Counted({{"tenant", key.first}, {"reason", key.second}}, count));
  }
  for (const TenantUsage& u : usage) {
    tokens.metric.push_back(Counted({{"tenant", u.tenant_id}, {"kind", "prompt"}},
                                    static_cast<uint64_t>(u.prompt_tokens)));
    tokens.metric.push_back(
        Counted({{"tenant", u.tenant_id}, {"kind", "generated"}},
                static_cast<uint64_t>(std::max<int64_t>(0, u.generated_tokens))));
    for (size_t r = 0; r < kRefusalReasons; ++r) {
      if (u.refusals[r] > 0) {
        rejected.metric.push_back(
            Counted({{"tenant", u.tenant_id},
                     {"reason", std::string(RefusalReasonName(static_cast<RefusalReason>(r)))}},
                    static_cast<uint64_t>(u.refusals[r])));
      }
    }
  }
  std::vector<prometheus::MetricFamily> out;
  out.push_back(std::move(queue_time));
  out.push_back(std::move(rejected));
  out.push_back(std::move(tokens));
  if (flows != nullptr) {
    prometheus::MetricFamily size =
        NewFamily("switchyard_router_flow_control_queue_size",
                  "Requests waiting in the router's flow control.", MetricType::Gauge);
    prometheus::MetricFamily bytes = NewFamily(
        "switchyard_router_flow_control_queue_bytes",
        "Body bytes of the requests waiting in the router's flow control.", MetricType::Gauge);
    prometheus::MetricFamily in_flight =
        NewFamily("switchyard_router_flow_control_inflight_requests",
                  "Requests flow control dispatched that have not ended.", MetricType::Gauge);
    for (const FlowControlSnapshot::Flow& f : flows->flows) {
      const std::vector<prometheus::ClientMetric::Label> labels = {
          {"fairness_id", f.flow_id}, {"priority", std::to_string(f.priority)}};
      size.metric.push_back(Gauged(labels, static_cast<double>(f.queued)));
      bytes.metric.push_back(Gauged(labels, static_cast<double>(f.queued_bytes)));
      in_flight.metric.push_back(Gauged(labels, static_cast<double>(f.in_flight)));
    }
    prometheus::MetricFamily pool = NewFamily(
        "switchyard_router_flow_control_pool_saturation",
        "The saturation detector's last reading: 0 idle, 1 or more saturated.", MetricType::Gauge);
    pool.metric.push_back(Gauged({}, saturation));
    out.push_back(std::move(size));
    out.push_back(std::move(bytes));
    out.push_back(std::move(in_flight));
    out.push_back(std::move(pool));
  }
  return out;
}

}  // namespace switchyard::router::flow
