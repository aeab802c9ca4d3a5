// The sampler's allowed-token bitset (structured output's seam): only allowed ids are ever
// drawn, greedy or not, and the raw logprobs stay those of the unmasked logits.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

#include "engine/sampler.h"
#include "structured/token_mask.h"

namespace switchyard::engine {
namespace {

TEST(SamplerMaskTest, OnlyAllowedIdsAreDrawn) {
  constexpr int64_t kVocab = 100;  // not a multiple of 32: the last word is partial
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 3);
  std::vector<float> logits(kVocab);
  for (float& l : logits)
    l = normal(rng);
  std::vector<uint32_t> mask(structured::MaskWords(kVocab), 0);
  const std::vector<int32_t> allowed_ids = {3, 31, 32, 64, 99};
  for (int32_t id : allowed_ids)
    mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
  // The greedy pick without a mask is some other id.
  logits[50] = 100;

  Sampler sampler(kVocab);
  SampleResult result;
  for (double temperature : {0.0, 0.7, 1.5}) {
    SamplingParams params;
    params.temperature = temperature;
    params.logprobs = 0;
    params.seed = 9;
    SequenceSamplingState state(kVocab, {}, params.seed);
    for (int i = 0; i < 300; ++i) {
      sampler.Sample(logits, params, &state, &result, {}, mask);
      EXPECT_TRUE(structured::MaskTest(mask, result.token)) << result.token;
      // Logprobs are the model's: id 50 dominates them even though it is masked.
      EXPECT_LT(result.logprob, -50.0f);
    }
  }
  // Banned and allowed together: a banned id stays out even if the mask allows it.
  SamplingParams greedy;
  greedy.temperature = 0;
  SequenceSamplingState state(kVocab, {}, std::nullopt);
  logits[99] = 90;
  sampler.Sample(logits, greedy, &state, &result, std::vector<int32_t>{99}, mask);
  EXPECT_NE(result.token, 99);
  EXPECT_TRUE(structured::MaskTest(mask, result.token));
}

}  // namespace
}  // namespace switchyard::engine
