// RouterMetrics: the router's own Prometheus metrics (GET /metrics on the router), in the
// spirit of llm-d's endpoint picker (EPP) metrics under our prefix. Which EPP metric each
// mirrors (gateway-api-inference-extension pkg/epp/metrics):
//
//   switchyard_router_requests_total{model,endpoint,pool,code}       counter
//       inference_objective_request_total and _request_error_total{error_code} in one:
//       `code` is the HTTP status the client got, "error" for a stream ended by an SSE error
//       event, "499" (nginx's "client closed request") for a client that left first.
//       endpoint and pool are empty when no endpoint was picked (429, bad request).
//   switchyard_router_request_duration_seconds{endpoint,pool}        histogram
//       inference_objective_request_duration_seconds, same buckets (5 ms .. 1 h): arrival
//       to the end of the response (as it is handed to the client's connection), for
//       requests that reached an endpoint. Recorded before the client can see the end, so a
//       client holding its response finds it counted.
//   switchyard_router_time_to_first_byte_seconds{endpoint,pool}      histogram
//       no EPP peer; vllm:time_to_first_token_seconds's buckets (1 ms .. 2560 s): arrival
//       to the first body byte written to the client (streams: the first SSE chunk, about
//       the first token; buffered responses: the whole body, at the end).
//   switchyard_router_tokenize_duration_seconds                      histogram
//   switchyard_router_scheduler_duration_seconds                     histogram
//       inference_extension_scheduler_e2e_duration_seconds, split in two: chat template +
//       tokenization once per request; snapshot + filters + scorers + picker once per pick
//       (retries pick again). Buckets 1 us .. 1 s.
//   switchyard_router_upstream_retries_total{endpoint,pool,reason}   counter
//       no EPP peer (Envoy's upstream_rq_retry): an attempt on `endpoint` failed before any
//       byte reached the client and the request went back to the picker. reason: connect
//       (refused, reset, closed, unresolved), http_502, http_503, timeout.
//   switchyard_router_prefix_prompt_tokens_total{endpoint,pool}              counter
//   switchyard_router_prefix_predicted_cached_tokens_total{endpoint,pool}    counter
//       inference_extension_prefix_indexer_hit_ratio / _hit_bytes, as token counters per
//       picked endpoint (hit rate = rate(cached) / rate(prompt)): the prompt routed to the
//       endpoint and how much of it the profile's prefix-cache scorer predicted cached there.
//   switchyard_router_endpoint_inflight_requests{endpoint,pool}      gauge
//       inference_objective_running_requests, per endpoint: the router's requests in flight.
//   switchyard_router_endpoint_queue_size{endpoint,pool}             gauge
//       inference_pool_per_pod_queue_size: the last scraped waiting requests.
//   switchyard_router_endpoint_running_requests{endpoint,pool}       gauge
//   switchyard_router_endpoint_kv_cache_usage{endpoint,pool}         gauge (0..1)
//       the per-endpoint inputs of inference_pool_average_kv_cache_utilization.
//   switchyard_router_endpoint_healthy{endpoint,pool}                gauge (0/1)
//   switchyard_router_endpoint_metrics_age_seconds{endpoint,pool}    gauge (-1: never)
//   switchyard_router_pool_size{pool}                                gauge (members)
//   switchyard_router_pool_ready_endpoints{pool}                     gauge
//       inference_pool_ready_pods.
// Counters carry `_total` in their names, so the text has `# TYPE x_total counter` as
// prometheus_client writes it; label sets of removed endpoints leave the gauges.
//
// Thread-safe: any thread records; Serialize from any thread. Owns its registry.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "router/endpoint_table.h"

namespace switchyard::router {

enum class RetryReason { kConnect, kHttp502, kHttp503, kTimeout };

// Seconds from `start` to now, as the latency metrics record them.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class RouterMetrics {
 public:
  // `pools`: the configured pool names (a pool with no members reports size 0).
  explicit RouterMetrics(const std::vector<std::string>& pools);
  ~RouterMetrics();
  RouterMetrics(const RouterMetrics&) = delete;
  RouterMetrics& operator=(const RouterMetrics&) = delete;

  // One client request ended with `code`; `latency_s` is recorded when an endpoint answered
  // (endpoint not empty).
  void RequestFinished(std::string_view model, std::string_view endpoint, std::string_view pool,
                       std::string_view code, double latency_s);
  void FirstByte(std::string_view endpoint, std::string_view pool, double seconds);
  void ObserveTokenize(double seconds);
  void ObserveSchedule(double seconds);
  void Retry(std::string_view endpoint, std::string_view pool, RetryReason reason);
  // The prompt went to `endpoint`, which was predicted to hold `cached_tokens` of it.
  void PrefixPrediction(std::string_view endpoint, std::string_view pool, int64_t prompt_tokens,
                        int64_t cached_tokens);
  // Sets the endpoint and pool gauges to what the endpoint table believes now.
  void UpdateEndpoints(const std::vector<EndpointStatus>& statuses);

  // Prometheus text exposition format 0.0.4.
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace switchyard::router
