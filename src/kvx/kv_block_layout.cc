#include "kvx/kv_block_layout.h"

#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace switchyard::kvx {

absl::StatusOr<KvBlockLayout> KvBlockLayout::ForKvCache(int64_t num_layers, int64_t block_size,
                                                        int64_t kv_heads, int64_t head_dim,
                                                        int64_t dtype_bytes) {
  if (num_layers <= 0 || block_size <= 0 || kv_heads <= 0 || head_dim <= 0 || dtype_bytes <= 0)
    return absl::InvalidArgumentError(fmt::format(
        "KV block layout: sizes must be positive (layers {}, block {}, kv heads {}, head dim {}, "
        "dtype bytes {})",
        num_layers, block_size, kv_heads, head_dim, dtype_bytes));
  size_t segment = 1;
  for (int64_t factor : {block_size, kv_heads, head_dim, dtype_bytes}) {
    if (__builtin_mul_overflow(segment, static_cast<size_t>(factor), &segment))
      return absl::InvalidArgumentError("KV block layout: a segment overflows size_t");
  }
  // Checked before the segment list is allocated, so that a huge layer count fails cleanly.
  size_t block = 0;
  if (__builtin_mul_overflow(segment, static_cast<size_t>(num_layers), &block) ||
      __builtin_mul_overflow(block, size_t{2}, &block))
    return absl::InvalidArgumentError("KV block layout: a block overflows size_t");
  return FromSegments(std::vector<size_t>(static_cast<size_t>(num_layers) * 2, segment));
}

absl::StatusOr<KvBlockLayout> KvBlockLayout::FromSegments(std::vector<size_t> segment_bytes) {
  if (segment_bytes.empty())
    return absl::InvalidArgumentError("KV block layout: no segments");
  std::vector<size_t> offsets;
  offsets.reserve(segment_bytes.size());
  size_t block_bytes = 0;
  for (size_t bytes : segment_bytes) {
    if (bytes == 0)
      return absl::InvalidArgumentError("KV block layout: a segment has no bytes");
    offsets.push_back(block_bytes);
    if (__builtin_add_overflow(block_bytes, bytes, &block_bytes))
      return absl::InvalidArgumentError("KV block layout: a block overflows size_t");
  }
  return KvBlockLayout(std::move(segment_bytes), std::move(offsets), block_bytes);
}

}  // namespace switchyard::kvx
