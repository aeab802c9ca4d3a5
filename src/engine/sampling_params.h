// SamplingParams: how one request turns logits into tokens (vLLM's SamplingParams subset
// that the sampler implements), and the caller-facing validation that keeps non-finite or
// out-of-range values away from the sampler. A plain value; copy it freely between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace switchyard::engine {

// Temperatures below this are greedy (vLLM's _SAMPLING_EPS).
inline constexpr double kGreedyTemperature = 1e-5;
// Most top logprobs a request may ask for (vLLM's default max_logprobs).
inline constexpr int32_t kMaxLogprobs = 20;

struct SamplingParams {
  double temperature = 1.0;  // 0 (or < kGreedyTemperature) = greedy
  double top_p = 1.0;        // (0, 1]; 1 = off
  int32_t top_k = -1;        // -1 or 0 = off, else >= 1
  double min_p = 0.0;        // [0, 1]; 0 = off
  // Over prompt and output tokens: positive logits are divided by it, others multiplied.
  double repetition_penalty = 1.0;  // > 0; 1 = off
  // Over output tokens only: subtracted once per distinct token / once per occurrence.
  double presence_penalty = 0.0;   // [-2, 2]
  double frequency_penalty = 0.0;  // [-2, 2]
  // Per-request generator seed; none = seeded from std::random_device.
  std::optional<uint64_t> seed;
  // Top-N logprobs to return with each sampled token (none = no logprobs; 0 = only the
  // sampled token's). Raw logprobs: log_softmax of the model's logits before penalties and
  // temperature, as vLLM reports them by default.
  std::optional<int32_t> logprobs;
  // Added to the logits before penalties and sampling, not to the reported logprobs
  // (vLLM's logit_bias). Ids outside the vocabulary are ignored by the sampler; callers
  // reject them.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // When non-empty, every other id is masked before sampling (vLLM's allowed_token_ids).
  std::vector<int32_t> allowed_token_ids;

  bool greedy() const { return temperature < kGreedyTemperature; }
};

// InvalidArgument naming the field ("temperature must be finite and >= 0, got nan") for any
// value the sampler does not accept; OK otherwise.
absl::Status ValidateSamplingParams(const SamplingParams& params);

}  // namespace switchyard::engine
