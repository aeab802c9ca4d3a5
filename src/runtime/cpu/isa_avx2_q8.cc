// Q8_0 x quantized-activation dot products on AVX2 (the decode GEMV), for CPUs without
// AVX-512 VNNI.
//
// Activations are quantized per row into 32-element blocks like the weights (scale =
// max|x| / 127 in f32, values in [-127, 127] as signed bytes), so each block's dot product
// is exact integer arithmetic scaled once by both block scales. AVX2's only byte multiply,
// vpmaddubsw, takes one unsigned and one signed operand and sums pairs into saturating
// int16: it gets |w| and the activation carrying w's sign (x * sign(w)), whose pair sums
// stay within 2 * 128 * 127 < 32768. The pairs are then summed to int32 (vpmaddwd by ones),
// converted and scaled by the two block scales. Compiled for its target by the pragma below
// and reached only through Avx2Q8Kernels(), after CpuSupportsIsa(kAvx2) said yes.
//
// Many activation rows (prefill) have no int8 path here: without an int8 dot-product
// instruction the four instructions per 32 products do not beat the f32 panel GEMM, so
// pack_panel and gemm_panel are null and MatMul takes the f32 panels.
#include <immintrin.h>

#include <cstdint>

#include "runtime/cpu/internal/avx2_loaders.h"
#include "runtime/cpu/internal/isa_kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace switchyard::runtime::cpu {
namespace {

constexpr int64_t kBlock = kQ8_0BlockElems;

void Quantize(const float* x, int64_t k, uint8_t* q, float* scales) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  // vpackssdw / vpacksswb interleave the 128-bit lanes; this puts the bytes back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < k / kBlock; ++b) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int64_t i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + b * kBlock + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_and_ps(v[i], abs_mask));
    }
    const ActivationBlockScale block_scale = ActivationScaleFor(Avx2ReduceMax(amax));
    const float scale = block_scale.scale;
    const __m256 inv = _mm256_set1_ps(block_scale.inv);
    __m256i i32[4];
    for (int i = 0; i < 4; ++i)
      i32[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
    const __m256i i16a = _mm256_packs_epi32(i32[0], i32[1]);
    const __m256i i16b = _mm256_packs_epi32(i32[2], i32[3]);
    const __m256i i8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(i16a, i16b), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kBlock), i8);
    scales[b] = scale;
  }
}

// N activation rows against weight rows [m_begin, m_end): each weight block is loaded and
// made unsigned once for all N rows. xs holds each row's block scales spread 8 lanes per
// block, so a block's scale is one 8-float load. kPrefetch: the first group of rows over
// these weight rows prefetches the ones ahead; later groups find them in cache.
template <int N, bool kPrefetch>
void DotRowsN(const uint8_t* xq, const float* xs, int64_t scale_stride, int64_t k, const uint8_t* w,
              size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  const int64_t blocks = k / kBlock;
  const __m256i ones = _mm256_set1_epi16(1);
  const size_t ahead = kAvx2PrefetchRows * w_row_bytes;
  for (int64_t j = m_begin; j < m_end; ++j) {
    const uint8_t* row = w + static_cast<size_t>(j) * w_row_bytes;
    __m256 acc[N];
#pragma GCC unroll 16
    for (int i = 0; i < N; ++i)
      acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = row + b * kQ8_0BlockBytes;
      if constexpr (kPrefetch)
        _mm_prefetch(reinterpret_cast<const char*>(block + ahead), _MM_HINT_T0);
      const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
      const __m256i w_abs = _mm256_sign_epi8(wq, wq);
      const __m256 w_scale = _mm256_set1_ps(Avx2Q8BlockScale(block));
#pragma GCC unroll 16
      for (int i = 0; i < N; ++i) {
        const __m256i xv =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + i * k + b * kBlock));
        const __m256i pairs = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(xv, wq));
        const __m256 sums = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
        const __m256 scale = _mm256_mul_ps(w_scale, _mm256_loadu_ps(xs + i * scale_stride + 8 * b));
        acc[i] = _mm256_fmadd_ps(sums, scale, acc[i]);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < N; ++i)
      out[i * ldo + j] = Avx2ReduceAdd(acc[i]);
  }
}

void DotRows(const uint8_t* xq, const float* xs, int64_t n, int64_t k, const uint8_t* w,
             size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  // The spread scale layout of Q8Kernels::dot_rows: 16 floats per pair of blocks.
  const int64_t stride = (k / kBlock + 1) / 2 * 16;
  // Weight rows go in blocks small enough to stay in L1 while every group of activation
  // rows passes over them, so the weights stream from memory once whatever n is.
  constexpr int64_t kRowBlock = 8;
  for (int64_t j0 = m_begin; j0 < m_end; j0 += kRowBlock) {
    const int64_t j1 = j0 + kRowBlock < m_end ? j0 + kRowBlock : m_end;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const auto rows = i == 0 ? &DotRowsN<4, true> : &DotRowsN<4, false>;
      rows(xq + i * k, xs + i * stride, stride, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
    }
    for (; i < n; ++i) {
      const auto rows = i == 0 ? &DotRowsN<1, true> : &DotRowsN<1, false>;
      rows(xq + i * k, xs + i * stride, stride, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
    }
  }
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const Q8Kernels& Avx2Q8Kernels() {
  static constexpr Q8Kernels kKernels = {&Quantize, &DotRows, nullptr, nullptr, kAvx2StreamingRows};
  return kKernels;
}

}  // namespace switchyard::runtime::cpu
