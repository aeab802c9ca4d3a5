#include "engine/sampling_params.h"

#include <cmath>
#include <string>

#include "fmt/format.h"

namespace switchyard::engine {
namespace {

absl::Status Invalid(const char* field, const char* rule, double value) {
  return absl::InvalidArgumentError(fmt::format("{} must be {}, got {}", field, rule, value));
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& params) {
  if (!std::isfinite(params.temperature) || params.temperature < 0) {
    return Invalid("temperature", "finite and >= 0", params.temperature);
  }
  if (!std::isfinite(params.top_p) || params.top_p <= 0 || params.top_p > 1) {
    return Invalid("top_p", "in (0, 1]", params.top_p);
  }
  if (params.top_k < -1) {
    return Invalid("top_k", "-1, 0 (disabled) or >= 1", params.top_k);
  }
  if (!std::isfinite(params.min_p) || params.min_p < 0 || params.min_p > 1) {
    return Invalid("min_p", "in [0, 1]", params.min_p);
  }
  if (!std::isfinite(params.repetition_penalty) || params.repetition_penalty <= 0) {
    return Invalid("repetition_penalty", "finite and > 0", params.repetition_penalty);
  }
  if (!std::isfinite(params.presence_penalty) || std::abs(params.presence_penalty) > 2) {
    return Invalid("presence_penalty", "in [-2, 2]", params.presence_penalty);
  }
  if (!std::isfinite(params.frequency_penalty) || std::abs(params.frequency_penalty) > 2) {
    return Invalid("frequency_penalty", "in [-2, 2]", params.frequency_penalty);
  }
  for (const auto& [id, bias] : params.logit_bias) {
    if (!std::isfinite(bias)) {
      return absl::InvalidArgumentError(
          fmt::format("logit_bias must be finite, got {} for token {}", bias, id));
    }
  }
  if (params.logprobs.has_value() && (*params.logprobs < 0 || *params.logprobs > kMaxLogprobs)) {
    return absl::InvalidArgumentError(
        fmt::format("logprobs must be in [0, {}], got {}", kMaxLogprobs, *params.logprobs));
  }
  return absl::OkStatus();
}

}  // namespace switchyard::engine
