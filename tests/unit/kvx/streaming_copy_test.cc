#include "kvx/internal/streaming_copy.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "gtest/gtest.h"

#include "transfer_test_memory.h"

namespace switchyard::kvx::internal {
namespace {

// Every length up to a few cache lines at every source and destination offset within 16
// bytes (the head, the line loop and the tail of the copy), with guard bytes on both sides
// of the destination that must stay as they were.
TEST(StreamingCopyTest, CopiesEveryLengthAtEveryAlignmentAndNothingElse) {
  constexpr size_t kGuard = 32;
  std::vector<std::byte> src(300 + 16);
  FillRandom(src, 1);
  for (size_t src_offset = 0; src_offset < 16; ++src_offset) {
    for (size_t dst_offset = 0; dst_offset < 16; ++dst_offset) {
      for (size_t bytes = 1; bytes <= 300; bytes += bytes < 80 ? 1 : 7) {
        std::vector<std::byte> dst(kGuard + dst_offset + bytes + kGuard);
        FillRandom(dst, 2);
        std::vector<std::byte> want = dst;
        std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(src_offset), bytes,
                    want.begin() + static_cast<std::ptrdiff_t>(kGuard + dst_offset));
        StreamingCopy(dst.data() + kGuard + dst_offset, src.data() + src_offset, bytes);
        StreamingCopyFence();
        ASSERT_EQ(dst, want) << "bytes " << bytes << " src+" << src_offset << " dst+" << dst_offset;
      }
    }
  }
}

TEST(StreamingCopyTest, CopiesALargeBuffer) {
  std::vector<std::byte> src(3 << 20 | 40), dst(src.size());
  FillRandom(src, 3);
  StreamingCopy(dst.data(), src.data() + 1, src.size() - 1);
  StreamingCopyFence();
  EXPECT_TRUE(std::equal(dst.begin(), dst.end() - 1, src.begin() + 1));
}

}  // namespace
}  // namespace switchyard::kvx::internal
