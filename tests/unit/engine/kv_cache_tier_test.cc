// What KvCacheManager offers a KV tier under the pool: ProbePrefix (a prompt as the tier sees
// it), BeginLoad up to an end block, and the released cached blocks the tier copies
// (TakeReleasedBlocks, PinBlocks, UnpinBlocks), and the prefix it lends a peer
// (PinCachedPrefix).
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "gtest/gtest.h"

#include "engine/kv_cache_manager.h"
#include "kv_cache_test_support.h"

namespace switchyard::engine {
namespace {

// Admits `seq` with `tokens` and computes all of them in one step, publishing its full
// blocks.
void Prefill(KvCacheManager& m, SeqId seq, const std::vector<int32_t>& tokens,
             const BlockHashExtras& extras = {}) {
  ASSERT_TRUE(m.AddSequence(seq, extras, std::nullopt).ok());
  auto hit = m.GetComputedBlocks(seq, tokens);
  ASSERT_TRUE(hit.ok()) << hit.status();
  auto plan = m.Plan(seq, tokens, static_cast<int32_t>(tokens.size()) - hit->num_tokens, *hit);
  ASSERT_TRUE(plan.ok()) << plan.status();
  m.Commit(*plan, tokens);
}

// The hashes of the first `num_blocks` full blocks of `tokens`, computed apart from `m`.
std::vector<BlockHash> Chain(const KvCacheManager& m, const std::vector<int32_t>& tokens,
                             int32_t num_blocks, const BlockHashExtras& extras = {}) {
  BlockHasher hasher = m.hasher();
  std::vector<BlockHash> chain;
  for (int32_t i = 0; i < num_blocks; ++i) {
    const std::span<const int32_t> block =
        std::span(tokens).subspan(static_cast<size_t>(i) * m.block_size(), m.block_size());
    chain.push_back(hasher.Hash(i == 0 ? nullptr : &chain.back(), block, extras, i));
  }
  return chain;
}

std::vector<BlockHash> ToVector(std::span<const BlockHash> hashes) {
  return {hashes.begin(), hashes.end()};
}

std::vector<BlockId> Table(const KvCacheManager& m, SeqId seq) {
  const std::span<const BlockId> table = m.block_table(seq);
  return {table.begin(), table.end()};
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(KvCacheTierTest, ProbePrefixHashesTheFullBlocksAHitMayCover) {
  auto m = MakeKvCacheManager(16, 4);
  const auto nine = Iota(9);
  ASSERT_TRUE(m->AddSequence(1, {}, std::nullopt).ok());
  const KvCacheManager::PrefixProbe probe = m->ProbePrefix(1, nine);
  EXPECT_EQ(ToVector(probe.hashes), Chain(*m, nine, 2));
  EXPECT_EQ(probe.num_cached_blocks, 0);

  // Never the last token's block, even when it is full.
  ASSERT_TRUE(m->AddSequence(2, {}, std::nullopt).ok());
  EXPECT_EQ(ToVector(m->ProbePrefix(2, Iota(8)).hashes), Chain(*m, nine, 1));
  ASSERT_TRUE(m->AddSequence(3, {}, std::nullopt).ok());
  EXPECT_TRUE(m->ProbePrefix(3, Iota(4)).hashes.empty());

  // A probe is no query and takes no block.
  EXPECT_EQ(m->prefix_cache_stats().requests, 0);
  EXPECT_EQ(m->prefix_cache_stats().queries, 0);
  EXPECT_EQ(m->pool().num_free_blocks(), 16);
  EXPECT_TRUE(m->TakeEvents().empty());
}

TEST(KvCacheTierTest, ProbePrefixCountsTheBlocksAnotherSequencePublished) {
  auto m = MakeKvCacheManager(16, 4);
  Prefill(*m, 1, Iota(9));  // publishes 2 blocks
  const auto prompt = Iota(17);

  ASSERT_TRUE(m->AddSequence(2, {}, std::nullopt).ok());
  const KvCacheManager::PrefixProbe probe = m->ProbePrefix(2, prompt);
  EXPECT_EQ(ToVector(probe.hashes), Chain(*m, prompt, 4));
  EXPECT_EQ(probe.num_cached_blocks, 2);

  // A prompt that parts from the cached one in its second block.
  ASSERT_TRUE(m->AddSequence(3, {}, std::nullopt).ok());
  EXPECT_EQ(m->ProbePrefix(3, Concat(Iota(5), Iota(12, 100))).num_cached_blocks, 1);

  // Another tenant's salt: the same tokens hash apart.
  const BlockHashExtras salted{.lora_name = std::nullopt, .cache_salt = "tenant"};
  ASSERT_TRUE(m->AddSequence(4, salted, std::nullopt).ok());
  const KvCacheManager::PrefixProbe other = m->ProbePrefix(4, prompt);
  EXPECT_EQ(other.num_cached_blocks, 0);
  EXPECT_EQ(ToVector(other.hashes), Chain(*m, prompt, 4, salted));
}

TEST(KvCacheTierTest, ProbePrefixOfAPreemptedSequenceCoversOnlyWhatAHitMay) {
  auto m = MakeKvCacheManager(16, 4);
  const auto tokens = Iota(8);
  Prefill(*m, 1, tokens);  // publishes (and hashes) both blocks
  ASSERT_TRUE(m->Preempt(1).ok());
  const KvCacheManager::PrefixProbe probe = m->ProbePrefix(1, tokens);
  EXPECT_EQ(ToVector(probe.hashes), Chain(*m, tokens, 1));
  EXPECT_EQ(probe.num_cached_blocks, 1);
}

TEST(KvCacheTierTest, BeginLoadStopsBeforeTheEndBlock) {
  auto m = MakeKvCacheManager(16, 4);
  const auto prompt = Iota(17);  // 4 blocks a hit may cover
  ASSERT_TRUE(m->AddSequence(1, {}, std::nullopt).ok());
  auto target = m->BeginLoad(1, prompt, /*end_block=*/3);
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->first_block, 0);
  EXPECT_EQ(target->blocks.size(), 3u);
  EXPECT_EQ(m->pool().num_free_blocks(), 13);

  m->FinishLoad(1, prompt, 3);
  const auto events = m->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(std::get<kvx::BlockStored>(events[0]).block_hashes.size(), 3u);
  EXPECT_EQ(m->GetComputedBlocks(1, prompt)->num_tokens, 12);

  // An end past the blocks a hit may cover changes nothing.
  ASSERT_TRUE(m->AddSequence(2, {}, std::nullopt).ok());
  target = m->BeginLoad(2, prompt, /*end_block=*/100);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->first_block, 3);
  EXPECT_EQ(target->blocks.size(), 1u);
  m->FinishLoad(2, prompt, 1);
  EXPECT_EQ(m->GetComputedBlocks(2, prompt)->num_tokens, 16);
}

TEST(KvCacheTierTest, BeginLoadIsEmptyWhenTheEndBlockIsWithinTheCachedPrefix) {
  auto m = MakeKvCacheManager(16, 4);
  Prefill(*m, 1, Iota(9));
  ASSERT_TRUE(m->Free(1).ok());
  m->TakeEvents();
  const auto prompt = Iota(17);
  const std::vector<BlockHash> chain = Chain(*m, prompt, 4);

  ASSERT_TRUE(m->AddSequence(2, {}, std::nullopt).ok());
  for (int32_t end_block : {0, 1, 2}) {
    SCOPED_TRACE(end_block);
    auto target = m->BeginLoad(2, prompt, end_block);
    ASSERT_TRUE(target.ok()) << target.status();
    EXPECT_EQ(target->first_block, 2);
    EXPECT_TRUE(target->blocks.empty());
    m->FinishLoad(2, prompt, 0);
    EXPECT_TRUE(m->TakeEvents().empty());
    EXPECT_EQ(m->pool().num_free_blocks(), 16);
  }

  auto target = m->BeginLoad(2, prompt, 3);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->first_block, 2);
  EXPECT_EQ(target->blocks.size(), 1u);
  m->FinishLoad(2, prompt, 1);
  const auto events = m->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  const auto& stored = std::get<kvx::BlockStored>(events[0]);
  ASSERT_EQ(stored.block_hashes.size(), 1u);
  EXPECT_EQ(stored.block_hashes[0], chain[2].event_hash());
  EXPECT_EQ(stored.parent_block_hash, chain[1].event_hash());
  EXPECT_EQ(m->GetComputedBlocks(2, prompt)->num_tokens, 12);
}

