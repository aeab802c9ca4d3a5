// KvBlockEntry: one KV block as a tier outside the process stores it (a disk file, a Redis
// value), self-checking:
//
//   magic "SYKVBLK1" | key (32) | compatibility digest (32) | payload bytes (u64 LE) |
//   XXH3-64 of the payload (u64 LE) | XXH3-64 of the 88 bytes before (u64 LE) | payload
//
// where the payload is the block's segments back to back in layout order. Reading one back
// checks magic, key, digest, size and both checksums, so a torn, truncated, corrupted or
// foreign entry is a DataLoss, never wrong KV.
//
// Functions only; any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"

#include "kvx/memory_region.h"

namespace switchyard::kvx {

inline constexpr size_t kKvBlockEntryHeaderBytes = 96;
using KvBlockEntryHeader = std::array<uint8_t, kKvBlockEntryHeaderBytes>;
using KvBlockKey = std::array<uint8_t, 32>;

// The header of block `block` of `region` stored under `key`.
// REQUIRES: block < region.num_blocks().
KvBlockEntryHeader MakeKvBlockEntryHeader(const KvBlockKey& key,
                                          const std::array<uint8_t, 32>& compatibility,
                                          const MemoryRegion& region, int64_t block);

// Checks an entry whose header was read and whose payload now sits in block `block` of
// `region`: OK when it is whole and intact and names `key` and `compatibility`; DataLoss
// (saying what is wrong, after `what`) otherwise.
absl::Status CheckKvBlockEntry(const KvBlockEntryHeader& header, const KvBlockKey& key,
                               const std::array<uint8_t, 32>& compatibility,
                               const MemoryRegion& region, int64_t block, std::string_view what);

}  // namespace switchyard::kvx
