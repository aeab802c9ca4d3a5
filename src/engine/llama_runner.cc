#include "engine/llama_runner.h"

#include <algorithm>
#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/status_macros.h"
#include "runtime/cpu/cpu_backend.h"

namespace switchyard::engine {

absl::StatusOr<std::unique_ptr<LlamaRunner>> LlamaRunner::Create(
    std::unique_ptr<model::ModelFiles> files, const LlamaRunnerOptions& options) {
  if (options.block_size <= 0 || options.max_num_batched_tokens <= 0 ||
      options.max_logit_rows <= 0 || options.num_kv_blocks < 0) {
    return absl::InvalidArgumentError(
        "block size, tokens per step and logit rows must be positive");
  }
  std::unique_ptr<LlamaRunner> runner(new LlamaRunner());
  runner->files_ = std::move(files);
  runtime::CpuBackendOptions backend_options;
  backend_options.num_threads = options.num_threads;
  SY_ASSIGN_OR_RETURN(runner->backend_, runtime::CreateCpuBackend(backend_options));
  model::LlamaModelOptions model_options;
  model_options.max_num_batched_tokens = options.max_num_batched_tokens;
  model_options.max_logit_rows = options.max_logit_rows;
  model_options.weight_dtype = options.weight_dtype;
  model_options.kv_dtype = options.kv_dtype;
  SY_ASSIGN_OR_RETURN(runner->model_, model::LlamaModel::Create(
                                          *runner->files_, runner->backend_.get(), model_options));
  int64_t num_blocks = options.num_kv_blocks;
  if (num_blocks == 0) {
    const size_t block_bytes = model::KvCacheBytes(runner->model_->KvShape(1, options.block_size));
    num_blocks = static_cast<int64_t>(options.kv_cache_memory_bytes / block_bytes);
    if (num_blocks < 1) {
      return absl::InvalidArgumentError(
          fmt::format("the KV cache memory ({} bytes) is smaller than one block ({} bytes)",
                      options.kv_cache_memory_bytes, block_bytes));
    }
    num_blocks = std::min<int64_t>(num_blocks, 1 << 24);
  }
  SY_ASSIGN_OR_RETURN(runner->kv_, model::KvCacheStorage::Create(
                                       runner->backend_.get(),
                                       runner->model_->KvShape(num_blocks, options.block_size)));
  runner->limits_.vocab_size = runner->model_->config().vocab_size;
  runner->limits_.max_num_batched_tokens = options.max_num_batched_tokens;
  runner->limits_.max_logit_rows = options.max_logit_rows;
  runner->limits_.num_kv_blocks = static_cast<int32_t>(num_blocks);
  runner->limits_.block_size = options.block_size;
  runner->limits_.sliding_window = SlidingWindowOf(runner->model_->config());
  if (!options.compile_sizes.empty()) {
    if (options.compile_cache.has_value()) {
      SY_ASSIGN_OR_RETURN(runner->compile_cache_,
                          compile::ArtefactCache::Open(*options.compile_cache));
    }
    const std::string isa(runtime::CpuIsaName(backend_options.isa.value_or(runtime::BestCpuIsa())));
    absl::StatusOr<std::unique_ptr<compile::CompiledLlamaSteps>> compiled =
        compile::CompiledLlamaSteps::Create(
            runner->model_.get(), runner->backend_.get(), runner->kv_.get(), options.compile_sizes,
            runner->compile_cache_.get(), {isa}, options.on_bucket_compiled);
    if (compiled.ok()) {
      runner->compiled_ = *std::move(compiled);
    } else if (compiled.status().code() == absl::StatusCode::kUnimplemented) {
      SY_LOG_INFO("engine: every step runs eagerly: {}", std::string(compiled.status().message()));
    } else {
      return compiled.status();
    }
  }
  return runner;
}

absl::Status LlamaRunner::Execute(const model::ForwardBatch& batch, std::span<float> logits) {
  if (compiled_ != nullptr) {
    SY_ASSIGN_OR_RETURN(const bool ran, compiled_->Forward(batch, logits));
    if (ran)
      return absl::OkStatus();
  }
  return model_->Forward(batch, *kv_, logits);
}

std::string LlamaRunner::backend_name() const {
  if (compiled_ == nullptr)
    return std::string(backend_->name());
  std::string sizes;
  for (int64_t s : compiled_->sizes())
    sizes += fmt::format("{}{}", sizes.empty() ? "" : ",", s);
  return fmt::format("{}, compiled steps of {} tokens", backend_->name(), sizes);
}

RunnerStartup LlamaRunner::startup() const {
  RunnerStartup out;
  out.weights = model_->weights().load;
  if (compiled_ != nullptr)
    out.compiled = compiled_->builds();
  out.kv_dtype = std::string(runtime::DTypeName(kv_->shape().dtype));
  out.kv_pool_bytes = kv_->size_bytes();
  return out;
}

absl::StatusOr<RunnerKvMemory> LlamaRunner::kv_memory() const {
  // The runner builds only the CPU backend today, whose device memory is the host's; a
  // device backend will need host staging here.
  const model::KvCacheShape& shape = kv_->shape();
  SY_ASSIGN_OR_RETURN(kvx::KvBlockLayout layout,
                      kvx::KvBlockLayout::ForKvCache(
                          shape.num_layers, shape.block_size, shape.kv_heads, shape.head_dim,
                          static_cast<int64_t>(runtime::RowBytes(shape.dtype, 1))));
  // Segments K0, V0, K1, V1, ...: kvx's pool layout.
  std::vector<std::span<std::byte>> pools;
  for (int64_t layer = 0; layer < shape.num_layers; ++layer) {
    for (const runtime::Tensor* pool : {&kv_->k_pool(layer), &kv_->v_pool(layer)})
      pools.emplace_back(static_cast<std::byte*>(pool->data()), pool->size_bytes());
  }
  SY_ASSIGN_OR_RETURN(
      kvx::MemoryRegion region,
      kvx::MemoryRegion::ForPools(std::move(layout), std::move(pools), shape.num_blocks));
  kvx::KvCompatibility compatibility;
  compatibility.dtype = std::string(runtime::DTypeName(shape.dtype));
  compatibility.num_layers = shape.num_layers;
  compatibility.kv_heads = shape.kv_heads;
  compatibility.head_dim = shape.head_dim;
  compatibility.block_size = shape.block_size;
  return RunnerKvMemory{.region = std::move(region), .compatibility = std::move(compatibility)};
}

}  // namespace switchyard::engine
