#include "kvx/kv_block_entry.h"

#include <cstring>

#define XXH_INLINE_ALL
#include "fmt/format.h"
#include <xxhash.h>

namespace switchyard::kvx {
namespace {

constexpr char kEntryMagic[8] = {'S', 'Y', 'K', 'V', 'B', 'L', 'K', '1'};
constexpr size_t kKeyOffset = 8;
constexpr size_t kDigestOffset = 40;
constexpr size_t kSizeOffset = 72;
constexpr size_t kPayloadSumOffset = 80;
constexpr size_t kHeaderSumOffset = 88;

void PutU64(uint64_t v, uint8_t* out) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t GetU64(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | in[i];
  return v;
}

uint64_t PayloadSum(const MemoryRegion& region, int64_t block) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  for (size_t s = 0; s < region.layout().num_segments(); ++s)
    XXH3_64bits_update(&state, region.addr(block, s), region.layout().segment_bytes(s));
  return XXH3_64bits_digest(&state);
}

}  // namespace

KvBlockEntryHeader MakeKvBlockEntryHeader(const KvBlockKey& key,
                                          const std::array<uint8_t, 32>& compatibility,
                                          const MemoryRegion& region, int64_t block) {
  KvBlockEntryHeader header{};
  std::memcpy(header.data(), kEntryMagic, sizeof(kEntryMagic));
  std::memcpy(header.data() + kKeyOffset, key.data(), key.size());
  std::memcpy(header.data() + kDigestOffset, compatibility.data(), compatibility.size());
  PutU64(region.layout().block_bytes(), header.data() + kSizeOffset);
  PutU64(PayloadSum(region, block), header.data() + kPayloadSumOffset);
  PutU64(XXH3_64bits(header.data(), kHeaderSumOffset), header.data() + kHeaderSumOffset);
  return header;
}

absl::Status CheckKvBlockEntry(const KvBlockEntryHeader& header, const KvBlockKey& key,
                               const std::array<uint8_t, 32>& compatibility,
                               const MemoryRegion& region, int64_t block, std::string_view what) {
  auto bad = [&](const char* why) { return absl::DataLossError(fmt::format("{}: {}", what, why)); };
  if (std::memcmp(header.data(), kEntryMagic, sizeof(kEntryMagic)) != 0)
    return bad("not a KV block entry");
  if (GetU64(header.data() + kHeaderSumOffset) != XXH3_64bits(header.data(), kHeaderSumOffset))
    return bad("header checksum mismatch");
  if (std::memcmp(header.data() + kKeyOffset, key.data(), key.size()) != 0)
    return bad("holds another block");
  if (std::memcmp(header.data() + kDigestOffset, compatibility.data(), compatibility.size()) != 0)
    return bad("written for other KV (model, dtype or layout)");
  if (GetU64(header.data() + kSizeOffset) != region.layout().block_bytes())
    return bad("payload size mismatch");
  if (GetU64(header.data() + kPayloadSumOffset) != PayloadSum(region, block))
    return bad("payload checksum mismatch");
  return absl::OkStatus();
}

}  // namespace switchyard::kvx
