#include "router/router_metrics.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "prometheus/client_metric.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

#include "base/mutex.h"
#include "router/metric_families.h"

namespace switchyard::router {
namespace {

using prometheus::Family;
using prometheus::Gauge;

constexpr std::array<std::string_view, kRetryReasons> kRetryReasonNames = {
    "connect", "http_502", "http_503", "timeout", "unhealthy"};

// inference_objective_request_duration_seconds's buckets: 5 ms to an hour.
std::vector<double> LatencyBuckets() {
  return {0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8,  1.0,  1.25, 1.5, 2,
          3,     4,     5,    6,   8,   10,  15,  20,   30,   45,   60,  120,
          180,   240,   300,  360, 480, 600, 900, 1200, 1800, 2700, 3600};
}

// vllm:time_to_first_token_seconds's buckets.
std::vector<double> FirstByteBuckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

// Scheduling decisions: 1 us to 1 s in 1-2.5-5 steps.
std::vector<double> DecisionBuckets() {
  return {1e-6,   2.5e-6, 5e-6, 1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3,
          2.5e-3, 5e-3,   1e-2, 2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1.0};
}

Family<Gauge>& AddGauge(prometheus::Registry& registry, const std::string& name,
                        const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

// (endpoint, pool), hashed and compared as string views: looked up without a copy.
using EndpointKey = std::pair<std::string, std::string>;
using EndpointKeyView = std::pair<std::string_view, std::string_view>;
struct EndpointKeyHash {
  using is_transparent = void;
  size_t operator()(const EndpointKeyView& k) const {
    // Debian's absl::string_view is not std::string_view: absl::Hash needs its own.
    return absl::Hash<std::pair<absl::string_view, absl::string_view>>()(
        {absl::string_view(k.first.data(), k.first.size()),
         absl::string_view(k.second.data(), k.second.size())});
  }
  size_t operator()(const EndpointKey& k) const {
    return (*this)(EndpointKeyView(k.first, k.second));
  }
};
struct EndpointKeyEq {
  using is_transparent = void;
  static EndpointKeyView View(const EndpointKeyView& k) { return k; }
  static EndpointKeyView View(const EndpointKey& k) { return {k.first, k.second}; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return View(a) == View(b);
  }
};

using ClientMetric = prometheus::ClientMetric;
using MetricFamily = prometheus::MetricFamily;

std::vector<ClientMetric::Label> EndpointLabels(const std::string& endpoint,
                                                const std::string& pool) {
  return {{"endpoint", endpoint}, {"pool", pool}};
}

uint64_t Load(const std::atomic<uint64_t>& value) {
  return value.load(std::memory_order_relaxed);
}

}  // namespace

EndpointRecorder::EndpointRecorder(std::string endpoint, std::string pool)
    : endpoint_(std::move(endpoint)),
      pool_(std::move(pool)),
      latency_(LatencyBuckets()),
      first_byte_(FirstByteBuckets()) {}

void EndpointRecorder::RequestFinished(int code, double latency_s) {
  requests_[std::clamp(code, 0, kCodes - 1)].fetch_add(1, std::memory_order_relaxed);
  if (!endpoint_.empty())
    latency_.Observe(latency_s);
}

void EndpointRecorder::FirstByte(double seconds) {
  first_byte_.Observe(seconds);
}

void EndpointRecorder::Retry(RetryReason reason) {
  retries_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

void EndpointRecorder::Ejected() {
  ejections_.fetch_add(1, std::memory_order_relaxed);
}

void EndpointRecorder::PrefixPrediction(int64_t prompt_tokens, int64_t cached_tokens) {
  prompt_tokens_.fetch_add(static_cast<uint64_t>(prompt_tokens), std::memory_order_relaxed);
  cached_tokens_.fetch_add(static_cast<uint64_t>(cached_tokens), std::memory_order_relaxed);
  predicted_.store(true, std::memory_order_relaxed);
}

void EndpointRecorder::KvSource() {
  kv_sources_.fetch_add(1, std::memory_order_relaxed);
}

struct RouterMetrics::Impl {
  explicit Impl(std::string model_name) : model(std::move(model_name)) {}

  // The request series' families, from the recorders; series never recorded into are left
  // out, as prometheus-cpp leaves out children never added.
  std::vector<MetricFamily> CollectRecorded() const;

  const std::string model;
  base::AtomicHistogram tokenize{DecisionBuckets()};
  base::AtomicHistogram schedule{DecisionBuckets()};

  // The gauges, set from the endpoint table at each scrape of the router.
  prometheus::Registry registry;
  std::array<Family<Gauge>*, 9> endpoint_gauges = {
      &AddGauge(registry, "switchyard_router_endpoint_inflight_requests",
                "The router's requests in flight to each endpoint."),
      &AddGauge(registry, "switchyard_router_endpoint_queue_size",
                "Waiting requests each endpoint reported at its last scrape."),
      &AddGauge(registry, "switchyard_router_endpoint_running_requests",
                "Running requests each endpoint reported at its last scrape."),
      &AddGauge(registry, "switchyard_router_endpoint_kv_cache_usage",
                "KV cache usage (0..1) each endpoint reported at its last scrape."),
      &AddGauge(registry, "switchyard_router_endpoint_healthy",
                "1 while the endpoint's scrapes succeed, 0 after failed ones."),
      &AddGauge(registry, "switchyard_router_endpoint_ejected",
                "1 while outlier detection has the endpoint ejected."),
      &AddGauge(registry, "switchyard_router_endpoint_metrics_age_seconds",
                "Seconds since the endpoint's last successful scrape (-1: never)."),
      &AddGauge(registry, "switchyard_router_endpoint_scrape_unauthorized",
                "1 when the endpoint's last scrape was refused with 401 or 403."),
      &AddGauge(registry, "switchyard_router_endpoint_kv_events_stale",
                "1 while the endpoint's KV event stream is stale (its prefix index untrusted)."),
  };
  prometheus::Family<prometheus::Counter>& subscriber_restarts =
      prometheus::BuildCounter()
          .Name("switchyard_router_kv_event_subscriber_restarts_total")
          .Help("Times the KV event subscriber's loop failed and was restarted.")
          .Register(registry);
  prometheus::Counter& subscriber_restarts_total = subscriber_restarts.Add({});
  prometheus::Family<prometheus::Counter>& pd_decisions =
      prometheus::BuildCounter()
          .Name("switchyard_router_pd_decisions_total")
          .Help("Prefill/decode decisions by outcome (disaggregated, fallback, decode_only).")
          .Register(registry);
  // In PdOutcome's order.
  std::array<prometheus::Counter*, kPdOutcomes> pd_decision_totals = {
      &pd_decisions.Add({{"outcome", "disaggregated"}}),
      &pd_decisions.Add({{"outcome", "fallback"}}),
      &pd_decisions.Add({{"outcome", "decode_only"}})};
  prometheus::Family<prometheus::Counter>& kube_lists =
      prometheus::BuildCounter()
          .Name("switchyard_router_kube_lists_total")
          .Help("Successful lists of a Kubernetes-discovered pool's resource (first and re-lists).")
          .Register(registry);
  prometheus::Family<prometheus::Counter>& kube_watch_restarts =
      prometheus::BuildCounter()
          .Name("switchyard_router_kube_watch_restarts_total")
          .Help("Watches of a Kubernetes-discovered pool's resource opened after the first.")
          .Register(registry);
  prometheus::Family<prometheus::Counter>& kube_errors =
      prometheus::BuildCounter()
          .Name("switchyard_router_kube_errors_total")
          .Help("Failed lists and watches of a Kubernetes-discovered pool's resource.")
          .Register(registry);
  Family<Gauge>& pool_size =
      AddGauge(registry, "switchyard_router_pool_size", "Members of each pool.");
  Family<Gauge>& pool_ready =
      AddGauge(registry, "switchyard_router_pool_ready_endpoints", "Healthy members of each pool.");

  // The table-fed gauges of one endpoint.
  struct EndpointGauges {
    std::string pool;
    std::array<Gauge*, 9> gauges = {};  // in the order of endpoint_gauges
  };

  mutable base::Mutex mu;
  absl::flat_hash_map<EndpointKey, std::unique_ptr<EndpointRecorder>, EndpointKeyHash,
                      EndpointKeyEq>
      recorders ABSL_GUARDED_BY(mu);
  std::map<std::string, EndpointGauges> gauges ABSL_GUARDED_BY(mu);
  std::set<std::string> pools ABSL_GUARDED_BY(mu);
};

std::vector<MetricFamily> RouterMetrics::Impl::CollectRecorded() const {
  using prometheus::MetricType;
  MetricFamily requests = NewFamily(
      "switchyard_router_requests_total",
      "Client requests by model, endpoint, pool and the HTTP status (or error) they ended with.",
      MetricType::Counter);
  MetricFamily latency = NewFamily("switchyard_router_request_duration_seconds",
                                   "Arrival to the last response byte, per endpoint, in seconds.",
                                   MetricType::Histogram);
  MetricFamily first_byte =
      NewFamily("switchyard_router_time_to_first_byte_seconds",
                "Arrival to the first response body byte sent to the client, in seconds.",
                MetricType::Histogram);
  MetricFamily tokenize_family = NewFamily(
      "switchyard_router_tokenize_duration_seconds",
      "Chat template and tokenization of one request, in seconds.", MetricType::Histogram);
  tokenize_family.metric.push_back(Histogram({}, tokenize));
  MetricFamily schedule_family = NewFamily(
      "switchyard_router_scheduler_duration_seconds",
      "One endpoint pick (snapshot, filters, scorers, picker), in seconds.", MetricType::Histogram);
  schedule_family.metric.push_back(Histogram({}, schedule));
  MetricFamily retries =
      NewFamily("switchyard_router_upstream_retries_total",
                "Attempts that failed before the first byte and went back to the picker.",
                MetricType::Counter);
  MetricFamily ejections =
      NewFamily("switchyard_router_endpoint_ejections_total",
                "Times outlier detection ejected each endpoint.", MetricType::Counter);
  MetricFamily prompt_tokens = NewFamily(
      "switchyard_router_prefix_prompt_tokens_total",
      "Prompt tokens routed to each endpoint (prefix-cache scorer profiles).", MetricType::Counter);
  MetricFamily cached_tokens =
      NewFamily("switchyard_router_prefix_predicted_cached_tokens_total",
                "Prompt tokens the prefix-cache scorer predicted cached on the picked endpoint.",
                MetricType::Counter);
  MetricFamily kv_sources =
      NewFamily("switchyard_router_kv_source_requests_total",
                "Attempts sent to each endpoint with a peer to pull the prompt's cached KV from.",
                MetricType::Counter);

  base::MutexLock lock(&mu);
  std::vector<const EndpointRecorder*> sorted;  // a stable order from scrape to scrape
  sorted.reserve(recorders.size());
  for (const auto& [key, recorder] : recorders)
    sorted.push_back(recorder.get());
  std::sort(sorted.begin(), sorted.end(), [](const EndpointRecorder* a, const EndpointRecorder* b) {
    return std::tie(a->endpoint_, a->pool_) < std::tie(b->endpoint_, b->pool_);
  });
  for (const EndpointRecorder* r : sorted) {
    for (int code = 0; code < EndpointRecorder::kCodes; ++code) {
      const uint64_t n = Load(r->requests_[code]);
      if (n == 0)
        continue;
      requests.metric.push_back(
          Counted({{"code", code == kStreamErrorCode ? "error" : std::to_string(code)},
                   {"endpoint", r->endpoint_},
                   {"model", model},
                   {"pool", r->pool_}},
                  n));
    }
    ClientMetric l = Histogram(EndpointLabels(r->endpoint_, r->pool_), r->latency_);
    if (l.histogram.sample_count > 0)
      latency.metric.push_back(std::move(l));
    ClientMetric f = Histogram(EndpointLabels(r->endpoint_, r->pool_), r->first_byte_);
    if (f.histogram.sample_count > 0)
      first_byte.metric.push_back(std::move(f));
    for (size_t i = 0; i < kRetryReasons; ++i) {
      const uint64_t n = Load(r->retries_[i]);
      if (n == 0)
        continue;
      std::vector<ClientMetric::Label> labels = EndpointLabels(r->endpoint_, r->pool_);
      labels.push_back({"reason", std::string(kRetryReasonNames[i])});
      retries.metric.push_back(Counted(std::move(labels), n));
    }
    if (const uint64_t n = Load(r->ejections_); n > 0)
      ejections.metric.push_back(Counted(EndpointLabels(r->endpoint_, r->pool_), n));
    if (r->predicted_.load(std::memory_order_relaxed)) {
      prompt_tokens.metric.push_back(
          Counted(EndpointLabels(r->endpoint_, r->pool_), Load(r->prompt_tokens_)));
      cached_tokens.metric.push_back(
          Counted(EndpointLabels(r->endpoint_, r->pool_), Load(r->cached_tokens_)));
    }
    if (const uint64_t n = Load(r->kv_sources_); n > 0)
      kv_sources.metric.push_back(Counted(EndpointLabels(r->endpoint_, r->pool_), n));
  }
  std::vector<MetricFamily> families;
  for (MetricFamily* family : {&requests, &latency, &first_byte, &tokenize_family, &schedule_family,
                               &retries, &ejections, &prompt_tokens, &cached_tokens, &kv_sources}) {
    if (!family->metric.empty())
      families.push_back(std::move(*family));
  }
  return families;
}

RouterMetrics::RouterMetrics(std::string model, const std::vector<std::string>& pools)
    : impl_(std::make_unique<Impl>(std::move(model))) {
  base::MutexLock lock(&impl_->mu);
  for (const std::string& pool : pools) {
    impl_->pools.insert(pool);
    impl_->pool_size.Add({{"pool", pool}}).Set(0);
    impl_->pool_ready.Add({{"pool", pool}}).Set(0);
  }
}

RouterMetrics::~RouterMetrics() = default;

EndpointRecorder& RouterMetrics::Endpoint(std::string_view endpoint, std::string_view pool) {
  base::MutexLock lock(&impl_->mu);
  auto it = impl_->recorders.find(EndpointKeyView(endpoint, pool));
  if (it == impl_->recorders.end()) {
    it = impl_->recorders
             .try_emplace(
                 {std::string(endpoint), std::string(pool)},
                 std::make_unique<EndpointRecorder>(std::string(endpoint), std::string(pool)))
             .first;
  }
  return *it->second;
}

void RouterMetrics::ObserveTokenize(double seconds) {
  impl_->tokenize.Observe(seconds);
}

void RouterMetrics::ObserveSchedule(double seconds) {
  impl_->schedule.Observe(seconds);
}

void RouterMetrics::UpdateEndpoints(const std::vector<EndpointStatus>& statuses) {
  Impl& m = *impl_;
  base::MutexLock lock(&m.mu);
  std::map<std::string, std::pair<int, int>> pools;  // pool -> (members, ready)
  for (const std::string& pool : m.pools)
    pools[pool] = {0, 0};
  std::set<std::string> seen;
  for (const EndpointStatus& status : statuses) {
    const router::Endpoint& e = status.endpoint;
    seen.insert(e.name);
    auto& [members, ready] = pools[e.pool];
    ++members;
    ready += status.routable() ? 1 : 0;
    Impl::EndpointGauges& g = m.gauges[e.name];
    if (g.gauges[0] != nullptr && g.pool != e.pool) {
      for (size_t i = 0; i < g.gauges.size(); ++i)
        m.endpoint_gauges[i]->Remove(g.gauges[i]);
      g.gauges = {};
    }
    if (g.gauges[0] == nullptr) {
      g.pool = e.pool;
      for (size_t i = 0; i < g.gauges.size(); ++i)
        g.gauges[i] = &m.endpoint_gauges[i]->Add({{"endpoint", e.name}, {"pool", e.pool}});
    }
    g.gauges[0]->Set(static_cast<double>(e.own_active_requests()));
    g.gauges[1]->Set(static_cast<double>(e.metrics.waiting_requests));
    g.gauges[2]->Set(static_cast<double>(e.metrics.running_requests));
    g.gauges[3]->Set(e.metrics.kv_cache_usage);
    g.gauges[4]->Set(status.healthy ? 1 : 0);
    g.gauges[5]->Set(status.ejected ? 1 : 0);
    g.gauges[6]->Set(status.metrics_age_s);
    g.gauges[7]->Set(status.scrape_unauthorized ? 1 : 0);
    g.gauges[8]->Set(status.kv_events.has_value() && status.kv_events->stale ? 1 : 0);
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

void RouterMetrics::PdDecision(PdOutcome outcome) {
  impl_->pd_decision_totals[static_cast<size_t>(outcome)]->Increment();
}

namespace {

// Raises a counter to `total`, a count kept elsewhere.
void CatchUp(prometheus::Counter& counter, double total) {
  const double more = total - counter.Value();
  if (more > 0)
    counter.Increment(more);
}

}  // namespace

void RouterMetrics::SetKvEventSubscriberRestarts(int64_t restarts) {
  CatchUp(impl_->subscriber_restarts_total, static_cast<double>(restarts));
}

void RouterMetrics::SetKubeWatchCounts(const std::string& pool, const std::string& resource,
                                       uint64_t lists, uint64_t watch_restarts, uint64_t errors) {
  const prometheus::Labels labels = {{"pool", pool}, {"resource", resource}};
  CatchUp(impl_->kube_lists.Add(labels), static_cast<double>(lists));
  CatchUp(impl_->kube_watch_restarts.Add(labels), static_cast<double>(watch_restarts));
  CatchUp(impl_->kube_errors.Add(labels), static_cast<double>(errors));
}

std::string RouterMetrics::Serialize() const {
  std::vector<MetricFamily> families = impl_->CollectRecorded();
  std::vector<MetricFamily> gauges = impl_->registry.Collect();
  families.insert(families.end(), std::make_move_iterator(gauges.begin()),
                  std::make_move_iterator(gauges.end()));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace switchyard::router
