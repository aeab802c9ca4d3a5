#include "engine/bad_words.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::engine {
namespace {

// Byte-level BPE: 'Ġ' is the space. "ab" and "Ġab" are single tokens; "c" has no spaced
// token, so " c" is two tokens.
constexpr int32_t kA = 0, kB = 1, kC = 2, kSpace = 3, kAb = 4, kSpaceA = 5, kSpaceAb = 6;

std::unique_ptr<text::Tokenizer> MakeTokenizer() {
  text::VocabSpec spec;
  spec.kind = text::VocabSpec::Kind::kByteLevelBpe;
  const std::string g = "\xC4\xA0";
  spec.tokens = {"a", "b", "c", g, "ab", g + "a", g + "ab"};
  spec.merges = {g + " a", g + "a b", "a b"};
  auto tok = text::Tokenizer::FromVocab(spec);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

TEST(BadWordsTest, TokenizesPlainAndSpacedFormsAsVllm) {
  auto tok = MakeTokenizer();
  const std::vector<std::string> words = {"  ab", "c", "ab c"};
  auto ids = TokenizeBadWords(*tok, words);
  ASSERT_TRUE(ids.ok()) << ids.status();
  // "ab" (trimmed) and " ab" (one token, different first token: kept); "c" and " c" (two
  // tokens: a different length, dropped); "ab c" = [ab, Ġ, c] and " ab c" = [Ġab, Ġ, c].
  const std::vector<std::vector<int32_t>> want = {
      {kAb}, {kSpaceAb}, {kC}, {kAb, kSpace, kC}, {kSpaceAb, kSpace, kC}};
  EXPECT_EQ(*ids, want);
}

TEST(BadWordsTest, RejectsEmptyWords) {
  auto tok = MakeTokenizer();
  for (const std::string& word : {std::string(), std::string(" \t")}) {
    const std::vector<std::string> words = {"ab", word};
    EXPECT_FALSE(TokenizeBadWords(*tok, words).ok()) << "'" << word << "'";
  }
}

TEST(BadWordsTest, BansTheLastTokenWhenTheOutputEndsWithTheRest) {
  const std::vector<std::vector<int32_t>> words = {{kC}, {kA, kB, kC}, {kSpaceA, kB}};
  std::vector<int32_t> banned;
  AppendBadWordBans(words, {}, &banned);
  EXPECT_EQ(banned, (std::vector<int32_t>{kC}));  // only single tokens before any output

  banned.clear();
  AppendBadWordBans(words, std::vector<int32_t>{kC, kA, kB}, &banned);
  EXPECT_EQ(banned, (std::vector<int32_t>{kC, kC}));

  banned.clear();
  AppendBadWordBans(words, std::vector<int32_t>{kSpaceA}, &banned);
  EXPECT_EQ(banned, (std::vector<int32_t>{kC, kB}));

  banned.clear();
  AppendBadWordBans(words, std::vector<int32_t>{kA, kC, kB}, &banned);
  EXPECT_EQ(banned, (std::vector<int32_t>{kC}));  // [a, b] must be the last two tokens
}

}  // namespace
}  // namespace switchyard::engine
