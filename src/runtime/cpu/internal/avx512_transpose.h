// A 16 x 16 transpose of 32-bit lanes in AVX-512 registers, shared by the AVX-512 panel
// packers. Compiled for AVX-512F by its own attribute, so including it leaves the rest of
// a file untouched; call it only from code that already runs on AVX-512.
#pragma once

#include <immintrin.h>

#if !defined(__clang__)
// GCC 12's AVX-512 headers build "undefined" vectors by self-assignment, which its own
// -Wuninitialized flags once inlined at -O2.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace switchyard::runtime::cpu {

// On return r[c] holds what was column c of rows r[0..15].
__attribute__((target("avx512f"))) inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4g + j], 128-bit lane L: column 4L + j of rows 4g..4g+3.
  __m512 u[16];
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 p = _mm512_shuffle_f32x4(u[j], u[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 q = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 hi_p = _mm512_shuffle_f32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 hi_q = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
    r[j] = _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(2, 0, 2, 0));
    r[4 + j] = _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(3, 1, 3, 1));
    r[8 + j] = _mm512_shuffle_f32x4(hi_p, hi_q, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + j] = _mm512_shuffle_f32x4(hi_p, hi_q, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

}  // namespace switchyard::runtime::cpu

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
