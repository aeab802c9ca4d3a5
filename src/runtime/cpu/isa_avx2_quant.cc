// GGML quantized weights (Q4_0 ... Q6_K) x quantized activations on AVX2 (the decode
// GEMV), for CPUs without AVX-512 VNNI: the same scheme as isa_avx512_quant.cc, with
// vpmaddubsw (unsigned weight x signed activation byte pairs, which cannot saturate:
// 2 * 63 * 127 < 2^15) and vpmaddwd to reach the same int32 lanes of 4 products.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

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

// As the AVX-512 Quantize (isa_avx512_quant.cc), 8 lanes at a time.
void Quantize(const float* x, int64_t k, int64_t ldq, int8_t* q, float* s, float* m) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t c = 0; c < ldq / kChunkElems; ++c) {
    if (c * kChunkElems >= k) {
      std::memset(q + c * kChunkElems, 0, kChunkElems);
      _mm256_storeu_ps(s + 8 * c, _mm256_setzero_ps());
      m[2 * c] = m[2 * c + 1] = 0.0f;
      continue;
    }
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int64_t i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + c * kChunkElems + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
    }
    const ActivationBlockScale block_scale = ActivationScaleFor(Avx2ReduceMax(amax));
    const float scale = block_scale.scale;
    const __m256 inv = _mm256_set1_ps(block_scale.inv);
    __m256i qi[4];
    for (int i = 0; i < 4; ++i)
      qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
    // int32 -> int8 with saturation (no value exceeds 127): packs work within 128-bit
    // lanes, so the result's 4-byte groups come out as 0 2 4 6 1 3 5 7; undo that.
    const __m256i packed = _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3])),
        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + c * kChunkElems), packed);
    _mm256_storeu_ps(s + 8 * c, _mm256_set1_ps(scale));
    const __m256i lo = _mm256_add_epi32(qi[0], qi[1]);
    const __m256i hi = _mm256_add_epi32(qi[2], qi[3]);
    const __m256 sums = _mm256_cvtepi32_ps(_mm256_hadd_epi32(lo, hi));
    // hadd within lanes: [lo0+lo1, lo2+lo3, hi0+hi1, hi2+hi3 | same for lanes 4-7].
    alignas(32) float parts[8];
    _mm256_store_ps(parts, sums);
    m[2 * c] = scale * (parts[0] + parts[1] + parts[4] + parts[5]);
    m[2 * c + 1] = scale * (parts[2] + parts[3] + parts[6] + parts[7]);
  }
}

template <int N>
struct DotDecoded {
  static void Run(const DecodedGroup* row, int64_t chunks, const QuantActivations& x, int64_t i0,
                  float* out, int64_t ldo);
};

template <int N>
void DotDecoded<N>::Run(const DecodedGroup* row, int64_t chunks, const QuantActivations& x,
                        int64_t i0, float* out, int64_t ldo) {
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
  DotRowsDecoded<DotDecoded>(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const QuantKernels& Avx2QuantKernels() {
  static constexpr QuantKernels kKernels = {&Quantize, &DotRows, &Avx2QuantGemv,    kQuantGemvRows,
                                            nullptr,   nullptr,  kAvx2StreamingRows};
  return kKernels;
}

}  // namespace switchyard::runtime::cpu
