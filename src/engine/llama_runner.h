// LlamaRunner: the ModelRunner that runs a Llama-family checkpoint (HF directory or GGUF)
// on the CPU backend (later any runtime::Backend) against its own paged KV cache, each
// step compiled when a bucket holds it (compile_sizes) and eagerly otherwise.
//
// Threads: the engine loop thread drives it; the backend's compute pool does the work.
// Owns the backend, the checkpoint files (weights may map them), the model and the KV
// storage.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "compile/compiled_llama_steps.h"
#include "engine/model_runner.h"
#include "model/kv_cache_storage.h"
#include "model/llama_model.h"
#include "model/model_files.h"
#include "runtime/backend.h"

namespace switchyard::engine {

struct LlamaRunnerOptions {
  size_t num_threads = 0;  // 0: one per hardware thread
  // The matrices' and the KV cache's dtypes (model::LlamaModelOptions); unset: the defaults.
  std::optional<runtime::DType> weight_dtype;
  std::optional<runtime::DType> kv_dtype;
  int64_t max_num_batched_tokens = 2048;
  int64_t max_logit_rows = 128;
  int32_t block_size = 16;
  // KV blocks: num_kv_blocks when > 0, else as many as kv_cache_memory_bytes holds.
  int32_t num_kv_blocks = 0;
  size_t kv_cache_memory_bytes = size_t{1} << 30;
  // Token buckets that run as compiled steps (compile::CompiledLlamaSteps); empty: every
  // step eager. A model whose steps cannot be compiled (mixture of experts) runs eagerly,
  // with a log line saying so.
  std::vector<int64_t> compile_sizes;
  // Where compiled steps keep what they measured (compile/artefact_cache.h); unset: they
  // measure at every start.
  std::optional<compile::ArtefactCacheOptions> compile_cache;
  // Hears of each compiled bucket as start-up builds it (may be empty).
  compile::BucketBuilt on_bucket_compiled;
};

class LlamaRunner final : public ModelRunner {
 public:
  // Takes the opened checkpoint. Errors: the model's and the backend's (out of memory).
  static absl::StatusOr<std::unique_ptr<LlamaRunner>> Create(
      std::unique_ptr<model::ModelFiles> files, const LlamaRunnerOptions& options);

  const RunnerLimits& limits() const override { return limits_; }
  absl::Status Execute(const model::ForwardBatch& batch, std::span<float> logits) override;
  std::string backend_name() const override;
  absl::StatusOr<RunnerKvMemory> kv_memory() const override;
  RunnerStartup startup() const override;

  const model::ModelConfig& config() const { return model_->config(); }

 private:
  LlamaRunner() = default;

  std::unique_ptr<model::ModelFiles> files_;
  std::unique_ptr<runtime::Backend> backend_;
  std::unique_ptr<model::LlamaModel> model_;
  std::unique_ptr<model::KvCacheStorage> kv_;
  std::unique_ptr<compile::ArtefactCache> compile_cache_;  // null: none
  std::unique_ptr<compile::CompiledLlamaSteps> compiled_;  // null: eager only
  RunnerLimits limits_;
};

}  // namespace switchyard::engine
