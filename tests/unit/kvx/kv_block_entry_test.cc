// KvBlockEntry: the header's byte format (checked with XXH3 computed here), a round trip
// between memories of different shapes, and DataLoss, naming what is wrong, for every
// single-field change and every flipped byte.
#include "kvx/kv_block_entry.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include <xxhash.h>

#include "transfer_test_memory.h"

namespace switchyard::kvx {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int32_t kBlocks = 4;

KvBlockKey Filled(uint8_t value) {
  KvBlockKey bytes;
  bytes.fill(value);
  return bytes;
}

uint64_t GetU64(const KvBlockEntryHeader& header, size_t offset) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(header[offset + i]) << (8 * i);
  return v;
}

void PutU64(uint64_t v, size_t offset, KvBlockEntryHeader& header) {
  for (size_t i = 0; i < 8; ++i)
    header[offset + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Rewrites the header checksum, as a writer that meant the other fields would have.
void Reseal(KvBlockEntryHeader& header) {
  PutU64(XXH3_64bits(header.data(), 88), 88, header);
}

class KvBlockEntryTest : public ::testing::Test {
 protected:
  KvBlockEntryTest()
      : layout_(*KvBlockLayout::ForKvCache(2, 4, 2, 4, 2)),
        pool_(layout_, kBlocks, /*seed=*/3),
        store_(layout_, kBlocks, /*seed=*/4),
        key_(Filled(0x11)),
        compatibility_(Filled(0x22)) {}

  // Block `block` of the pool's payload bytes, segment after segment.
  std::vector<std::byte> Payload(int32_t block) {
    std::vector<std::byte> bytes;
    for (size_t s = 0; s < layout_.num_segments(); ++s) {
      const std::span<std::byte> segment = pool_.Segment(layout_, block, s);
      bytes.insert(bytes.end(), segment.begin(), segment.end());
    }
    return bytes;
  }

  // Copies pool block `block` into block `into` of the interleaved store, as a tier holds it.
  void CopyToStore(int32_t block, int32_t into) {
    for (size_t s = 0; s < layout_.num_segments(); ++s) {
      const std::span<std::byte> from = pool_.Segment(layout_, block, s);
      std::memcpy(store_.Segment(layout_, into, s).data(), from.data(), from.size());
    }
  }

  absl::Status Check(const KvBlockEntryHeader& header, int32_t block = 2) {
    return CheckKvBlockEntry(header, key_, compatibility_, *store_.region, block, "entry 7");
  }

  KvBlockLayout layout_;
  PoolMemory pool_;
  InterleavedMemory store_;
  KvBlockKey key_;
  std::array<uint8_t, 32> compatibility_;
};

TEST_F(KvBlockEntryTest, HeaderHoldsTheDocumentedFields) {
  const KvBlockEntryHeader header = MakeKvBlockEntryHeader(key_, compatibility_, *pool_.region, 1);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(header.data()), 8), "SYKVBLK1");
  EXPECT_EQ(0, std::memcmp(header.data() + 8, key_.data(), 32));
  EXPECT_EQ(0, std::memcmp(header.data() + 40, compatibility_.data(), 32));
  EXPECT_EQ(GetU64(header, 72), layout_.block_bytes());
  const std::vector<std::byte> payload = Payload(1);
  EXPECT_EQ(GetU64(header, 80), XXH3_64bits(payload.data(), payload.size()));
  EXPECT_EQ(GetU64(header, 88), XXH3_64bits(header.data(), 88));
  // A pure function of its inputs.
  EXPECT_EQ(header, MakeKvBlockEntryHeader(key_, compatibility_, *pool_.region, 1));
  EXPECT_NE(header, MakeKvBlockEntryHeader(key_, compatibility_, *pool_.region, 0));
}

TEST_F(KvBlockEntryTest, AnEntryChecksOutInMemoryOfAnotherShape) {
  const KvBlockEntryHeader header = MakeKvBlockEntryHeader(key_, compatibility_, *pool_.region, 1);
  CopyToStore(1, 2);
  EXPECT_TRUE(Check(header, 2).ok()) << Check(header, 2);
  // Block 3 holds other bytes.
  EXPECT_EQ(Check(header, 3).code(), absl::StatusCode::kDataLoss);
}

