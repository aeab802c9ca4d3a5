// The KV cache manager under a sliding window: which blocks are released and when, that
// released blocks stay prefix-cache hits until the pool reuses them, the window-aware hit,
// fork and preemption over released blocks, and the per-sequence block bound.
#include <algorithm>
#include <cstdint>
#include <variant>
#include <vector>

#include "gtest/gtest.h"

#include "engine/kv_cache_manager.h"
#include "kv_cache_test_support.h"

namespace switchyard::engine {
namespace {

using kvx::BlockRemoved;
using kvx::BlockStored;

constexpr BlockId N = kNullBlock;

std::vector<BlockId> Table(const KvCacheManager& m, SeqId seq) {
  return {m.block_table(seq).begin(), m.block_table(seq).end()};
}

int32_t NumNull(const KvCacheManager& m, SeqId seq) {
  return static_cast<int32_t>(std::count(m.block_table(seq).begin(), m.block_table(seq).end(), N));
}

// One step of `seq` computing `n` more tokens of `tokens`, then the release the engine does
// after the forward step. Returns false when the plan does not fit.
bool Step(KvCacheManager& m, SeqId seq, const std::vector<int32_t>& tokens, int32_t n,
          const PrefixHit& hit = {}) {
  auto plan = m.Plan(seq, tokens, n, hit);
  if (!plan.ok())
    return false;
  m.Commit(*plan, tokens);
  m.ReleaseSkippedBlocks(seq);
  return true;
}

// Registers `seq` and computes `tokens` from its prefix hit on, in chunks of `chunk`.
PrefixHit Admit(KvCacheManager& m, SeqId seq, const std::vector<int32_t>& tokens,
                int32_t chunk = 1 << 20) {
  EXPECT_TRUE(m.AddSequence(seq, {}, std::nullopt).ok());
  auto hit = m.GetComputedBlocks(seq, tokens);
  EXPECT_TRUE(hit.ok()) << hit.status();
  const auto total = static_cast<int32_t>(tokens.size());
  int32_t done = hit->num_tokens;
  PrefixHit first = *hit;
  while (done < total) {
    const int32_t n = std::min(chunk, total - done);
    EXPECT_TRUE(Step(m, seq, tokens, n, first));
    first = {};
    done += n;
  }
  return *hit;
}

struct WindowCase {
  const char* name;
  int32_t window;
  int32_t block_size;
};

class WindowReleaseTest : public testing::TestWithParam<WindowCase> {};

// Decoding one token at a time in a pool that holds only the window's blocks: after the
// step that computed n tokens, block i is released exactly when it ends at or before the
// next token's window start, n - W + 1, and the pool gets it back.
TEST_P(WindowReleaseTest, DecodeReleasesBlocksAsTheyLeaveTheWindow) {
  const WindowCase& c = GetParam();
  const int32_t bs = c.block_size;
  const int32_t num_blocks = MaxBlocksPerSequence(1 << 20, 1, c.window, bs);
  auto m = MakeKvCacheManager(num_blocks, bs, c.window);
  std::vector<int32_t> tokens = {7};
  Admit(*m, 1, tokens);
  constexpr int32_t kLength = 100;
  ASSERT_GT((kLength + bs - 1) / bs, num_blocks) << "the sequence must outgrow the pool";
  for (int32_t n = 1; n <= kLength; ++n) {
    if (n > 1) {
      tokens.push_back(n % 13);
      ASSERT_TRUE(Step(*m, 1, tokens, 1)) << "step to " << n << " tokens";
    }
    ASSERT_EQ(m->num_tokens(1), n);
    const std::vector<BlockId> table = Table(*m, 1);
    ASSERT_EQ(static_cast<int32_t>(table.size()), (n + bs - 1) / bs);
    int32_t held = 0;
    for (size_t i = 0; i < table.size(); ++i) {
      const bool outside = static_cast<int32_t>(i + 1) * bs <= n - c.window + 1;
      EXPECT_EQ(table[i] == N, outside) << n << " tokens, block " << i;
      held += outside ? 0 : 1;
    }
    EXPECT_EQ(m->pool().num_free_blocks(), num_blocks - held) << n << " tokens";
  }
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_EQ(m->pool().num_free_blocks(), num_blocks);
}

INSTANTIATE_TEST_SUITE_P(Windows, WindowReleaseTest,
                         testing::Values(WindowCase{"window_6_blocks_of_4", 6, 4},
                                         WindowCase{"window_8_blocks_of_4", 8, 4},
                                         WindowCase{"window_5_blocks_of_2", 5, 2},
                                         WindowCase{"window_3_blocks_of_1", 3, 1},
                                         WindowCase{"window_24_blocks_of_16", 24, 16},
                                         WindowCase{"window_1_blocks_of_4", 1, 4}),
                         [](const testing::TestParamInfo<WindowCase>& param_info) {
                           return param_info.param.name;
                         });

TEST(KvCacheWindowTest, WindowNotAMultipleOfTheBlockSize) {
  // W = 6, blocks of 4: after 8 tokens the next one (8) sees 3..8, so block 0 ([0, 4)) stays;
  // after 9 it sees 4..9 and block 0 goes. Block 1 ([4, 8)) stays through 12 tokens (7..12)
  // and goes at 13 (8..13).
  auto m = MakeKvCacheManager(8, 4, 6);
  std::vector<int32_t> tokens = Iota(8);
  Admit(*m, 1, tokens);
  EXPECT_EQ(NumNull(*m, 1), 0);
  EXPECT_EQ(m->NumSkippedBlocks(8), 0);
  const BlockId block0 = m->block_table(1)[0];
  tokens.push_back(8);
  ASSERT_TRUE(Step(*m, 1, tokens, 1));
  EXPECT_EQ(Table(*m, 1)[0], N);
  EXPECT_EQ(m->pool().ref_count(block0), 0);
  EXPECT_TRUE(m->pool().in_free_queue(block0));
  for (int32_t t = 9; t < 12; ++t) {
    tokens.push_back(t);
    ASSERT_TRUE(Step(*m, 1, tokens, 1));
    EXPECT_EQ(NumNull(*m, 1), 1) << t + 1 << " tokens";
  }
  tokens.push_back(12);
  ASSERT_TRUE(Step(*m, 1, tokens, 1));
  EXPECT_EQ(NumNull(*m, 1), 2);
  EXPECT_EQ(m->NumSkippedBlocks(12), 1);
  EXPECT_EQ(m->NumSkippedBlocks(13), 2);
}

TEST(KvCacheWindowTest, PrefillChunkKeepsWhatItsFirstQueryReads) {
  // W = 6, blocks of 4, a 20-token prompt in chunks of 8.
  auto m = MakeKvCacheManager(16, 4, 6);
  const std::vector<int32_t> prompt = Iota(20);
  ASSERT_TRUE(m->AddSequence(1, {}, std::nullopt).ok());
  auto hit = m->GetComputedBlocks(1, prompt);
  ASSERT_TRUE(hit.ok());
  ASSERT_TRUE(Step(*m, 1, prompt, 8, *hit));
  EXPECT_EQ(NumNull(*m, 1), 0);  // position 8 sees 3..8
  // Committing the second chunk releases nothing: its first query (8) still reads block 0.
  auto plan = m->Plan(1, prompt, 8, {});
  ASSERT_TRUE(plan.ok());
  m->Commit(*plan, prompt);
  EXPECT_EQ(NumNull(*m, 1), 0);
  EXPECT_EQ(m->pool().num_free_blocks(), 12);
  // Once the step ran, position 16 sees 11..16: blocks 0 and 1 go.
  m->ReleaseSkippedBlocks(1);
  EXPECT_EQ(Table(*m, 1)[0], N);
  EXPECT_EQ(Table(*m, 1)[1], N);
  EXPECT_NE(Table(*m, 1)[2], N);
  EXPECT_EQ(m->pool().num_free_blocks(), 14);
  ASSERT_TRUE(Step(*m, 1, prompt, 4));  // position 20 sees 15..20
  EXPECT_EQ(NumNull(*m, 1), 3);
  EXPECT_EQ(m->pool().num_free_blocks(), 14);
}

TEST(KvCacheWindowTest, NothingReleasedWhileTheWindowCoversTheSequence) {
  for (int32_t window : {0, 41, 64}) {
    SCOPED_TRACE(window);
    auto m = MakeKvCacheManager(16, 4, window);
    std::vector<int32_t> tokens = Iota(30);
    Admit(*m, 1, tokens, 7);
    for (int32_t t = 30; t < 40; ++t) {
      tokens.push_back(t);
      ASSERT_TRUE(Step(*m, 1, tokens, 1));
    }
    EXPECT_EQ(NumNull(*m, 1), 0);
    EXPECT_EQ(m->pool().num_free_blocks(), 6);
    EXPECT_EQ(m->NumSkippedBlocks(40), 0);
  }
  // Full attention never skips anything.
  EXPECT_EQ(MakeKvCacheManager(4, 4, 0)->NumSkippedBlocks(1 << 20), 0);
}

TEST(KvCacheWindowTest, ReleasedBlocksStayHitsUntilThePoolReusesThem) {
  // W = 6, blocks of 4 (a hit needs the 2 blocks before its end), 6 blocks in all.
  auto m = MakeKvCacheManager(6, 4, 6);
  Admit(*m, 1, Iota(24));
  ASSERT_EQ(Table(*m, 1), (std::vector<BlockId>{N, N, N, N, 4, 5}));
  auto events = m->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  const BlockStored stored = std::get<BlockStored>(events[0]);
  ASSERT_EQ(stored.block_hashes.size(), 6u);
  // Released oldest first; each keeps its hash and nothing is reported removed.
  EXPECT_EQ(m->pool().FreeQueue(), (std::vector<BlockId>{0, 1, 2, 3}));
  for (BlockId b : {0, 1, 2, 3})
    EXPECT_NE(m->pool().hash(b), nullptr) << b;
  EXPECT_TRUE(m->TakeEvents().empty());

  // A prompt sharing 16 tokens hits blocks 2 and 3 (free, cached) and skips 0 and 1: it
  // needs 2 taken from the free queue + 1 new = 3 of the 4 free blocks (touching all four
  // hit blocks as a full-attention hit would needs 5).
  std::vector<int32_t> shared = Iota(16);
  shared.push_back(777);
  ASSERT_TRUE(m->AddSequence(2, {}, std::nullopt).ok());
  auto hit = m->GetComputedBlocks(2, shared);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->num_tokens, 16);
  EXPECT_EQ(hit->blocks, (std::vector<BlockId>{N, N, 2, 3}));
  ASSERT_TRUE(Step(*m, 2, shared, 1, *hit));
  // The new block came from the front of the queue: block 0, evicted.
  EXPECT_EQ(Table(*m, 2), (std::vector<BlockId>{N, N, N, 3, 0}));
  EXPECT_EQ(m->pool().ref_count(3), 1);
  events = m->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<BlockRemoved>(events[0]));
  EXPECT_EQ(std::get<BlockRemoved>(events[0]).block_hashes,
            std::vector<kvx::EventHash>{stored.block_hashes[0]});
  EXPECT_EQ(m->pool().hash(0), nullptr);

