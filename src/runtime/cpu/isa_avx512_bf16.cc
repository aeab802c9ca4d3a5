// BF16-weight x bf16-activation kernels on AVX512_BF16 dot products (vdpbf16ps), as
// llama.cpp does for BF16 weights: activation rows are rounded to bf16 once per call, so
// weights need no conversion at all and each instruction does 32 multiply-adds into 16
// f32 accumulators. The products are exact in f32 and accumulated in f32; the only new
// error is the activations' rounding (relative 2^-9 each). Compiled for its target by the
// pragma below and reached only through Avx512Bf16Kernels(), after
// CpuSupportsAvx512Bf16() said yes.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/internal/avx512_transpose.h"
#include "runtime/cpu/internal/isa_kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace switchyard::runtime::cpu {
namespace {

// bf16 elements per zmm register.
constexpr int64_t kBf16Width = 32;

__m512bh AsBf16(__m512i v) {
  return (__m512bh)v;
}

__mmask32 TailMask(int64_t count) {
  return count >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << count) - 1);
}

// Masked loads and stores only for the tail: a masked store in every iteration was most of
// this loop's time on Zen 4.
void RoundRow(const float* x, int64_t k, uint16_t* dst) {
  int64_t t = 0;
  for (; t + 16 <= k; t += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + t));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + t), (__m256i)h);
  }
  if (t < k) {
    const __mmask16 mask = static_cast<__mmask16>(TailMask(k - t));
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, x + t));
    _mm256_mask_storeu_epi16(dst + t, mask, (__m256i)h);
  }
  if (k % 2 != 0)
    dst[k] = 0;
}

// N activation rows against weight rows [m_begin, m_end), two accumulators per row so
// consecutive dot products do not wait on each other.
template <int N>
void DotRowsN(const uint16_t* x, int64_t ldx, int64_t k, const uint8_t* w, size_t w_row_bytes,
              int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  for (int64_t j = m_begin; j < m_end; ++j) {
    const auto* row = reinterpret_cast<const uint16_t*>(w + static_cast<size_t>(j) * w_row_bytes);
    __m512 acc0[N];
    __m512 acc1[N];
    for (int i = 0; i < N; ++i)
      acc0[i] = acc1[i] = _mm512_setzero_ps();
    int64_t t = 0;
    for (; t + 2 * kBf16Width <= k; t += 2 * kBf16Width) {
      const __m512bh w0 = AsBf16(_mm512_loadu_si512(row + t));
      const __m512bh w1 = AsBf16(_mm512_loadu_si512(row + t + kBf16Width));
#pragma GCC unroll 4
      for (int i = 0; i < N; ++i) {
        const uint16_t* xi = x + i * ldx + t;
        acc0[i] = _mm512_dpbf16_ps(acc0[i], AsBf16(_mm512_loadu_si512(xi)), w0);
        acc1[i] = _mm512_dpbf16_ps(acc1[i], AsBf16(_mm512_loadu_si512(xi + kBf16Width)), w1);
      }
    }
    for (; t < k; t += kBf16Width) {
      const __mmask32 mask = TailMask(k - t);
      const __m512bh w0 = AsBf16(_mm512_maskz_loadu_epi16(mask, row + t));
#pragma GCC unroll 4
      for (int i = 0; i < N; ++i) {
        const __m512bh xv = AsBf16(_mm512_maskz_loadu_epi16(mask, x + i * ldx + t));
        acc0[i] = _mm512_dpbf16_ps(acc0[i], xv, w0);
      }
    }
    for (int i = 0; i < N; ++i)
      out[i * ldo + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[i], acc1[i]));
  }
}

