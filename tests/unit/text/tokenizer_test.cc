#include "text/tokenizer.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "tokenizer_test_util.h"

namespace switchyard::text {
namespace {

using testing::BpeJson;
using testing::ByteLevelJson;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::SentencePieceJson;

std::unique_ptr<Tokenizer> Load(const std::string& json) {
  auto t = Tokenizer::FromJson(json, "test.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<int32_t> Ids(const Tokenizer& t, std::string_view text, bool add_special = false) {
  auto ids = t.Encode(text, add_special);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

// Found by libFuzzer: ids index a table, so a sparse id must be an error, not a huge allocation.
TEST(TokenizerTest, RejectsSparseTokenIds) {
  auto tok = Tokenizer::FromJson(
      R"({"model": {"vocab": {"a": 0, "b": 1, "ab": 299999999}, "merges": ["a b"]}})",
      "sparse.json");
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr("sparse.json"));
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr("299999999"));
}

TEST(TokenizerTest, MergesApplyInRankOrder) {
  // "abc": with (b c) ranked first the result is a + bc; with (a b) first, ab + c.
  auto bc_first = Load(BpeJson({"a", "b", "c", "ab", "bc"}, {"b c", "a b"}));
  auto ab_first = Load(BpeJson({"a", "b", "c", "ab", "bc"}, {"a b", "b c"}));
  EXPECT_THAT(Ids(*bc_first, "abc"), ElementsAre(0, 4));
  EXPECT_THAT(Ids(*ab_first, "abc"), ElementsAre(3, 2));
}

TEST(TokenizerTest, MergesAsArraysAndLongWords) {
  std::string json = BpeJson({"a", "aa", "aaaa"}, {});
  json.replace(json.find("\"merges\": []"), 12, R"("merges": [["a", "a"], ["aa", "aa"]])");
  auto t = Load(json);
  // 100 symbols takes the heap path; 6 the quadratic one. Both merge left to right.
  std::vector<int32_t> expect(25, 2);
  EXPECT_EQ(Ids(*t, std::string(100, 'a')), expect);
  EXPECT_THAT(Ids(*t, "aaaaaa"), ElementsAre(2, 1));
  EXPECT_THAT(Ids(*t, std::string(102, 'a')).back(), 1);
}

TEST(TokenizerTest, SentencePieceStyle) {
  auto t = Load(SentencePieceJson());
  std::vector<int32_t> ids = Ids(*t, "hello world", true);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(t->IdToToken(ids[1]), "▁hello");
  EXPECT_EQ(t->IdToToken(ids[2]), "▁world");
  EXPECT_EQ(t->Decode(ids, true), "hello world");
  EXPECT_EQ(t->Decode(ids, false), "<s> hello world");
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
}

// Words are cut before "▁" for speed, except after a character that some token joins to a
// following "▁" (here ">" in ">▁<"), so that token is still found. Expected ids are HF's.
TEST(TokenizerTest, SentencePieceCutsKeepTokensSpanningMarkers) {
  std::vector<std::string> vocab = {"▁", "a", ">", "<", "▁a", ">▁", ">▁<", "a>"};
  auto t = Load(BpeJson(vocab, {"▁ a", "> ▁", ">▁ <", "a >"}, "",
                        R"({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})"));
  EXPECT_THAT(Ids(*t, "a> <a a"), ElementsAre(1, 6, 1, 4));
  EXPECT_THAT(Ids(*t, "a a>  a"), ElementsAre(1, 4, 5, 4));
}

TEST(TokenizerTest, ByteFallbackAndUnknown) {
  auto t = Load(SentencePieceJson());
  // "ü" is not in the vocabulary: its two UTF-8 bytes become <0xC3> <0xBC>.
  std::vector<int32_t> ids = Ids(*t, "ü");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(t->IdToToken(ids[1]), "<0xC3>");
  EXPECT_EQ(t->IdToToken(ids[2]), "<0xBC>");
  EXPECT_EQ(t->Decode(ids, false), "ü");
  // A lone lead byte decodes to one U+FFFD per byte.
  EXPECT_EQ(t->Decode(std::vector<int32_t>{ids[1]}, false), "\xEF\xBF\xBD");

  // Without byte fallback, unknown characters fuse into one <unk>.
  auto no_fallback = Load(BpeJson({"<unk>", "a"}, {}, R"("unk_token": "<unk>", "fuse_unk": true)"));
  EXPECT_THAT(Ids(*no_fallback, "axyza"), ElementsAre(1, 0, 1));
  auto no_fuse = Load(BpeJson({"<unk>", "a"}, {}, R"("unk_token": "<unk>")"));
  EXPECT_THAT(Ids(*no_fuse, "axya"), ElementsAre(1, 0, 0, 1));
}

TEST(TokenizerTest, InvalidUtf8IsReplacedFirst) {
  auto t = Load(SentencePieceJson());
  // "\xff" becomes U+FFFD (EF BF BD), encoded by byte fallback.
  std::vector<int32_t> ids = Ids(*t, "\xff");
  std::vector<std::string> tokens;
  for (int32_t id : ids)
    tokens.emplace_back(t->IdToToken(id));
  EXPECT_THAT(tokens, ElementsAre("▁", "<0xEF>", "<0xBF>", "<0xBD>"));
}

TEST(TokenizerTest, ByteLevelWithIgnoreMerges) {
  auto t = Load(ByteLevelJson());
  std::vector<int32_t> ids = Ids(*t, "the cat");
  std::vector<std::string> tokens;
  for (int32_t id : ids)
    tokens.emplace_back(t->IdToToken(id));
  EXPECT_THAT(tokens, ElementsAre("t", "he", "Ġcat"));
  EXPECT_EQ(t->Decode(ids, false), "the cat");
  std::string text = "héllo 😀  \n\t x";
  EXPECT_EQ(t->Decode(Ids(*t, text), false), text);
}

TEST(TokenizerTest, AddedTokensSplitBeforeModel) {
  auto t = Load(ByteLevelJson());
  std::vector<int32_t> ids = Ids(*t, "<|begin|>the<|user|>", true);
  EXPECT_EQ(ids.front(), 300);
  EXPECT_EQ(ids.back(), 301);
  EXPECT_TRUE(t->IsSpecial(300));
  EXPECT_FALSE(t->IsSpecial(301));
  EXPECT_TRUE(t->IsAddedToken(300));
  EXPECT_TRUE(t->IsAddedToken(301));
  EXPECT_FALSE(t->IsAddedToken(ids[1]));
  EXPECT_FALSE(t->IsAddedToken(-1));
  EXPECT_EQ(t->Decode(ids, true), "the<|user|>");
  EXPECT_EQ(t->Decode(ids, false), "<|begin|>the<|user|>");
  EXPECT_EQ(t->TokenToId("<|begin|>"), 300);
}

TEST(TokenizerTest, AddedTokenStripAndSingleWord) {
  std::string added = R"([{"id": 3, "content": "XY", "lstrip": true, "rstrip": true},
                          {"id": 4, "content": "ab", "single_word": true}])";
  auto t = Load(
      BpeJson({"a", "b", " ", "XY", "ab", "_"}, {}, "", "null", "null", "null", "null", added));
  EXPECT_THAT(Ids(*t, "a  XY  b"), ElementsAre(0, 3, 1));
  EXPECT_THAT(Ids(*t, "a ab b"), ElementsAre(0, 2, 4, 2, 1));
  EXPECT_THAT(Ids(*t, "_ab"), ElementsAre(5, 0, 1));
  EXPECT_THAT(Ids(*t, "ab_"), ElementsAre(0, 1, 5));
}

