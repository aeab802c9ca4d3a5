// MemoryRegion: where each segment of each block of one memory area lives, by one formula:
//
//   addr(block, segment) = segment_base[segment] + block * block_stride
//
// It covers both shapes KV takes in memory:
//  - the engine's pool: segment_base[s] is pool s (a layer's K or V pool), block_stride the
//    segment's bytes (ForPools);
//  - an interleaved store (a tier's buffer, a shared-memory mapping): block b's segments lie
//    back to back, segment_base[s] = base + segment_offset(s), block_stride the whole
//    block's bytes (ForInterleaved).
// Creation checks once that every block of every segment lies inside the memory given for
// it, without overflow; addr() then checks nothing. A region made by ForInterleaved is a
// store: copies into it use non-temporal stores (kvx/internal/streaming_copy.h), since a
// store's blocks are read back only on a later hit, not by the next step.
//
// Immutable value; any thread. Does not own the memory, which must outlive every use of
// the region (a TransferEngine that registered it included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

#include "kvx/kv_block_layout.h"

namespace switchyard::kvx {

class MemoryRegion {
 public:
  // segment_memory[s]: the memory segment s's blocks live in, block 0 at its start.
  // InvalidArgument when the counts disagree with the layout, num_blocks < 1,
  // block_stride < a segment's bytes (blocks would overlap), or the last block of a segment
  // ends past its memory.
  static absl::StatusOr<MemoryRegion> Create(KvBlockLayout layout,
                                             std::vector<std::span<std::byte>> segment_memory,
                                             size_t block_stride, int64_t num_blocks);
  // One pool per segment, each of num_blocks blocks of that segment. InvalidArgument, as
  // Create, or when the segments differ in size (one stride cannot serve them).
  static absl::StatusOr<MemoryRegion> ForPools(KvBlockLayout layout,
                                               std::vector<std::span<std::byte>> pools,
                                               int64_t num_blocks);
  // num_blocks whole blocks back to back in `store`; is_store() is true. InvalidArgument, as
  // Create.
  static absl::StatusOr<MemoryRegion> ForInterleaved(KvBlockLayout layout,
                                                     std::span<std::byte> store,
                                                     int64_t num_blocks);

  const KvBlockLayout& layout() const { return layout_; }
  int64_t num_blocks() const { return num_blocks_; }
  size_t block_stride() const { return block_stride_; }
  // REQUIRES: segment < layout().num_segments().
  std::byte* segment_base(size_t segment) const { return segment_base_[segment]; }
  // Whether each block's segments lie back to back in layout order, so that a block is one
  // contiguous range of block_bytes() starting at segment 0.
  bool segments_packed() const { return segments_packed_; }
  // Whether the region is a store (ForInterleaved): what is written into it is not read soon.
  bool is_store() const { return is_store_; }

  // REQUIRES: 0 <= block < num_blocks(), segment < layout().num_segments().
  std::byte* addr(int64_t block, size_t segment) const {
    return segment_base_[segment] + static_cast<size_t>(block) * block_stride_;
  }

 private:
  MemoryRegion(KvBlockLayout layout, std::vector<std::byte*> segment_base, size_t block_stride,
               int64_t num_blocks, bool segments_packed)
      : layout_(std::move(layout)),
        segment_base_(std::move(segment_base)),
        block_stride_(block_stride),
        num_blocks_(num_blocks),
        segments_packed_(segments_packed) {}

  KvBlockLayout layout_;
  std::vector<std::byte*> segment_base_;
  size_t block_stride_;
  int64_t num_blocks_;
  bool segments_packed_;
  bool is_store_ = false;
};

}  // namespace switchyard::kvx
