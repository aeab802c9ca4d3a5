// RouterMetrics: the router's own Prometheus metrics (GET /metrics on the router), in the
// spirit of llm-d's endpoint picker (EPP) metrics under our prefix. Which EPP metric each
// mirrors (gateway-api-inference-extension pkg/epp/metrics):
//
//   switchyard_router_requests_total{model,endpoint,pool,code}       counter
//       inference_objective_request_total and _request_error_total{error_code} in one:
//       `code` is the HTTP status the client got, "error" for a stream ended by an SSE error
//       event, "499" (nginx's "client closed request") for a client that left first.
//       endpoint and pool are empty when no endpoint was picked (503: none healthy; bad
//       request).
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
//       (refused, reset, closed, unresolved, malformed or cut short), http_502, http_503,
//       timeout, unhealthy (the endpoint left the routing set, by failed scrapes or an
//       ejection, while the request waited on it: cancelled there and retried).
//   switchyard_router_endpoint_ejections_total{endpoint,pool}        counter
//       Envoy's outlier_detection.ejections_enforced_total: outlier detection ejected the
//       endpoint (outlier_detection.h).
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
//   switchyard_router_endpoint_healthy{endpoint,pool}                gauge (0/1, by scrapes)
//   switchyard_router_endpoint_ejected{endpoint,pool}                gauge (0/1)
//       Envoy's outlier_detection.ejections_active, per endpoint.
//   switchyard_router_endpoint_metrics_age_seconds{endpoint,pool}    gauge (-1: never)
//   switchyard_router_endpoint_scrape_unauthorized{endpoint,pool}    gauge (0/1)
//       the last scrape was refused with 401/403 (credentials missing or wrong).
//   switchyard_router_endpoint_kv_events_stale{endpoint,pool}        gauge (0/1)
//       the endpoint's KV event stream lost events (kv_event_subscriber.h): its precise
//       prefix index was cleared and gives no credit until the stream is back in order.
//   switchyard_router_kv_event_subscriber_restarts_total            counter
//       the KV event subscriber's loop failed and was restarted.
//   switchyard_router_pd_decisions_total{outcome}                   counter
//       prefill/decode decisions (disagg-profile-handler), per attempt: disaggregated (the
//       prefill endpoint's KV went to the decode endpoint), fallback (disaggregation was
//       decided but no prefill endpoint was found or its leg failed: the decode endpoint
//       computed the prompt), decode_only (the decider kept the prompt on the decode endpoint).
//   switchyard_router_kv_source_requests_total{endpoint,pool}        counter
//       attempts sent to `endpoint` with a peer to pull the prompt's cached KV from
//       (p2p-source-producer: x-kv-cache-source-host-port).
//   switchyard_router_kube_lists_total{pool,resource}                counter
//   switchyard_router_kube_watch_restarts_total{pool,resource}       counter
//   switchyard_router_kube_errors_total{pool,resource}               counter
//       Kubernetes discovery (kube_pool_resolver.h), per pool and watched resource
//       (inferencepool, pods): successful lists (the first and each re-list after a 410 Gone),
//       watches opened again after the first (timeouts, errors, re-lists), failed lists and
//       watches (the API server down, a refused token). client-go's reflector has no metrics
//       of its own; these are ours.
//   switchyard_router_pool_size{pool}                                gauge (members)
//   switchyard_router_pool_ready_endpoints{pool}                     gauge
//       inference_pool_ready_pods: healthy and not ejected.
// Counters carry `_total` in their names, so the text has `# TYPE x_total counter` as
// prometheus_client writes it; label sets of removed endpoints leave the gauges.
//
// Per-request recording (EndpointRecorder, ObserveTokenize, ObserveSchedule) takes no lock:
// relaxed atomic adds. Looking up an endpoint's recorder and the endpoint gauges take the
// metrics' mutex. Thread-safe throughout; Serialize from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/atomic_histogram.h"
#include "router/endpoint_table.h"