TEST(TokenizerTest, NormalizedAddedTokensMatchAfterNormalization) {
  std::string added = R"([{"id": 2, "content": "AB", "normalized": true}])";
  auto t = Load(
      BpeJson({"a", "b", "ab"}, {}, "", R"({"type": "Lowercase"})", "null", "null", "null", added));
  EXPECT_THAT(Ids(*t, "aAbB"), ElementsAre(0, 2, 1));
}

TEST(TokenizerTest, PostProcessorOnlyWithSpecialTokens) {
  std::string post = R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [0]}, "</s>": {"id": "</s>", "ids": [1]}}})";
  auto t = Load(BpeJson({"<s>", "</s>", "a"}, {}, "", "null", "null", "null", post));
  EXPECT_THAT(Ids(*t, "a", true), ElementsAre(0, 2, 1));
  EXPECT_THAT(Ids(*t, "a", false), ElementsAre(2));
  EXPECT_THAT(Ids(*t, "", true), ElementsAre(0, 1));
  auto roberta = Load(BpeJson({"<s>", "</s>", "a"}, {}, "", "null", "null", "null",
                              R"({"type": "RobertaProcessing", "sep": ["</s>", 1],
                                  "cls": ["<s>", 0]})"));
  EXPECT_THAT(Ids(*roberta, "a", true), ElementsAre(0, 2, 1));
}

TEST(TokenizerTest, NoDecoderJoinsWithSpaces) {
  auto t = Load(BpeJson({"a", "b"}, {}));
  EXPECT_EQ(t->Decode(std::vector<int32_t>{0, 1, 7, -1}, false), "a b");
}

TEST(TokenizerTest, EncodeFromManyThreads) {
  auto t = Load(ByteLevelJson());
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back("the cat " + std::to_string(i * 7919) + " é 😀");
  std::vector<std::vector<int32_t>> expected;
  for (const auto& s : texts)
    expected.push_back(Ids(*t, s));
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          auto ids = t->Encode(texts[(i + k * 31) % texts.size()], false);
          if (!ids.ok() || *ids != expected[(i + k * 31) % texts.size()])
            ++failures[k];
        }
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_THAT(failures, ElementsAre(0, 0, 0, 0));
}

