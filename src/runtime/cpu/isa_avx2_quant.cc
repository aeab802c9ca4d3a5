// GGML quantized weights (Q4_0 ... Q6_K) x quantized activations on AVX2 (the decode
// GEMV), for CPUs without AVX-512 VNNI: the same scheme as isa_avx512_quant.cc, with
// vpmaddubsw (unsigned weight x signed activation byte pairs, which cannot saturate:
// 2 * 63 * 127 < 2^15) and vpmaddwd to reach the same int32 lanes of 4 products.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "runtime/cpu/internal/avx2_loaders.h"
#include "runtime/cpu/internal/isa_kernels.h"
#include "runtime/cpu/internal/quant_decode.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace switchyard::runtime::cpu {
namespace {

template <int N>
void DotDecoded(const DecodedGroup* row, int64_t chunks, const QuantActivations& x, int64_t i0,
                float* out, int64_t ldo) {
  const int64_t lds = x.ldq / 4;
  const int64_t ldm = x.ldq / 16;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[N];
  __m256 mins[N];
  for (int r = 0; r < N; ++r)
    acc[r] = mins[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g * kGroupChunks < chunks; ++g) {
    const DecodedGroup& dg = row[g];
    const int64_t in_group = std::min(kGroupChunks, chunks - g * kGroupChunks);
    for (int64_t c = 0; c < in_group; ++c) {
      const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(dg.q + 32 * c));
      const __m256 ws = _mm256_load_ps(dg.ws + 8 * c);
      for (int r = 0; r < N; ++r) {
        const int64_t i = i0 + r;
        const __m256i xv = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(x.q + i * x.ldq + g * kGroupElems + 32 * c));
        const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(w, xv), ones);
        const __m256 sx = _mm256_loadu_ps(x.s + i * lds + g * 64 + 8 * c);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(ws, sx), acc[r]);
      }
    }
    const __m256 wm0 = _mm256_load_ps(dg.wm);
    const __m256 wm1 = _mm256_load_ps(dg.wm + 8);
    for (int r = 0; r < N; ++r) {
      const float* xm = x.m + (i0 + r) * ldm + g * 16;
      mins[r] = _mm256_fmadd_ps(wm0, _mm256_loadu_ps(xm), mins[r]);
      mins[r] = _mm256_fmadd_ps(wm1, _mm256_loadu_ps(xm + 8), mins[r]);
    }
  }
  for (int r = 0; r < N; ++r)
    out[r * ldo] = Avx2ReduceAdd(_mm256_sub_ps(acc[r], mins[r]));
}

void DotRows(DType w_dtype, const QuantActivations& x, int64_t n, int64_t k, const uint8_t* w,
             size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  DotRowsDecoded(w_dtype, n, k, w, w_row_bytes, m_begin, m_end, out, ldo,
                 [&](const DecodedGroup* row, int64_t chunks, int64_t i, int64_t rows, float* o) {
                   switch (rows) {
                     case 4:
                       return DotDecoded<4>(row, chunks, x, i, o, ldo);
                     case 3:
                       return DotDecoded<3>(row, chunks, x, i, o, ldo);
                     case 2:
                       return DotDecoded<2>(row, chunks, x, i, o, ldo);
                     default:
                       return DotDecoded<1>(row, chunks, x, i, o, ldo);
                   }
                 });
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const QuantKernels& Avx2QuantKernels() {
  static constexpr QuantKernels kKernels = {&DotRows, nullptr, nullptr, kAvx2StreamingRows};
  return kKernels;
}

}  // namespace switchyard::runtime::cpu
