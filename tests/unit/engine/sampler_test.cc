#include "engine/sampler.h"

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::engine {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs)
    logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -kInf);
  return logits;
}

// Frequencies of `draws` seeded samples from `logits` under `params`.
std::vector<double> Frequencies(const std::vector<float>& logits, SamplingParams params,
                                int draws) {
  Sampler sampler(static_cast<int64_t>(logits.size()));
  params.seed = 1234;
  SequenceSamplingState state(static_cast<int64_t>(logits.size()), {}, params.seed);
  std::vector<double> freq(logits.size(), 0);
  SampleResult result;
  for (int i = 0; i < draws; ++i) {
    sampler.Sample(logits, params, &state, &result);
    freq[static_cast<size_t>(result.token)] += 1.0 / draws;
  }
  return freq;
}

struct DistributionCase {
  const char* name;
  SamplingParams params;
  std::vector<double> expected;
};

SamplingParams With(double temperature, int32_t top_k, double top_p, double min_p) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  return p;
}

TEST(SamplerTest, DistributionsMatchTheFilteredSoftmax) {
  const std::vector<float> logits = LogitsOf({0.5, 0.3, 0.15, 0.05});
  const double t2 = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.15) + std::sqrt(0.05);
  const DistributionCase cases[] = {
      {"plain", With(1, -1, 1, 0), {0.5, 0.3, 0.15, 0.05}},
      {"top_k_2", With(1, 2, 1, 0), {0.625, 0.375, 0, 0}},
      {"top_k_0_off", With(1, 0, 1, 0), {0.5, 0.3, 0.15, 0.05}},
      // Mass 0.5 < 0.75, then 0.8 >= 0.75: the first two stay.
      {"top_p_075", With(1, -1, 0.75, 0), {0.625, 0.375, 0, 0}},
      {"top_p_tiny", With(1, -1, 1e-6, 0), {1, 0, 0, 0}},
      // min_p 0.5 keeps p >= 0.25.
      {"min_p_05", With(1, -1, 1, 0.5), {0.625, 0.375, 0, 0}},
      {"min_p_02", With(1, -1, 1, 0.2), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}},
      {"temperature_2",
       With(2, -1, 1, 0),
       {std::sqrt(0.5) / t2, std::sqrt(0.3) / t2, std::sqrt(0.15) / t2, std::sqrt(0.05) / t2}},
      // top-p renormalises over the top-k survivors: 0.5/0.95 >= 0.5.
      {"top_k_3_top_p_05", With(1, 3, 0.5, 0), {1, 0, 0, 0}},
      {"min_p_1", With(1, -1, 1, 1), {1, 0, 0, 0}},
  };
  for (const DistributionCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<double> freq = Frequencies(logits, c.params, 20000);
    for (size_t i = 0; i < freq.size(); ++i)
      EXPECT_NEAR(freq[i], c.expected[i], 0.015) << "token " << i;
  }
}

TEST(SamplerTest, GreedyTakesTheFirstMaximumAndSkipsNan) {
  Sampler sampler(5);
  SamplingParams params;
  params.temperature = 0;
  SequenceSamplingState state(5, {}, 0);
  SampleResult result;
  const std::array<float, 5> logits = {0.1f, kNan, 3.0f, 3.0f, -1.0f};
  sampler.Sample(logits, params, &state, &result);
  EXPECT_EQ(result.token, 2);
  const std::array<float, 5> all_nan = {kNan, kNan, kNan, kNan, kNan};
  sampler.Sample(all_nan, params, &state, &result);
  EXPECT_EQ(result.token, 0);
}

TEST(SamplerTest, SamplingNeverPicksMaskedOrNanTokens) {
  const std::vector<float> logits = {-kInf, kNan, 0.0f, -kInf, 0.0f};
  std::vector<double> freq = Frequencies(logits, With(1, -1, 1, 0), 2000);
  EXPECT_EQ(freq[0] + freq[1] + freq[3], 0);
  EXPECT_NEAR(freq[2], 0.5, 0.05);
}