TEST(TokenizerTest, ErrorsNameTheField) {
  auto missing_model = Tokenizer::FromJson(R"({"added_tokens": []})", "tok.json");
  EXPECT_THAT(std::string(missing_model.status().message()), HasSubstr("tok.json: model"));
  auto bad_merge = Tokenizer::FromJson(BpeJson({"a", "b"}, {"a c"}), "tok.json");
  EXPECT_THAT(std::string(bad_merge.status().message()), HasSubstr("model.merges[0]"));
  auto bad_merge_form = Tokenizer::FromJson(BpeJson({"a", "b"}, {"ab"}), "tok.json");
  EXPECT_THAT(std::string(bad_merge_form.status().message()), HasSubstr("model.merges[0]"));
  auto unknown_type = Tokenizer::FromJson(
      BpeJson({"a"}, {}, "", R"({"type": "Sequence", "normalizers": [{"type": "Magic"}]})"),
      "tok.json");
  EXPECT_THAT(std::string(unknown_type.status().message()),
              HasSubstr("normalizer.normalizers[0].type: unsupported normalizer type \"Magic\""));
  auto bad_model = Tokenizer::FromJson(R"({"model": {"type": "Unigram", "vocab": []}})", "t");
  EXPECT_THAT(std::string(bad_model.status().message()), HasSubstr("model.type"));
  auto bad_regex = Tokenizer::FromJson(
      BpeJson({"a"}, {}, "", "null",
              R"({"type": "Split", "pattern": {"Regex": "(("}, "behavior": "Isolated"})"),
      "tok.json");
  EXPECT_THAT(std::string(bad_regex.status().message()), HasSubstr("pre_tokenizer.pattern.Regex"));
  EXPECT_FALSE(Tokenizer::FromJson("not json", "tok.json").ok());
  EXPECT_FALSE(Tokenizer::FromJson("[]", "tok.json").ok());
}

TEST(TokenizerTest, FromVocabSentencePiece) {
  VocabSpec spec;
  spec.kind = VocabSpec::Kind::kSentencePieceBpe;
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.token_types = {2, 3, 3};
  for (const std::string& b : testing::ByteTokens()) {
    spec.tokens.push_back(b);
    spec.token_types.push_back(6);
  }
  for (const char* t : {"▁", "h", "i", "▁h", "▁hi"}) {
    spec.tokens.push_back(t);
    spec.token_types.push_back(1);
  }
  spec.scores.assign(spec.tokens.size(), 0.0f);
  spec.scores[spec.tokens.size() - 2] = -2.0f;  // ▁h
  spec.scores[spec.tokens.size() - 1] = -1.0f;  // ▁hi
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.unk_id = 0;
  spec.add_bos = true;
  auto t = Tokenizer::FromVocab(spec);
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<int32_t> ids = Ids(**t, "hi é", true);
  std::vector<std::string> tokens;
  for (int32_t id : ids)
    tokens.emplace_back((*t)->IdToToken(id));
  EXPECT_THAT(tokens, ElementsAre("<s>", "▁hi", "▁", "<0xC3>", "<0xA9>"));
  EXPECT_EQ((*t)->Decode(ids, true), "hi é");
  EXPECT_THAT(Ids(**t, "</s>"), ElementsAre(2));
}

TEST(TokenizerTest, FromVocabByteLevel) {
  VocabSpec spec;
  spec.kind = VocabSpec::Kind::kByteLevelBpe;
  for (int b = 0; b < 256; ++b) {
    spec.tokens.emplace_back(internal::ByteToChars(static_cast<uint8_t>(b)));
  }
  spec.tokens.push_back("Ġc");
  spec.tokens.push_back("Ġcat");
  spec.tokens.push_back("<|eot|>");
  spec.token_types.assign(spec.tokens.size(), 1);
  spec.token_types.back() = 3;
  spec.merges = {"Ġ c", "Ġc a", "Ġc at"};
  EXPECT_FALSE(Tokenizer::FromVocab(spec).ok());  // "Ġc a" makes "Ġca", not in the vocabulary
  spec.merges = {"Ġ c", "a t", "Ġc at"};
  spec.tokens.push_back("at");
  spec.token_types.push_back(1);
  spec.pre_tokenizer = "llama-bpe";
  auto t = Tokenizer::FromVocab(spec);
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<int32_t> ids = Ids(**t, "a cat<|eot|>");
  EXPECT_THAT(ids, ElementsAre('a', 256 + 1, 258));
  EXPECT_EQ((*t)->Decode(ids, true), "a cat");
  EXPECT_TRUE((*t)->IsSpecial(258));
}

TEST(TokenizerTest, FromVocabRejectsBadSpecs) {
  VocabSpec spec;
  EXPECT_THAT(std::string(Tokenizer::FromVocab(spec).status().message()), HasSubstr("tokens"));
  spec.tokens = {"a"};
  spec.bos_id = 5;
  EXPECT_THAT(std::string(Tokenizer::FromVocab(spec).status().message()), HasSubstr("bos_id"));
  spec.bos_id.reset();
  spec.scores = {1.0f, 2.0f};
  EXPECT_THAT(std::string(Tokenizer::FromVocab(spec).status().message()), HasSubstr("scores"));
}

}  // namespace
}  // namespace switchyard::text
