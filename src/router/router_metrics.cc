#include "router/router_metrics.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <utility>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

#include "base/mutex.h"

namespace switchyard::router {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

constexpr std::array<std::string_view, 4> kRetryReasons = {"connect", "http_502", "http_503",
                                                           "timeout"};

// inference_objective_request_duration_seconds's buckets: 5 ms to an hour.
const Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new Histogram::BucketBoundaries{
      0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8,  1.0,  1.25, 1.5, 2,
      3,     4,     5,    6,   8,   10,  15,  20,   30,   45,   60,  120,
      180,   240,   300,  360, 480, 600, 900, 1200, 1800, 2700, 3600};
  return *buckets;
}

// vllm:time_to_first_token_seconds's buckets.
const Histogram::BucketBoundaries& FirstByteBuckets() {
  static const auto* buckets = new Histogram::BucketBoundaries{
      0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
      1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
  return *buckets;
}

// Scheduling decisions: 1 us to 1 s in 1-2.5-5 steps.
const Histogram::BucketBoundaries& DecisionBuckets() {
  static const auto* buckets = new Histogram::BucketBoundaries{
      1e-6,   2.5e-6, 5e-6, 1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3,
      2.5e-3, 5e-3,   1e-2, 2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1.0};
  return *buckets;
}

Family<Counter>& AddCounter(prometheus::Registry& registry, const std::string& name,
                            const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

Family<Gauge>& AddGauge(prometheus::Registry& registry, const std::string& name,
                        const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

Family<Histogram>& AddHistogram(prometheus::Registry& registry, const std::string& name,
                                const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

// The values of a child's labels, in the family's label order; looked up by string_views.
template <size_t N>
using LabelValues = std::array<std::string, N>;

struct LabelValuesLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return std::lexicographical_compare(
        a.begin(), a.end(), b.begin(), b.end(),
        [](std::string_view x, std::string_view y) { return x < y; });
  }
};

}  // namespace

struct RouterMetrics::Impl {
  // Per-request series of one (endpoint, pool), created on first use.
  struct EndpointSeries {
    Histogram* latency = nullptr;
    Histogram* first_byte = nullptr;
    Counter* prompt_tokens = nullptr;
    Counter* cached_tokens = nullptr;
    std::array<Counter*, kRetryReasons.size()> retries = {};
  };
  // The table-fed gauges of one endpoint.
  struct EndpointGauges {
    std::string pool;
    std::array<Gauge*, 6> gauges = {};  // in the order of Impl::endpoint_gauges
  };

  prometheus::Registry registry;
  Family<Counter>& requests = AddCounter(
      registry, "switchyard_router_requests_total",
      "Client requests by model, endpoint, pool and the HTTP status (or error) they ended with.");
  Family<Histogram>& latency =
      AddHistogram(registry, "switchyard_router_request_duration_seconds",
                   "Arrival to the last response byte, per endpoint, in seconds.");
  Family<Histogram>& first_byte =
      AddHistogram(registry, "switchyard_router_time_to_first_byte_seconds",
                   "Arrival to the first response body byte sent to the client, in seconds.");
  Histogram& tokenize = AddHistogram(registry, "switchyard_router_tokenize_duration_seconds",
                                     "Chat template and tokenization of one request, in seconds.")
                            .Add({}, DecisionBuckets());
  Histogram& schedule =
      AddHistogram(registry, "switchyard_router_scheduler_duration_seconds",
                   "One endpoint pick (snapshot, filters, scorers, picker), in seconds.")
          .Add({}, DecisionBuckets());
  Family<Counter>& retries =
      AddCounter(registry, "switchyard_router_upstream_retries_total",
                 "Attempts that failed before the first byte and went back to the picker.");
  Family<Counter>& prompt_tokens =
      AddCounter(registry, "switchyard_router_prefix_prompt_tokens_total",
                 "Prompt tokens routed to each endpoint (prefix-cache scorer profiles).");
  Family<Counter>& cached_tokens =
      AddCounter(registry, "switchyard_router_prefix_predicted_cached_tokens_total",
                 "Prompt tokens the prefix-cache scorer predicted cached on the picked endpoint.");
  std::array<Family<Gauge>*, 6> endpoint_gauges = {
      &AddGauge(registry, "switchyard_router_endpoint_inflight_requests",
                "The router's requests in flight to each endpoint."),
      &AddGauge(registry, "switchyard_router_endpoint_queue_size",
                "Waiting requests each endpoint reported at its last scrape."),
      &AddGauge(registry, "switchyard_router_endpoint_running_requests",
                "Running requests each endpoint reported at its last scrape."),
      &AddGauge(registry, "switchyard_router_endpoint_kv_cache_usage",
                "KV cache usage (0..1) each endpoint reported at its last scrape."),
      &AddGauge(registry, "switchyard_router_endpoint_healthy",
                "1 when the endpoint is in the routing set, 0 after a failed check."),
      &AddGauge(registry, "switchyard_router_endpoint_metrics_age_seconds",
                "Seconds since the endpoint's last successful scrape (-1: never)."),
  };
  Family<Gauge>& pool_size =
      AddGauge(registry, "switchyard_router_pool_size", "Members of each pool.");
  Family<Gauge>& pool_ready =
      AddGauge(registry, "switchyard_router_pool_ready_endpoints", "Healthy members of each pool.");

  base::Mutex mu;
  // The per-request children, found by their label values without building a label map
  // (prometheus-cpp's Family::Add hashes and looks up a std::map of strings under its own
  // lock; at every request that is measurable).
  std::map<LabelValues<2>, EndpointSeries, LabelValuesLess> series ABSL_GUARDED_BY(mu);
  std::map<LabelValues<4>, Counter*, LabelValuesLess> requests_by_labels ABSL_GUARDED_BY(mu);
  std::map<std::string, EndpointGauges> gauges ABSL_GUARDED_BY(mu);
  std::set<std::string> pools ABSL_GUARDED_BY(mu);

  EndpointSeries& Series(std::string_view endpoint, std::string_view pool)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const std::array<std::string_view, 2> key = {endpoint, pool};
    auto it = series.find(key);
    if (it == series.end())
      it = series.try_emplace({std::string(endpoint), std::string(pool)}).first;
    return it->second;
  }
  prometheus::Labels EndpointLabels(std::string_view endpoint, std::string_view pool) const {
    return {{"endpoint", std::string(endpoint)}, {"pool", std::string(pool)}};
  }
};

