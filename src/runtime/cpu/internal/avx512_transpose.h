// Lane shuffles across 16 AVX-512 registers shared by the AVX-512 kernels: a 16 x 16
// transpose of 32-bit lanes (panel packers, attention) and the lane sums of 16 vectors
// gathered into one (dot products of several rows at once). Compiled for AVX-512F by their
// own attributes, so including this leaves the rest of a file untouched; call them only
// from code that already runs on AVX-512.
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

namespace switchyard::runtime::cpu {

// On return r[c] holds what was column c of rows r[0..15].
__attribute__((target("avx512f"), always_inline)) inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int64_t i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4g + j], 128-bit lane L: column 4L + j of rows 4g..4g+3.
  __m512 u[16];
  for (int64_t g = 0; g < 4; ++g) {
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

// Lane sums of 16 vectors a0..a15 gathered into one (lane i: the sum of a_i's lanes), by
// folding pairs of vectors together, 45 instructions in all; the steps are separate so that
// callers can fold vectors as they make them and keep few live:
//   Fold2(a_2j, a_2j+1): per 128-bit lane [x0+x2, y0+y2, x1+x3, y1+y3] (x = a_2j, y = a_2j+1)
//   Fold4(Fold2(a_4j, a_4j+1), Fold2(a_4j+2, a_4j+3)): per 128-bit lane, that lane's sums
//     of a_4j .. a_4j+3
//   Fold16(c0, c1, c2, c3) with c_j = Fold4(...) of a_4j .. a_4j+3: the 16 sums.
__attribute__((target("avx512f"), always_inline)) inline __m512 Fold2(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_unpacklo_ps(x, y), _mm512_unpackhi_ps(x, y));
}

__attribute__((target("avx512f"), always_inline)) inline __m512 Fold4(__m512 b0, __m512 b1) {
  const __m512d x = _mm512_castps_pd(b0);
  const __m512d y = _mm512_castps_pd(b1);
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                       _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
}

__attribute__((target("avx512f"), always_inline)) inline __m512 Fold16(__m512 c0, __m512 c1,
                                                                       __m512 c2, __m512 c3) {
  const __m512 d0 = _mm512_add_ps(_mm512_shuffle_f32x4(c0, c1, _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(c0, c1, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 d1 = _mm512_add_ps(_mm512_shuffle_f32x4(c2, c3, _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(c2, c3, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(d0, d1, _MM_SHUFFLE(3, 1, 3, 1)));
}

}  // namespace switchyard::runtime::cpu

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
