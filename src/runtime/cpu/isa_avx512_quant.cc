// GGML quantized weights (Q4_0 ... Q6_K) x quantized activations on AVX-512 VNNI int8 dot
// products (vpdpbusd), both shapes of MatMul.
//
// Weights are decoded into quant_decode.h's form (unsigned values below 64, a scale per
// 16 elements, a min per 16), so vpdpbusd multiplies them directly (unsigned) by the
// signed int8 activations; each int32 lane (4 products) is scaled by its weight and
// activation scales, and the mins come off as weight min x activation 16-element sum.
// Compiled for its target by the pragma below and reached only through
// Avx512QuantKernels(), after CpuSupportsAvx512Vnni() said yes.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/internal/isa_kernels.h"
#include "runtime/cpu/internal/quant_decode.h"

#if defined(__clang__)
#pragma clang attribute push(                                                          \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,fma,f16c"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace switchyard::runtime::cpu {
namespace {

// Per 32-element chunk: the scale as llama.cpp stores it (ActivationScaleFor),
// values rounded to nearest even by the conversion, and the two 16-element sums.
void Quantize(const float* x, int64_t k, int64_t ldq, int8_t* q, float* s, float* m) {
  for (int64_t c = 0; c < ldq / kChunkElems; ++c) {
    if (c * kChunkElems >= k) {
      std::memset(q + c * kChunkElems, 0, kChunkElems);
      _mm256_storeu_ps(s + 8 * c, _mm256_setzero_ps());
      m[2 * c] = m[2 * c + 1] = 0.0f;
      continue;
    }
    const __m512 v0 = _mm512_loadu_ps(x + c * kChunkElems);
    const __m512 v1 = _mm512_loadu_ps(x + c * kChunkElems + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const ActivationBlockScale block_scale = ActivationScaleFor(amax);
    const float scale = block_scale.scale;
    const __m512 inv = _mm512_set1_ps(block_scale.inv);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, inv));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, inv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + c * kChunkElems), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + c * kChunkElems + 16),
                     _mm512_cvtepi32_epi8(q1));
    _mm256_storeu_ps(s + 8 * c, _mm256_set1_ps(scale));
    m[2 * c] = scale * static_cast<float>(_mm512_reduce_add_epi32(q0));
    m[2 * c + 1] = scale * static_cast<float>(_mm512_reduce_add_epi32(q1));
  }
}

// Activation rows i0 .. i0 + N against one decoded weight row; out[r * ldo] gets row
// i0 + r's dot product.
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
  __m512 acc[N];
  __m512 mins[N];
  for (int r = 0; r < N; ++r)
    acc[r] = mins[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g * kGroupChunks < chunks; ++g) {
    const DecodedGroup& dg = row[g];
    const int64_t pairs = (std::min(kGroupChunks, chunks - g * kGroupChunks) + 1) / 2;
    for (int64_t p = 0; p < pairs; ++p) {
      const __m512i w = _mm512_load_si512(dg.q + 64 * p);
      const __m512 ws = _mm512_load_ps(dg.ws + 16 * p);
      for (int r = 0; r < N; ++r) {
        const int64_t i = i0 + r;
        const __m512i xv = _mm512_loadu_si512(x.q + i * x.ldq + g * kGroupElems + 64 * p);
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xv);
        const __m512 sx = _mm512_loadu_ps(x.s + i * lds + g * 64 + 16 * p);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(ws, sx), acc[r]);
      }
    }
    const __m512 wm = _mm512_load_ps(dg.wm);
    for (int r = 0; r < N; ++r) {
      mins[r] = _mm512_fmadd_ps(wm, _mm512_loadu_ps(x.m + (i0 + r) * ldm + g * 16), mins[r]);
    }
  }
  for (int r = 0; r < N; ++r)
    out[r * ldo] = _mm512_reduce_add_ps(_mm512_sub_ps(acc[r], mins[r]));
}

