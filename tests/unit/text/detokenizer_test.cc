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

}  // namespace
}  // namespace switchyard::text
