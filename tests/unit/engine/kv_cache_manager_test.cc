// Table-driven tests of the prefix-hit, eviction, fork and event rules. The randomized
// operation sequences with invariants are in kv_cache_manager_property_test.cc.
#include "engine/kv_cache_manager.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

#include "kv_cache_test_support.h"

namespace switchyard::engine {
namespace {

using kvx::AllBlocksCleared;
using kvx::BlockRemoved;
using kvx::BlockStored;

// Admits `seq` with its whole prompt in one step; returns the hit size in tokens.
int32_t Admit(KvCacheManager& m, SeqId seq, const std::vector<int32_t>& tokens,
              BlockHashExtras extras = {}) {
  EXPECT_TRUE(m.AddSequence(seq, std::move(extras), std::nullopt).ok());
  auto hit = m.GetComputedBlocks(seq, tokens);
  EXPECT_TRUE(hit.ok()) << hit.status();
  auto plan = m.Plan(seq, tokens, static_cast<int32_t>(tokens.size()) - hit->num_tokens, *hit);
  EXPECT_TRUE(plan.ok()) << plan.status();
  m.Commit(*plan, tokens);
  return hit->num_tokens;
}

TEST(KvCacheManagerTest, RejectsBadOptions) {
  KvCacheOptions options;
  EXPECT_EQ(KvCacheManager::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.num_blocks = 4;
  options.block_size = 0;
  EXPECT_EQ(KvCacheManager::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

struct HitCase {
  const char* name;
  int32_t cached_prompt_len;  // prompt of the first sequence
  int32_t query_prompt_len;   // prompt of the second, sharing the first's tokens
  int32_t expected_hit_tokens;
};

class PrefixHitTest : public testing::TestWithParam<HitCase> {};

TEST_P(PrefixHitTest, LongestFullBlockPrefixNeverCoveringLastToken) {
  const HitCase& c = GetParam();
  auto m = MakeKvCacheManager(32, 4);
  Admit(*m, 1, Iota(c.cached_prompt_len));
  EXPECT_EQ(Admit(*m, 2, Iota(c.query_prompt_len)), c.expected_hit_tokens);
  EXPECT_EQ(m->prefix_cache_stats().queries, c.cached_prompt_len + c.query_prompt_len);
  EXPECT_EQ(m->prefix_cache_stats().hits, c.expected_hit_tokens);
  EXPECT_EQ(m->prefix_cache_stats().requests, 2);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, PrefixHitTest,
    testing::Values(HitCase{"identical_block_aligned_recomputes_last_block", 8, 8, 4},
                    HitCase{"identical_unaligned", 10, 10, 8}, HitCase{"longer_query", 8, 9, 8},
                    HitCase{"shorter_query", 12, 6, 4},
                    HitCase{"partial_block_never_cached", 7, 12, 4},
                    HitCase{"one_token_prompt", 4, 1, 0}, HitCase{"block_plus_one", 4, 5, 4},
                    HitCase{"below_one_block", 3, 3, 0}),
    [](const testing::TestParamInfo<HitCase>& param_info) { return param_info.param.name; });

TEST(KvCacheManagerTest, ExtraKeysIsolateCaches) {
  auto m = MakeKvCacheManager(32, 4);
  const auto prompt = Iota(9);
  Admit(*m, 1, prompt, {.lora_name = std::nullopt, .cache_salt = "tenant-a"});
  EXPECT_EQ(Admit(*m, 2, prompt), 0);
  EXPECT_EQ(Admit(*m, 3, prompt, {.lora_name = std::nullopt, .cache_salt = "tenant-b"}), 0);
  EXPECT_EQ(Admit(*m, 4, prompt, {.lora_name = std::nullopt, .cache_salt = "tenant-a"}), 8);
  EXPECT_EQ(Admit(*m, 5, prompt, {.lora_name = "lora1", .cache_salt = ""}), 0);
  EXPECT_EQ(Admit(*m, 6, prompt, {.lora_name = "lora1", .cache_salt = ""}), 8);
}

TEST(KvCacheManagerTest, FreeReturnsBlocksTailFirstAndTailIsEvictedFirst) {
  auto m = MakeKvCacheManager(3, 4);
  Admit(*m, 1, Iota(12));
  const std::vector<BlockId> table(m->block_table(1).begin(), m->block_table(1).end());
  ASSERT_EQ(table.size(), 3u);
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_EQ(m->pool().FreeQueue(), (std::vector<BlockId>{table[2], table[1], table[0]}));
  m->TakeEvents();

  // A 1-block request evicts the chain's tail; the first two blocks still hit.
  Admit(*m, 2, Iota(2, 100));
  EXPECT_EQ(m->block_table(2)[0], table[2]);
  auto events = m->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<BlockRemoved>(events[0]));
  ASSERT_TRUE(m->Free(2).ok());
  EXPECT_EQ(Admit(*m, 3, Iota(12)), 8);
}

TEST(KvCacheManagerTest, HitTouchRemovesBlocksFromFreeQueue) {
  auto m = MakeKvCacheManager(4, 4);
  Admit(*m, 1, Iota(9));
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_EQ(m->pool().num_free_blocks(), 4);
  EXPECT_EQ(Admit(*m, 2, Iota(9)), 8);
  EXPECT_EQ(m->pool().num_free_blocks(), 1);
  for (BlockId b : m->block_table(2))
    EXPECT_EQ(m->pool().ref_count(b), 1);
}

TEST(KvCacheManagerTest, PlanCountsEvictableHitsAndFailsWithoutChanges) {
  auto m = MakeKvCacheManager(4, 4);
  Admit(*m, 1, Iota(9));  // 3 blocks, 2 of them cached
  ASSERT_TRUE(m->Free(1).ok());
  // 17 tokens: 2 hit blocks (both in the free queue) + 3 new = 5 > 4 blocks.
  const auto prompt = Iota(17);
  ASSERT_TRUE(m->AddSequence(2, {}, std::nullopt).ok());
  auto hit = m->GetComputedBlocks(2, prompt);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->num_tokens, 8);
  const auto queue_before = m->pool().FreeQueue();
  auto plan = m->Plan(2, prompt, 9, *hit);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m->pool().FreeQueue(), queue_before);
  EXPECT_TRUE(m->block_table(2).empty());
  // Chunked prefill fits: 2 hit blocks + 1 new.
  plan = m->Plan(2, prompt, 4, *hit);
  ASSERT_TRUE(plan.ok()) << plan.status();
  m->Commit(*plan, prompt);
  EXPECT_EQ(m->num_tokens(2), 12);
  EXPECT_EQ(m->block_table(2).size(), 3u);
}

TEST(KvCacheManagerTest, StaleHitIsRejected) {
  auto m = MakeKvCacheManager(8, 4);
  Admit(*m, 1, Iota(9));
  ASSERT_TRUE(m->AddSequence(2, {}, std::nullopt).ok());
  auto hit = m->GetComputedBlocks(2, Iota(9));
  ASSERT_TRUE(hit.ok());
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_EQ(m->Plan(2, Iota(9), 1, *hit).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(KvCacheManagerTest, DecodeCachesBlocksAsTheyFillWithChainedEvents) {
  auto m = MakeKvCacheManager(8, 4);
  auto tokens = Iota(6);
  Admit(*m, 1, tokens);
  auto events = m->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  const BlockStored first = std::get<BlockStored>(events[0]);
  ASSERT_EQ(first.block_hashes.size(), 1u);
  EXPECT_FALSE(first.parent_block_hash.has_value());
  EXPECT_EQ(first.token_ids, Iota(4));
  EXPECT_EQ(first.block_size, 4);
  for (int32_t t = 6; t < 9; ++t) {
    tokens.push_back(100 + t);
    auto plan = m->Plan(1, tokens, 1, {});
    ASSERT_TRUE(plan.ok());
    m->Commit(*plan, tokens);
  }
  events = m->TakeEvents();
  ASSERT_EQ(events.size(), 1u);  // only the step that filled block 1
  const auto& second = std::get<BlockStored>(events[0]);
  ASSERT_TRUE(second.parent_block_hash.has_value());
  EXPECT_EQ(*second.parent_block_hash, first.block_hashes[0]);
  EXPECT_EQ(second.token_ids, (std::vector<int32_t>{4, 5, 106, 107}));
  // A new request whose prompt continues the generated text hits both blocks.
  tokens.push_back(7);
  EXPECT_EQ(Admit(*m, 2, tokens), 8);
}

TEST(KvCacheManagerTest, ResetPrefixCacheOnlyWhenIdle) {
  auto m = MakeKvCacheManager(8, 4);
  Admit(*m, 1, Iota(9));
  m->TakeEvents();
  EXPECT_EQ(m->ResetPrefixCache().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(m->Free(1).ok());
  ASSERT_TRUE(m->ResetPrefixCache().ok());
  EXPECT_TRUE(m->pool().cache_map().empty());
  auto events = m->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(events[0]));
  EXPECT_EQ(Admit(*m, 2, Iota(9)), 0);
}

TEST(KvCacheManagerTest, PreemptKeepsSequenceForRescheduling) {
  auto m = MakeKvCacheManager(8, 4);
  Admit(*m, 1, Iota(9));
  ASSERT_TRUE(m->Preempt(1).ok());
  EXPECT_TRUE(m->block_table(1).empty());
  EXPECT_EQ(m->usage(), 0.0);
  auto hit = m->GetComputedBlocks(1, Iota(9));
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->num_tokens, 8);
}

TEST(KvCacheManagerTest, CachingDisabledNeverHits) {
  auto m = MakeKvCacheManager(8, 4, /*window=*/0, /*caching=*/false);
  Admit(*m, 1, Iota(9));
  EXPECT_EQ(Admit(*m, 2, Iota(9)), 0);
  EXPECT_TRUE(m->pool().cache_map().empty());
  EXPECT_TRUE(m->TakeEvents().empty());
  EXPECT_EQ(m->prefix_cache_stats().queries, 0);
  EXPECT_DOUBLE_EQ(m->usage(), 6.0 / 8.0);
}

}  // namespace
}  // namespace switchyard::engine