void DotRows(DType w_dtype, const QuantActivations& x, int64_t n, int64_t k, const uint8_t* w,
             size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  DotRowsDecoded<DotDecoded>(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
}

void PackPanel(DType w_dtype, const uint8_t* w, size_t w_row_bytes, int64_t j0, int64_t rows,
               int64_t g0, int64_t num_groups, int64_t chunks, QuantPanel* panel) {
  DecodedGroup dg{};
  for (int64_t c = 0; c < kPanelRows; ++c) {
    const uint8_t* wr = w + static_cast<size_t>(j0 + c) * w_row_bytes;
    for (int64_t gg = 0; gg < num_groups; ++gg) {
      const int64_t in_group = std::min(kGroupChunks, chunks - gg * kGroupChunks);
      if (c < rows)
        DecodeGroup(w_dtype, wr, g0 + gg, in_group, &dg);
      for (int64_t cc = 0; cc < in_group; ++cc) {
        const int64_t chunk = gg * kGroupChunks + cc;
        uint8_t* q = panel->q + chunk * kQ8PanelBlockBytes;
        for (int64_t quad = 0; quad < kChunkElems / 4; ++quad) {
          if (c < rows)
            std::memcpy(q + (quad * kPanelRows + c) * 4, dg.q + 32 * cc + 4 * quad, 4);
          else
            std::memset(q + (quad * kPanelRows + c) * 4, 0, 4);
        }
        for (int64_t h = 0; h < 2; ++h) {
          const int64_t at = (chunk * 2 + h) * kPanelRows + c;
          panel->scales[at] = c < rows ? dg.ws[8 * cc + 4 * h] : 0.0f;
          panel->mins[at] = c < rows ? dg.wm[2 * cc + h] : 0.0f;
        }
      }
    }
  }
}

// MR activation rows x 32 panel columns over `chunks` chunks. kSplit: the two halves of a
// chunk have their own scales (Q6_K), so their dot products are kept apart.
template <int MR, bool kSplit>
void GemmTile(const QuantActivations& x, int64_t i0, int64_t c0, const QuantPanel& panel,
              int64_t chunks, float* out, int64_t ldo, int64_t cols, bool accumulate) {
  const int64_t lds = x.ldq / 4;
  const int64_t ldm = x.ldq / 16;
  __m512 acc0[MR];
  __m512 acc1[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
    acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t cc = 0; cc < chunks; ++cc) {
    const uint8_t* q = panel.q + cc * kQ8PanelBlockBytes;
    __m512i lo0[MR], lo1[MR], hi0[MR], hi1[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
      lo0[r] = lo1[r] = hi0[r] = hi1[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int64_t quad = 0; quad < 8; ++quad) {
      const __m512i w0 = _mm512_load_si512(q + quad * kPanelRows * 4);
      const __m512i w1 = _mm512_load_si512(q + quad * kPanelRows * 4 + 64);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        int32_t a;
        std::memcpy(&a, x.q + (i0 + r) * x.ldq + (c0 + cc) * kChunkElems + quad * 4, sizeof(a));
        const __m512i av = _mm512_set1_epi32(a);
        if (!kSplit || quad < 4) {
          lo0[r] = _mm512_dpbusd_epi32(lo0[r], w0, av);
          lo1[r] = _mm512_dpbusd_epi32(lo1[r], w1, av);
        } else {
          hi0[r] = _mm512_dpbusd_epi32(hi0[r], w0, av);
          hi1[r] = _mm512_dpbusd_epi32(hi1[r], w1, av);
        }
      }
    }
    const float* scales = panel.scales + cc * 2 * kPanelRows;
    const float* mins = panel.mins + cc * 2 * kPanelRows;
    const __m512 s0 = _mm512_load_ps(scales), s1 = _mm512_load_ps(scales + 16);
    const __m512 m0 = _mm512_load_ps(mins), m1 = _mm512_load_ps(mins + 16);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const int64_t i = i0 + r;
      const __m512 xs = _mm512_set1_ps(x.s[i * lds + (c0 + cc) * 8]);
      const float* xm = x.m + i * ldm + (c0 + cc) * 2;
      if constexpr (kSplit) {
        const __m512 t0 = _mm512_load_ps(scales + kPanelRows);
        const __m512 t1 = _mm512_load_ps(scales + kPanelRows + 16);
        const __m512 n0 = _mm512_load_ps(mins + kPanelRows);
        const __m512 n1 = _mm512_load_ps(mins + kPanelRows + 16);
        const __m512 xm_lo = _mm512_set1_ps(xm[0]), xm_hi = _mm512_set1_ps(xm[1]);
        acc0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo0[r]), _mm512_mul_ps(xs, s0), acc0[r]);
        acc0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi0[r]), _mm512_mul_ps(xs, t0), acc0[r]);
        acc0[r] = _mm512_fnmadd_ps(xm_lo, m0, _mm512_fnmadd_ps(xm_hi, n0, acc0[r]));
        acc1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo1[r]), _mm512_mul_ps(xs, s1), acc1[r]);
        acc1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi1[r]), _mm512_mul_ps(xs, t1), acc1[r]);
        acc1[r] = _mm512_fnmadd_ps(xm_lo, m1, _mm512_fnmadd_ps(xm_hi, n1, acc1[r]));
      } else {
        const __m512 xm_sum = _mm512_set1_ps(xm[0] + xm[1]);
        acc0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo0[r]), _mm512_mul_ps(xs, s0), acc0[r]);
        acc0[r] = _mm512_fnmadd_ps(xm_sum, m0, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo1[r]), _mm512_mul_ps(xs, s1), acc1[r]);
        acc1[r] = _mm512_fnmadd_ps(xm_sum, m1, acc1[r]);
      }
    }
  }
  const __mmask16 k0 = static_cast<__mmask16>(cols >= 16 ? 0xffff : (1u << cols) - 1);
  const __mmask16 k1 = static_cast<__mmask16>(cols >= 32   ? 0xffff
                                              : cols <= 16 ? 0
                                                           : (1u << (cols - 16)) - 1);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* o = out + r * ldo;
    if (accumulate) {
      acc0[r] = _mm512_add_ps(acc0[r], _mm512_maskz_loadu_ps(k0, o));
      acc1[r] = _mm512_add_ps(acc1[r], _mm512_maskz_loadu_ps(k1, o + 16));
    }
    _mm512_mask_storeu_ps(o, k0, acc0[r]);
    _mm512_mask_storeu_ps(o + 16, k1, acc1[r]);
  }
}