TEST(KvCacheTierTest, LoadedTokensAreNoHitsOfTheAdmissionAfterTheLoad) {
  auto m = MakeKvCacheManager(16, 4);
  Prefill(*m, 1, Iota(5));  // publishes block 0
  const auto prompt = Iota(13);
  ASSERT_TRUE(m->AddSequence(2, {}, std::nullopt).ok());
  auto target = m->BeginLoad(2, prompt);
  ASSERT_TRUE(target.ok()) << target.status();
  ASSERT_EQ(target->blocks.size(), 2u);
  m->FinishLoad(2, prompt, 2);
  const PrefixCacheStats before = m->prefix_cache_stats();
  auto hit = m->GetComputedBlocks(2, prompt);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->num_tokens, 12);
  // The query counts the prompt; its hits only the block that was cached before the load.
  EXPECT_EQ(m->prefix_cache_stats().queries - before.queries, 13);
  EXPECT_EQ(m->prefix_cache_stats().hits - before.hits, 4);
  // Another sequence finds all three blocks as ordinary hits.
  ASSERT_TRUE(m->AddSequence(3, {}, std::nullopt).ok());
  ASSERT_TRUE(m->GetComputedBlocks(3, prompt).ok());
  EXPECT_EQ(m->prefix_cache_stats().hits - before.hits, 4 + 12);
}