RouterMetrics::RouterMetrics(const std::vector<std::string>& pools)
    : impl_(std::make_unique<Impl>()) {
  base::MutexLock lock(&impl_->mu);
  for (const std::string& pool : pools) {
    impl_->pools.insert(pool);
    impl_->pool_size.Add({{"pool", pool}}).Set(0);
    impl_->pool_ready.Add({{"pool", pool}}).Set(0);
  }
}

RouterMetrics::~RouterMetrics() = default;

void RouterMetrics::RequestFinished(std::string_view model, std::string_view endpoint,
                                    std::string_view pool, std::string_view code,
                                    double latency_s) {
  base::MutexLock lock(&impl_->mu);
  const std::array<std::string_view, 4> key = {model, endpoint, pool, code};
  auto it = impl_->requests_by_labels.find(key);
  if (it == impl_->requests_by_labels.end()) {
    Counter* counter = &impl_->requests.Add({{"model", std::string(model)},
                                             {"endpoint", std::string(endpoint)},
                                             {"pool", std::string(pool)},
                                             {"code", std::string(code)}});
    it = impl_->requests_by_labels
             .try_emplace(
                 {std::string(model), std::string(endpoint), std::string(pool), std::string(code)},
                 counter)
             .first;
  }
  it->second->Increment();
  if (endpoint.empty())
    return;
  Impl::EndpointSeries& s = impl_->Series(endpoint, pool);
  if (s.latency == nullptr)
    s.latency = &impl_->latency.Add(impl_->EndpointLabels(endpoint, pool), LatencyBuckets());
  s.latency->Observe(latency_s);
}

