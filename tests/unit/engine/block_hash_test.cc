#include "engine/block_hash.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "base/json.h"

namespace switchyard::engine {
namespace {

constexpr char kGoldenPath[] = SY_SOURCE_DIR "/tests/data/golden/block_hashes.json";

BlockHash FromHex(std::string_view hex) {
  BlockHash hash;
  EXPECT_EQ(hex.size(), 64u);
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < 32 && 2 * i + 1 < hex.size(); ++i) {
    hash.bytes[i] = static_cast<uint8_t>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  }
  return hash;
}

std::optional<std::string> OptionalString(simdjson::dom::element element) {
  if (element.is_null())
    return std::nullopt;
  return std::string(std::string_view(element));
}

// Golden digests come from tools/gen_block_hash_golden.py, which applies vLLM's rules with
// cbor2 and hashlib.
TEST(BlockHashGoldenTest, MatchesVllmSha256Cbor) {
  auto doc = base::JsonDocument::ParseFile(kGoldenPath);
  ASSERT_TRUE(doc.ok()) << doc.status();
  simdjson::dom::array cases = (*doc)->root()["cases"];
  ASSERT_GT(cases.size(), 10u);
  for (simdjson::dom::element c : cases) {
    const std::string name{std::string_view(c["name"])};
    SCOPED_TRACE(name);
    const std::optional<std::string> seed = OptionalString(c["seed"]);
    const BlockHash none_hash = FromHex(std::string_view(c["none_hash"]));
    if (seed.has_value()) {
      EXPECT_EQ(BlockHasher(std::string_view(*seed)).none_hash(), none_hash);
    }
    BlockHasher hasher = BlockHasher::WithNoneHash(none_hash);
    BlockHashExtras extras;
    extras.lora_name = OptionalString(c["lora_name"]);
    extras.cache_salt = OptionalString(c["cache_salt"]).value_or("");
    const auto block_size = static_cast<size_t>(int64_t(c["block_size"]));
    std::vector<int64_t> tokens;
    bool fits_int32 = true;
    for (simdjson::dom::element t : simdjson::dom::array(c["tokens"])) {
      tokens.push_back(int64_t(t));
      fits_int32 &= tokens.back() >= std::numeric_limits<int32_t>::min() &&
                    tokens.back() <= std::numeric_limits<int32_t>::max();
    }
    std::vector<std::string> expected;
    for (simdjson::dom::element h : simdjson::dom::array(c["hashes"])) {
      expected.emplace_back(std::string_view(h));
    }
    std::vector<uint64_t> expected_events;
    for (simdjson::dom::element h : simdjson::dom::array(c["event_hashes"])) {
      expected_events.push_back(uint64_t(h));
    }
    ASSERT_EQ(expected.size(), tokens.size() / block_size);
    ASSERT_EQ(expected_events.size(), expected.size());

    std::optional<BlockHash> parent;
    for (size_t i = 0; i < expected.size(); ++i) {
      std::span<const int64_t> block(tokens.data() + i * block_size, block_size);
      const BlockHash hash =
          hasher.Hash(parent ? &*parent : nullptr, block, extras, static_cast<int64_t>(i));
      EXPECT_EQ(hash.ToHex(), expected[i]) << "block " << i;
      EXPECT_EQ(hash.low64(), expected_events[i]) << "block " << i;
      if (fits_int32) {
        std::vector<int32_t> narrow(block.begin(), block.end());
        EXPECT_EQ(hasher.Hash(parent ? &*parent : nullptr, narrow, extras, static_cast<int64_t>(i)),
                  hash);
      }
      parent = hash;
    }
  }
}

TEST(BlockHashTest, UnsetSeedGivesProcessPrivateNoneHash) {
  BlockHasher a(std::nullopt);
  BlockHasher b(std::nullopt);
  EXPECT_NE(a.none_hash(), b.none_hash());
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  EXPECT_NE(a.Hash(nullptr, tokens, {}, 0), b.Hash(nullptr, tokens, {}, 0));
}

TEST(BlockHashTest, SaltOnlyChangesBlockZero) {
  BlockHasher hasher(std::string_view("0"));
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  BlockHashExtras salted;
  salted.cache_salt = "tenant";
  EXPECT_NE(hasher.Hash(nullptr, tokens, salted, 0), hasher.Hash(nullptr, tokens, {}, 0));
  const BlockHash parent = hasher.Hash(nullptr, tokens, {}, 0);
  EXPECT_EQ(hasher.Hash(&parent, tokens, salted, 1), hasher.Hash(&parent, tokens, {}, 1));
}

TEST(BlockHashTest, Low64IsLastEightBytesBigEndian) {
  BlockHash hash;
  for (int i = 0; i < 32; ++i)
    hash.bytes[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(hash.low64(), 0x18191a1b1c1d1e1fULL);
}

}  // namespace
}  // namespace switchyard::engine
