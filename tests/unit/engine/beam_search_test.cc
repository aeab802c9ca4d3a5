#include "engine/beam_search.h"

#include <cmath>
#include <initializer_list>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace switchyard::engine {
namespace {

using ::testing::ElementsAre;

constexpr int32_t kEos = 0;

// A step result whose candidates are `top` (token, logprob), most likely first.
SampleResult Next(std::initializer_list<std::pair<int32_t, float>> top) {
  SampleResult r;
  for (const auto& [token, logprob] : top)
    r.top_logprobs.push_back({token, logprob});
  r.token = r.top_logprobs.front().token;
  r.logprob = r.top_logprobs.front().logprob;
  r.rank = 1;
  return r;
}

BeamSearchOptions Options(int32_t width, int64_t max_tokens, double length_penalty = 1.0) {
  return BeamSearchOptions{
      .beam_width = width,
      .max_tokens = max_tokens,
      .length_penalty = length_penalty,
      .eos_token_id = kEos,
      .ignore_eos = false,
      .include_stop_str_in_output = false,
  };
}

Beam MakeBeam(std::vector<int32_t> tokens, double cum_logprob) {
  Beam b;
  b.tokens = std::move(tokens);
  b.cum_logprob = cum_logprob;
  return b;
}

TEST(BeamSearchScoreTest, DividesByLengthToThePenalty) {
  const BeamSearchOptions o = Options(1, 8);
  // 3 prompt tokens + 2 generated.
  EXPECT_DOUBLE_EQ(BeamSearchScore(MakeBeam({5, 6}, -2.0), 3, o), -2.0 / 5);
  EXPECT_DOUBLE_EQ(BeamSearchScore(MakeBeam({5, 6}, -2.0), 3, Options(1, 8, 0.0)), -2.0);
  EXPECT_DOUBLE_EQ(BeamSearchScore(MakeBeam({5, 6}, -2.0), 3, Options(1, 8, 2.0)), -2.0 / 25);
  EXPECT_DOUBLE_EQ(BeamSearchScore(MakeBeam({5, 6}, -2.0), 3, Options(1, 8, 0.5)),
                   -2.0 / std::sqrt(5.0));
}

TEST(BeamSearchScoreTest, AnEndingEosDoesNotCount) {
  const BeamSearchOptions o = Options(1, 8);
  EXPECT_DOUBLE_EQ(BeamSearchScore(MakeBeam({5, kEos}, -2.0), 3, o), -2.0 / 4);
  // Only at the end.
  EXPECT_DOUBLE_EQ(BeamSearchScore(MakeBeam({kEos, 5}, -2.0), 3, o), -2.0 / 5);
  // The prompt alone (no generated token).
  EXPECT_DOUBLE_EQ(BeamSearchScore(MakeBeam({}, -1.0), 4, o), -1.0 / 4);
}

TEST(BeamSearchTest, KeepsTheBestWidthByCumulativeLogprobAndCompletesEos) {
  BeamSearch search(Options(2, 4), 4);
  ASSERT_EQ(search.live().size(), 1u);
  EXPECT_FALSE(search.done());

  search.Step(std::vector<SampleResult>{Next({{7, -0.1f}, {kEos, -0.5f}, {8, -1.0f}, {9, -2.0f}})});
  ASSERT_EQ(search.live().size(), 2u);
  EXPECT_THAT(search.live()[0].tokens, ElementsAre(7));
  EXPECT_THAT(search.live()[1].tokens, ElementsAre(8));
  EXPECT_NEAR(search.live()[1].cum_logprob, -1.0, 1e-6);
  // The chosen token's logprob entry: its rank among the candidates and the candidates.
  ASSERT_EQ(search.live()[1].logprobs.size(), 1u);
  EXPECT_EQ(search.live()[1].logprobs[0].token, 8);
  EXPECT_EQ(search.live()[1].logprobs[0].rank, 3);
  EXPECT_EQ(search.live()[1].logprobs[0].top_logprobs.size(), 4u);

  // Candidates across beams compete: [8,3] -1.05 beats [7,3] -1.1 and [8,6] -1.1 (tie: the
  // earlier beam's first), [7,4] -1.3 is out.
  search.Step(std::vector<SampleResult>{
      Next({{3, -1.0f}, {4, -1.2f}, {kEos, -3.0f}, {5, -4.0f}}),
      Next({{3, -0.05f}, {6, -0.1f}, {5, -5.0f}, {kEos, -6.0f}}),
  });
  ASSERT_EQ(search.live().size(), 2u);
  EXPECT_THAT(search.live()[0].tokens, ElementsAre(8, 3));
  EXPECT_THAT(search.live()[1].tokens, ElementsAre(7, 3));
  EXPECT_EQ(search.steps(), 2);

  // Completed: [] (-0.5), [7]+EOS (-3.1), [8]+EOS (-7.0); live: [8,3], [7,3].
  // Scores over 4 prompt tokens: -0.125, -0.62, -1.4, -0.175, -0.1833.
  std::vector<Beam> best = search.TakeBest();
  ASSERT_EQ(best.size(), 2u);
  EXPECT_TRUE(best[0].tokens.empty());
  EXPECT_TRUE(best[0].stopped);
  EXPECT_NEAR(best[0].cum_logprob, -0.5, 1e-6);
  EXPECT_THAT(best[1].tokens, ElementsAre(8, 3));
  EXPECT_FALSE(best[1].stopped);
}

// One beam, one prompt token. Step 1: EOS (-1.0) ends E1 = [] with score -1/1; [5] lives.
// Step 2: EOS ends [5] at -2.5; [5,6] lives at -1.5 (3 tokens with the prompt).
BeamSearch TwoSteps(double length_penalty, bool include_eos = false) {
  BeamSearchOptions o = Options(1, 2, length_penalty);
  o.include_stop_str_in_output = include_eos;
  BeamSearch search(o, 1);
  search.Step(std::vector<SampleResult>{Next({{5, -0.5f}, {kEos, -1.0f}})});
  search.Step(std::vector<SampleResult>{Next({{6, -1.0f}, {kEos, -2.0f}})});
  return search;
}

TEST(BeamSearchTest, LengthPenaltyDecidesBetweenShortAndLong) {
  BeamSearch favour_long = TwoSteps(1.0);
  ASSERT_TRUE(favour_long.done());
  std::vector<Beam> best = favour_long.TakeBest();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_THAT(best[0].tokens, ElementsAre(5, 6));  // -1.5 / 3 = -0.5 beats -1.0 / 1
  EXPECT_FALSE(best[0].stopped);

  BeamSearch raw = TwoSteps(0.0);
  best = raw.TakeBest();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_TRUE(best[0].tokens.empty());  // -1.0 beats -1.5
  EXPECT_TRUE(best[0].stopped);
}

TEST(BeamSearchTest, IncludeStopStrKeepsTheEosWithoutChangingTheScore) {
  BeamSearch search = TwoSteps(0.5, true);
  std::vector<Beam> best = search.TakeBest();
  ASSERT_EQ(best.size(), 1u);
  // -1.0 / 1^0.5 = -1.0 against -1.5 / sqrt(3) = -0.866: the long beam still wins...
  EXPECT_THAT(best[0].tokens, ElementsAre(5, 6));
  // ...and with no penalty the EOS beam wins, its EOS kept, one logprob per token.
  BeamSearch raw = TwoSteps(0.0, true);
  best = raw.TakeBest();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_THAT(best[0].tokens, ElementsAre(kEos));
  ASSERT_EQ(best[0].logprobs.size(), 1u);
  EXPECT_EQ(best[0].logprobs[0].token, kEos);
  EXPECT_EQ(best[0].logprobs[0].rank, 2);
}

TEST(BeamSearchTest, IgnoreEosMakesEosAnOrdinaryToken) {
  BeamSearchOptions o = Options(1, 1);
  o.ignore_eos = true;
  BeamSearch search(o, 2);
  search.Step(std::vector<SampleResult>{Next({{kEos, -0.1f}, {4, -0.2f}})});
  ASSERT_TRUE(search.done());
  std::vector<Beam> best = search.TakeBest();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_THAT(best[0].tokens, ElementsAre(kEos));
  EXPECT_FALSE(best[0].stopped);
}

TEST(BeamSearchTest, EndsWhenEveryCandidateIsEos) {
  BeamSearch search(Options(1, 10), 2);
  search.Step(std::vector<SampleResult>{Next({{kEos, -0.3f}})});
  EXPECT_TRUE(search.live().empty());
  EXPECT_TRUE(search.done());
  std::vector<Beam> best = search.TakeBest();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_TRUE(best[0].stopped);
  EXPECT_TRUE(best[0].tokens.empty());
}

TEST(BeamSearchTest, WidthOneFollowsTheMostLikelyToken) {
  BeamSearch search(Options(1, 3), 2);
  for (int32_t token : {11, 12, 13}) {
    ASSERT_FALSE(search.done());
    search.Step(std::vector<SampleResult>{Next({{token, -0.25f}, {kEos, -2.0f}})});
  }
  ASSERT_TRUE(search.done());
  std::vector<Beam> best = search.TakeBest();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_THAT(best[0].tokens, ElementsAre(11, 12, 13));
  EXPECT_NEAR(best[0].cum_logprob, -0.75, 1e-6);
}

}  // namespace
}  // namespace switchyard::engine
