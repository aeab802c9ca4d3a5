// Arbitrary bytes as a KV block entry read back from a tier (a disk file, a Redis value):
// the first 96 bytes its header, the rest its payload, laid out as a block of two segments
// (one when the payload is a single byte) and checked against a fixed key and compatibility,
// as a reader does. Nothing may crash; the check may only pass or say DataLoss; an entry
// that passes must be byte for byte the header MakeKvBlockEntryHeader writes for that
// payload, and must fail under any other key.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "kvx/kv_block_entry.h"
#include "kvx/kv_block_layout.h"
#include "kvx/memory_region.h"

namespace switchyard::kvx {
namespace {

std::array<uint8_t, 32> Filled(char c) {
  std::array<uint8_t, 32> bytes;
  bytes.fill(static_cast<uint8_t>(c));
  return bytes;
}

void Check(std::span<const uint8_t> input) {
  if (input.size() <= kKvBlockEntryHeaderBytes)
    return;
  KvBlockEntryHeader header;
  std::memcpy(header.data(), input.data(), header.size());
  std::vector<std::byte> payload(input.size() - header.size());
  std::memcpy(payload.data(), input.data() + header.size(), payload.size());
  std::vector<size_t> segments = {payload.size()};
  if (payload.size() >= 2)
    segments = {payload.size() / 2, payload.size() - payload.size() / 2};
  const auto region =
      MemoryRegion::ForInterleaved(*KvBlockLayout::FromSegments(segments), payload, 1);
  if (!region.ok())
    std::abort();

  const KvBlockKey key = Filled('K');
  const std::array<uint8_t, 32> compatibility = Filled('C');
  const absl::Status status = CheckKvBlockEntry(header, key, compatibility, *region, 0, "fuzz");
  if (status.ok()) {
    KvBlockKey other = key;
    other[0] ^= 1;
    if (MakeKvBlockEntryHeader(key, compatibility, *region, 0) != header ||
        CheckKvBlockEntry(header, other, compatibility, *region, 0, "fuzz").ok())
      std::abort();
  } else if (!absl::IsDataLoss(status)) {
    std::abort();
  }
}

}  // namespace
}  // namespace switchyard::kvx

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  switchyard::kvx::Check({data, size});
  return 0;
}
