// EngineMetrics: the engine's Prometheus metrics under vLLM's names, types, labels and
// buckets (vllm/v1/metrics/loggers.py PrometheusStatLogger; see
// shared/reference/engines.md §3), so dashboards and llm-d's scrapers read our engine as
// they read vLLM. Every series carries the labels model_name and engine (the engine index).
// Counters are exposed with the `_total` suffix, as prometheus_client writes them.
//
// Threads: the engine loop thread records; any thread may call Serialize (the /metrics
// route). prometheus-cpp metrics are thread-safe. Owns its registry.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/kv_tier_stats.h"

namespace switchyard::engine {

struct EngineMetricsOptions {
  std::string model_name;
  std::string engine_index = "0";
  // Upper end of the 1-2-5 token-count buckets (vLLM's build_1_2_5_buckets(max_model_len)).
  int64_t max_model_len = 2048;
  // vllm:cache_config_info labels (the CacheConfig fields a scraper uses).
  int32_t block_size = 16;
  int32_t num_gpu_blocks = 0;
  bool enable_prefix_caching = true;
  std::string cache_dtype = "auto";
  std::string prefix_caching_hash_algo = "sha256_cbor";
  // The media of the KV tiers under the pool ("CPU", "DISK"), whose series are registered.
  std::vector<std::string> kv_tier_media;
};

// vLLM's finished_reason label values.
enum class FinishReason { kStop, kLength, kAbort, kError };

// How a peer-to-peer prefix pull ended: some blocks came, the source held none of them, or
// it failed (the prompt was computed here).
enum class KvPeerPullOutcome { kLoaded, kMissed, kFellBack };
std::string_view FinishReasonName(FinishReason reason);  // "stop", "length", "abort", "error"

// One request's numbers, recorded once when it finishes (all of its n sequences).
struct FinishedRequestStats {
  FinishReason finish_reason = FinishReason::kStop;
  double e2e_latency_s = 0;     // arrival -> finish
  double queued_time_s = 0;     // arrival -> first scheduled
  double prefill_time_s = 0;    // first scheduled -> first token
  double decode_time_s = 0;     // first token -> last token
  double inference_time_s = 0;  // first scheduled -> last token
  int64_t num_prompt_tokens = 0;
  // Prompt tokens served from the prefix cache (vllm:request_prefill_kv_computed_tokens
  // observes num_prompt_tokens - num_cached_tokens).
  int64_t num_cached_tokens = 0;
  int64_t num_generation_tokens = 0;
  // The longest of the n sequences' outputs (vllm:request_max_num_generation_tokens);
  // -1 means num_generation_tokens, right for n == 1.
  int64_t max_num_generation_tokens = -1;
  int64_t max_tokens_param = 0;  // the request's resolved max_tokens
  int64_t n_param = 1;
  // Mean time per output token over the request's decode phase; unset (0 tokens) skips it.
  double mean_time_per_output_token_s = -1;
};

// The startup report's numbers (startup_report.h), set once at start-up.
struct StartupNumbers {
  double weights_seconds = 0;
  int64_t weights_mapped_bytes = 0;
  int64_t weights_copied_bytes = 0;
  int64_t weights_converted_bytes = 0;
  int64_t weights_packed_bytes = 0;
  double compile_seconds = 0;
  std::map<std::string, int64_t> compiled_buckets;  // by where each came from
};

class EngineMetrics {
 public:
  explicit EngineMetrics(const EngineMetricsOptions& options);
  ~EngineMetrics();
  EngineMetrics(const EngineMetrics&) = delete;
  EngineMetrics& operator=(const EngineMetrics&) = delete;

  // Gauges, set once per engine step.
  void SetSchedulerState(int64_t num_running, int64_t num_waiting, double kv_cache_usage);

  // Per step counters and histograms.
  // vllm:prefix_cache_queries / vllm:prefix_cache_hits, in tokens.
  void AddPrefixCache(int64_t queries, int64_t hits);
  void AddPreemptions(int64_t count);
  // vllm:prompt_tokens counts a request's whole prompt when it produces its first token;
  // cached_tokens of them were served from the prefix cache (vllm:prompt_tokens_cached), of
  // which external_tokens had been loaded from a remote prefill
  // (vllm:prompt_tokens_by_source{source=local_compute|local_cache_hit|external_kv_transfer}).
  void AddPromptTokens(int64_t prompt_tokens, int64_t cached_tokens, int64_t external_tokens);
  void AddGenerationTokens(int64_t count);
  // Prefill/decode disaggregation (kv_connector.h), Switchyard's own series (vLLM has no
  // names for these): switchyard:kv_transfer_loads{outcome=loaded|fell_back}, a consumer's
  // pulls of a remote prefill (fell_back: the prompt was computed instead), and
  // switchyard:kv_transfer_leases_ended{how=released|expired}, a producer's leases.
  void AddKvTransferLoad(bool loaded);
  void AddKvTransferLeaseEnded(bool expired);
  // Peer-to-peer prefix pulls (kv_connector.h), Switchyard's own series:
  // switchyard:kv_peer_pulls{outcome=loaded|missed|fell_back}, a puller's pulls, and
  // switchyard:kv_peer_lookups{outcome=held|none} with switchyard:kv_peer_lent_blocks, the
  // lookups a source answered and the blocks it lent (their leases end in
  // switchyard:kv_transfer_leases_ended).
  void AddKvPeerPull(KvPeerPullOutcome outcome);
  void AddKvPeerLookup(int64_t lent_blocks);
  // A KV tier's totals (REQUIRES: stats.medium is in options.kv_tier_media), published as
  // vLLM's offload series vllm:kv_offload_total_bytes / vllm:kv_offload_total_time
  // {transfer_type=GPU_to_<medium>|<medium>_to_GPU} and Switchyard's own, labelled {medium}:
  // switchyard:kv_tier_capacity_blocks, switchyard:kv_tier_used_blocks (gauges),
  // switchyard:kv_tier_queries / switchyard:kv_tier_hits (tokens),
  // switchyard:kv_tier_stored_blocks, switchyard:kv_tier_evicted_blocks and
  // switchyard:kv_tier_loads{outcome=loaded|fell_back}. Counters advance by the change since
  // the last call.
  void SetKvTier(const KvTierStats& stats);
  // switchyard:startup_weights_seconds, switchyard:startup_weights_bytes{loaded=mapped|
  // copied|converted}, switchyard:startup_compile_seconds and
  // switchyard:startup_compiled_buckets{source}.
  void SetStartup(const StartupNumbers& numbers);
  // vllm:iteration_tokens_total: tokens scheduled in one step.
  void ObserveIterationTokens(int64_t count);
  void ObserveTimeToFirstToken(double seconds);
  void ObserveInterTokenLatency(double seconds);

  // vllm:request_success_total{finished_reason} and the per-request histograms
  // (e2e, queue, prefill, decode, inference time, prompt/generation tokens, params).
  void RecordFinishedRequest(const FinishedRequestStats& stats);

  // Prometheus text exposition format 0.0.4 of every series.
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace switchyard::engine
