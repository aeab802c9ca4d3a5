// SimKvMemory: real KV cache bytes for a simulated engine, laid out as the CPU runner lays
// out a model's KV (one pool per layer for K and one for V, f16 elements), so that KV
// transfers (tiers, P/D, P2P pulls) move as many bytes as they would for that model while
// the forward pass stays simulated. The simulated runner never writes them: what moves is
// whatever is there, and the compatibility record's dtype ("sim-f16") keeps real engines
// from exchanging KV with simulated ones.
//
// Owns the memory; immutable after Create. The region stays valid as long as this object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "engine/model_runner.h"
#include "model/model_config.h"

namespace switchyard::sim {

inline constexpr char kSimKvDtype[] = "sim-f16";

class SimKvMemory {
 public:
  // The KV bytes of one block of `config` with `block_size` tokens.
  // InvalidArgument for a config without layers, heads or a head size.
  static absl::StatusOr<size_t> BlockBytes(const model::ModelConfig& config, int32_t block_size);
  // `num_blocks` blocks, zeroed. Errors: BlockBytes's; InvalidArgument for num_blocks < 1.
  static absl::StatusOr<std::unique_ptr<SimKvMemory>> Create(const model::ModelConfig& config,
                                                             int32_t block_size,
                                                             int64_t num_blocks);

  // The pools as KV transfers address them (ModelRunner::kv_memory).
  engine::RunnerKvMemory kv_memory() const;

 private:
  SimKvMemory(std::vector<std::vector<std::byte>> pools, engine::RunnerKvMemory memory)
      : pools_(std::move(pools)), memory_(std::move(memory)) {}

  const std::vector<std::vector<std::byte>> pools_;  // K0, V0, K1, V1, ...
  const engine::RunnerKvMemory memory_;
};

}  // namespace switchyard::sim
