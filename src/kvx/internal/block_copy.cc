#include "kvx/internal/block_copy.h"

#include <unistd.h>

#include <cstring>
#include <functional>

#include "kvx/internal/streaming_copy.h"

namespace switchyard::kvx::internal {
namespace {

// A transfer at least this large is not kept in the cache whatever its destination: half
// the last-level cache (16 MiB where the system does not say).
size_t LargeTransferBytes() {
  static const size_t kBytes = [] {
    const long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);  // NOLINT(google-runtime-int): its type
    return l3 > 0 ? static_cast<size_t>(l3) / 2 : size_t{16} << 20;
  }();
  return kBytes;
}

// Merges pieces into the pending op and issues it when the next piece does not continue it.
// Streaming copiers write with non-temporal stores and fence them when destroyed, so that
// the stores are ordered before the transfer's completion is published.
class CoalescingCopier {
 public:
  CoalescingCopier(absl::FunctionRef<bool(size_t)> before_op, bool streaming)
      : before_op_(before_op), streaming_(streaming) {}
  ~CoalescingCopier() {
    if (streaming_)
      StreamingCopyFence();
  }
  CoalescingCopier(const CoalescingCopier&) = delete;
  CoalescingCopier& operator=(const CoalescingCopier&) = delete;

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
    if (streaming_)
      StreamingCopy(dst_, src_, bytes);
    else
      std::memcpy(dst_, src_, bytes);
    return absl::OkStatus();
  }

 private:
  absl::FunctionRef<bool(size_t)> before_op_;
  const bool streaming_;
  const std::byte* src_ = nullptr;
  std::byte* dst_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace

absl::Status CopyBlocks(const DescriptorTable& src, std::span<const int32_t> src_entries,
                        const DescriptorTable& dst, std::span<const int32_t> dst_entries,
                        absl::FunctionRef<bool(size_t bytes)> before_op) {
  const KvBlockLayout& layout = src.region->layout();
  CoalescingCopier copier(
      before_op,
      dst.region->is_store() || layout.block_bytes() * src_entries.size() >= LargeTransferBytes());
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