template <bool kSplit>
void GemmRows(const QuantActivations& x, int64_t c0, int64_t n, const QuantPanel& panel,
              int64_t chunks, float* out, int64_t ldo, int64_t cols, bool accumulate) {
  constexpr int kMr = 4;
  int64_t i = 0;
  for (; i + kMr <= n; i += kMr)
    GemmTile<kMr, kSplit>(x, i, c0, panel, chunks, out + i * ldo, ldo, cols, accumulate);
  switch (n - i) {
    case 3:
      return GemmTile<3, kSplit>(x, i, c0, panel, chunks, out + i * ldo, ldo, cols, accumulate);
    case 2:
      return GemmTile<2, kSplit>(x, i, c0, panel, chunks, out + i * ldo, ldo, cols, accumulate);
    case 1:
      return GemmTile<1, kSplit>(x, i, c0, panel, chunks, out + i * ldo, ldo, cols, accumulate);
    default:
      return;
  }
}

void GemmPanel(const QuantActivations& x, int64_t c0, int64_t n, const QuantPanel& panel,
               int64_t chunks, bool split_halves, float* out, int64_t ldo, int64_t cols,
               bool accumulate) {
  if (split_halves)
    GemmRows<true>(x, c0, n, panel, chunks, out, ldo, cols, accumulate);
  else
    GemmRows<false>(x, c0, n, panel, chunks, out, ldo, cols, accumulate);
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

const QuantKernels& Avx512QuantKernels() {
  static constexpr QuantKernels kKernels = {&Quantize,           &DotRows,   &Avx512QuantGemv,
                                            kQuantGemvRows,      &PackPanel, &GemmPanel,
                                            kAvx512StreamingRows};
  return kKernels;
}

}  // namespace switchyard::runtime::cpu
