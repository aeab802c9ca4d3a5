#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "text/incremental_detokenizer.h"
#include "text/tokenizer.h"
#include "tokenizer_test_util.h"

namespace switchyard::text {
namespace {

const std::vector<std::string>& Texts() {
  static const auto* texts = new std::vector<std::string>{
      "hello world",
      "  hello   world  ",
      "é ü 中文 😀 👨‍👩‍👧",
      "\n\nhello\tworld\n",
      "😀😀😀 hello",
      "a",
      "",
      " ",
  };
  return *texts;
}

// Streams `ids` through the detokenizer; checks pieces never split a character and that
// their concatenation equals Decode of everything.
void CheckStream(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special,
                 const std::vector<int32_t>& prompt = {}) {
  IncrementalDetokenizer detok(&t, skip_special, prompt);
  std::string streamed;
  for (int32_t id : ids) {
    std::string piece = detok.Push(id);
    // Every emitted piece is whole UTF-8 characters.
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "partial character emitted";
    streamed += piece;
  }
  streamed += detok.Flush();
  EXPECT_EQ(streamed, t.Decode(ids, skip_special));
}

TEST(IncrementalDetokenizerTest, SentencePieceKeepsSpacesAndBytes) {
  auto t = Tokenizer::FromJson(testing::SentencePieceJson(), "spm.json");
  ASSERT_TRUE(t.ok()) << t.status();
  for (const std::string& text : Texts()) {
    auto ids = (*t)->Encode(text, true);
    ASSERT_TRUE(ids.ok());
    CheckStream(**t, *ids, true);
    CheckStream(**t, *ids, false);
  }
}

TEST(IncrementalDetokenizerTest, ByteLevelHoldsSplitCharacters) {
  auto t = Tokenizer::FromJson(testing::ByteLevelJson(), "bl.json");
  ASSERT_TRUE(t.ok()) << t.status();
  for (const std::string& text : Texts()) {
    auto ids = (*t)->Encode(text, true);
    ASSERT_TRUE(ids.ok());
    CheckStream(**t, *ids, true);
  }
  // "😀" is four byte tokens: nothing is emitted until the last one.
  auto ids = (*t)->Encode("😀", false);
  ASSERT_EQ(ids->size(), 4u);
  IncrementalDetokenizer detok(t->get(), false);
  EXPECT_EQ(detok.Push((*ids)[0]), "");
  EXPECT_EQ(detok.Push((*ids)[1]), "");
  EXPECT_EQ(detok.Push((*ids)[2]), "");
  EXPECT_EQ(detok.Push((*ids)[3]), "😀");
  EXPECT_EQ(detok.Flush(), "");
}

TEST(IncrementalDetokenizerTest, PromptGivesContext) {
  auto t = Tokenizer::FromJson(testing::SentencePieceJson(), "spm.json");
  ASSERT_TRUE(t.ok());
  auto prompt = (*t)->Encode("hello", true);
  auto generated = (*t)->Encode("world", false);
  IncrementalDetokenizer detok(t->get(), true, *prompt);
  std::string out;
  for (int32_t id : *generated)
    out += detok.Push(id);
  out += detok.Flush();
  // The leading space of "▁world" survives because the prompt precedes it.
  EXPECT_EQ(out, " world");
}

TEST(IncrementalDetokenizerTest, RandomSequencesMatchDecode) {
  std::mt19937 rng(42);
  for (const std::string& json : {testing::SentencePieceJson(), testing::ByteLevelJson()}) {
    auto t = Tokenizer::FromJson(json, "t.json");
    ASSERT_TRUE(t.ok());
    std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>((*t)->vocab_size()) - 1);
    for (int n = 0; n < 300; ++n) {
      std::vector<int32_t> ids(rng() % 12);
      for (int32_t& v : ids)
        v = id(rng);
      IncrementalDetokenizer detok(t->get(), false);
      std::string streamed;
      for (int32_t v : ids)
        streamed += detok.Push(v);
      streamed += detok.Flush();
      EXPECT_EQ(streamed, (*t)->Decode(ids, false));
    }
  }
}

std::string StreamAll(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special,
                      bool spaces_between_special) {
  IncrementalDetokenizer detok(&t, skip_special, {}, spaces_between_special);
  std::string out;
  for (int32_t id : ids)
    out += detok.Push(id);
  return out + detok.Flush();
}

// A decoder-less tokenizer joins every token with " " (as HF `tokenizers` does); vLLM's
// detokenizer with spaces_between_special_tokens=false emits an added token that follows
// another added token bare. Expected strings are what HF tokenizers 0.23's DecodeStream and
// vLLM's FastIncrementalDetokenizer produce for the same tokenizer.json.
TEST(IncrementalDetokenizerTest, SpacesBetweenSpecialTokensWithoutDecoder) {
  auto t = Tokenizer::FromJson(
      testing::BpeJson({"a", "b"}, {}, "", "null", "null", "null", "null",
                       R"([{"id": 2, "content": "<x>", "special": true, "normalized": false},
                           {"id": 3, "content": "<y>", "special": false, "normalized": false}])"),
      "plain.json");
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<int32_t> ids = {0, 2, 3, 1, 3, 2};
  EXPECT_EQ((*t)->Decode(ids, false), "a <x> <y> b <y> <x>");
  EXPECT_EQ(StreamAll(**t, ids, false, true), "a <x> <y> b <y> <x>");
  EXPECT_EQ(StreamAll(**t, ids, false, false), "a <x><y> b <y><x>");
  // Skipped special tokens stay skipped; <y> after the (skipped) <x> is still bare.
  EXPECT_EQ(StreamAll(**t, ids, true, true), "a <y> b <y>");
  EXPECT_EQ(StreamAll(**t, ids, true, false), "a<y> b <y>");
}

// Decoders put nothing between added tokens, so both settings give plain Decode.
TEST(IncrementalDetokenizerTest, SpacesBetweenSpecialTokensWithDecoders) {
  for (const std::string& json : {testing::SentencePieceJson(), testing::ByteLevelJson()}) {
    auto t = Tokenizer::FromJson(json, "t.json");
    ASSERT_TRUE(t.ok());
    std::vector<int32_t> added;
    for (int32_t id = 0; id < static_cast<int32_t>((*t)->vocab_size()); ++id) {
      if ((*t)->IsAddedToken(id))
        added.push_back(id);
    }
    ASSERT_GE(added.size(), 2u);
    auto text = (*t)->Encode("hello world the cat", false);
    ASSERT_TRUE(text.ok());
    std::vector<int32_t> ids = *text;
    ids.insert(ids.begin() + 2, added.begin(), added.end());
    ids.insert(ids.end(), added.rbegin(), added.rend());
    for (bool skip : {false, true}) {
      EXPECT_EQ(StreamAll(**t, ids, skip, false), (*t)->Decode(ids, skip)) << json;
      EXPECT_EQ(StreamAll(**t, ids, skip, true), (*t)->Decode(ids, skip)) << json;
    }
  }
}

}  // namespace
}  // namespace switchyard::text
