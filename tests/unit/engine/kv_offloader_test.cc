// KvOffloader over a pool of test buffers: which released blocks are stored, what Lookup
// finds, loads that copy the stored bytes back, LRU eviction, the "CPU" KV events and the
// stats. Every copy runs on the transfer threads; the tests wait on the wake callback.
#include "engine/kv_offloader.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"

#include "kv_offloader_test_support.h"

namespace switchyard::engine {
namespace {

using ReleasedBlock = KvCacheManager::ReleasedBlock;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kPoolBlocks = 8;

class KvOffloaderTest : public ::testing::Test {
 protected:
  KvOffloaderTest()
      : layout_(*kvx::KvBlockLayout::ForKvCache(2, kBlockSize, 2, 8, 2)),
        pool_(layout_, kPoolBlocks, /*seed=*/7) {}

  int64_t block_bytes() const { return static_cast<int64_t>(layout_.block_bytes()); }

  void Start(int64_t capacity_blocks, int32_t store_threshold = 1) {
    auto offloader = KvOffloader::Start(
        {.capacity_bytes = capacity_blocks * block_bytes(), .store_threshold = store_threshold},
        *pool_.region, kBlockSize, kvx::KvCompatibility{}, wakes_.Callback());
    ASSERT_TRUE(offloader.ok()) << offloader.status();
    offloader_ = std::move(*offloader);
  }

  // Waits for the next started job (a StartStores that returned blocks, a StartLoad that
  // returned true) and collects what has finished.
  KvOffloader::Finished FinishJob() {
    EXPECT_TRUE(wakes_.WaitFor(++num_jobs_));
    return offloader_->TakeFinished();
  }

  // Looks each block up once and stores them; fails the test unless all are stored.
  void Store(const std::vector<ReleasedBlock>& released) {
    std::vector<BlockHash> hashes;
    std::vector<BlockId> blocks;
    for (const ReleasedBlock& r : released) {
      hashes.push_back(r.hash);
      blocks.push_back(r.block);
    }
    offloader_->Lookup(hashes, static_cast<int32_t>(hashes.size()));
    ASSERT_EQ(offloader_->StartStores(released), blocks);
    EXPECT_EQ(FinishJob().unpin, blocks);
  }

  std::vector<std::byte> Bytes(BlockId block) { return pool_.BlockBytes(layout_, block); }
  void Overwrite(BlockId block, uint32_t seed) { OverwriteBlock(pool_, layout_, block, seed); }

  int32_t LoadableAfter(const std::vector<BlockHash>& hashes, int32_t num_cached) {
    return offloader_->Lookup(hashes, num_cached).local;
  }

