// ModelRunner: what the engine loop needs from whatever computes a step. The real runner
// (llama_runner.h) runs the model on a device backend against its paged KV cache; the
// simulated one (sim/sim_runner.h) charges a latency model and makes deterministic logits,
// so the same scheduler, KV cache manager, sampler, metrics, events and API run on top of
// either.
//
// Threads: the engine loop thread alone calls a runner, one call at a time. The runner
// owns its KV memory; the engine's KvCacheManager decides which block ids each sequence
// uses (ForwardBatch block tables and slot ids).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "compile/compiled_llama_steps.h"
#include "kvx/kv_compatibility.h"
#include "kvx/memory_region.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace switchyard::engine {

// Logit rows a serving runner keeps beyond max_num_seqs (the sample rows) for prompt
// logprobs: a step returns the logits of at most this many prompt positions, so a
// prompt_logprobs request's prefill advances this many tokens per step at most.
inline constexpr int64_t kPromptLogitRowsPerStep = 64;

// Sizes the engine plans with; fixed for the runner's life.
struct RunnerLimits {
  int64_t vocab_size = 0;
  // Most tokens (rows) one Execute may carry.
  int64_t max_num_batched_tokens = 0;
  // Most logit rows one Execute may ask for.
  int64_t max_logit_rows = 0;
  // KV blocks the runner allocated, and their size in tokens.
  int32_t num_kv_blocks = 0;
  int32_t block_size = 16;
  // The sliding window W the runner's attention applies (a query at t reads keys t - W < p
  // <= t); 0: full attention. The engine drops the KV blocks it never reads again, and
  // their block-table entries read kNullBlock (runtime::AttentionSequence).
  int32_t sliding_window = 0;
};

// RunnerLimits::sliding_window for a model: the window all its layers share, or 0 when it
// has none, when some layer attends to the whole prefix (Gemma 3's global layers), or when
// it is past int32 (longer than any context a runner holds, so as good as none).
inline int32_t SlidingWindowOf(const model::ModelConfig& config) {
  const int64_t window = model::CommonSlidingWindow(config);
  return window <= std::numeric_limits<int32_t>::max() ? static_cast<int32_t>(window) : 0;
}

// The runner's KV cache memory as KV transfers address it (kv_connector.h): the region of
// its pools, and what a peer's KV must match (the model fingerprint is the caller's).
struct RunnerKvMemory {
  kvx::MemoryRegion region;
  kvx::KvCompatibility compatibility;
};

// What the runner did at start-up, for the startup report (startup_report.h): where its
// weights came from and how, and each compiled step bucket (none: every step eager).
struct RunnerStartup {
  std::optional<model::WeightsLoad> weights;  // none: no real weights (the sim runner)
  std::vector<compile::BucketBuild> compiled;
  std::string kv_dtype;      // the KV pool's ("" when it holds no bytes)
  size_t kv_pool_bytes = 0;  // all layers' K and V pools
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const RunnerLimits& limits() const = 0;

  // Runs one step: writes the K/V of batch.tokens at batch.slot_ids and the logits of
  // batch.logit_rows, row after row, into `logits` (vocab_size floats each).
  // REQUIRES: tokens <= max_num_batched_tokens, logit rows <= max_logit_rows,
  // logits.size() == logit rows * vocab_size, block ids < num_kv_blocks.
  // Errors are the runner's (a device failure, a malformed batch: a bug in the caller).
  virtual absl::Status Execute(const model::ForwardBatch& batch, std::span<float> logits) = 0;

  // Short name for logs and /version ("cpu", "sim").
  virtual std::string backend_name() const = 0;

  // The KV memory, for moving blocks between engines. Unimplemented for a runner that keeps
  // no KV bytes (the simulated one) or keeps them where the host cannot address them.
  virtual absl::StatusOr<RunnerKvMemory> kv_memory() const {
    return absl::UnimplementedError(backend_name() + " runner: its KV cannot be moved");
  }

  virtual RunnerStartup startup() const { return {}; }
};

}  // namespace switchyard::engine
