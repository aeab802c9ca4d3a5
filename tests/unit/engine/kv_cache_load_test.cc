// KvCacheManager::BeginLoad / FinishLoad: KV computed elsewhere enters the cache so that the
// sequence's normal admission finds it as a prefix hit.
#include <cstdint>
#include <variant>
#include <vector>

#include "gtest/gtest.h"

#include "engine/kv_cache_manager.h"
#include "kv_cache_test_support.h"

namespace switchyard::engine {
namespace {

TEST(KvCacheLoadTest, LoadedBlocksBecomeThePrefixHitOfTheSequence) {
  auto m = MakeKvCacheManager(16, 4);
  const auto prompt = Iota(10);  // 2 full blocks a hit may cover (never the last token)
  ASSERT_TRUE(m->AddSequence(1, {}, std::nullopt).ok());
  auto target = m->BeginLoad(1, prompt);
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->first_block, 0);
  ASSERT_EQ(target->blocks.size(), 2u);
  // Nothing is published while the bytes are on their way.
  EXPECT_TRUE(m->TakeEvents().empty());
  BlockHasher scratch = m->hasher();
  EXPECT_EQ(m->ProbeComputedBlocks(prompt, {}, &scratch).num_tokens, 0);
  EXPECT_EQ(m->pool().num_free_blocks(), 14);

  m->FinishLoad(1, prompt, /*num_loaded=*/2);
  const auto events = m->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(std::get<kvx::BlockStored>(events[0]).block_hashes.size(), 2u);
  EXPECT_EQ(m->pool().num_free_blocks(), 16);

  auto hit = m->GetComputedBlocks(1, prompt);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->num_tokens, 8);
  EXPECT_EQ(hit->blocks, target->blocks);
}

TEST(KvCacheLoadTest, OnlyTheBlocksNotCachedHereAreLoaded) {
  auto m = MakeKvCacheManager(16, 4);
  const auto prompt = Iota(14);  // 3 loadable blocks
  // Another sequence computed the first block's KV here already.
  ASSERT_TRUE(m->AddSequence(1, {}, std::nullopt).ok());
  const std::vector<int32_t> first(prompt.begin(), prompt.begin() + 5);
  auto hit = m->GetComputedBlocks(1, first);
  auto plan = m->Plan(1, first, 5, *hit);
  m->Commit(*plan, first);
  ASSERT_TRUE(m->Free(1).ok());
  m->TakeEvents();

  ASSERT_TRUE(m->AddSequence(2, {}, std::nullopt).ok());
  auto target = m->BeginLoad(2, prompt);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->first_block, 1);
  EXPECT_EQ(target->blocks.size(), 2u);
  m->FinishLoad(2, prompt, 2);
  const auto events = m->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  const auto& stored = std::get<kvx::BlockStored>(events[0]);
  EXPECT_EQ(stored.block_hashes.size(), 2u);
  EXPECT_TRUE(stored.parent_block_hash.has_value());
  EXPECT_EQ(m->GetComputedBlocks(2, prompt)->num_tokens, 12);
}

TEST(KvCacheLoadTest, AFailedLoadPublishesNothingAndFreesEverything) {
  auto m = MakeKvCacheManager(8, 4);
  const auto prompt = Iota(9);
  ASSERT_TRUE(m->AddSequence(1, {}, std::nullopt).ok());
  ASSERT_TRUE(m->BeginLoad(1, prompt).ok());
  m->FinishLoad(1, prompt, /*num_loaded=*/0);
  EXPECT_TRUE(m->TakeEvents().empty());
  EXPECT_EQ(m->pool().num_free_blocks(), 8);
  EXPECT_EQ(m->GetComputedBlocks(1, prompt)->num_tokens, 0);
}

TEST(KvCacheLoadTest, RefusesWhatItCannotHonour) {
  auto small = MakeKvCacheManager(2, 4);
  ASSERT_TRUE(small->AddSequence(1, {}, std::nullopt).ok());
  EXPECT_EQ(small->BeginLoad(1, Iota(20)).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(small->pool().num_free_blocks(), 2);

  auto no_cache = MakeKvCacheManager(8, 4, 0, /*caching=*/false);
  ASSERT_TRUE(no_cache->AddSequence(1, {}, std::nullopt).ok());
  EXPECT_EQ(no_cache->BeginLoad(1, Iota(9)).status().code(), absl::StatusCode::kFailedPrecondition);

  auto windowed = MakeKvCacheManager(8, 4, /*window=*/4);
  ASSERT_TRUE(windowed->AddSequence(1, {}, std::nullopt).ok());
  EXPECT_EQ(windowed->BeginLoad(1, Iota(9)).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace switchyard::engine
