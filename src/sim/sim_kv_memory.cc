#include "sim/sim_kv_memory.h"

#include <span>
#include <utility>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "kvx/kv_block_layout.h"

namespace switchyard::sim {
namespace {

constexpr int64_t kF16Bytes = 2;

int64_t HeadDim(const model::ModelConfig& config) {
  if (config.head_dim > 0)
    return config.head_dim;
  return config.num_attention_heads > 0 ? config.hidden_size / config.num_attention_heads : 0;
}

absl::StatusOr<kvx::KvBlockLayout> Layout(const model::ModelConfig& config, int32_t block_size) {
  const int64_t kv_heads =
      config.num_key_value_heads > 0 ? config.num_key_value_heads : config.num_attention_heads;
  if (config.num_hidden_layers <= 0 || kv_heads <= 0 || HeadDim(config) <= 0) {
    return absl::InvalidArgumentError(
        "sim KV memory: the model config names no layers, KV heads or head size");
  }
  return kvx::KvBlockLayout::ForKvCache(config.num_hidden_layers, block_size, kv_heads,
                                        HeadDim(config), kF16Bytes);
}

}  // namespace

absl::StatusOr<size_t> SimKvMemory::BlockBytes(const model::ModelConfig& config,
                                               int32_t block_size) {
  SY_ASSIGN_OR_RETURN(kvx::KvBlockLayout layout, Layout(config, block_size));
  return layout.block_bytes();
}

absl::StatusOr<std::unique_ptr<SimKvMemory>> SimKvMemory::Create(const model::ModelConfig& config,
                                                                 int32_t block_size,
                                                                 int64_t num_blocks) {
  if (num_blocks < 1)
    return absl::InvalidArgumentError(
        fmt::format("sim KV memory: {} blocks; at least one is needed", num_blocks));
  SY_ASSIGN_OR_RETURN(kvx::KvBlockLayout layout, Layout(config, block_size));
  // The buffers keep their addresses when the vector holding them moves into the object.
  std::vector<std::vector<std::byte>> buffers;
  std::vector<std::span<std::byte>> pools;
  for (size_t s = 0; s < layout.num_segments(); ++s) {
    buffers.emplace_back(layout.segment_bytes(s) * static_cast<size_t>(num_blocks));
    pools.emplace_back(buffers.back());
  }
  kvx::KvCompatibility compatibility;
  compatibility.dtype = kSimKvDtype;
  compatibility.num_layers = config.num_hidden_layers;
  compatibility.kv_heads =
      config.num_key_value_heads > 0 ? config.num_key_value_heads : config.num_attention_heads;
  compatibility.head_dim = HeadDim(config);
  compatibility.block_size = block_size;
  SY_ASSIGN_OR_RETURN(kvx::MemoryRegion region,
                      kvx::MemoryRegion::ForPools(std::move(layout), std::move(pools), num_blocks));
  return std::unique_ptr<SimKvMemory>(new SimKvMemory(
      std::move(buffers),
      engine::RunnerKvMemory{.region = std::move(region), .compatibility = compatibility}));
}

engine::RunnerKvMemory SimKvMemory::kv_memory() const {
  return memory_;
}

}  // namespace switchyard::sim
