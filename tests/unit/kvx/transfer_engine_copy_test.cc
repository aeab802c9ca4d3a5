// What the transfer engine copies: coalescing (copy ops issued per shape) and byte-exact
// results against a reference copy.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

#include "kvx/transfer_engine.h"
#include "transfer_test_memory.h"

namespace switchyard::kvx {
namespace {

constexpr int32_t kBlocks = 8;

KvBlockLayout FourSegments() {
  return *KvBlockLayout::ForKvCache(2, 4, 2, 4, 2);
}

std::vector<int32_t> AllBlocks(int32_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// Runs one transfer of src_ids -> dst_ids on a fresh engine and returns the copy ops it
// issued, after checking that it ended kDone.
uint64_t CopyOpsFor(const MemoryRegion& src, const MemoryRegion& dst,
                    const std::vector<int32_t>& src_ids, const std::vector<int32_t>& dst_ids) {
  TransferEngine engine({.num_threads = 1});
  const BlockListHandle src_table =
      *engine.PrepareBlockList(engine.RegisterRegion(src), AllBlocks(kBlocks));
  const BlockListHandle dst_table =
      *engine.PrepareBlockList(engine.RegisterRegion(dst), AllBlocks(kBlocks));
  CallbackLog log;
  absl::StatusOr<TransferHandle> transfer =
      engine.Post(src_table, src_ids, dst_table, dst_ids, log.Callback(0));
  EXPECT_TRUE(transfer.ok()) << transfer.status();
  log.WaitForCalls(1);
  EXPECT_EQ(engine.Poll(*transfer).state, TransferState::kDone);
  EXPECT_EQ(engine.counters().bytes_moved, src_ids.size() * src.layout().block_bytes());
  return engine.counters().copy_ops;
}

TEST(TransferEngineCopyTest, PoolToPoolIsOneCopyPerSegmentPerRun) {
  const KvBlockLayout layout = FourSegments();
  PoolMemory src(layout, kBlocks, 1), dst(layout, kBlocks, 2);
  EXPECT_EQ(CopyOpsFor(*src.region, *dst.region, {0, 1, 2, 3}, {4, 5, 6, 7}), 4u);
  // The run breaks where the destination does: (0, 1) -> (5, 6), then 2 -> 0.
  EXPECT_EQ(CopyOpsFor(*src.region, *dst.region, {0, 1, 2}, {5, 6, 0}), 8u);
  // And where the source does.
  EXPECT_EQ(CopyOpsFor(*src.region, *dst.region, {3, 4, 0}, {0, 1, 2}), 8u);
}

TEST(TransferEngineCopyTest, InterleavedToInterleavedIsOneCopyPerRun) {
  const KvBlockLayout layout = FourSegments();
  InterleavedMemory src(layout, kBlocks, 1), dst(layout, kBlocks, 2);
  EXPECT_EQ(CopyOpsFor(*src.region, *dst.region, {0, 1, 2, 3}, {2, 3, 4, 5}), 1u);
  EXPECT_EQ(CopyOpsFor(*src.region, *dst.region, {0, 1, 5, 6}, {7, 0, 1, 2}), 3u);
}

TEST(TransferEngineCopyTest, PoolAndInterleavedAreOneCopyPerSegmentPerBlock) {
  const KvBlockLayout layout = FourSegments();
  PoolMemory pool(layout, kBlocks, 1);
  InterleavedMemory store(layout, kBlocks, 2);
  // Consecutive blocks are adjacent in a pool but not on the interleaved side.
  EXPECT_EQ(CopyOpsFor(*pool.region, *store.region, {0, 1, 2}, {0, 1, 2}), 12u);
  EXPECT_EQ(CopyOpsFor(*store.region, *pool.region, {4, 5, 6}, {1, 2, 3}), 12u);
}

TEST(TransferEngineCopyTest, ScatteredIdsAreOneCopyPerBlock) {
  const KvBlockLayout layout = FourSegments();
  PoolMemory src(layout, kBlocks, 1), dst(layout, kBlocks, 2);
  EXPECT_EQ(CopyOpsFor(*src.region, *dst.region, {0, 2, 4}, {1, 3, 5}), 12u);
  InterleavedMemory a(layout, kBlocks, 3), b(layout, kBlocks, 4);
  EXPECT_EQ(CopyOpsFor(*a.region, *b.region, {7, 5, 3}, {0, 2, 4}), 3u);
}

// The same transfers through a reference: whole blocks, segment by segment, in list order.
template <typename Src, typename Dst>
void ReferenceCopy(const KvBlockLayout& layout, Src& src, Dst& dst,
                   const std::vector<int32_t>& src_ids, const std::vector<int32_t>& dst_ids) {
  for (size_t i = 0; i < src_ids.size(); ++i) {
    for (size_t s = 0; s < layout.num_segments(); ++s) {
      std::span<std::byte> from = src.Segment(layout, src_ids[i], s);
      std::memcpy(dst.Segment(layout, dst_ids[i], s).data(), from.data(), from.size());
    }
  }
}

TEST(TransferEngineCopyTest, RandomTransfersMatchAReferenceCopy) {
  const KvBlockLayout layout = *KvBlockLayout::FromSegments({24, 8, 40});
  constexpr int32_t kRegionBlocks = 32;
  std::mt19937 random(7);
  for (int round = 0; round < 40; ++round) {
    const bool src_pool = random() % 2 == 0;
    const bool dst_pool = random() % 2 == 0;
    // Pools need one segment size: use a uniform layout for them.
    const KvBlockLayout round_layout =
        src_pool || dst_pool ? *KvBlockLayout::FromSegments({32, 32, 32}) : layout;
    const uint32_t seed = static_cast<uint32_t>(round) * 10;
    // The destination and its reference start from the same bytes (same seed).
    std::unique_ptr<PoolMemory> src_pool_memory, dst_pool_memory, ref_pool_memory;
    if (src_pool || dst_pool) {
      src_pool_memory = std::make_unique<PoolMemory>(round_layout, kRegionBlocks, seed);
      dst_pool_memory = std::make_unique<PoolMemory>(round_layout, kRegionBlocks, seed + 5);
      ref_pool_memory = std::make_unique<PoolMemory>(round_layout, kRegionBlocks, seed + 5);
    }
    InterleavedMemory src_store(round_layout, kRegionBlocks, seed + 1);
    InterleavedMemory dst_store(round_layout, kRegionBlocks, seed + 2);
    InterleavedMemory ref_store(round_layout, kRegionBlocks, seed + 2);

    // Random block lists, often with runs; destinations distinct.
    std::vector<int32_t> dst_order = AllBlocks(kRegionBlocks);
    std::shuffle(dst_order.begin(), dst_order.end(), random);
    if (random() % 2 == 0)
      std::sort(dst_order.begin(), dst_order.begin() + 12);
    const size_t n = 1 + random() % 12;
    std::vector<int32_t> src_ids, dst_ids(dst_order.begin(), dst_order.begin() + n);
    int32_t next = static_cast<int32_t>(random() % kRegionBlocks);
    for (size_t i = 0; i < n; ++i) {
      src_ids.push_back(next);
      next = random() % 3 == 0 ? static_cast<int32_t>(random() % kRegionBlocks)
                               : (next + 1) % kRegionBlocks;
    }

    TransferEngine engine({.num_threads = 2});
    const MemoryRegion& src_region = src_pool ? *src_pool_memory->region : *src_store.region;
    const MemoryRegion& dst_region = dst_pool ? *dst_pool_memory->region : *dst_store.region;
    // Tables in another order than the regions' ids, so that indices differ from ids.
    std::vector<int32_t> reversed = AllBlocks(kRegionBlocks);
    std::reverse(reversed.begin(), reversed.end());
    const BlockListHandle src_table =
        *engine.PrepareBlockList(engine.RegisterRegion(src_region), reversed);
    const BlockListHandle dst_table =
        *engine.PrepareBlockList(engine.RegisterRegion(dst_region), AllBlocks(kRegionBlocks));
    std::vector<int32_t> src_indices;
    for (int32_t id : src_ids)
      src_indices.push_back(kRegionBlocks - 1 - id);
    CallbackLog log;
    ASSERT_TRUE(engine.Post(src_table, src_indices, dst_table, dst_ids, log.Callback(0)).ok());
    log.WaitForCalls(1);
    ASSERT_EQ(log.Calls(0).at(0).state, TransferState::kDone);

    if (src_pool && dst_pool)
      ReferenceCopy(round_layout, *src_pool_memory, *ref_pool_memory, src_ids, dst_ids);
    else if (src_pool)
      ReferenceCopy(round_layout, *src_pool_memory, ref_store, src_ids, dst_ids);
    else if (dst_pool)
      ReferenceCopy(round_layout, src_store, *ref_pool_memory, src_ids, dst_ids);
    else
      ReferenceCopy(round_layout, src_store, ref_store, src_ids, dst_ids);
    if (dst_pool)
      EXPECT_EQ(dst_pool_memory->pools, ref_pool_memory->pools) << "round " << round;
    else
      EXPECT_EQ(dst_store.store, ref_store.store) << "round " << round;
    EXPECT_EQ(engine.counters().bytes_moved, n * round_layout.block_bytes());
  }
}

TEST(TransferEngineCopyTest, AnOverlappingCopyFailsWithoutCopying) {
  const KvBlockLayout layout = FourSegments();
  InterleavedMemory store(layout, kBlocks, 1);
  const std::vector<std::byte> before = store.store;
  TransferEngine engine({.num_threads = 1});
  const BlockListHandle table =
      *engine.PrepareBlockList(engine.RegisterRegion(*store.region), AllBlocks(kBlocks));
  CallbackLog log;
  // Blocks 0-1 -> 1-2 of one store: one merged copy whose ends overlap.
  absl::StatusOr<TransferHandle> transfer =
      engine.Post(table, {{0, 1}}, table, {{1, 2}}, log.Callback(0));
  ASSERT_TRUE(transfer.ok());
  log.WaitForCalls(1);
  const TransferStatus status = engine.Poll(*transfer);
  EXPECT_EQ(status.state, TransferState::kFailed);
  EXPECT_EQ(status.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(log.Calls(0).at(0).state, TransferState::kFailed);
  EXPECT_EQ(store.store, before);
  EXPECT_EQ(engine.counters().transfers_failed, 1u);
  EXPECT_EQ(engine.counters().copy_ops, 0u);

  // Disjoint blocks of the same store are fine.
  ASSERT_TRUE(engine.Post(table, {{0}}, table, {{5}}, log.Callback(1)).ok());
  log.WaitForCalls(2);
  EXPECT_EQ(log.Calls(1).at(0).state, TransferState::kDone);
  EXPECT_EQ(std::memcmp(store.Segment(layout, 5, 0).data(), before.data(), layout.block_bytes()),
            0);
}

TEST(TransferEngineCopyTest, BadBlockListsAndIndicesAreRefusedUpFront) {
  const KvBlockLayout layout = FourSegments();
  PoolMemory pool(layout, kBlocks, 1);
  InterleavedMemory other(*KvBlockLayout::FromSegments({16, 16, 16, 16, 8}), kBlocks, 2);
  TransferEngine engine({.num_threads = 1});
  const RegionHandle region = engine.RegisterRegion(*pool.region);

  EXPECT_EQ(engine.PrepareBlockList(region, {{0, kBlocks}}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(engine.PrepareBlockList(region, {{-1}}).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(engine.PrepareBlockList(RegionHandle{7}, {{0}}).status().code(),
            absl::StatusCode::kInvalidArgument);

  const BlockListHandle table = *engine.PrepareBlockList(region, {{0, 1, 2}});
  const BlockListHandle other_table =
      *engine.PrepareBlockList(engine.RegisterRegion(*other.region), {{0, 1, 2}});
  EXPECT_EQ(engine.Post(table, {{0, 3}}, table, {{1, 2}}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(engine.Post(table, {{0}}, table, {{-1}}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(engine.Post(table, {{0, 1}}, table, {{2}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.Post(table, {{0}}, other_table, {{0}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.Post(BlockListHandle{9}, {{0}}, table, {{0}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.counters().copy_ops, 0u);
}

}  // namespace
}  // namespace switchyard::kvx
