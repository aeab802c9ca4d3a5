// Endpoint load from an engine's /metrics, per engine kind (llm-d's core-metrics-extractor
// mappings, shared/reference/llm-d.md §6):
//   vllm (and our engine)  vllm:num_requests_waiting, vllm:num_requests_running,
//                          vllm:kv_cache_usage_perc (older: vllm:gpu_cache_usage_perc),
//                          vllm:cache_config_info{block_size, num_gpu_blocks}
//   sglang                 sglang:num_queue_reqs, sglang:num_running_reqs,
//                          sglang:token_usage, sglang:cache_config_info{page_size, num_pages}
//   llamacpp               llamacpp:requests_deferred, llamacpp:requests_processing,
//                          llamacpp:kv_cache_usage_ratio (older builds only; else 0)
// Several series of one gauge (data-parallel engines, label `engine`) add up; KV usage
// takes the largest. Stateless; any thread.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "router/endpoint.h"
#include "router/prometheus_text.h"

namespace switchyard::router {

enum class EngineKind { kVllm, kSglang, kLlamaCpp };

// "vllm" (also "switchyard"), "sglang", "llamacpp" / "llama.cpp"; InvalidArgument otherwise.
absl::StatusOr<EngineKind> ParseEngineKind(std::string_view name);
// "vllm", "sglang" or "llamacpp": the metrics dialect the router reads (our engine's is vllm's).
std::string_view EngineKindName(EngineKind kind);

// NotFound naming the metric when the queue or running gauge is missing (the endpoint is
// not the kind it was labelled as); the result has fresh = true.
absl::StatusOr<EndpointMetrics> ExtractEndpointMetrics(EngineKind kind,
                                                       const std::vector<PromSample>& samples);

// ExtractEndpointMetrics over a /metrics text: InvalidArgument for malformed text, else as
// above. Only the few series it reads are copied out of the text (an engine serves
// hundreds, mostly histogram buckets, and a router scrapes every engine many times a
// second).
absl::StatusOr<EndpointMetrics> ParseEndpointMetrics(EngineKind kind, std::string_view text);

// Whether a /metrics answer with `http_status` means "this engine exposes no metrics" rather
// than a failure: llama-cpp-python's server has no route (404), llama-server none without
// --metrics (501). Such an endpoint is reachable, so healthy, with its metrics unknown.
bool ServesNoMetrics(EngineKind kind, int http_status);

}  // namespace switchyard::router
