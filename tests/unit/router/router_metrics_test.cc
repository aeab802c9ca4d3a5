#include "router/router_metrics.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "router/prometheus_text.h"

namespace switchyard::router {
namespace {

using Labels = std::map<std::string, std::string>;

// The serialized text, parsed back by the router's own scraper parser.
std::vector<PromSample> Samples(const RouterMetrics& metrics) {
  absl::StatusOr<std::vector<PromSample>> samples = ParsePrometheusText(metrics.Serialize());
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *samples : std::vector<PromSample>{};
}

bool HasLabels(const PromSample& s, const Labels& labels) {
  for (const auto& [k, v] : labels) {
    bool found = false;
    for (const auto& [name, value] : s.labels)
      found = found || (name == k && value == v);
    if (!found)
      return false;
  }
  return true;
}

// The one sample of `name` with (at least) `labels`; NaN when there is none.
double Value(const std::vector<PromSample>& samples, const std::string& name,
             const Labels& labels = {}) {
  double value = std::nan("");
  int matches = 0;
  for (const PromSample& s : samples) {
    if (s.name == name && HasLabels(s, labels)) {
      value = s.value;
      ++matches;
    }
  }
  EXPECT_LE(matches, 1) << name;
  return value;
}

// The `le` bounds of a histogram series, in order (+Inf last).
std::vector<double> Buckets(const std::vector<PromSample>& samples, const std::string& name,
                            const Labels& labels = {}) {
  std::vector<double> out;
  for (const PromSample& s : samples) {
    if (s.name == name + "_bucket" && HasLabels(s, labels))
      out.push_back(std::stod(std::string(s.Label("le"))));
  }
  return out;
}

EndpointStatus Status(const std::string& name, const std::string& pool, bool healthy) {
  EndpointStatus s;
  s.endpoint.name = name;
  s.endpoint.pool = pool;
  s.healthy = healthy;
  return s;
}

TEST(RouterMetricsTest, RequestsLatenciesRetriesAndPrefixAddUp) {
  RouterMetrics metrics("m", {"default"});
  EndpointRecorder& r1 = metrics.Endpoint("e1", "default");
  EXPECT_EQ(&metrics.Endpoint("e1", "default"), &r1);  // one recorder per (endpoint, pool)
  r1.RequestFinished(200, 0.5);
  r1.RequestFinished(200, 0.5);
  r1.RequestFinished(kStreamErrorCode, 1.0);
  metrics.Unrouted().RequestFinished(429, 0.001);
  r1.FirstByte(0.05);
  metrics.ObserveTokenize(2e-6);
  metrics.ObserveSchedule(3e-5);
  metrics.ObserveSchedule(3e-5);
  EndpointRecorder& r2 = metrics.Endpoint("e2", "default");
  r2.Retry(RetryReason::kConnect);
  r2.Retry(RetryReason::kHttp503);
  r2.Retry(RetryReason::kHttp503);
  r1.Retry(RetryReason::kTimeout);
  r1.PrefixPrediction(100, 64);
  r1.PrefixPrediction(50, 0);
  // Recorded nothing: no series at all.
  metrics.Endpoint("e3", "default");

  const std::string text = metrics.Serialize();
  EXPECT_NE(text.find("# TYPE switchyard_router_requests_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE switchyard_router_request_duration_seconds histogram"),
            std::string::npos);
  const std::vector<PromSample> s = Samples(metrics);
  const std::string requests = "switchyard_router_requests_total";
  EXPECT_EQ(Value(s, requests, {{"model", "m"}, {"endpoint", "e1"}, {"code", "200"}}), 2);
  EXPECT_EQ(Value(s, requests, {{"endpoint", "e1"}, {"pool", "default"}, {"code", "error"}}), 1);
  EXPECT_EQ(Value(s, requests, {{"endpoint", ""}, {"pool", ""}, {"code", "429"}}), 1);

  // End-to-end latency: only requests an endpoint answered, llm-d's buckets.
  const std::string latency = "switchyard_router_request_duration_seconds";
  const Labels e1 = {{"endpoint", "e1"}, {"pool", "default"}};
  EXPECT_EQ(Value(s, latency + "_count", e1), 3);
  EXPECT_DOUBLE_EQ(Value(s, latency + "_sum", e1), 2.0);
  EXPECT_EQ(Value(s, latency + "_bucket", {{"endpoint", "e1"}, {"le", "0.4"}}), 0);
  EXPECT_EQ(Value(s, latency + "_bucket", {{"endpoint", "e1"}, {"le", "0.6"}}), 2);
  EXPECT_EQ(Value(s, latency + "_bucket", {{"endpoint", "e1"}, {"le", "+Inf"}}), 3);
  const std::vector<double> latency_buckets = Buckets(s, latency, e1);
  ASSERT_EQ(latency_buckets.size(), 36u);
  EXPECT_DOUBLE_EQ(latency_buckets.front(), 0.005);
  EXPECT_DOUBLE_EQ(latency_buckets[34], 3600);
  EXPECT_TRUE(std::isinf(latency_buckets.back()));
  EXPECT_TRUE(std::isnan(Value(s, latency + "_count", {{"endpoint", ""}})));

  const std::string first_byte = "switchyard_router_time_to_first_byte_seconds";
  EXPECT_EQ(Value(s, first_byte + "_count", e1), 1);
  EXPECT_EQ(Value(s, first_byte + "_bucket", {{"endpoint", "e1"}, {"le", "0.04"}}), 0);
  EXPECT_EQ(Value(s, first_byte + "_bucket", {{"endpoint", "e1"}, {"le", "0.06"}}), 1);
  EXPECT_DOUBLE_EQ(Buckets(s, first_byte, e1).front(), 0.001);

  // Decision times: microsecond buckets, tokenization apart from the pick.
  const std::vector<double> decision = Buckets(s, "switchyard_router_scheduler_duration_seconds");
  ASSERT_EQ(decision.size(), 20u);
  EXPECT_DOUBLE_EQ(decision.front(), 1e-6);
  EXPECT_DOUBLE_EQ(decision[18], 1.0);
  EXPECT_EQ(Value(s, "switchyard_router_scheduler_duration_seconds_count"), 2);
  EXPECT_EQ(Value(s, "switchyard_router_scheduler_duration_seconds_bucket", {{"le", "2.5e-05"}}),
            0);
  EXPECT_EQ(Value(s, "switchyard_router_scheduler_duration_seconds_bucket", {{"le", "5e-05"}}), 2);
  EXPECT_EQ(Value(s, "switchyard_router_tokenize_duration_seconds_count"), 1);
  EXPECT_EQ(Value(s, "switchyard_router_tokenize_duration_seconds_bucket", {{"le", "1e-06"}}), 0);
  EXPECT_EQ(Value(s, "switchyard_router_tokenize_duration_seconds_bucket", {{"le", "2.5e-06"}}), 1);

  const std::string retries = "switchyard_router_upstream_retries_total";
  EXPECT_EQ(Value(s, retries, {{"endpoint", "e2"}, {"reason", "connect"}}), 1);
  EXPECT_EQ(Value(s, retries, {{"endpoint", "e2"}, {"reason", "http_503"}}), 2);
  EXPECT_EQ(Value(s, retries, {{"endpoint", "e1"}, {"pool", "default"}, {"reason", "timeout"}}), 1);
  EXPECT_TRUE(std::isnan(Value(s, retries, {{"reason", "http_502"}})));

  EXPECT_TRUE(std::isnan(Value(s, requests, {{"endpoint", "e3"}})));
  EXPECT_TRUE(std::isnan(Value(s, latency + "_count", {{"endpoint", "e2"}})));
  EXPECT_EQ(Value(s, "switchyard_router_prefix_prompt_tokens_total", e1), 150);
  EXPECT_EQ(Value(s, "switchyard_router_prefix_predicted_cached_tokens_total", e1), 64);
}

TEST(RouterMetricsTest, EndpointAndPoolGaugesFollowTheTable) {
  RouterMetrics metrics("m", {"default", "empty"});
  EndpointStatus a = Status("a", "default", true);
  a.endpoint.load = std::make_shared<EndpointLoad>(3);
  a.endpoint.metrics.waiting_requests = 5;
  a.endpoint.metrics.running_requests = 7;
  a.endpoint.metrics.kv_cache_usage = 0.25;
  a.metrics_age_s = 0.5;
  const EndpointStatus b = Status("b", "default", false);
  const EndpointStatus c = Status("c", "other", true);
  metrics.UpdateEndpoints({a, b, c});

  std::vector<PromSample> s = Samples(metrics);
  const Labels la = {{"endpoint", "a"}, {"pool", "default"}};
  EXPECT_EQ(Value(s, "switchyard_router_endpoint_inflight_requests", la), 3);
  EXPECT_EQ(Value(s, "switchyard_router_endpoint_queue_size", la), 5);
  EXPECT_EQ(Value(s, "switchyard_router_endpoint_running_requests", la), 7);
  EXPECT_EQ(Value(s, "switchyard_router_endpoint_kv_cache_usage", la), 0.25);
  EXPECT_EQ(Value(s, "switchyard_router_endpoint_healthy", la), 1);
  EXPECT_EQ(Value(s, "switchyard_router_endpoint_metrics_age_seconds", la), 0.5);
  EXPECT_EQ(Value(s, "switchyard_router_endpoint_healthy", {{"endpoint", "b"}}), 0);
  EXPECT_EQ(Value(s, "switchyard_router_endpoint_metrics_age_seconds", {{"endpoint", "b"}}), -1);
  EXPECT_EQ(Value(s, "switchyard_router_pool_size", {{"pool", "default"}}), 2);
  EXPECT_EQ(Value(s, "switchyard_router_pool_ready_endpoints", {{"pool", "default"}}), 1);
  EXPECT_EQ(Value(s, "switchyard_router_pool_size", {{"pool", "empty"}}), 0);
  EXPECT_EQ(Value(s, "switchyard_router_pool_size", {{"pool", "other"}}), 1);

  // b leaves the table (a DNS member gone), a moves pool: their old series go.
  a.endpoint.pool = "other";
  metrics.UpdateEndpoints({a, c});
  s = Samples(metrics);
  EXPECT_TRUE(std::isnan(Value(s, "switchyard_router_endpoint_healthy", {{"endpoint", "b"}})));
  EXPECT_TRUE(std::isnan(Value(s, "switchyard_router_endpoint_healthy", la)));
  EXPECT_EQ(Value(s, "switchyard_router_endpoint_healthy", {{"endpoint", "a"}, {"pool", "other"}}),
            1);
  EXPECT_EQ(Value(s, "switchyard_router_pool_size", {{"pool", "default"}}), 0);
  EXPECT_EQ(Value(s, "switchyard_router_pool_size", {{"pool", "other"}}), 2);
}

TEST(RouterMetricsTest, ConcurrentRecordingAddsUp) {
  RouterMetrics metrics("m", {"p"});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      const std::string endpoint = t % 2 == 0 ? "a" : "b";
      for (int i = 0; i < kPerThread; ++i) {
        EndpointRecorder& r = metrics.Endpoint(endpoint, "p");
        r.RequestFinished(200, 0.01);
        r.FirstByte(0.001);
        r.Retry(RetryReason::kConnect);
        r.PrefixPrediction(10, 4);
        if (i % 50 == 0)
          metrics.Serialize();  // reads race with recording
        if (i % 100 == 0)
          metrics.UpdateEndpoints({Status(endpoint, "p", true)});
      }
    });
  }
  for (std::thread& t : threads)
    t.join();
  const std::vector<PromSample> s = Samples(metrics);
  double requests = 0;
  double retries = 0;
  double prompt = 0;
  double latency_count = 0;
  for (const char* e : {"a", "b"}) {
    requests += Value(s, "switchyard_router_requests_total", {{"endpoint", e}});
    retries += Value(s, "switchyard_router_upstream_retries_total", {{"endpoint", e}});
    prompt += Value(s, "switchyard_router_prefix_prompt_tokens_total", {{"endpoint", e}});
    latency_count +=
        Value(s, "switchyard_router_request_duration_seconds_count", {{"endpoint", e}});
  }
  EXPECT_EQ(requests, kThreads * kPerThread);
  EXPECT_EQ(retries, kThreads * kPerThread);
  EXPECT_EQ(prompt, 10.0 * kThreads * kPerThread);
  EXPECT_EQ(latency_count, kThreads * kPerThread);
}

}  // namespace
}  // namespace switchyard::router