// 4 activation rows x 4 weight rows [j, j + 4): each vector of either is loaded once for
// four dot products, and the 16 sums are folded together at the end.
void DotTile4x4(const uint16_t* x, int64_t ldx, int64_t k, const uint8_t* w, size_t w_row_bytes,
                int64_t j, float* out, int64_t ldo) {
  const uint16_t* rows[4];
  for (int jj = 0; jj < 4; ++jj)
    rows[jj] = reinterpret_cast<const uint16_t*>(w + static_cast<size_t>(j + jj) * w_row_bytes);
  __m512 acc[16];  // [activation row][weight row]
  for (__m512& a : acc)
    a = _mm512_setzero_ps();
  for (int64_t t = 0; t < k; t += kBf16Width) {
    const __mmask32 mask = TailMask(k - t);
    const bool full = k - t >= kBf16Width;
    __m512bh wv[4];
#pragma GCC unroll 4
    for (int jj = 0; jj < 4; ++jj) {
      wv[jj] = AsBf16(full ? _mm512_loadu_si512(rows[jj] + t)
                           : _mm512_maskz_loadu_epi16(mask, rows[jj] + t));
    }
#pragma GCC unroll 4
    for (int ii = 0; ii < 4; ++ii) {
      const uint16_t* xi = x + ii * ldx + t;
      const __m512bh xv =
          AsBf16(full ? _mm512_loadu_si512(xi) : _mm512_maskz_loadu_epi16(mask, xi));
#pragma GCC unroll 4
      for (int jj = 0; jj < 4; ++jj)
        acc[ii * 4 + jj] = _mm512_dpbf16_ps(acc[ii * 4 + jj], xv, wv[jj]);
    }
  }
  alignas(64) float sums[16];
  _mm512_store_ps(sums, Fold16(Fold4(Fold2(acc[0], acc[1]), Fold2(acc[2], acc[3])),
                               Fold4(Fold2(acc[4], acc[5]), Fold2(acc[6], acc[7])),
                               Fold4(Fold2(acc[8], acc[9]), Fold2(acc[10], acc[11])),
                               Fold4(Fold2(acc[12], acc[13]), Fold2(acc[14], acc[15]))));
  for (int ii = 0; ii < 4; ++ii) {
    for (int jj = 0; jj < 4; ++jj)
      out[ii * ldo + j + jj] = sums[ii * 4 + jj];
  }
}