TEST(SamplerTest, SeedsReproduce) {
  std::vector<float> logits(257);
  for (size_t i = 0; i < logits.size(); ++i)
    logits[i] = static_cast<float>(std::sin(static_cast<double>(i) * 0.7));
  auto run = [&](uint64_t seed) {
    Sampler sampler(257);
    SamplingParams params = With(0.8, 50, 0.9, 0.01);
    params.seed = seed;
    SequenceSamplingState state(257, {}, seed);
    std::vector<int32_t> tokens;
    SampleResult result;
    for (int i = 0; i < 200; ++i) {
      sampler.Sample(logits, params, &state, &result);
      tokens.push_back(result.token);
    }
    return tokens;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(SamplerTest, PenaltiesFollowVllm) {
  SamplingParams params;
  params.repetition_penalty = 2;
  params.presence_penalty = 0.5;
  params.frequency_penalty = 0.25;
  const std::array<int32_t, 3> prompt = {0, 1, 99};  // 99 is out of range: ignored
  SequenceSamplingState state(6, prompt, 0);
  state.AppendOutput(1);
  state.AppendOutput(2);
  state.AppendOutput(2);
  state.AppendOutput(-3);
  EXPECT_EQ(state.output_count(2), 2);
  EXPECT_TRUE(state.in_prompt(0));
  EXPECT_FALSE(state.in_prompt(2));
  std::array<float, 6> logits = {2.0f, -2.0f, 1.0f, 4.0f, -1.0f, 0.0f};
  ApplyPenalties(params, state, logits);
  // 0: prompt only -> repetition; 1: prompt+output once; 2: output twice; others untouched.
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], -4.0f - 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(logits[2], 0.5f - 0.5f - 0.5f);
  EXPECT_FLOAT_EQ(logits[3], 4.0f);
  EXPECT_FLOAT_EQ(logits[4], -1.0f);
  EXPECT_FLOAT_EQ(logits[5], 0.0f);
}

TEST(SamplerTest, RepetitionPenaltyChangesTheGreedyChoice) {
  Sampler sampler(3);
  SamplingParams params;
  params.temperature = 0;
  params.repetition_penalty = 1.5;
  const std::array<int32_t, 1> prompt = {0};
  SequenceSamplingState state(3, prompt, 0);
  SampleResult result;
  const std::array<float, 3> logits = {1.2f, 1.0f, 0.5f};
  sampler.Sample(logits, params, &state, &result);
  EXPECT_EQ(result.token, 1);
}

TEST(SamplerTest, LogprobsAreRawAndSorted) {
  Sampler sampler(4);
  SamplingParams params;
  params.temperature = 0;
  params.repetition_penalty = 100;  // changes the pick, not the reported logprobs
  params.logprobs = 3;
  const std::array<int32_t, 1> prompt = {1};
  SequenceSamplingState state(4, prompt, 0);
  SampleResult result;
  const std::array<float, 4> logits = {1.0f, 3.0f, 2.0f, 2.0f};
  sampler.Sample(logits, params, &state, &result);
  double norm = std::log(std::exp(1.0) + std::exp(3.0) + 2 * std::exp(2.0));
  EXPECT_EQ(result.token, 2);
  EXPECT_NEAR(result.logprob, 2.0 - norm, 1e-6);
  ASSERT_EQ(result.top_logprobs.size(), 3u);
  EXPECT_EQ(result.top_logprobs[0].token, 1);
  EXPECT_NEAR(result.top_logprobs[0].logprob, 3.0 - norm, 1e-6);
  EXPECT_EQ(result.top_logprobs[1].token, 2);
  EXPECT_EQ(result.top_logprobs[2].token, 3);

  params.logprobs = 0;
  sampler.Sample(logits, params, &state, &result);
  EXPECT_TRUE(result.top_logprobs.empty());
  params.logprobs = 20;  // more than the vocabulary
  sampler.Sample(logits, params, &state, &result);
  EXPECT_EQ(result.top_logprobs.size(), 4u);
}

TEST(SamplerTest, TopKOneIsGreedyWhateverTheSeed) {
  const std::vector<float> logits = {0.1f, 0.7f, 0.69f, -2.0f};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Sampler sampler(4);
    SamplingParams params = With(1.5, 1, 1, 0);
    SequenceSamplingState state(4, {}, seed);
    SampleResult result;
    sampler.Sample(logits, params, &state, &result);
    EXPECT_EQ(result.token, 1);
  }
}

// Prompt logprobs score a given token: its raw logprob and vLLM's rank (the ids whose logit
// is >= its own, ties included), with the top ids refilled on every call.
TEST(SamplerTest, ComputeLogprobsRanksAGivenToken) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f, kNan};
  Sampler sampler(static_cast<int64_t>(logits.size()));
  const double log_norm = std::log(std::exp(1.0) + 2 * std::exp(3.0) + 1.0);
  SampleResult r;
  r.token = 3;
  sampler.ComputeLogprobs(logits, 2, &r);
  EXPECT_NEAR(r.logprob, -log_norm, 1e-6);
  EXPECT_EQ(r.rank, 4);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].token, 1);
  EXPECT_EQ(r.top_logprobs[1].token, 2);
  r.token = 2;
  sampler.ComputeLogprobs(logits, 0, &r);
  EXPECT_NEAR(r.logprob, 3.0 - log_norm, 1e-6);
  EXPECT_EQ(r.rank, 2);
  EXPECT_TRUE(r.top_logprobs.empty());
}

}  // namespace
}  // namespace switchyard::engine
