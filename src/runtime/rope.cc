#include "runtime/rope.h"

#include <cmath>
#include <numbers>

#include "fmt/format.h"

namespace switchyard::runtime {

absl::StatusOr<std::vector<double>> RopeInverseFrequencies(const RopeParams& params) {
  const int64_t rotary_dim = params.rotary_dim == 0 ? params.head_dim : params.rotary_dim;
  if (params.head_dim <= 0 || rotary_dim <= 0 || rotary_dim % 2 != 0 ||
      rotary_dim > params.head_dim) {
    return absl::InvalidArgumentError(
        fmt::format("rope: need 0 < rotary_dim <= head_dim with rotary_dim even, got "
                    "head_dim={} rotary_dim={}",
                    params.head_dim, rotary_dim));
  }
  if (!(params.theta > 0.0)) {
    return absl::InvalidArgumentError(fmt::format("rope: theta must be > 0, got {}", params.theta));
  }
  if (params.scaling != RopeScalingType::kNone && !(params.factor > 0.0)) {
    return absl::InvalidArgumentError(
        fmt::format("rope: scaling factor must be > 0, got {}", params.factor));
  }
  if (params.scaling == RopeScalingType::kLlama3 &&
      (!(params.low_freq_factor < params.high_freq_factor) ||
       params.original_max_position_embeddings <= 0)) {
    return absl::InvalidArgumentError(fmt::format(
        "rope: llama3 scaling needs low_freq_factor < high_freq_factor and "
        "original_max_position_embeddings > 0, got {} {} {}",
        params.low_freq_factor, params.high_freq_factor, params.original_max_position_embeddings));
  }
  const size_t half = static_cast<size_t>(rotary_dim / 2);
  if (!params.freq_factors.empty() && params.freq_factors.size() != half) {
    return absl::InvalidArgumentError(
        fmt::format("rope: freq_factors has {} entries, want rotary_dim/2 = {}",
                    params.freq_factors.size(), half));
  }
  std::vector<double> inv_freq(half);
  for (size_t i = 0; i < half; ++i) {
    double f =
        std::pow(params.theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
    if (params.scaling == RopeScalingType::kLinear) {
      f /= params.factor;
    } else if (params.scaling == RopeScalingType::kLlama3) {
      const double old_len = static_cast<double>(params.original_max_position_embeddings);
      const double low_freq_wavelen = old_len / params.low_freq_factor;
      const double high_freq_wavelen = old_len / params.high_freq_factor;
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_freq_wavelen) {
        f /= params.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double smooth = (old_len / wavelen - params.low_freq_factor) /
                              (params.high_freq_factor - params.low_freq_factor);
        f = (1.0 - smooth) * f / params.factor + smooth * f;
      }
    }
    if (!params.freq_factors.empty()) {
      const double divisor = params.freq_factors[i];
      if (!(divisor > 0.0)) {
        return absl::InvalidArgumentError(
            fmt::format("rope: freq_factors[{}] must be > 0, got {}", i, divisor));
      }
      f /= divisor;
    }
    inv_freq[i] = f;
  }
  return inv_freq;
}

}  // namespace switchyard::runtime
