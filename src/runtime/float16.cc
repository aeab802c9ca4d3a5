#include "runtime/float16.h"

#include <algorithm>
#include <cmath>

#include "runtime/ggml_blocks.h"

namespace switchyard::runtime {

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else {
    // Zero or subnormal: mantissa * 2^-24 is exact in f32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t F32ToF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u);  // NaN.
  if (abs_bits >= 0x477ff000u)
    return static_cast<uint16_t>(sign | 0x7c00u);  // Overflow.
  if (abs_bits < 0x38800000u) {
    // Subnormal half (or zero): round magnitude * 2^24 to the nearest even integer.
    float magnitude;
    std::memcpy(&magnitude, &abs_bits, sizeof(magnitude));
    const float scaled = std::nearbyint(magnitude * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(scaled));
  }
  // Normal: rebias the exponent, round the dropped 13 mantissa bits to nearest even.
  uint32_t rounded = abs_bits + 0xfffu + ((abs_bits >> 13) & 1u);
  rounded -= 112u << 23;
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

void QuantizeRowQ8_0(const float* x, int64_t n, void* out) {
  auto* blocks = static_cast<BlockQ8_0*>(out);
  for (int64_t b = 0; b < n / kQ8_0BlockElems; ++b) {
    const float* xb = x + b * kQ8_0BlockElems;
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8_0BlockElems; ++j)
      amax = std::max(amax, std::fabs(xb[j]));
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    BlockQ8_0 block{};
    block.scale_f16 = F32ToF16(scale);
    for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
      block.qs[j] = static_cast<int8_t>(std::lround(xb[j] * inv));
    }
    std::memcpy(&blocks[b], &block, sizeof(block));
  }
}

void DequantizeRow(DType dtype, const void* src, int64_t n, float* out) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i)
        out[i] = F16ToF32(h[i]);
      return;
    }
    case DType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i)
        out[i] = Bf16ToF32(h[i]);
      return;
    }
    case DType::kQ8_0: {
      const auto* bytes = static_cast<const uint8_t*>(src);
      for (int64_t b = 0; b < n / kQ8_0BlockElems; ++b) {
        BlockQ8_0 block{};
        std::memcpy(&block, bytes + b * kQ8_0BlockBytes, sizeof(block));
        const float scale = F16ToF32(block.scale_f16);
        for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
          out[b * kQ8_0BlockElems + j] = scale * static_cast<float>(block.qs[j]);
        }
      }
      return;
    }
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ2_K:
    case DType::kQ3_K:
      DequantizeGgmlRow(dtype, src, n, out);
      return;
    case DType::kI32:
      return;
  }
}

}  // namespace switchyard::runtime
