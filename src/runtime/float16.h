// Scalar conversions between f32 and the 16-bit float formats, plus Q8_0 row
// quantization, for host-side code (weight conversion, tests, portable kernels). Pure
// functions; callable from any thread.
#pragma once

#include <cstdint>
#include <cstring>

#include "runtime/dtype.h"

namespace switchyard::runtime {

inline float Bf16ToF32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Round to nearest even; NaN stays NaN.
inline uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// IEEE binary16 -> f32, exact (subnormals, infinities and NaN included).
float F16ToF32(uint16_t h);
// f32 -> IEEE binary16, round to nearest even, overflow to infinity.
uint16_t F32ToF16(float f);

// Quantizes n floats to n/32 Q8_0 blocks the way GGML does: scale = max|x| / 127,
// q = round(x / scale).
// REQUIRES: n % kQ8_0BlockElems == 0; out holds RowBytes(kQ8_0, n) bytes.
void QuantizeRowQ8_0(const float* x, int64_t n, void* out);

// Converts n elements of `dtype` at src to f32.
// REQUIRES: dtype != kI32; n is a multiple of DTypeBlockElems(dtype).
void DequantizeRow(DType dtype, const void* src, int64_t n, float* out);

}  // namespace switchyard::runtime
