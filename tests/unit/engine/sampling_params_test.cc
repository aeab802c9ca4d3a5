#include "engine/sampling_params.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace switchyard::engine {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Case {
  std::string name;
  std::function<void(SamplingParams*)> set;
  bool ok;
  std::string field;  // expected in the message when !ok
};

TEST(SamplingParamsTest, Table) {
  const Case cases[] = {
      {"defaults", [](SamplingParams*) {}, true, ""},
      {"greedy", [](SamplingParams* p) { p->temperature = 0; }, true, ""},
      {"hot", [](SamplingParams* p) { p->temperature = 5; }, true, ""},
      {"temp_negative", [](SamplingParams* p) { p->temperature = -0.1; }, false, "temperature"},
      {"temp_nan", [](SamplingParams* p) { p->temperature = kNan; }, false, "temperature"},
      {"temp_inf", [](SamplingParams* p) { p->temperature = kInf; }, false, "temperature"},
      {"top_p_small", [](SamplingParams* p) { p->top_p = 1e-6; }, true, ""},
      {"top_p_zero", [](SamplingParams* p) { p->top_p = 0; }, false, "top_p"},
      {"top_p_above", [](SamplingParams* p) { p->top_p = 1.01; }, false, "top_p"},
      {"top_p_nan", [](SamplingParams* p) { p->top_p = kNan; }, false, "top_p"},
      {"top_k_off", [](SamplingParams* p) { p->top_k = 0; }, true, ""},
      {"top_k_one", [](SamplingParams* p) { p->top_k = 1; }, true, ""},
      {"top_k_bad", [](SamplingParams* p) { p->top_k = -2; }, false, "top_k"},
      {"min_p_one", [](SamplingParams* p) { p->min_p = 1; }, true, ""},
      {"min_p_neg", [](SamplingParams* p) { p->min_p = -0.01; }, false, "min_p"},
      {"min_p_big", [](SamplingParams* p) { p->min_p = 1.5; }, false, "min_p"},
      {"min_p_nan", [](SamplingParams* p) { p->min_p = kNan; }, false, "min_p"},
      {"rep_ok", [](SamplingParams* p) { p->repetition_penalty = 0.5; }, true, ""},
      {"rep_zero", [](SamplingParams* p) { p->repetition_penalty = 0; }, false,
       "repetition_penalty"},
      {"rep_inf", [](SamplingParams* p) { p->repetition_penalty = kInf; }, false,
       "repetition_penalty"},
      {"presence_edge", [](SamplingParams* p) { p->presence_penalty = -2; }, true, ""},
      {"presence_big", [](SamplingParams* p) { p->presence_penalty = 2.5; }, false,
       "presence_penalty"},
      {"presence_nan", [](SamplingParams* p) { p->presence_penalty = kNan; }, false,
       "presence_penalty"},
      {"frequency_edge", [](SamplingParams* p) { p->frequency_penalty = 2; }, true, ""},
      {"frequency_small", [](SamplingParams* p) { p->frequency_penalty = -2.01; }, false,
       "frequency_penalty"},
      {"logprobs_zero", [](SamplingParams* p) { p->logprobs = 0; }, true, ""},
      {"logprobs_max", [](SamplingParams* p) { p->logprobs = kMaxLogprobs; }, true, ""},
      {"logprobs_big", [](SamplingParams* p) { p->logprobs = kMaxLogprobs + 1; }, false,
       "logprobs"},
      {"logprobs_neg", [](SamplingParams* p) { p->logprobs = -1; }, false, "logprobs"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SamplingParams params;
    c.set(&params);
    absl::Status status = ValidateSamplingParams(params);
    EXPECT_EQ(status.ok(), c.ok) << status;
    if (!c.ok) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(status.message()), ::testing::StartsWith(c.field + " must be"));
    }
  }
}

TEST(SamplingParamsTest, GreedyThreshold) {
  SamplingParams params;
  params.temperature = 0;
  EXPECT_TRUE(params.greedy());
  params.temperature = kGreedyTemperature / 2;
  EXPECT_TRUE(params.greedy());
  params.temperature = 0.01;
  EXPECT_FALSE(params.greedy());
}

}  // namespace
}  // namespace switchyard::engine
