// StreamingCopy: memcpy with non-temporal stores. The destination's cache lines are written
// without first being read for ownership and are not kept in the cache, so a copy into memory
// nobody reads soon moves two streams of bytes instead of three (what glibc's memcpy does on
// its own only for one call larger than a share of the last-level cache, never for the
// 16 KiB pieces a KV transfer is made of). On targets without SSE2 it is memcpy.
//
// The stores are weakly ordered: call StreamingCopyFence() before another thread may read
// the destination (a transfer's completion), as for any non-temporal store.
#pragma once

#include <cstddef>

namespace switchyard::kvx::internal {

// REQUIRES: [dst, dst + bytes) and [src, src + bytes) do not overlap.
void StreamingCopy(std::byte* dst, const std::byte* src, size_t bytes);

// Orders every StreamingCopy this thread made before its later stores (an sfence).
void StreamingCopyFence();

}  // namespace switchyard::kvx::internal
