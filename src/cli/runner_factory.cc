#include "cli/runner_factory.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "engine/llama_runner.h"
#include "model/device_dtype.h"
#include "sim/latency_model.h"
#include "sim/sim_runner.h"

namespace switchyard::cli {

absl::StatusOr<engine::RunnerFactory> MakeRunnerFactory(const RunnerFlags& f) {
  if (f.backend == "cpu") {
    engine::LlamaRunnerOptions o;
    o.num_threads = f.threads;
    SY_ASSIGN_OR_RETURN(o.weight_dtype,
                        model::ParseDeviceDType("--dtype", f.dtype, model::DTypeTarget::kWeights));
    SY_ASSIGN_OR_RETURN(o.kv_dtype, model::ParseDeviceDType("--kv-cache-dtype", f.kv_cache_dtype,
                                                            model::DTypeTarget::kKvCache));
    o.max_num_batched_tokens = f.max_num_batched_tokens;
    o.max_logit_rows = f.max_num_seqs + engine::kPromptLogitRowsPerStep;
    o.block_size = f.block_size;
    o.num_kv_blocks = f.num_gpu_blocks_override;
    o.kv_cache_memory_bytes = static_cast<size_t>(f.kv_cache_memory_bytes);
    SY_RETURN_IF_ERROR(
        ApplyCompilationFlags(f.compilation, f.max_num_seqs, f.max_num_batched_tokens, &o));
    return engine::RunnerFactory(
        [o](std::unique_ptr<model::ModelFiles> files,
            const text::Tokenizer&) -> absl::StatusOr<std::unique_ptr<engine::ModelRunner>> {
          SY_ASSIGN_OR_RETURN(std::unique_ptr<engine::LlamaRunner> runner,
                              engine::LlamaRunner::Create(std::move(files), o));
          return std::unique_ptr<engine::ModelRunner>(std::move(runner));
        });
  }
  if (f.backend == "sim") {
    SY_ASSIGN_OR_RETURN(sim::LatencyParams latency, sim::ParseLatencyParams(f.sim_latency));
    engine::RunnerLimits limits;
    limits.max_num_batched_tokens = f.max_num_batched_tokens;
    limits.max_logit_rows = f.max_num_seqs + engine::kPromptLogitRowsPerStep;
    limits.block_size = f.block_size;
    // Without KV memory the simulated cache holds nothing; by default as many blocks as the
    // real one would hold in 1 GiB of a small model, enough for max_num_seqs full sequences.
    limits.num_kv_blocks = f.num_gpu_blocks_override > 0 ? f.num_gpu_blocks_override : 65536;
    return engine::RunnerFactory(
        [limits, latency, f](
            std::unique_ptr<model::ModelFiles> files,
            const text::Tokenizer& tok) -> absl::StatusOr<std::unique_ptr<engine::ModelRunner>> {
          engine::RunnerLimits l = limits;
          std::unique_ptr<sim::SimKvMemory> kv;
          if (f.sim_kv_memory) {
            SY_ASSIGN_OR_RETURN(size_t block_bytes,
                                sim::SimKvMemory::BlockBytes(files->config(), f.block_size));
            if (f.num_gpu_blocks_override <= 0)
              l.num_kv_blocks =
                  static_cast<int32_t>(static_cast<size_t>(f.kv_cache_memory_bytes) / block_bytes);
            SY_ASSIGN_OR_RETURN(
                kv, sim::SimKvMemory::Create(files->config(), f.block_size, l.num_kv_blocks));
          }
          l.vocab_size = files->config().vocab_size;
          // The window the real runner would apply, so the engine drops the same blocks.
          l.sliding_window = engine::SlidingWindowOf(files->config());
          std::vector<int32_t> emit;
          const auto n = static_cast<int32_t>(
              std::min<int64_t>(l.vocab_size, static_cast<int64_t>(tok.vocab_size())));
          for (int32_t id = 0; id < n; ++id) {
            if (!tok.IsSpecial(id))
              emit.push_back(id);
          }
          SY_ASSIGN_OR_RETURN(
              std::unique_ptr<sim::SimRunner> runner,
              sim::SimRunner::Create(l, latency, std::move(emit),
                                     std::make_unique<sim::SteadySimClock>(), std::move(kv)));
          return std::unique_ptr<engine::ModelRunner>(std::move(runner));
        });
  }
  return absl::InvalidArgumentError(
      fmt::format("--backend must be cpu or sim, got '{}'", f.backend));
}

}  // namespace switchyard::cli