void RouterMetrics::FirstByte(std::string_view endpoint, std::string_view pool, double seconds) {
  base::MutexLock lock(&impl_->mu);
  Impl::EndpointSeries& s = impl_->Series(endpoint, pool);
  if (s.first_byte == nullptr) {
    s.first_byte =
        &impl_->first_byte.Add(impl_->EndpointLabels(endpoint, pool), FirstByteBuckets());
  }
  s.first_byte->Observe(seconds);
}

void RouterMetrics::ObserveTokenize(double seconds) {
  impl_->tokenize.Observe(seconds);
}

void RouterMetrics::ObserveSchedule(double seconds) {
  impl_->schedule.Observe(seconds);
}

void RouterMetrics::Retry(std::string_view endpoint, std::string_view pool, RetryReason reason) {
  const auto index = static_cast<size_t>(reason);
  base::MutexLock lock(&impl_->mu);
  Impl::EndpointSeries& s = impl_->Series(endpoint, pool);
  if (s.retries[index] == nullptr) {
    prometheus::Labels labels = impl_->EndpointLabels(endpoint, pool);
    labels["reason"] = std::string(kRetryReasons[index]);
    s.retries[index] = &impl_->retries.Add(labels);
  }
  s.retries[index]->Increment();
}

void RouterMetrics::PrefixPrediction(std::string_view endpoint, std::string_view pool,
                                     int64_t prompt_tokens, int64_t cached_tokens) {
  base::MutexLock lock(&impl_->mu);
  Impl::EndpointSeries& s = impl_->Series(endpoint, pool);
  if (s.prompt_tokens == nullptr) {
    s.prompt_tokens = &impl_->prompt_tokens.Add(impl_->EndpointLabels(endpoint, pool));
    s.cached_tokens = &impl_->cached_tokens.Add(impl_->EndpointLabels(endpoint, pool));
  }
  s.prompt_tokens->Increment(static_cast<double>(prompt_tokens));
  s.cached_tokens->Increment(static_cast<double>(cached_tokens));
}

void RouterMetrics::UpdateEndpoints(const std::vector<EndpointStatus>& statuses) {
  Impl& m = *impl_;
  base::MutexLock lock(&m.mu);
  std::map<std::string, std::pair<int, int>> pools;  // pool -> (members, ready)
  for (const std::string& pool : m.pools)
    pools[pool] = {0, 0};
  std::set<std::string> seen;
  for (const EndpointStatus& status : statuses) {
    const Endpoint& e = status.endpoint;
    seen.insert(e.name);
    auto& [members, ready] = pools[e.pool];
    ++members;
    ready += status.healthy ? 1 : 0;
    Impl::EndpointGauges& g = m.gauges[e.name];
    if (g.gauges[0] != nullptr && g.pool != e.pool) {
      for (size_t i = 0; i < g.gauges.size(); ++i)
        m.endpoint_gauges[i]->Remove(g.gauges[i]);
      g.gauges = {};
    }
    if (g.gauges[0] == nullptr) {
      g.pool = e.pool;
      for (size_t i = 0; i < g.gauges.size(); ++i)
        g.gauges[i] = &m.endpoint_gauges[i]->Add(m.EndpointLabels(e.name, e.pool));
    }
    g.gauges[0]->Set(static_cast<double>(e.active_requests()));
    g.gauges[1]->Set(static_cast<double>(e.metrics.waiting_requests));
    g.gauges[2]->Set(static_cast<double>(e.metrics.running_requests));
    g.gauges[3]->Set(e.metrics.kv_cache_usage);
    g.gauges[4]->Set(status.healthy ? 1 : 0);
    g.gauges[5]->Set(status.metrics_age_s);
  }
  for (auto it = m.gauges.begin(); it != m.gauges.end();) {
    if (seen.contains(it->first)) {
      ++it;
      continue;
    }
    for (size_t i = 0; i < it->second.gauges.size(); ++i)
      m.endpoint_gauges[i]->Remove(it->second.gauges[i]);
    it = m.gauges.erase(it);
  }
  for (const auto& [pool, counts] : pools) {
    m.pools.insert(pool);
    m.pool_size.Add({{"pool", pool}}).Set(counts.first);
    m.pool_ready.Add({{"pool", pool}}).Set(counts.second);
  }
}

std::string RouterMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(impl_->registry.Collect());
}

}  // namespace switchyard::router
