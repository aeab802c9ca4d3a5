#include "kvx/memory_region.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::kvx {
namespace {

KvBlockLayout ThreeSegments() {
  return *KvBlockLayout::FromSegments({16, 16, 16});
}

TEST(MemoryRegionTest, PoolsPutEachSegmentInItsPool) {
  std::vector<std::byte> k(4 * 16), v(4 * 16), w(4 * 16);
  absl::StatusOr<MemoryRegion> region = MemoryRegion::ForPools(ThreeSegments(), {k, v, w}, 4);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ(region->block_stride(), 16u);
  EXPECT_EQ(region->addr(0, 0), k.data());
  EXPECT_EQ(region->addr(3, 1), v.data() + 48);
  EXPECT_EQ(region->addr(2, 2), w.data() + 32);
  EXPECT_FALSE(region->segments_packed());
  EXPECT_FALSE(region->is_store());
}

TEST(MemoryRegionTest, InterleavedKeepsABlocksSegmentsTogether) {
  std::vector<std::byte> store(5 * 48);
  absl::StatusOr<MemoryRegion> region = MemoryRegion::ForInterleaved(ThreeSegments(), store, 5);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ(region->block_stride(), 48u);
  EXPECT_EQ(region->addr(0, 0), store.data());
  EXPECT_EQ(region->addr(1, 0), store.data() + 48);
  EXPECT_EQ(region->addr(4, 2), store.data() + 4 * 48 + 32);
  EXPECT_TRUE(region->segments_packed());
  EXPECT_TRUE(region->is_store());
}

TEST(MemoryRegionTest, RefusesBlocksPastTheMemory) {
  std::vector<std::byte> store(5 * 48);
  EXPECT_TRUE(MemoryRegion::ForInterleaved(ThreeSegments(), store, 5).ok());
  // The last block's last segment would end one byte past the store.
  EXPECT_EQ(MemoryRegion::ForInterleaved(ThreeSegments(), std::span(store).first(5 * 48 - 1), 5)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(MemoryRegion::ForInterleaved(ThreeSegments(), store, 6).ok());
  EXPECT_FALSE(MemoryRegion::ForInterleaved(ThreeSegments(), std::span(store).first(8), 1).ok());

  std::vector<std::byte> k(4 * 16), v(4 * 16), short_pool(4 * 16 - 1);
  EXPECT_FALSE(MemoryRegion::ForPools(ThreeSegments(), {k, v, short_pool}, 4).ok());
}

TEST(MemoryRegionTest, RefusesMalformedShapes) {
  std::vector<std::byte> k(4 * 16), v(4 * 16), w(4 * 16);
  EXPECT_FALSE(MemoryRegion::ForPools(ThreeSegments(), {k, v}, 4).ok());     // a pool short
  EXPECT_FALSE(MemoryRegion::ForPools(ThreeSegments(), {k, v, w}, 0).ok());  // no blocks
  // Blocks of one segment would overlap.
  EXPECT_FALSE(MemoryRegion::Create(ThreeSegments(), {k, v, w}, 8, 4).ok());
  // Pools with segments of different sizes have no single stride.
  EXPECT_FALSE(
      MemoryRegion::ForPools(*KvBlockLayout::FromSegments({16, 8, 16}), {k, v, w}, 4).ok());
}

TEST(MemoryRegionTest, RefusesAStrideThatOverflows) {
  std::vector<std::byte> k(64), v(64), w(64);
  const size_t huge = std::numeric_limits<size_t>::max() / 2;
  EXPECT_EQ(MemoryRegion::Create(ThreeSegments(), {k, v, w}, huge, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace switchyard::kvx
