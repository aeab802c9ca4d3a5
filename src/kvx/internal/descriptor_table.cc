#include "kvx/internal/descriptor_table.h"

#include "absl/status/status.h"
#include "fmt/format.h"

namespace switchyard::kvx::internal {

absl::StatusOr<DescriptorTable> DescriptorTable::Resolve(const MemoryRegion& region,
                                                         std::span<const int32_t> block_ids) {
  DescriptorTable table{&region, {}};
  table.block_offset.reserve(block_ids.size());
  for (size_t i = 0; i < block_ids.size(); ++i) {
    const int32_t block = block_ids[i];
    if (block < 0 || block >= region.num_blocks())
      return absl::OutOfRangeError(
          fmt::format("block list entry {}: block {} is outside the region's {} blocks", i, block,
                      region.num_blocks()));
    // Cannot overflow: MemoryRegion::Create checked the last block's end.
    table.block_offset.push_back(static_cast<size_t>(block) * region.block_stride());
  }
  return table;
}

}  // namespace switchyard::kvx::internal
