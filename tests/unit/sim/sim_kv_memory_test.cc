// SimKvMemory: a simulated engine's KV bytes, laid out as the CPU runner's pools, and the
// simulated runner that hands them to KV transfers.
#include "sim/sim_kv_memory.h"

#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "sim/sim_runner.h"

namespace switchyard::sim {
namespace {

// bench-135m's attention shape: 30 layers, 3 KV heads of 64 (hidden 576 / 9 heads).
model::ModelConfig Bench135mShape() {
  model::ModelConfig config;
  config.num_hidden_layers = 30;
  config.hidden_size = 576;
  config.num_attention_heads = 9;
  config.num_key_value_heads = 3;
  config.vocab_size = 64;
  return config;
}

TEST(SimKvMemoryTest, HoldsTheModelsKvBytesInLayerPools) {
  // K and V of 30 layers, 3 heads x 64 dims, 16 tokens, 2 bytes each.
  const size_t block_bytes = size_t{2} * 30 * 16 * 3 * 64 * 2;
  EXPECT_EQ(*SimKvMemory::BlockBytes(Bench135mShape(), 16), block_bytes);
  auto memory = SimKvMemory::Create(Bench135mShape(), 16, 10);
  ASSERT_TRUE(memory.ok()) << memory.status();
  const engine::RunnerKvMemory kv = (*memory)->kv_memory();
  EXPECT_EQ(kv.region.num_blocks(), 10);
  EXPECT_EQ(kv.region.layout().block_bytes(), block_bytes);
  EXPECT_EQ(kv.region.layout().num_segments(), 60u);
  EXPECT_EQ(kv.compatibility.dtype, kSimKvDtype);
  EXPECT_EQ(kv.compatibility.num_layers, 30);
  EXPECT_EQ(kv.compatibility.kv_heads, 3);
  EXPECT_EQ(kv.compatibility.head_dim, 64);
  EXPECT_EQ(kv.compatibility.block_size, 16);
  // Every block's every segment is addressable and writable.
  for (int64_t block = 0; block < 10; ++block) {
    for (size_t s = 0; s < 60; ++s)
      *kv.region.addr(block, s) = std::byte{1};
  }
}

TEST(SimKvMemoryTest, RefusesShapelessConfigsAndEmptyCaches) {
  model::ModelConfig no_layers = Bench135mShape();
  no_layers.num_hidden_layers = 0;
  EXPECT_EQ(SimKvMemory::BlockBytes(no_layers, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SimKvMemory::Create(Bench135mShape(), 16, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SimKvMemoryTest, TheRunnerLendsItsMemoryOnlyWhenItHasSome) {
  engine::RunnerLimits limits;
  limits.vocab_size = 64;
  limits.max_num_batched_tokens = 32;
  limits.max_logit_rows = 4;
  limits.num_kv_blocks = 10;
  limits.block_size = 16;
  auto bare =
      SimRunner::Create(limits, LatencyParams::Zero(), {1, 3}, std::make_unique<SteadySimClock>());
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ((*bare)->kv_memory().status().code(), absl::StatusCode::kUnimplemented);

  auto with_memory =
      SimRunner::Create(limits, LatencyParams::Zero(), {1, 3}, std::make_unique<SteadySimClock>(),
                        *SimKvMemory::Create(Bench135mShape(), 16, 10));
  ASSERT_TRUE(with_memory.ok()) << with_memory.status();
  auto kv = (*with_memory)->kv_memory();
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->region.num_blocks(), 10);

  // Memory of another block count than the cache's is refused.
  EXPECT_EQ(
      SimRunner::Create(limits, LatencyParams::Zero(), {1, 3}, std::make_unique<SteadySimClock>(),
                        *SimKvMemory::Create(Bench135mShape(), 16, 9))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace switchyard::sim
