#include "kvx/kv_block_layout.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace switchyard::kvx {
namespace {

TEST(KvBlockLayoutTest, KvCacheHasAKAndAVSegmentPerLayer) {
  // bench-1b: 16 layers, 8 KV heads, head_dim 64, block 16, f16.
  absl::StatusOr<KvBlockLayout> layout = KvBlockLayout::ForKvCache(16, 16, 8, 64, 2);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->num_segments(), 32u);
  for (size_t s = 0; s < layout->num_segments(); ++s) {
    EXPECT_EQ(layout->segment_bytes(s), 16u * 8 * 64 * 2);
    EXPECT_EQ(layout->segment_offset(s), s * 16 * 8 * 64 * 2);
  }
  EXPECT_EQ(layout->block_bytes(), 32u * 16 * 8 * 64 * 2);
}

TEST(KvBlockLayoutTest, SegmentsOfDifferentSizesGetRunningOffsets) {
  absl::StatusOr<KvBlockLayout> layout = KvBlockLayout::FromSegments({8, 24, 16});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->segment_offset(0), 0u);
  EXPECT_EQ(layout->segment_offset(1), 8u);
  EXPECT_EQ(layout->segment_offset(2), 32u);
  EXPECT_EQ(layout->block_bytes(), 48u);
  EXPECT_EQ(*layout, *KvBlockLayout::FromSegments({8, 24, 16}));
  EXPECT_FALSE(*layout == *KvBlockLayout::FromSegments({8, 16, 24}));
}

TEST(KvBlockLayoutTest, RefusesEmptyNonPositiveAndOverflowingLayouts) {
  EXPECT_FALSE(KvBlockLayout::FromSegments({}).ok());
  EXPECT_FALSE(KvBlockLayout::FromSegments({8, 0}).ok());
  EXPECT_FALSE(KvBlockLayout::FromSegments({std::numeric_limits<size_t>::max(), size_t{1}}).ok());
  EXPECT_FALSE(KvBlockLayout::ForKvCache(0, 16, 8, 64, 2).ok());
  EXPECT_FALSE(KvBlockLayout::ForKvCache(16, 16, -8, 64, 2).ok());
  EXPECT_FALSE(KvBlockLayout::ForKvCache(16, 16, 8, 64, 0).ok());
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(KvBlockLayout::ForKvCache(16, huge, huge, 64, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A layer count whose segment list alone would not fit in memory fails before allocating.
  EXPECT_EQ(KvBlockLayout::ForKvCache(huge, 16, 8, 64, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace switchyard::kvx
