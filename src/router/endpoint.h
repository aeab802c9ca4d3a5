// Endpoint: what the router believes about one model server at the moment it schedules a
// request: where it is, its labels (role, hardware, engine kind), its last scraped metrics
// and the requests the router itself has in flight to it.
//
// Scheduling reads immutable snapshots (a vector of Endpoints swapped by pointer by the
// endpoint table), so plain values, except the router's own load on the endpoint, which
// every snapshot shares live; any thread may read a snapshot.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "router/endpoint_waiters.h"

namespace switchyard::router {

// The llm-d role label and its values (llm-d.ai/role).
inline constexpr char kRoleLabel[] = "llm-d.ai/role";
// The port of the endpoint's KV transfer server (p2p-source-producer: p2p_source.h), in
// 1..65535; overrides the plugin's kvPort.
inline constexpr char kKvPortLabel[] = "switchyard.ai/kv-port";

struct EndpointMetrics {
  int64_t waiting_requests = 0;  // vllm:num_requests_waiting and its SGLang/llama.cpp peers
  int64_t running_requests = 0;  // vllm:num_requests_running
  double kv_cache_usage = 0;     // vllm:kv_cache_usage_perc, 0..1
  int32_t block_size = 0;        // vllm:cache_config_info, 0 when unknown
  int64_t num_gpu_blocks = 0;
  // False when the last scrape is older than the staleness bound (scores then treat the
  // endpoint as unknown rather than idle).
  bool fresh = true;
  // When the metrics were scraped (the epoch when never), for consumers with a staleness
  // bound of their own (the utilization-detector's).
  std::chrono::steady_clock::time_point scraped_at{};
};

class EndpointRecorder;  // router_metrics.h

// The router's own requests in flight to one endpoint, and how the last of them ended. Every
// snapshot of the endpoint shares it, so scheduling sees it live. A request's attempt updates
// the load object it started on (held through its ProxyTarget), without the table's lock; an
// endpoint that leaves and rejoins the table gets a new one, so late ends of old requests
// cannot skew it. Any thread.
struct EndpointLoad {
  explicit EndpointLoad(int64_t active = 0, int64_t inflight = 0)
      : active_requests(active), inflight_prompt_tokens(inflight) {}

  void Started(int64_t prompt_tokens) {
    active_requests.fetch_add(1, std::memory_order_relaxed);
    inflight_prompt_tokens.fetch_add(prompt_tokens, std::memory_order_relaxed);
    inflight_tokens.fetch_add(prompt_tokens, std::memory_order_relaxed);
  }
  // The request's first token arrived (its prefill is done).
  void PrefillDone(int64_t prompt_tokens) {
    inflight_prompt_tokens.fetch_sub(prompt_tokens, std::memory_order_relaxed);
  }
  // The request generated `tokens` more (as far as the router sees them stream).
  void Generated(int64_t tokens) { inflight_tokens.fetch_add(tokens, std::memory_order_relaxed); }
  // The request ended, having generated `generated_tokens` (the sum of its Generated calls);
  // `prefill_pending` when PrefillDone was never called for it.
  void Ended(int64_t prompt_tokens, int64_t generated_tokens, bool prefill_pending) {
    active_requests.fetch_sub(1, std::memory_order_relaxed);
    if (prefill_pending)
      inflight_prompt_tokens.fetch_sub(prompt_tokens, std::memory_order_relaxed);
    inflight_tokens.fetch_sub(prompt_tokens + generated_tokens, std::memory_order_relaxed);
  }

  std::atomic<int64_t> active_requests;
  // Prompt tokens of those requests not yet past their first token (the prefill work queued
  // on the endpoint, for TTFT estimates).
  std::atomic<int64_t> inflight_prompt_tokens;
  // Prompt and generated tokens of those requests: the KV they hold on the endpoint (the
  // concurrency-detector's token mode). A buffered (non-streamed) response's generated tokens
  // are not seen until it has ended, so they never count here.
  std::atomic<int64_t> inflight_tokens{0};
  // The endpoint's series in the router's metrics, found on its first pick and kept here
  // so that later picks need no lookup (the metrics keep every recorder they made).
  std::atomic<EndpointRecorder*> recorder{nullptr};
  // The other router replicas' requests in flight to the endpoint and their tokens, as they
  // last reported them (router/shared/replica_sync.h); 0 without shared state. Scheduling
  // counts them with the router's own (Endpoint's accessors).
  std::atomic<int64_t> elsewhere_requests{0};
  std::atomic<int64_t> elsewhere_prompt_tokens{0};
  std::atomic<int64_t> elsewhere_tokens{0};
  // Attempts in a row that failed (outlier detection: EndpointTable::ReportRequestFailure).
  std::atomic<int> consecutive_failures{0};
  // The requests waiting on the endpoint with nothing sent to their client yet: cancelled
  // and retried elsewhere when the endpoint goes down.
  EndpointWaiters waiters;
};

struct Endpoint {
  std::string name;     // unique in the pool, e.g. "10.0.0.7:8000"
  std::string address;  // host:port to connect to
  std::string pool;     // the config pool it belongs to
  std::map<std::string, std::string> labels;
  std::string authorization;  // EndpointSpec::authorization
  EndpointMetrics metrics;
  std::shared_ptr<EndpointLoad> load;  // null: no router requests known

  // Requests in flight to the endpoint from this router and (with shared state) the others.
  int64_t active_requests() const {
    return load == nullptr ? 0
                           : load->active_requests.load(std::memory_order_relaxed) +
                                 load->elsewhere_requests.load(std::memory_order_relaxed);
  }
  // This router's own.
  int64_t own_active_requests() const {
    return load == nullptr ? 0 : load->active_requests.load(std::memory_order_relaxed);
  }
  int64_t inflight_prompt_tokens() const {
    return load == nullptr ? 0
                           : load->inflight_prompt_tokens.load(std::memory_order_relaxed) +
                                 load->elsewhere_prompt_tokens.load(std::memory_order_relaxed);
  }
  int64_t inflight_tokens() const {
    return load == nullptr ? 0
                           : load->inflight_tokens.load(std::memory_order_relaxed) +
                                 load->elsewhere_tokens.load(std::memory_order_relaxed);
  }

  std::optional<std::string> Label(const std::string& key) const {
    auto it = labels.find(key);
    if (it == labels.end())
      return std::nullopt;
    return it->second;
  }
};

}  // namespace switchyard::router
