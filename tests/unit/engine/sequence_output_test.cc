#include "engine/sequence_output.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::engine {
namespace {

// Ids 0..4 are "a" "b" "c" "d" " "; 5 is the EOS, 6 another end-of-turn token, 7 is "é"
// split over two byte tokens (8, 9).
constexpr int32_t kA = 0, kB = 1, kC = 2, kD = 3, kSpace = 4, kEos = 5, kEot = 6;
constexpr int32_t kE1 = 7, kE2 = 8;

std::unique_ptr<text::Tokenizer> MakeTokenizer() {
  text::VocabSpec spec;
  spec.kind = text::VocabSpec::Kind::kByteLevelBpe;
  // Byte-level forms: 'Ġ' is the space, "Ã" + "©" are the bytes C3 A9 of "é".
  spec.tokens = {"a", "b", "c", "d", "\xC4\xA0", "<eos>", "<eot>", "\xC3\x83", "\xC2\xA9"};
  spec.token_types = {1, 1, 1, 1, 1, 3, 3, 1, 1};
  spec.eos_id = kEos;
  auto tok = text::Tokenizer::FromVocab(spec);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

class SequenceOutputTest : public ::testing::Test {
 protected:
  SequenceOutputTest() : tokenizer_(MakeTokenizer()) {
    request_.prompt_tokens = {kA};
    request_.stop.max_tokens = 100;
  }

  // Feeds `tokens`; returns the text released and the final step.
  std::pair<std::string, SequenceStep> Run(const std::vector<int32_t>& tokens,
                                           std::vector<std::string>* pieces = nullptr) {
    SequenceOutput out(tokenizer_.get(), request_, kEos, extra_eos_);
    std::string text;
    SequenceStep step;
    int64_t n = 0;
    for (int32_t t : tokens) {
      std::string piece;
      step = out.Append(t, ++n, false, &piece);
      text += piece;
      if (pieces != nullptr)
        pieces->push_back(piece);
      if (step.finish_reason.has_value())
        break;
    }
    return {text, step};
  }

  std::unique_ptr<text::Tokenizer> tokenizer_;
  EngineRequest request_;
  std::vector<int32_t> extra_eos_ = {kEot};
};

TEST_F(SequenceOutputTest, EosStopsWithoutTextOrStopReason) {
  auto [text, step] = Run({kB, kC, kEos, kD});
  EXPECT_EQ(text, "bc");
  ASSERT_TRUE(step.finish_reason.has_value());
  EXPECT_EQ(*step.finish_reason, FinishReason::kStop);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(step.stop_reason));
}

TEST_F(SequenceOutputTest, ModelEosIdsActAsStopTokensUnlessIgnoreEos) {
  auto [text, step] = Run({kB, kEot});
  EXPECT_EQ(text, "b");
  EXPECT_EQ(std::get<int32_t>(step.stop_reason), kEot);

  request_.stop.ignore_eos = true;
  request_.stop.max_tokens = 3;
  auto [text2, step2] = Run({kB, kEot, kEos});
  EXPECT_EQ(*step2.finish_reason, FinishReason::kLength);
}

TEST_F(SequenceOutputTest, StopTokenIdReportsTheId) {
  request_.stop.stop_token_ids = {kD};
  auto [text, step] = Run({kB, kD, kC});
  EXPECT_EQ(text, "b");
  EXPECT_EQ(std::get<int32_t>(step.stop_reason), kD);
}

TEST_F(SequenceOutputTest, StopStringAcrossTokensIsCutAndNeverSent) {
  request_.stop.stop_strings = {"c d"};
  std::vector<std::string> pieces;
  auto [text, step] = Run({kA, kB, kC, kSpace, kD, kA}, &pieces);
  EXPECT_EQ(text, "ab");
  EXPECT_EQ(std::get<std::string>(step.stop_reason), "c d");
  EXPECT_EQ(*step.finish_reason, FinishReason::kStop);
  for (const std::string& p : pieces)
    EXPECT_EQ(p.find('c'), std::string::npos) << p;
}

TEST_F(SequenceOutputTest, IncludeStopStringKeepsIt) {
  request_.stop.stop_strings = {"bc"};
  request_.stop.include_stop_str_in_output = true;
  auto [text, step] = Run({kA, kB, kC, kD});
  EXPECT_EQ(text, "abc");
}

TEST_F(SequenceOutputTest, FirstStopStringInRequestOrderWins) {
  request_.stop.stop_strings = {"cd", "bc"};
  auto [text, step] = Run({kA, kB, kC, kD});
  // After "abc" the second matches first (the first needs the "d").
  EXPECT_EQ(text, "a");
  EXPECT_EQ(std::get<std::string>(step.stop_reason), "bc");
}

TEST_F(SequenceOutputTest, HeldBackTextIsReleasedWhenNoStopFollows) {
  request_.stop.stop_strings = {"xyz"};
  request_.stop.max_tokens = 4;
  std::vector<std::string> pieces;
  auto [text, step] = Run({kA, kB, kC, kD}, &pieces);
  EXPECT_EQ(text, "abcd");
  EXPECT_EQ(*step.finish_reason, FinishReason::kLength);
  // Two bytes lag behind until the end.
  EXPECT_EQ(pieces[0], "");
  EXPECT_EQ(pieces[2], "a");
}

TEST_F(SequenceOutputTest, MinTokensDefersEosAndStopStrings) {
  request_.stop.min_tokens = 3;
  request_.stop.stop_strings = {"b"};
  auto [text, step] = Run({kB, kEos, kC, kB});
  ASSERT_TRUE(step.finish_reason.has_value());
  EXPECT_EQ(*step.finish_reason, FinishReason::kStop);
  EXPECT_EQ(std::get<std::string>(step.stop_reason), "b");
  EXPECT_EQ(text, "bc");
}

TEST_F(SequenceOutputTest, ContextFullIsLength) {
  SequenceOutput out(tokenizer_.get(), request_, kEos, extra_eos_);
  std::string text;
  SequenceStep step = out.Append(kA, 1, true, &text);
  EXPECT_EQ(*step.finish_reason, FinishReason::kLength);
  EXPECT_EQ(text, "a");
}

TEST_F(SequenceOutputTest, SplitCharacterIsNeverEmittedHalf) {
  request_.stop.stop_strings = {"zz"};
  std::vector<std::string> pieces;
  auto [text, step] = Run({kE1, kE2, kA, kB}, &pieces);
  for (const std::string& p : pieces)
    EXPECT_NE(p, "\xC3");
  request_.stop.max_tokens = 4;
  EXPECT_EQ(Run({kE1, kE2, kA, kB}).first,
            "\xC3\xA9"
            "ab");
}

TEST_F(SequenceOutputTest, AbortFinishReleasesHeldText) {
  request_.stop.stop_strings = {"xyz"};
  SequenceOutput out(tokenizer_.get(), request_, kEos, extra_eos_);
  std::string text;
  out.Append(kA, 1, false, &text);
  out.Append(kB, 2, false, &text);
  EXPECT_EQ(text, "");
  out.Finish(&text);
  EXPECT_EQ(text, "ab");
}

}  // namespace
}  // namespace switchyard::engine
