// KvBlockLayout: what one KV block is made of, for moving it: an ordered list of segments and
// the bytes of each. In the engine's pool (model/kv_cache_storage.h) a block is
// 2 x num_layers segments, one per layer's K pool and one per layer's V pool, each holding
// block_size x kv_heads x head_dim elements; segment 2l is layer l's K, 2l + 1 its V. An
// interleaved store keeps a block's segments back to back in this order (SegmentOffset).
//
// Immutable value; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::kvx {

class KvBlockLayout {
 public:
  // The engine pool's layout. InvalidArgument for non-positive sizes or a block that
  // overflows size_t.
  static absl::StatusOr<KvBlockLayout> ForKvCache(int64_t num_layers, int64_t block_size,
                                                  int64_t kv_heads, int64_t head_dim,
                                                  int64_t dtype_bytes);
  // Any list of segments. InvalidArgument when it is empty, a segment has no bytes, or the
  // block's bytes overflow size_t.
  static absl::StatusOr<KvBlockLayout> FromSegments(std::vector<size_t> segment_bytes);

  size_t num_segments() const { return segment_bytes_.size(); }
  // REQUIRES: segment < num_segments().
  size_t segment_bytes(size_t segment) const { return segment_bytes_[segment]; }
  // Where `segment` starts in a block whose segments lie back to back.
  // REQUIRES: segment < num_segments().
  size_t segment_offset(size_t segment) const { return segment_offsets_[segment]; }
  // All segments together.
  size_t block_bytes() const { return block_bytes_; }

  bool operator==(const KvBlockLayout& other) const {
    return segment_bytes_ == other.segment_bytes_;
  }

 private:
  KvBlockLayout(std::vector<size_t> segment_bytes, std::vector<size_t> segment_offsets,
                size_t block_bytes)
      : segment_bytes_(std::move(segment_bytes)),
        segment_offsets_(std::move(segment_offsets)),
        block_bytes_(block_bytes) {}

  std::vector<size_t> segment_bytes_;
  std::vector<size_t> segment_offsets_;
  size_t block_bytes_;
};

}  // namespace switchyard::kvx