TEST(KvCacheTierTest, NothingIsReleasedForATierUnlessTracked) {
  auto m = MakeKvCacheManager(8, 4);
  Prefill(*m, 1, Iota(9));
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_TRUE(m->TakeReleasedBlocks().empty());
}

TEST(KvCacheTierTest, FreeReleasesThePublishedBlocksInBlockTableOrder) {
  auto m = MakeKvCacheManager(16, 4, 0, true, /*track_released=*/true);
  const auto tokens = Iota(21);  // 5 full blocks, published, and a partial one
  Prefill(*m, 1, tokens);
  EXPECT_TRUE(m->TakeReleasedBlocks().empty());  // still referenced
  const std::vector<BlockId> table = Table(*m, 1);
  ASSERT_EQ(table.size(), 6u);
  const std::vector<BlockHash> chain = Chain(*m, tokens, 5);

  ASSERT_TRUE(m->Free(1).ok());
  const auto released = m->TakeReleasedBlocks();
  ASSERT_EQ(released.size(), 5u);
  for (size_t i = 0; i < released.size(); ++i) {
    EXPECT_EQ(released[i].block, table[i]) << i;
    EXPECT_EQ(released[i].hash, chain[i]) << i;
  }
  EXPECT_TRUE(m->TakeReleasedBlocks().empty());
}

TEST(KvCacheTierTest, PreemptReleasesThePublishedBlocksAsFreeDoes) {
  auto m = MakeKvCacheManager(16, 4, 0, true, /*track_released=*/true);
  const auto tokens = Iota(10);
  Prefill(*m, 1, tokens);
  const std::vector<BlockId> table = Table(*m, 1);
  const std::vector<BlockHash> chain = Chain(*m, tokens, 2);
  ASSERT_TRUE(m->Preempt(1).ok());
  const auto released = m->TakeReleasedBlocks();
  ASSERT_EQ(released.size(), 2u);
  EXPECT_EQ(released[0].block, table[0]);
  EXPECT_EQ(released[0].hash, chain[0]);
  EXPECT_EQ(released[1].block, table[1]);
  EXPECT_EQ(released[1].hash, chain[1]);
}

TEST(KvCacheTierTest, ABlockIsReleasedOnlyWithItsLastReference) {
  auto m = MakeKvCacheManager(16, 4, 0, true, /*track_released=*/true);
  const auto tokens = Iota(9);
  Prefill(*m, 1, tokens);
  Prefill(*m, 2, tokens);  // hits both published blocks of sequence 1
  const std::vector<BlockId> table = Table(*m, 2);
  ASSERT_EQ(m->block_table(1)[0], table[0]);

  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_TRUE(m->TakeReleasedBlocks().empty());
  ASSERT_TRUE(m->Free(2).ok());
  const auto released = m->TakeReleasedBlocks();
  ASSERT_EQ(released.size(), 2u);
  EXPECT_EQ(released[0].block, table[0]);
  EXPECT_EQ(released[1].block, table[1]);
}

TEST(KvCacheTierTest, ALoadReleasesTheBlocksItPublished) {
  auto m = MakeKvCacheManager(16, 4, 0, true, /*track_released=*/true);
  const auto prompt = Iota(9);
  ASSERT_TRUE(m->AddSequence(1, {}, std::nullopt).ok());
  auto target = m->BeginLoad(1, prompt);
  ASSERT_TRUE(target.ok());
  ASSERT_EQ(target->blocks.size(), 2u);
  m->FinishLoad(1, prompt, /*num_loaded=*/1);  // the second never arrived
  const auto released = m->TakeReleasedBlocks();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].block, target->blocks[0]);
  EXPECT_EQ(released[0].hash, Chain(*m, prompt, 1)[0]);
}