  kvx::KvBlockLayout layout_;
  kvx::PoolMemory pool_;
  WakeCounter wakes_;
  int64_t num_jobs_ = 0;
  // Last: destroyed first, while the pool and the wake counter still exist.
  std::unique_ptr<KvOffloader> offloader_;
};

TEST_F(KvOffloaderTest, AReleasedBlockLookedUpOnceIsStored) {
  Start(4);
  EXPECT_EQ(LoadableAfter({H(1)}, 0), 0);
  EXPECT_EQ(offloader_->StartStores(std::vector<ReleasedBlock>{{2, H(1)}}),
            std::vector<BlockId>{2});
  // Not readable before its copy is collected.
  EXPECT_EQ(LoadableAfter({H(1)}, 0), 0);
  EXPECT_FALSE(offloader_->StartLoad(1, std::vector<BlockHash>{H(1)}, std::vector<BlockId>{5}, 0));

  const KvOffloader::Finished finished = FinishJob();
  EXPECT_EQ(finished.unpin, std::vector<BlockId>{2});
  EXPECT_TRUE(finished.loads.empty());
  const std::vector<kvx::KvCacheEvent> events = offloader_->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  const auto& stored = std::get<kvx::BlockStored>(events[0]);
  EXPECT_EQ(stored.block_hashes, std::vector<kvx::EventHash>{H(1).event_hash()});
  EXPECT_EQ(stored.medium, std::string(kvx::kMediumCpu));
  EXPECT_TRUE(stored.token_ids.empty());
  EXPECT_FALSE(stored.parent_block_hash.has_value());
  EXPECT_EQ(stored.block_size, kBlockSize);
  EXPECT_TRUE(offloader_->TakeEvents().empty());

  EXPECT_EQ(LoadableAfter({H(1)}, 0), 1);
  const KvTierStats stats = offloader_->stats().front();
  EXPECT_EQ(stats.stored_blocks, 1);
  EXPECT_EQ(stats.used_blocks, 1);
  EXPECT_EQ(stats.capacity_blocks, 4);
  EXPECT_EQ(stats.block_bytes, block_bytes());
  EXPECT_EQ(stats.store_bytes, block_bytes());
  EXPECT_EQ(stats.evicted_blocks, 0);
  EXPECT_EQ(std::string(stats.medium), kvx::kMediumCpu);
}

TEST_F(KvOffloaderTest, BlocksLookedUpLessThanTheThresholdAreNotStored) {
  Start(4, /*store_threshold=*/2);
  const std::vector<ReleasedBlock> released = {{0, H(1)}, {1, H(2)}};
  LoadableAfter({H(1)}, 0);
  EXPECT_TRUE(offloader_->StartStores(released).empty());
  EXPECT_TRUE(offloader_->TakeEvents().empty());
  EXPECT_EQ(offloader_->stats().front().used_blocks, 0);

  // The second lookup passes the threshold for H(1) only.
  LoadableAfter({H(1)}, 0);
  EXPECT_EQ(offloader_->StartStores(released), std::vector<BlockId>{0});
  EXPECT_EQ(FinishJob().unpin, std::vector<BlockId>{0});
  EXPECT_EQ(offloader_->stats().front().stored_blocks, 1);
}

TEST_F(KvOffloaderTest, BlocksThePoolAlreadyHoldsCountTowardTheThreshold) {
  Start(4, /*store_threshold=*/2);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(LoadableAfter({H(1), H(2)}, /*num_cached=*/2), 0);
  EXPECT_EQ(offloader_->stats().front().query_tokens, 0);
  EXPECT_EQ(offloader_->StartStores(std::vector<ReleasedBlock>{{3, H(1)}, {4, H(2)}}),
            (std::vector<BlockId>{3, 4}));
  FinishJob();
}

TEST_F(KvOffloaderTest, ABlockIsStoredOnce) {
  Start(4);
  LoadableAfter({H(1)}, 0);
  // Released twice before the tier saw it, by blocks holding the same hash.
  EXPECT_EQ(offloader_->StartStores(std::vector<ReleasedBlock>{{0, H(1)}, {5, H(1)}}),
            std::vector<BlockId>{0});
  // While it is being written.
  EXPECT_TRUE(offloader_->StartStores(std::vector<ReleasedBlock>{{0, H(1)}}).empty());
  EXPECT_EQ(FinishJob().unpin, std::vector<BlockId>{0});
  // Once it is readable.
  EXPECT_TRUE(offloader_->StartStores(std::vector<ReleasedBlock>{{6, H(1)}}).empty());
  EXPECT_EQ(offloader_->stats().front().stored_blocks, 1);
  EXPECT_EQ(offloader_->stats().front().used_blocks, 1);
  EXPECT_EQ(offloader_->TakeEvents().size(), 1u);
}

TEST_F(KvOffloaderTest, NothingIsStoredWhileEverySlotIsBeingWritten) {
  Start(1);
  LoadableAfter({H(1), H(2)}, 0);
  EXPECT_EQ(offloader_->StartStores(std::vector<ReleasedBlock>{{0, H(1)}, {1, H(2)}}),
            std::vector<BlockId>{0});
  EXPECT_TRUE(offloader_->StartStores(std::vector<ReleasedBlock>{{1, H(2)}}).empty());
  FinishJob();
  EXPECT_EQ(offloader_->stats().front().evicted_blocks, 0);
  EXPECT_EQ(LoadableAfter({H(1)}, 0), 1);
}

TEST_F(KvOffloaderTest, LookupFindsTheRunOfStoredBlocksAfterThePoolsHit) {
  Start(8);
  Store({{1, H(1)}, {2, H(2)}, {4, H(4)}});
  EXPECT_EQ(offloader_->stats().front().query_tokens, 0);  // Store looked up no block past the pool
  const std::vector<BlockHash> hashes = {H(0), H(1), H(2), H(3), H(4)};
  EXPECT_EQ(LoadableAfter(hashes, 1), 2);  // H(3) is missing
  EXPECT_EQ(LoadableAfter(hashes, 0), 0);  // H(0) is missing
  EXPECT_EQ(LoadableAfter(hashes, 3), 0);
  EXPECT_EQ(LoadableAfter(hashes, 4), 1);
  EXPECT_EQ(LoadableAfter(hashes, 5), 0);
  // Query tokens: those of the blocks past the pool's hit.
  EXPECT_EQ(offloader_->stats().front().query_tokens, (4 + 5 + 2 + 1 + 0) * kBlockSize);
  EXPECT_EQ(offloader_->stats().front().hit_tokens, 0);  // loads count hits, lookups do not
}

TEST_F(KvOffloaderTest, ALoadCopiesTheStoredBytesIntoOtherPoolBlocks) {
  Start(4);
  const std::vector<std::byte> first = Bytes(0);
  const std::vector<std::byte> second = Bytes(1);
  Store({{0, H(1)}, {1, H(2)}});
  // The pool reuses the blocks the tier copied.
  Overwrite(0, 100);
  Overwrite(1, 200);
  for (BlockId block : {0, 1, 3, 5, 6, 7}) {
    ASSERT_NE(Bytes(block), first);
    ASSERT_NE(Bytes(block), second);
  }

  ASSERT_EQ(LoadableAfter({H(1), H(2)}, 0), 2);
  ASSERT_TRUE(
      offloader_->StartLoad(7, std::vector<BlockHash>{H(1), H(2)}, std::vector<BlockId>{5, 6}, 0));
  KvOffloader::Finished finished = FinishJob();
  EXPECT_TRUE(finished.unpin.empty());
  ASSERT_EQ(finished.loads.size(), 1u);
  EXPECT_EQ(finished.loads[0].seq, 7);
  EXPECT_EQ(finished.loads[0].num_loaded, 2);
  EXPECT_EQ(Bytes(5), first);
  EXPECT_EQ(Bytes(6), second);

  // In another order, into blocks apart.
  ASSERT_TRUE(
      offloader_->StartLoad(8, std::vector<BlockHash>{H(2), H(1)}, std::vector<BlockId>{3, 7}, 0));
  finished = FinishJob();
  ASSERT_EQ(finished.loads.size(), 1u);
  EXPECT_EQ(finished.loads[0].seq, 8);
  EXPECT_EQ(finished.loads[0].num_loaded, 2);
  EXPECT_EQ(Bytes(3), second);
  EXPECT_EQ(Bytes(7), first);

  const KvTierStats stats = offloader_->stats().front();
  EXPECT_EQ(stats.loads_done, 2);
  EXPECT_EQ(stats.loads_failed, 0);
  EXPECT_EQ(stats.hit_tokens, 4 * kBlockSize);
  EXPECT_EQ(stats.load_bytes, 4 * block_bytes());
  // Loads change nothing in the tier: only the stores' event.
  EXPECT_EQ(offloader_->TakeEvents().size(), 1u);
}

TEST_F(KvOffloaderTest, ALoadOfABlockNotInTheTierStartsNothing) {
  Start(1);
  Store({{0, H(1)}});
  EXPECT_FALSE(
      offloader_->StartLoad(7, std::vector<BlockHash>{H(1), H(9)}, std::vector<BlockId>{5, 6}, 0));
  offloader_->TakeEvents();
  // H(1) was left unpinned: the next store may evict it.
  Store({{1, H(2)}});
  const std::vector<kvx::KvCacheEvent> events = offloader_->TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  const auto& removed = std::get<kvx::BlockRemoved>(events[0]);
  EXPECT_EQ(removed.block_hashes, std::vector<kvx::EventHash>{H(1).event_hash()});
  EXPECT_EQ(removed.medium, std::string(kvx::kMediumCpu));
  EXPECT_EQ(offloader_->stats().front().loads_done + offloader_->stats().front().loads_failed, 0);
}

TEST_F(KvOffloaderTest, AFullTierEvictsTheLeastRecentlyUsedBlock) {
  Start(2);
  Store({{0, H(1)}});
  Store({{1, H(2)}});
  // Reading H(1) makes it the more recent of the two.
  ASSERT_TRUE(offloader_->StartLoad(7, std::vector<BlockHash>{H(1)}, std::vector<BlockId>{5}, 0));
  ASSERT_EQ(FinishJob().loads.size(), 1u);
  offloader_->TakeEvents();

  LoadableAfter({H(3)}, 0);
  EXPECT_EQ(offloader_->StartStores(std::vector<ReleasedBlock>{{2, H(3)}}),
            std::vector<BlockId>{2});
  std::vector<kvx::KvCacheEvent> events = offloader_->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  const auto& removed = std::get<kvx::BlockRemoved>(events[0]);
  EXPECT_EQ(removed.block_hashes, std::vector<kvx::EventHash>{H(2).event_hash()});
  EXPECT_EQ(removed.medium, std::string(kvx::kMediumCpu));
  EXPECT_EQ(LoadableAfter({H(2)}, 0), 0);

  EXPECT_EQ(FinishJob().unpin, std::vector<BlockId>{2});
  events = offloader_->TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(std::get<kvx::BlockStored>(events[0]).block_hashes,
            std::vector<kvx::EventHash>{H(3).event_hash()});
  EXPECT_EQ(LoadableAfter({H(1)}, 0), 1);
  EXPECT_EQ(LoadableAfter({H(3)}, 0), 1);
  const KvTierStats stats = offloader_->stats().front();
  EXPECT_EQ(stats.evicted_blocks, 1);
  EXPECT_EQ(stats.stored_blocks, 3);
  EXPECT_EQ(stats.used_blocks, 2);
}

TEST_F(KvOffloaderTest, StartSizesTheTierInWholeBlocks) {
  for (int64_t capacity : {int64_t{0}, block_bytes() - 1}) {
    auto refused = KvOffloader::Start({.capacity_bytes = capacity}, *pool_.region, kBlockSize,
                                      kvx::KvCompatibility{}, wakes_.Callback());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << capacity;
  }
  auto started =
      KvOffloader::Start({.capacity_bytes = 2 * block_bytes() + block_bytes() / 2}, *pool_.region,
                         kBlockSize, kvx::KvCompatibility{}, wakes_.Callback());
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ((*started)->stats().front().capacity_blocks, 2);
  EXPECT_EQ((*started)->stats().front().used_blocks, 0);
}

}  // namespace
}  // namespace switchyard::engine