TEST_F(KvBlockEntryTest, EachBadFieldIsDataLossNamingIt) {
  const KvBlockEntryHeader good = MakeKvBlockEntryHeader(key_, compatibility_, *pool_.region, 1);
  CopyToStore(1, 2);
  struct Case {
    const char* field;
    // Changes one field of the header; `reseal` rewrites the header checksum afterwards.
    size_t offset;
    bool reseal;
    const char* problem;
  };
  const std::vector<Case> cases = {
      {"magic", 0, false, "not a KV block entry"},
      {"magic, resealed", 7, true, "not a KV block entry"},
      {"key", 8, false, "header checksum mismatch"},
      {"key, resealed", 39, true, "holds another block"},
      {"digest", 40, false, "header checksum mismatch"},
      {"digest, resealed", 71, true, "written for other KV"},
      {"size", 72, false, "header checksum mismatch"},
      {"size, resealed", 72, true, "payload size mismatch"},
      {"payload checksum", 80, false, "header checksum mismatch"},
      {"payload checksum, resealed", 87, true, "payload checksum mismatch"},
      {"header checksum", 88, false, "header checksum mismatch"},
  };
  for (const Case& c : cases) {
    KvBlockEntryHeader header = good;
    header[c.offset] ^= 0x01;
    if (c.reseal)
      Reseal(header);
    const absl::Status status = Check(header);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << c.field;
    EXPECT_THAT(std::string(status.message()), StartsWith("entry 7: ")) << c.field;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.problem)) << c.field;
  }
}

TEST_F(KvBlockEntryTest, AnIntactEntryOfAnotherKeyOrCompatibilityIsDataLoss) {
  const KvBlockEntryHeader header = MakeKvBlockEntryHeader(key_, compatibility_, *pool_.region, 1);
  CopyToStore(1, 2);
  absl::Status status =
      CheckKvBlockEntry(header, Filled(0x12), compatibility_, *store_.region, 2, "k");
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("holds another block"));
  status = CheckKvBlockEntry(header, key_, Filled(0x23), *store_.region, 2, "k");
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("written for other KV"));
}

TEST_F(KvBlockEntryTest, AnEntryOfAnotherBlockSizeIsDataLoss) {
  const KvBlockEntryHeader header = MakeKvBlockEntryHeader(key_, compatibility_, *pool_.region, 1);
  // The same bytes under a layout one segment shorter.
  const KvBlockLayout shorter = *KvBlockLayout::FromSegments(
      {layout_.segment_bytes(0), layout_.segment_bytes(1), layout_.segment_bytes(2)});
  InterleavedMemory other(shorter, 1, /*seed=*/5);
  const absl::Status status =
      CheckKvBlockEntry(header, key_, compatibility_, *other.region, 0, "k");
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("payload size mismatch"));
}

TEST_F(KvBlockEntryTest, EveryFlippedByteIsDataLoss) {
  const KvBlockEntryHeader good = MakeKvBlockEntryHeader(key_, compatibility_, *pool_.region, 1);
  CopyToStore(1, 2);
  for (size_t i = 0; i < good.size(); ++i) {
    KvBlockEntryHeader header = good;
    header[i] ^= 0x80;
    EXPECT_EQ(Check(header).code(), absl::StatusCode::kDataLoss) << "header byte " << i;
  }
  for (size_t s = 0; s < layout_.num_segments(); ++s) {
    const std::span<std::byte> segment = store_.Segment(layout_, 2, s);
    for (std::byte& b : segment) {
      b ^= std::byte{0x01};
      const absl::Status status = Check(good);
      EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << "segment " << s;
      EXPECT_THAT(std::string(status.message()), HasSubstr("payload checksum mismatch"));
      b ^= std::byte{0x01};
    }
  }
  EXPECT_TRUE(Check(good).ok());
}

}  // namespace
}  // namespace switchyard::kvx