  // Block 0 is gone: a 9-token prompt (whose next token reads from position 3) misses...
  ASSERT_TRUE(m->AddSequence(3, {}, std::nullopt).ok());
  EXPECT_EQ(m->GetComputedBlocks(3, Iota(9))->num_tokens, 0);
  // ...while the 17-token one still hits past it, where a chain from block 0 would not.
  ASSERT_TRUE(m->AddSequence(4, {}, std::nullopt).ok());
  auto past = m->GetComputedBlocks(4, shared);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->num_tokens, 16);
  EXPECT_EQ(past->blocks, (std::vector<BlockId>{N, N, 2, 3}));
  EXPECT_EQ(m->prefix_cache_stats().hits, 32);
}

TEST(KvCacheWindowTest, ProbeAgreesWithGetComputedBlocks) {
  auto m = MakeKvCacheManager(6, 4, 6);
  Admit(*m, 1, Iota(24));
  std::vector<int32_t> shared = Iota(16);
  shared.push_back(777);
  BlockHasher hasher = m->hasher();
  const PrefixCacheStats before = m->prefix_cache_stats();
  const PrefixHit probe = m->ProbeComputedBlocks(shared, {}, &hasher);
  EXPECT_EQ(m->prefix_cache_stats().queries, before.queries);
  ASSERT_TRUE(m->AddSequence(2, {}, std::nullopt).ok());
  auto hit = m->GetComputedBlocks(2, shared);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(probe.blocks, hit->blocks);
  EXPECT_EQ(probe.num_tokens, hit->num_tokens);
}

