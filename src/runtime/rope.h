// Rotary position embedding parameters, and the host-side computation of the per-pair
// inverse frequencies every backend shares. Pure functions; callable from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::runtime {

// How inverse frequencies are rescaled for context extension (HF "rope_scaling").
enum class RopeScalingType : uint8_t {
  kNone,
  kLinear,  // inv_freq /= factor (positions interpolated).
  kLlama3,  // Llama 3.1: long wavelengths / factor, short ones kept, smooth in between.
};

// Which dimensions form a rotation pair.
enum class RopeStyle : uint8_t {
  // HF "rotate_half" (GPT-NeoX): pair (i, i + rotary_dim/2). HF safetensors Llama weights.
  kNeox,
  // GPT-J / GGML mode 0: pair (2i, 2i + 1). GGUF Llama Q/K weights are permuted for this.
  kInterleaved,
};

struct RopeParams {
  int64_t head_dim = 0;
  // Leading dims of each head that rotate; the rest pass through. 0 means head_dim.
  int64_t rotary_dim = 0;
  double theta = 10000.0;
  RopeStyle style = RopeStyle::kNeox;
  RopeScalingType scaling = RopeScalingType::kNone;
  double factor = 1.0;                              // kLinear, kLlama3.
  double low_freq_factor = 1.0;                     // kLlama3.
  double high_freq_factor = 4.0;                    // kLlama3.
  int64_t original_max_position_embeddings = 8192;  // kLlama3.
  // Optional GGUF "rope_freqs": rotary_dim/2 divisors applied after scaling
  // (inv_freq[i] /= freq_factors[i]). Empty means none.
  std::vector<float> freq_factors = {};
};

// inv_freq[i] for i in [0, rotary_dim/2): theta^(-2i/rotary_dim), rescaled as `params`
// says. Pair i at position p rotates by angle p * inv_freq[i]. Computed in double.
// Errors: head_dim <= 0, rotary_dim odd or > head_dim, theta <= 0, factor <= 0,
// low_freq_factor >= high_freq_factor for kLlama3, or freq_factors of the wrong size.
absl::StatusOr<std::vector<double>> RopeInverseFrequencies(const RopeParams& params);

}  // namespace switchyard::runtime
