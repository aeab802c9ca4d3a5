#include "kvx/memory_region.h"

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace switchyard::kvx {

absl::StatusOr<MemoryRegion> MemoryRegion::Create(KvBlockLayout layout,
                                                  std::vector<std::span<std::byte>> segment_memory,
                                                  size_t block_stride, int64_t num_blocks) {
  if (segment_memory.size() != layout.num_segments())
    return absl::InvalidArgumentError(fmt::format("memory region: {} segments for a layout of {}",
                                                  segment_memory.size(), layout.num_segments()));
  if (num_blocks < 1)
    return absl::InvalidArgumentError(
        fmt::format("memory region: {} blocks (at least 1)", num_blocks));
  std::vector<std::byte*> bases;
  bases.reserve(segment_memory.size());
  bool packed = true;
  for (size_t s = 0; s < segment_memory.size(); ++s) {
    const std::span<std::byte> memory = segment_memory[s];
    const size_t segment_bytes = layout.segment_bytes(s);
    if (block_stride < segment_bytes)
      return absl::InvalidArgumentError(
          fmt::format("memory region: block stride {} is less than segment {}'s {} bytes",
                      block_stride, s, segment_bytes));
    // The last block's end: (num_blocks - 1) * stride + segment bytes, overflow-checked; the
    // memory's end must not wrap the address space either.
    size_t end = 0;
    if (__builtin_mul_overflow(static_cast<size_t>(num_blocks - 1), block_stride, &end) ||
        __builtin_add_overflow(end, segment_bytes, &end) || end > memory.size())
      return absl::InvalidArgumentError(
          fmt::format("memory region: segment {}'s {} blocks end past its {} bytes", s, num_blocks,
                      memory.size()));
    uintptr_t last = 0;
    if (__builtin_add_overflow(reinterpret_cast<uintptr_t>(memory.data()), memory.size(), &last))
      return absl::InvalidArgumentError(
          fmt::format("memory region: segment {}'s memory wraps the address space", s));
    bases.push_back(memory.data());
    packed = packed && memory.data() == bases[0] + layout.segment_offset(s);
  }
  return MemoryRegion(std::move(layout), std::move(bases), block_stride, num_blocks, packed);
}

absl::StatusOr<MemoryRegion> MemoryRegion::ForPools(KvBlockLayout layout,
                                                    std::vector<std::span<std::byte>> pools,
                                                    int64_t num_blocks) {
  const size_t stride = layout.segment_bytes(0);
  for (size_t s = 1; s < layout.num_segments(); ++s) {
    if (layout.segment_bytes(s) != stride)
      return absl::InvalidArgumentError(
          "memory region: pools need segments of one size (one block stride)");
  }
  return Create(std::move(layout), std::move(pools), stride, num_blocks);
}

absl::StatusOr<MemoryRegion> MemoryRegion::ForInterleaved(KvBlockLayout layout,
                                                          std::span<std::byte> store,
                                                          int64_t num_blocks) {
  std::vector<std::span<std::byte>> segments;
  segments.reserve(layout.num_segments());
  for (size_t s = 0; s < layout.num_segments(); ++s) {
    const size_t offset = layout.segment_offset(s);
    if (offset > store.size())
      return absl::InvalidArgumentError(
          fmt::format("memory region: a {}-byte store holds no whole block", store.size()));
    segments.push_back(store.subspan(offset));
  }
  const size_t stride = layout.block_bytes();
  absl::StatusOr<MemoryRegion> region =
      Create(std::move(layout), std::move(segments), stride, num_blocks);
  if (region.ok())
    region->is_store_ = true;
  return region;
}

}  // namespace switchyard::kvx
