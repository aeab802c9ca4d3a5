// CopyBlocks: the copies of one transfer, coalesced. Entry src_entries[i] of `src` goes to
// entry dst_entries[i] of `dst`, every segment. The pieces are visited in an order that
// lets neighbours merge, and a piece whose source and destination both continue where the
// previous piece's ended joins it, so each maximal run is one memcpy:
//  - both regions' blocks packed (segments back to back, e.g. interleaved stores): whole
//    blocks in entry order; a run of blocks adjacent on both sides is one copy;
//  - otherwise (a pool on either side): segment by segment, entries in order within each;
//    pool<->pool gives one copy per segment per run, pool<->interleaved one per segment per
//    block (its bytes are not adjacent on the interleaved side).
// Copies into a store region (MemoryRegion::is_store) and copies of a transfer of at least
// half the last-level cache use non-temporal stores (streaming_copy.h), fenced before
// CopyBlocks returns: their destination is not read soon, or would not stay cached anyway.
//
// Runs on the calling thread; the tables and the memory they name must stay alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

#include "kvx/internal/descriptor_table.h"

namespace switchyard::kvx::internal {

// Before each copy op, calls before_op(bytes); when it returns false, stops and returns
// Cancelled (ops already made stay made). InvalidArgument, before copying that op, when an
// op's source and destination bytes overlap (memcpy's precondition).
// REQUIRES: the tables' regions have equal layouts; the entry lists have equal sizes and
// hold valid entries of their tables.
absl::Status CopyBlocks(const DescriptorTable& src, std::span<const int32_t> src_entries,
                        const DescriptorTable& dst, std::span<const int32_t> dst_entries,
                        absl::FunctionRef<bool(size_t bytes)> before_op);

}  // namespace switchyard::kvx::internal
