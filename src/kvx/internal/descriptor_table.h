// DescriptorTable: a list of blocks of one registered region, resolved once (NIXL's
// prepared descriptor list): entry i is block_ids[i], kept as its byte offset from each
// segment's base, so a transfer finds entry i's segment s at
// region->segment_base(s) + block_offset[i] with no check left to make.
//
// Immutable after Resolve; any thread. Does not own the region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

#include "kvx/memory_region.h"

namespace switchyard::kvx::internal {

struct DescriptorTable {
  // OutOfRange naming the entry when a block id is negative or not below
  // region.num_blocks().
  static absl::StatusOr<DescriptorTable> Resolve(const MemoryRegion& region,
                                                 std::span<const int32_t> block_ids);

  size_t size() const { return block_offset.size(); }
  std::byte* addr(size_t entry, size_t segment) const {
    return region->segment_base(segment) + block_offset[entry];
  }

  const MemoryRegion* region;
  std::vector<size_t> block_offset;
};

}  // namespace switchyard::kvx::internal