TEST(KvCacheWindowTest, PreemptedSequenceRecomputesFromItsWindowHit) {
  auto m = MakeKvCacheManager(8, 4, 6);
  std::vector<int32_t> tokens = Iota(10);
  Admit(*m, 1, tokens);
  for (int32_t t = 10; t < 20; ++t) {
    tokens.push_back(100 + t);
    ASSERT_TRUE(Step(*m, 1, tokens, 1));
  }
  ASSERT_EQ(NumNull(*m, 1), 3);
  ASSERT_TRUE(m->Preempt(1).ok());
  EXPECT_TRUE(m->block_table(1).empty());
  EXPECT_EQ(m->pool().num_free_blocks(), 8);
  // Blocks 2 and 3 ([8, 16)) are enough for position 16, which sees 11..16.
  auto hit = m->GetComputedBlocks(1, tokens);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->num_tokens, 16);
  ASSERT_EQ(hit->blocks.size(), 4u);
  EXPECT_EQ(hit->blocks[0], N);
  EXPECT_EQ(hit->blocks[1], N);
  ASSERT_TRUE(Step(*m, 1, tokens, 4, *hit));
  EXPECT_EQ(m->num_tokens(1), 20);
  EXPECT_EQ(NumNull(*m, 1), 3);
  EXPECT_EQ(m->pool().num_free_blocks(), 6);
}

