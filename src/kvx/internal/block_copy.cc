#include "kvx/internal/block_copy.h"

#include <cstring>
#include <functional>

namespace switchyard::kvx::internal {
namespace {

// Merges pieces into the pending op and issues it when the next piece does not continue it.
class CoalescingCopier {
 public:
  explicit CoalescingCopier(absl::FunctionRef<bool(size_t)> before_op) : before_op_(before_op) {}

  absl::Status Add(const std::byte* src, std::byte* dst, size_t bytes) {
    if (bytes_ > 0 && src == src_ + bytes_ && dst == dst_ + bytes_) {
      bytes_ += bytes;
      return absl::OkStatus();
    }
    absl::Status flushed = Flush();
    src_ = src;
    dst_ = dst;
    bytes_ = bytes;
    return flushed;
  }

  absl::Status Flush() {
    if (bytes_ == 0)
      return absl::OkStatus();
    const size_t bytes = bytes_;
    bytes_ = 0;
    // std::less gives a total order on unrelated pointers.
    const std::less<const std::byte*> before;
    if (before(src_, dst_ + bytes) && before(dst_, src_ + bytes))
      return absl::InvalidArgumentError("kvx transfer: a copy's source and destination overlap");
    if (!before_op_(bytes))
      return absl::CancelledError("kvx transfer cancelled");
    std::memcpy(dst_, src_, bytes);
    return absl::OkStatus();
  }

 private:
  absl::FunctionRef<bool(size_t)> before_op_;
  const std::byte* src_ = nullptr;
  std::byte* dst_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace

absl::Status CopyBlocks(const DescriptorTable& src, std::span<const int32_t> src_entries,
                        const DescriptorTable& dst, std::span<const int32_t> dst_entries,
                        absl::FunctionRef<bool(size_t bytes)> before_op) {
  CoalescingCopier copier(before_op);
  const KvBlockLayout& layout = src.region->layout();
  const auto entry = [](std::span<const int32_t> entries, size_t i) {
    return static_cast<size_t>(entries[i]);
  };
  if (src.region->segments_packed() && dst.region->segments_packed()) {
    for (size_t i = 0; i < src_entries.size(); ++i) {
      absl::Status status = copier.Add(src.addr(entry(src_entries, i), 0),
                                       dst.addr(entry(dst_entries, i), 0), layout.block_bytes());
      if (!status.ok())
        return status;
    }
    return copier.Flush();
  }
  for (size_t s = 0; s < layout.num_segments(); ++s) {
    for (size_t i = 0; i < src_entries.size(); ++i) {
      absl::Status status = copier.Add(src.addr(entry(src_entries, i), s),
                                       dst.addr(entry(dst_entries, i), s), layout.segment_bytes(s));
      if (!status.ok())
        return status;
    }
  }
  return copier.Flush();
}

}  // namespace switchyard::kvx::internal
