// The memory an engine needs for a checkpoint: its weights, the copies of them its backend
// lays out for MatMul (Backend::PackMatMulWeights), plus the KV cache of one sequence of
// max_model_len tokens, computed with the engine's own sizing (the KV dtype rule, block
// bytes and blocks per sequence it uses), at its default --dtype auto (weights as stored,
// mapped from the file). `switchyard model inspect` prints it; `switchyard up` gives its
// engines at least that much KV cache. Pure functions; any thread.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "cli/runner_factory.h"

#include "model/model_files.h"
#include "runtime/backend.h"
#include "runtime/dtype.h"

namespace switchyard::cli {

struct MemoryEstimateOptions {
  int64_t max_model_len = 0;  // 0: the model's context
  int32_t block_size = RunnerFlags{}.block_size;
  // Tokens per step; under a sliding window a sequence holds a window plus one step.
  int64_t max_num_batched_tokens = RunnerFlags{}.max_num_batched_tokens;
};

struct MemoryEstimate {
  int64_t max_model_len = 0;
  int32_t block_size = 0;
  int32_t sliding_window = 0;  // 0: full attention
  runtime::DType kv_dtype = runtime::DType::kF32;
  int64_t kv_blocks = 0;
  size_t kv_block_bytes = 0;
  size_t kv_cache_bytes = 0;
  uint64_t weights_bytes = 0;  // every tensor's bytes as stored
  uint64_t packed_bytes = 0;   // the backend's copies of the matrices MatMul reads
  uint64_t total_bytes() const { return weights_bytes + packed_bytes + kv_cache_bytes; }
};

// `backend`: the one the engine would run on, asked what its copies of the model's MatMul
// matrices take (PackedMatMulWeightBytes); null counts none. InvalidArgument for a
// max_model_len outside [0, the model's context] or a block size that is not positive.
absl::StatusOr<MemoryEstimate> EstimateMemory(const model::ModelFiles& files,
                                              const MemoryEstimateOptions& options,
                                              const runtime::Backend* backend = nullptr);

}  // namespace switchyard::cli
