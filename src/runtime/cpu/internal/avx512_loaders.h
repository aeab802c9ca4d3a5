// 16-lane f32 loads of F32, BF16 and F16 rows for the AVX-512 kernels (isa_avx512*.cc):
// Load(row, t) reads elements [t, t + 16) of the row at `row`; the masked form reads only
// the lanes in `mask` and zeroes the rest, so row tails need no scalar code; a full mask
// takes the plain load (measured faster for F16 rows read from memory).
// Compiled for AVX-512 by their own attributes; call them only from code that already runs
// on it.
#pragma once

#include <immintrin.h>

#include <cstdint>

#if !defined(__clang__)
// GCC 12's AVX-512 headers build "undefined" vectors by self-assignment, which its own
// -Wuninitialized flags once inlined at -O2.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define SY_AVX512_LOADER __attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline))

namespace switchyard::runtime::cpu {

// Lanes [0, left) of a 16-lane vector.
SY_AVX512_LOADER inline __mmask16 TailMask(int64_t left) {
  return left >= 16  ? static_cast<__mmask16>(0xffff)
         : left <= 0 ? static_cast<__mmask16>(0)
                     : static_cast<__mmask16>((1u << left) - 1);
}

struct LoadF32 {
  SY_AVX512_LOADER static __m512 Load(const uint8_t* row, int64_t t) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + t);
  }
  SY_AVX512_LOADER static __m512 Load(const uint8_t* row, int64_t t, __mmask16 mask) {
    if (mask == 0xffff)
      return Load(row, t);
    return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(row) + t);
  }
};

struct LoadBf16 {
  SY_AVX512_LOADER static __m512 Widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  SY_AVX512_LOADER static __m512 Load(const uint8_t* row, int64_t t) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * t)));
  }
  SY_AVX512_LOADER static __m512 Load(const uint8_t* row, int64_t t, __mmask16 mask) {
    if (mask == 0xffff)
      return Load(row, t);
    return Widen(_mm256_maskz_loadu_epi16(mask, row + 2 * t));
  }
};

struct LoadF16 {
  SY_AVX512_LOADER static __m512 Load(const uint8_t* row, int64_t t) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * t)));
  }
  SY_AVX512_LOADER static __m512 Load(const uint8_t* row, int64_t t, __mmask16 mask) {
    if (mask == 0xffff)
      return Load(row, t);
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, row + 2 * t));
  }
};

}  // namespace switchyard::runtime::cpu

#undef SY_AVX512_LOADER

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