// Weight rows go in blocks small enough to stay in L1 while every group of activation
// rows passes over them, so the weights stream from memory once whatever n is. Groups of
// 4 activation rows take 4 weight rows at a time.
void DotRows(const uint16_t* x, int64_t ldx, int64_t n, int64_t k, const uint8_t* w,
             size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  constexpr int64_t kRowBlock = 8;
  for (int64_t j0 = m_begin; j0 < m_end; j0 += kRowBlock) {
    const int64_t j1 = std::min(m_end, j0 + kRowBlock);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      int64_t j = j0;
      for (; j + 4 <= j1; j += 4)
        DotTile4x4(x + i * ldx, ldx, k, w, w_row_bytes, j, out + i * ldo, ldo);
      if (j < j1)
        DotRowsN<4>(x + i * ldx, ldx, k, w, w_row_bytes, j, j1, out + i * ldo, ldo);
    }
    switch (n - i) {
      case 3:
        DotRowsN<3>(x + i * ldx, ldx, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
        break;
      case 2:
        DotRowsN<2>(x + i * ldx, ldx, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
        break;
      case 1:
        DotRowsN<1>(x + i * ldx, ldx, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
        break;
      default:
        break;
    }
  }
}

// A row's 32 bf16 values from column t0 + t are 16 pairs, i.e. 16 32-bit lanes, so 16
// rows transpose into 16 pair-major vectors with the f32 transpose.
void PackPanel(const uint8_t* w, size_t w_row_bytes, int64_t rows, int64_t t0, int64_t kc,
               uint32_t* panel) {
  const int64_t kc_vec = kc / kBf16Width * kBf16Width;
  constexpr int64_t kLanes = 16;
  for (int64_t g = 0; g < kPanelRows; g += kLanes) {
    for (int64_t t = 0; t < kc_vec; t += kBf16Width) {
      __m512 r[kLanes];
      for (int64_t i = 0; i < kLanes; ++i) {
        const uint8_t* row = w + static_cast<size_t>(g + i) * w_row_bytes + 2 * (t0 + t);
        r[i] = g + i < rows ? _mm512_loadu_ps(row) : _mm512_setzero_ps();
      }
      Transpose16x16(r);
      for (int64_t c = 0; c < kLanes; ++c)
        _mm512_store_ps(reinterpret_cast<float*>(panel + (t / 2 + c) * kPanelRows + g), r[c]);
    }
  }
  for (int64_t t = kc_vec; t < kc; t += 2) {
    for (int64_t r = 0; r < kPanelRows; ++r) {
      uint16_t lo = 0;
      uint16_t hi = 0;
      if (r < rows) {
        const uint8_t* row = w + static_cast<size_t>(r) * w_row_bytes + 2 * (t0 + t);
        std::memcpy(&lo, row, 2);
        if (t + 1 < kc)
          std::memcpy(&hi, row + 2, 2);
      }
      panel[t / 2 * kPanelRows + r] = static_cast<uint32_t>(hi) << 16 | lo;
    }
  }
}

// Pairs ahead of the one in use that GemmTile asks the caches for (4 KiB of panel). A
// decode step's few rows stream panels packed at load from memory, once each; without it
// the hardware prefetcher, next to one activation stream per tile row, fell behind:
// BM_SmallBatch_BF16_Packed/2048/2048 at 12-32 rows went 1.2-1.5x faster with it.
constexpr int64_t kPrefetchPairs = 32;

// MR rows x 32 panel columns, accumulators in 2 * MR registers.
template <int MR>
void GemmTile(const uint16_t* a, int64_t lda, const uint32_t* panel, int64_t pairs, float* out,
              int64_t ldo, int64_t cols, bool accumulate) {
  __m512 acc0[MR];
  __m512 acc1[MR];
  // Every loop over MR unrolled, so that the accumulators live only in registers (a rolled
  // one made GCC zero a stack copy of them with rep stos on every call).
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
    acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = AsBf16(_mm512_load_si512(panel + p * kPanelRows));
    const __m512bh b1 = AsBf16(_mm512_load_si512(panel + p * kPanelRows + 16));
    const uint32_t* ahead = panel + (p + kPrefetchPairs) * kPanelRows;
    _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(ahead + 16), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      uint32_t pair;
      std::memcpy(&pair, a + r * lda + 2 * p, sizeof(pair));
      const __m512bh av = AsBf16(_mm512_set1_epi32(static_cast<int>(pair)));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], av, b1);
    }
  }
  const __mmask16 m0 = static_cast<__mmask16>(cols >= 16 ? 0xffff : (1u << cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(cols >= 32   ? 0xffff
                                              : cols <= 16 ? 0
                                                           : (1u << (cols - 16)) - 1);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    float* o = out + r * ldo;
    if (accumulate) {
      acc0[r] = _mm512_add_ps(acc0[r], _mm512_maskz_loadu_ps(m0, o));
      acc1[r] = _mm512_add_ps(acc1[r], _mm512_maskz_loadu_ps(m1, o + 16));
    }
    _mm512_mask_storeu_ps(o, m0, acc0[r]);
    _mm512_mask_storeu_ps(o + 16, m1, acc1[r]);
  }
}

// Remainder rows: one tile of exactly `rows` (< MR) rows.
template <int MR>
void GemmRest(int64_t rows, const uint16_t* a, int64_t lda, const uint32_t* panel, int64_t pairs,
              float* out, int64_t ldo, int64_t cols, bool accumulate) {
  if constexpr (MR > 0) {
    if (rows == MR)
      return GemmTile<MR>(a, lda, panel, pairs, out, ldo, cols, accumulate);
    GemmRest<MR - 1>(rows, a, lda, panel, pairs, out, ldo, cols, accumulate);
  }
}

void GemmPanel(const uint16_t* a, int64_t lda, int64_t n, const uint32_t* panel, int64_t pairs,
               float* out, int64_t ldo, int64_t cols, bool accumulate) {
  // 2 * kMr accumulators + 2 panel vectors + 1 broadcast fit the 32 zmm registers.
  constexpr int kMr = 12;
  int64_t i = 0;
  for (; i + kMr <= n; i += kMr)
    GemmTile<kMr>(a + i * lda, lda, panel, pairs, out + i * ldo, ldo, cols, accumulate);
  GemmRest<kMr - 1>(n - i, a + i * lda, lda, panel, pairs, out + i * ldo, ldo, cols, accumulate);
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

const Bf16Kernels& Avx512Bf16Kernels() {
  static constexpr Bf16Kernels kKernels = {&RoundRow, &DotRows, &PackPanel, &GemmPanel,
                                           kAvx512StreamingRows};
  return kKernels;
}

}  // namespace switchyard::runtime::cpu
