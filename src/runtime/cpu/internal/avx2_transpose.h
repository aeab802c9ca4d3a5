// An 8 x 8 transpose of 32-bit lanes across 8 AVX2 registers, shared by the AVX2 panel
// packer and attention. Compiled for AVX2 by its own attribute, so including this leaves the
// rest of a file untouched; call it only from code that already runs on AVX2.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace switchyard::runtime::cpu {

// On return r[c] holds what was column c of rows r[0..7].
__attribute__((target("avx2"), always_inline)) inline void Transpose8x8(__m256 r[8]) {
  __m256 t[8];
  for (int64_t i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4g + j], 128-bit lane L: column 4L + j of rows 4g..4g+3.
  __m256 u[8];
  for (int64_t g = 0; g < 2; ++g) {
    u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

}  // namespace switchyard::runtime::cpu