namespace switchyard::router {

enum class RetryReason { kConnect, kHttp502, kHttp503, kTimeout, kUnhealthy };
enum class PdOutcome { kDisaggregated, kFallback, kDecodeOnly };
inline constexpr size_t kPdOutcomes = 3;
inline constexpr size_t kRetryReasons = 5;

// The code of a request whose stream ended with an SSE error event (`code="error"`); no
// HTTP status is 0.
inline constexpr int kStreamErrorCode = 0;

// Seconds from `start` to `end`, as the latency metrics record them.
inline double SecondsBetween(std::chrono::steady_clock::time_point start,
                             std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// Seconds from `start` to now.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return SecondsBetween(start, std::chrono::steady_clock::now());
}

// The per-request series of one (endpoint, pool). Any thread records, without a lock.
class EndpointRecorder {
 public:
  // `endpoint` empty: the requests the router answered itself, before any pick.
  EndpointRecorder(std::string endpoint, std::string pool);
  EndpointRecorder(const EndpointRecorder&) = delete;
  EndpointRecorder& operator=(const EndpointRecorder&) = delete;

  // One client request ended with `code`: an HTTP status (100..999; 499 when the client left
  // first) or kStreamErrorCode. `latency_s` is recorded when an endpoint answered.
  void RequestFinished(int code, double latency_s);
  void FirstByte(double seconds);
  void Retry(RetryReason reason);
  // Outlier detection ejected the endpoint.
  void Ejected();
  // The prompt came here, where it was predicted to find `cached_tokens` of it cached.
  void PrefixPrediction(int64_t prompt_tokens, int64_t cached_tokens);
  // An attempt went here with a KV source (x-kv-cache-source-host-port).
  void KvSource();

 private:
  friend class RouterMetrics;
  static constexpr int kCodes = 1000;  // kStreamErrorCode, then three-digit statuses

  const std::string endpoint_;
  const std::string pool_;
  std::array<std::atomic<uint64_t>, kCodes> requests_{};
  base::AtomicHistogram latency_;
  base::AtomicHistogram first_byte_;
  std::array<std::atomic<uint64_t>, kRetryReasons> retries_{};
  std::atomic<uint64_t> ejections_{0};
  std::atomic<bool> predicted_{false};
  std::atomic<uint64_t> prompt_tokens_{0};
  std::atomic<uint64_t> cached_tokens_{0};
  std::atomic<uint64_t> kv_sources_{0};
};

class RouterMetrics {
 public:
  // `model`: the model label of the request counts. `pools`: the configured pool names (a
  // pool with no members reports size 0).
  RouterMetrics(std::string model, const std::vector<std::string>& pools);
  ~RouterMetrics();
  RouterMetrics(const RouterMetrics&) = delete;
  RouterMetrics& operator=(const RouterMetrics&) = delete;

  // The recorder of `endpoint` in `pool`, made on first use; it lives as long as the metrics.
  EndpointRecorder& Endpoint(std::string_view endpoint, std::string_view pool);
  // The recorder of requests the router answered before any endpoint was picked.
  EndpointRecorder& Unrouted() { return Endpoint("", ""); }
  void ObserveTokenize(double seconds);
  void ObserveSchedule(double seconds);
  // Sets the endpoint and pool gauges to what the endpoint table believes now.
  void UpdateEndpoints(const std::vector<EndpointStatus>& statuses);
  void PdDecision(PdOutcome outcome);
  // The KV event subscriber's restarts() so far.
  void SetKvEventSubscriberRestarts(int64_t restarts);

  // A Kubernetes-discovered pool's reflector counts so far (kube::ReflectorStats).
  void SetKubeWatchCounts(const std::string& pool, const std::string& resource, uint64_t lists,
                          uint64_t watch_restarts, uint64_t errors);

  // Prometheus text exposition format 0.0.4.
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace switchyard::router