TEST(KvCacheTierTest, ABlockHandedOutSinceIsLeftOut) {
  // The pool hands out its free queue front first, and Free queues a table tail first, so
  // after sequence 1 the queue is: the two never used blocks, then 1's second and first.
  // Sequence 2 takes three: 1's second block, reused, drops its hash (11 tokens: it is the
  // partial block) or is published under another one (12 tokens).
  for (int32_t num_tokens : {11, 12}) {
    SCOPED_TRACE(num_tokens);
    auto m = MakeKvCacheManager(4, 4, 0, true, /*track_released=*/true);
    const auto tokens = Iota(8);
    Prefill(*m, 1, tokens);
    const std::vector<BlockId> table = Table(*m, 1);
    const std::vector<BlockHash> chain = Chain(*m, tokens, 2);
    ASSERT_TRUE(m->Free(1).ok());
    Prefill(*m, 2, Iota(num_tokens, 100));
    const BlockHash* second = m->pool().hash(table[1]);
    ASSERT_TRUE(second == nullptr || *second != chain[1]);

    const auto released = m->TakeReleasedBlocks();
    ASSERT_EQ(released.size(), 1u);
    EXPECT_EQ(released[0].block, table[0]);
    EXPECT_EQ(released[0].hash, chain[0]);
  }
}

TEST(KvCacheTierTest, PinnedBlocksStayCachedAndUnpinningIsNoRelease) {
  auto m = MakeKvCacheManager(4, 4, 0, true, /*track_released=*/true);
  const auto tokens = Iota(9);
  Prefill(*m, 1, tokens);
  ASSERT_TRUE(m->Free(1).ok());
  const auto released = m->TakeReleasedBlocks();
  ASSERT_EQ(released.size(), 2u);
  const std::vector<BlockId> pinned = {released[0].block, released[1].block};

  m->PinBlocks(pinned);
  for (BlockId block : pinned) {
    EXPECT_FALSE(m->pool().in_free_queue(block));
    EXPECT_EQ(m->pool().ref_count(block), 1);
  }
  EXPECT_EQ(m->pool().num_free_blocks(), 2);
  // Another prompt takes every free block; the pinned ones keep their hashes.
  Prefill(*m, 2, Iota(8, 100));
  EXPECT_EQ(m->pool().num_free_blocks(), 0);
  EXPECT_EQ(*m->pool().hash(pinned[0]), released[0].hash);
  EXPECT_EQ(*m->pool().hash(pinned[1]), released[1].hash);
  ASSERT_TRUE(m->AddSequence(3, {}, std::nullopt).ok());
  auto hit = m->GetComputedBlocks(3, Iota(5, 200));
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(m->Plan(3, Iota(5, 200), 5, *hit).status().code(),
            absl::StatusCode::kResourceExhausted);

  m->UnpinBlocks(pinned);
  for (BlockId block : pinned) {
    EXPECT_TRUE(m->pool().in_free_queue(block));
    EXPECT_EQ(m->pool().ref_count(block), 0);
  }
  EXPECT_TRUE(m->TakeReleasedBlocks().empty());
  ASSERT_TRUE(m->AddSequence(4, {}, std::nullopt).ok());
  EXPECT_EQ(m->GetComputedBlocks(4, tokens)->num_tokens, 8);
}

TEST(KvCacheTierTest, PinCachedPrefixPinsTheLeadingRunTheCacheHolds) {
  auto m = MakeKvCacheManager(8, 4);
  const auto tokens = Iota(13);
  Prefill(*m, 1, tokens);
  const std::vector<BlockId> table = Table(*m, 1);
  ASSERT_TRUE(m->Free(1).ok());
  // Three full blocks are cached; a peer asks for them and one more.
  const std::vector<BlockHash> chain = Chain(*m, Concat(tokens, Iota(3, 50)), 4);

  const std::vector<BlockId> lent = m->PinCachedPrefix(chain);
  EXPECT_EQ(lent, std::vector<BlockId>(table.begin(), table.begin() + 3));
  for (BlockId block : lent) {
    EXPECT_FALSE(m->pool().in_free_queue(block));
    EXPECT_EQ(m->pool().ref_count(block), 1);
  }
  // A run starts at the first hash: a gap ends it, and a later cached block is not lent.
  EXPECT_TRUE(m->PinCachedPrefix(std::span(chain).subspan(3)).empty());
  const std::vector<BlockHash> gapped = {chain[3], chain[1]};
  EXPECT_TRUE(m->PinCachedPrefix(gapped).empty());
  // A run may start past the first block: chained hashes name the whole prefix.
  const std::vector<BlockId> tail = m->PinCachedPrefix(std::span(chain).subspan(1, 2));
  EXPECT_EQ(tail, std::vector<BlockId>(table.begin() + 1, table.begin() + 3));
  EXPECT_EQ(m->pool().ref_count(table[1]), 2);

  m->UnpinBlocks(tail);
  m->UnpinBlocks(lent);
  for (BlockId block : lent)
    EXPECT_TRUE(m->pool().in_free_queue(block));
}

}  // namespace
}  // namespace switchyard::engine