TEST(KvCacheWindowTest, ReleasesWithoutPrefixCaching) {
  auto m = MakeKvCacheManager(4, 4, 6, /*caching=*/false);
  std::vector<int32_t> tokens = Iota(5);
  Admit(*m, 1, tokens);
  for (int32_t t = 5; t < 40; ++t) {
    tokens.push_back(t);
    ASSERT_TRUE(Step(*m, 1, tokens, 1)) << t;
  }
  EXPECT_EQ(NumNull(*m, 1), 8);
  EXPECT_EQ(m->pool().num_free_blocks(), 2);
  EXPECT_TRUE(m->pool().cache_map().empty());
}

TEST(KvCacheWindowTest, MaxBlocksPerSequenceBoundsEveryStep) {
  EXPECT_EQ(MaxBlocksPerSequence(2048, 2048, 0, 16), 128);
  EXPECT_EQ(MaxBlocksPerSequence(2048, 16, 24, 16), 4);
  EXPECT_EQ(MaxBlocksPerSequence(40, 2048, 24, 16), 3);
  // A step computing n <= max_step tokens from position c holds the blocks from the one
  // with c - W + 1 to the one with c + n - 1.
  for (int32_t window = 1; window <= 12; ++window) {
    for (int32_t bs = 1; bs <= 6; ++bs) {
      for (int32_t max_step = 1; max_step <= 8; ++max_step) {
        const int32_t bound = MaxBlocksPerSequence(1 << 20, max_step, window, bs);
        for (int32_t c = 0; c <= 40; ++c) {
          const int32_t first = std::max(0, c - window + 1) / bs;
          const int32_t end = (c + max_step + bs - 1) / bs;
          ASSERT_LE(end - first, bound)
              << "window " << window << " block " << bs << " step " << max_step << " at " << c;
        }
      }
    }
  }
}

TEST(KvCacheWindowTest, RejectsNegativeWindow) {
  KvCacheOptions options;
  options.num_blocks = 4;
  options.sliding_window = -1;
  EXPECT_EQ(KvCacheManager::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace switchyard::engine
